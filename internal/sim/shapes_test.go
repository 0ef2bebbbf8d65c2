package sim

import (
	"cmp"
	"slices"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/trace"
)

// Three nodes of 4 cpu each run a pod of 3 cpu: 1 cpu is free on each.
// Every ten minutes three pods of 2 cpu arrive, for five minutes. A
// target that counts them in units of 1 cpu keeps 6 units, and three of
// them are the nodes' free cpu, where no pod of 2 cpu fits: the new node
// holds two of the pods and the third of every burst waits for a launch.
// With the shapes learned, the target keeps three units of 2 cpu (and
// three of 1 cpu in the free room), and every burst after the first hour
// starts at once.
func TestLearnedShapesHoldPodsLargerThanAUnitWhole(t *testing.T) {
	var ev []*trace.Event
	for i := range 3 {
		c := create(0, "long-"+strconv.Itoa(i), "3")
		c.Running = true
		ev = append(ev, c)
	}
	for b := range 18 {
		at := float64(b*600 + 30)
		for i := range 3 {
			name := "p" + strconv.Itoa(b) + "-" + strconv.Itoa(i)
			ev = append(ev, create(at, name, "2"), del(at+300, name))
		}
	}
	slices.SortStableFunc(ev, func(a, b *trace.Event) int { return cmp.Compare(a.At, b.At) })
	ev = append(ev, end(3*3600))
	run := func(shapes v1alpha1.TargetShapes) (late map[int]int, r *Result) {
		h := units(0, "1", false)
		h.Spec.Target = &v1alpha1.HeadroomTarget{Wait: metav1.Duration{Duration: 5 * time.Second}, Percent: 95, Shapes: shapes}
		c := cfg(string(shapes), h)
		late = map[int]int{} // by burst, the pods that waited over 5 s
		c.OnBound = func(key string, created, bound time.Duration) {
			if bound-created > 5*time.Second {
				late[int(created/(600*time.Second))]++
			}
		}
		r, err := Run(c, traceOf(t, ev...))
		if err != nil {
			t.Fatal(err)
		}
		return late, r
	}
	late, r := run(v1alpha1.TargetShapesLearned)
	for b := 8; b < 18; b++ {
		if late[b] != 0 {
			t.Errorf("learned shapes: %d pods of burst %d waited, want none", late[b], b)
		}
	}
	if sv := r.Shapes["spare"]; sv == nil || len(sv.Classes) != 1 {
		t.Errorf("learned shapes %+v, want the pods' one", sv)
	}
	late, one := run(v1alpha1.TargetShapesUnit)
	for b := 8; b < 18; b++ {
		if late[b] != 1 {
			t.Errorf("one shape: %d pods of burst %d waited, want 1 (the units in the nodes' free cpu hold no pod of 2 cpu)", late[b], b)
		}
	}
	// Each unit's room is priced at its own size: three units of 2 cpu
	// and three of 1 cpu hold more room than six of 1 cpu, and cost
	// about as much or more (the share of a node is capped at the node;
	// seen: 1.11 and 1.11). Before, the learned units were priced as
	// units of 1 cpu: half as much (0.55).
	if r.HeadroomCost < 0.8*one.HeadroomCost {
		t.Errorf("headroom cost with learned shapes %.4f, with one shape %.4f: want the learned units' larger room priced at its size", r.HeadroomCost, one.HeadroomCost)
	}
}
