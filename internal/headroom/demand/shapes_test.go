package demand

import (
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func req(cpu, mem string) Requests {
	return RequestsOf(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)})
}

func shapeOf(c *Class) string {
	if c == nil {
		return "unit"
	}
	l := c.Rec.H.Shape.List()
	return l.Cpu().String() + "/" + l.Memory().String()
}

func TestPodsLargerThanAUnitAreLearnedApartByTheirShape(t *testing.T) {
	s := NewShapes(cpu1, time.Minute, 0)
	for _, tc := range []struct {
		cpu, mem, want string
	}{
		{"500m", "512Mi", "unit"}, // within one unit: their requests add up in the unit's history
		{"1", "1Gi", "unit"},
		{"2", "2Gi", "2/2Gi"},
		{"4", "1Gi", "4/1Gi"},
		{"2", "2Gi", "2/2Gi"}, // the same shape again: the same history
		{"1", "3Gi", "1/3Gi"},
	} {
		if got := shapeOf(s.Route(req(tc.cpu, tc.mem), monday, monday)); got != tc.want {
			t.Errorf("a pod of %s, %s counts in %s, want %s", tc.cpu, tc.mem, got, tc.want)
		}
	}
	if len(s.Classes) != MaxShapes {
		t.Fatalf("%d shapes learned, want %d", len(s.Classes), MaxShapes)
	}
	// A fourth shape: the smallest learned one that holds it, else the
	// unit's history (several units, as without learned shapes).
	for _, tc := range []struct {
		cpu, mem, want string
	}{
		{"3", "1Gi", "4/1Gi"},
		{"1500m", "1500Mi", "2/2Gi"}, // 4/1Gi does not hold 1500Mi
		{"8", "8Gi", "unit"},
	} {
		if got := shapeOf(s.Route(req(tc.cpu, tc.mem), monday, monday)); got != tc.want {
			t.Errorf("with %d shapes learned, a pod of %s, %s counts in %s, want %s", MaxShapes, tc.cpu, tc.mem, got, tc.want)
		}
		if got := shapeOf(s.Find(req(tc.cpu, tc.mem))); got != tc.want {
			t.Errorf("its departure counts in %s, want %s", got, tc.want)
		}
	}
	if len(s.Classes) != MaxShapes {
		t.Errorf("%d shapes learned, want at most %d", len(s.Classes), MaxShapes)
	}
}

func TestAShapeNotSeenForTheHistorysSpanGivesItsPlace(t *testing.T) {
	s := NewShapes(cpu1, time.Minute, 2*time.Hour)
	s.Route(req("2", "2Gi"), monday, monday)
	s.Route(req("4", "4Gi"), monday, monday)
	s.Route(req("8", "8Gi"), monday, monday)
	later := monday.Add(90 * time.Minute)
	s.Route(req("4", "4Gi"), later, later)
	s.Route(req("8", "8Gi"), later, later)
	end := monday.Add(3 * time.Hour)
	if got := shapeOf(s.Route(req("3", "3Gi"), end, end)); got != "3/3Gi" {
		t.Fatalf("a new shape counts in %s; want its own history in place of 2/2Gi (last seen 3h ago, span 2h)", got)
	}
	for _, c := range s.Classes {
		if shapeOf(c) == "2/2Gi" {
			t.Errorf("the stale shape is still learned")
		}
	}
	// Not yet stale: 4/4Gi was seen 90 minutes ago.
	if got := shapeOf(s.Route(req("16", "16Gi"), end, end)); got != "unit" {
		t.Errorf("a pod no learned shape holds counts in %s, want unit", got)
	}
}

// A pod counts as one unit of the learned shape it is routed to: five
// pods of 1200m held by a learned shape of 2 cpu need five of its units
// (one each: two do not fit in one), not ceil(6/2) = 3. Pods a little
// apart (1990m and 2000m) share a shape; a pod only held by a shape does
// not keep that shape from going stale.
func TestAPodCountsAsOneUnitOfItsLearnedShape(t *testing.T) {
	s := NewShapes(cpu1, time.Minute, 2*time.Hour)
	for _, r := range []Requests{req("2", "1Gi"), req("4", "4Gi"), req("8", "8Gi")} {
		s.Route(r, monday, monday)
	}
	if got := shapeOf(s.Route(req("1990m", "1000Mi"), monday, monday)); got != "2/1Gi" {
		t.Fatalf("a pod of 1990m, 1000Mi counts in %s, want the shape of 2 cpu, 1Gi (rounded up to 50m and 64Mi)", got)
	}
	at := monday.Add(90 * time.Minute)
	for range 5 {
		c := s.Route(req("1200m", "1Gi"), at, at)
		if shapeOf(c) != "2/1Gi" {
			t.Fatalf("a pod of 1200m counts in %s, want 2/1Gi, the smallest shape that holds it", shapeOf(c))
		}
		c.Arrived(at, at)
	}
	s.Close(at.Add(10 * time.Minute))
	h := s.Classes[0].Rec.H
	most := int64(0)
	for _, hr := range h.Hours {
		for _, b := range hr.Bins {
			most = max(most, b.Units)
		}
	}
	if most != 5 {
		t.Errorf("the window of five pods of 1200m needs %d units of 2 cpu, want 5", most)
	}
	// Three hours on, the 2-cpu shape's own pods stopped 3h ago (only
	// pods it merely holds came since, 90 minutes ago): it is stale, and
	// a new shape takes its place.
	later := monday.Add(3 * time.Hour)
	s.Route(req("4", "4Gi"), later, later)
	s.Route(req("8", "8Gi"), later, later)
	if got := shapeOf(s.Route(req("3", "3Gi"), later, later)); got != "3/3Gi" {
		t.Errorf("a new shape counts in %s; want its own history in place of 2/1Gi, whose own pods stopped 3h ago", got)
	}
}

