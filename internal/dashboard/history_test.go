package dashboard

import (
	"testing"
	"time"
)

func TestHistoryKeepsTheLastHourInAFixedRing(t *testing.T) {
	h := NewHistory(time.Minute) // 61 samples
	if len(h.ring) != 61 {
		t.Fatalf("ring of %d", len(h.ring))
	}
	for i := range 200 {
		h.Add(Sample{Time: now.Add(time.Duration(i) * time.Minute), Nodes: i})
	}
	got := h.Samples()
	if len(got) != 61 || got[0].Nodes != 139 || got[60].Nodes != 199 {
		t.Fatalf("got %d samples from %d to %d", len(got), got[0].Nodes, got[len(got)-1].Nodes)
	}
	if span := got[60].Time.Sub(got[0].Time); span != Window {
		t.Errorf("span %s", span)
	}
}

func TestHistoryDropsSamplesOlderThanTheWindow(t *testing.T) {
	h := NewHistory(time.Second)
	h.Add(Sample{Time: now.Add(-2 * time.Hour), Nodes: 1})
	h.Add(Sample{Time: now.Add(-30 * time.Minute), Nodes: 2})
	h.Add(Sample{Time: now, Nodes: 3})
	got := h.Samples()
	if len(got) != 2 || got[0].Nodes != 2 {
		t.Errorf("got %+v", got)
	}
	if len(NewHistory(time.Second).Samples()) != 0 {
		t.Error("an empty history has samples")
	}
}
