package scaledown

import (
	"time"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/headroom"
)

// WindowOpen reports whether the group's disruption window
// (spec.disruption.window) is open at now; a group without one is always
// open. A window that cannot be read (the API server checks the cron's
// shape, not every value) returns its error: no removal starts then.
// The plan is made whatever the window (byWindow plans the removals that
// wait for one last); the controller starts what waits for it
// (WaitsForWindow) only while it is open.
func WindowOpen(g *v1alpha1.NodeGroup, now time.Time) (bool, error) {
	w := g.Spec.Disruption.Window
	if w == nil {
		return true, nil
	}
	return headroom.ScheduleActive(w.Cron, w.Duration.Duration, now)
}

// WaitsForWindow reports whether the removal starts only in its group's
// window: every removal but a deleted group's (the user asked for it).
func (r Removal) WaitsForWindow() bool { return r.Reason != RemovalNodeGroupDeleted }

// WaitsForWindow reports whether the disruption starts only in its
// group's window: drift and expiry do; an interruption (the cloud does
// not wait) and a repair do not. A replacement always does.
func (d Disruption) WaitsForWindow() bool {
	return d.Reason == v1alpha1.ReasonDrifted || d.Reason == v1alpha1.ReasonExpired
}

// byWindow splits the candidates, each part in its order: those whose
// removal may start now, and those of groups whose disruption window is
// closed at now (or cannot be read). The planner tries the second last,
// after any replacement: a removal that waits for its window takes no
// room, no disruption and no replacement from a removal that can start
// now, and is still planned, so that its node's consolidateAfter runs.
// Without a clock (a hand-written input) every window counts as open.
func (p *planner) byWindow(cands []candidate) (now, later []candidate) {
	open := map[string]bool{}
	for _, c := range cands {
		g := c.group
		if p.now.IsZero() || retiring(g) || g.Spec.Disruption.Window == nil {
			now = append(now, c)
			continue
		}
		o, known := open[g.Name]
		if !known {
			ok, err := WindowOpen(g, p.now)
			o = ok && err == nil
			open[g.Name] = o
		}
		if o {
			now = append(now, c)
		} else {
			later = append(later, c)
		}
	}
	return now, later
}