// Every 10 minutes a burst of three pods of 2 cpu, 4Gi arrives (and
// leaves 5 minutes later), with a pod of 500m in between; the unit is
// 1 cpu, 1Gi. Fed as the learner feeds them (every pod to the unit's
// history, the large ones also to their shape's), after two hours the
// learned shape asks for 3 of its units, and the unit's history for 12
// (the three pods need 4 units each: 12 hold every window).
func TestALearnedShapeAsksForTheUnitsItsBurstsNeed(t *testing.T) {
	unit := NewRecorder(NewHistory(time.Minute, cpu1, 0, monday), monday)
	s := NewShapes(cpu1, time.Minute, 0)
	arrive := func(r Requests, at time.Time) {
		if c := s.Route(r, at, at); c != nil {
			c.Arrived(at, at)
		}
		unit.Arrived(at, at, r)
	}
	leave := func(r Requests, at, now time.Time) {
		if c := s.Find(r); c != nil {
			c.Left(at, now)
		}
		unit.Left(at, now, r)
	}
	large, small := req("2", "4Gi"), req("500m", "512Mi")
	for m := range 130 {
		at := monday.Add(time.Duration(m) * time.Minute)
		switch m % 10 {
		case 0:
			for range 3 {
				arrive(large, at)
			}
		case 5:
			if s.Find(small) != nil {
				t.Fatal("a small pod counts in a learned shape")
			}
			arrive(small, at)
			for range 3 {
				leave(large, at, at)
			}
		}
		s.Close(at)
		unit.Close(at)
	}
	now := monday.Add(130 * time.Minute)
	est := s.Estimates(now, 0.95, time.Hour)
	if len(est) != 1 || !est[0].Known || est[0].Units != 3 {
		t.Fatalf("estimates %+v, want one shape needing 3 units", est)
	}
	if got := est[0].Shape.List(); got.Cpu().String() != "2" || got.Memory().String() != "4Gi" {
		t.Errorf("learned shape %v, want 2 cpu, 4Gi", got)
	}
	if e := unit.H.Estimate(now, 0.95); !e.Known || e.Units != 12 {
		t.Errorf("the unit's history asks for %+v, want 12 units (every pod counts)", e)
	}
}

func TestLearnedShapesAreSavedAndRestoredInTheirWindow(t *testing.T) {
	s := NewShapes(cpu1, time.Minute, 0)
	s.Route(req("2", "2Gi"), monday, monday).Arrived(monday, monday)
	s.Route(req("4", "4Gi"), monday, monday)
	s.Close(monday.Add(10 * time.Minute))
	b, err := json.Marshal(s.Save())
	if err != nil {
		t.Fatal(err)
	}
	var back Saved
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if err := back.Check(); err != nil {
		t.Fatalf("a saved history fails its check: %v", err)
	}
	later := monday.Add(time.Hour)
	same := NewShapes(cpu1, 65*time.Second, 0)
	same.Restore(back, later)
	if len(same.Classes) != 2 || shapeOf(same.Classes[0]) != "2/2Gi" || same.Classes[0].Rec.H.Bursts != s.Classes[0].Rec.H.Bursts {
		t.Fatalf("restored %d shapes (first %s), want both with their bursts", len(same.Classes), shapeOf(same.Classes[0]))
	}
	if same.Classes[0].Rec.H.Next <= s.Classes[0].Rec.H.Next {
		t.Errorf("the restored history counts the windows while berth was away")
	}
	other := NewShapes(cpu1, 3*time.Minute, 0)
	other.Restore(back, later)
	if len(other.Classes) != 0 {
		t.Errorf("shapes learned in 1m windows kept in 3m ones")
	}
	bad := back
	bad.Version = 7
	if bad.Check() == nil {
		t.Errorf("a saved form of another version passes its check")
	}
	bad = Saved{Version: ShapesVersion, Classes: []SavedClass{{}}}
	if bad.Check() == nil {
		t.Errorf("a learned shape without a history passes its check")
	}
}
