package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// judgeBerthWrites checks berth's own writes as the API server answered
// them: it never deletes a pod outside berth-system (it evicts).
func judgeBerthWrites(w *chaosWatcher, p *chaosProxy, ns string) {
	_, _, writes := p.snapshot()
	for _, wr := range writes {
		if wr.Code >= 300 || wr.Verb != "DELETE" || wr.Namespace == v1alpha1.SystemNamespace {
			continue
		}
		if wr.Resource == "pods" || (wr.Resource == "other" && strings.Contains(wr.Path, "/namespaces/"+ns+"/")) {
			w.add(violBerthDeletedPod, "berth's DELETE %s at %s answered %d", wr.Path, wr.At.Format(time.TimeOnly), wr.Code)
		}
	}
}

// writeFigures sums berth's pod and node writes by outcome.
func writeFigures(writes []berthWrite) string {
	var created, deleted, denied, evicted, refused, evictOther, nodePatches int
	for _, wr := range writes {
		switch {
		case wr.Sub == "eviction" && wr.Code == 201:
			evicted++
		case wr.Sub == "eviction" && wr.Code == 429:
			refused++
		case wr.Sub == "eviction":
			evictOther++
		case wr.Resource != "nodes":
		case wr.Code == 403 || wr.Code == 422:
			denied++
		case wr.Verb == "POST" && wr.Code < 300:
			created++
		case wr.Verb == "DELETE" && wr.Code < 300:
			deleted++
		case wr.Code < 300:
			nodePatches++
		}
	}
	return fmt.Sprintf("berth's writes (as the API server answered): nodes created %d, deleted %d, patched/updated %d, denied by admission %d; evictions granted %d, refused by a PDB %d, other answers %d",
		created, deleted, nodePatches, denied, evicted, refused, evictOther)
}

func report(t *testing.T, w *chaosWatcher, p *chaosProxy, c *chaosController, took time.Duration) {
	t.Helper()
	requests, faults, writes := p.snapshot()
	lf := c.logFigures()
	found := w.found()
	t.Logf("chaos soak figures after %s:\nproxy: %d requests, faults injected %s\n%s\n%s\nwatcher: %s\ncontroller logs: launched %d, drains started %d, removed %d, drains stopped %d, error lines %d, panics %d\n  most frequent errors:\n    %s\ninvariant violations: %d",
		took.Round(time.Second), requests, faultSummary(faults), c.figures(), writeFigures(writes), w.figures(),
		lf.launched, lf.drains, lf.removed, lf.drainsStopped, lf.errors, lf.panics, strings.Join(lf.topErrors, "\n    "), len(found))
	for _, v := range found {
		t.Errorf("%s: %s: %s", v.At.Format(time.TimeOnly), v.Kind, v.Detail)
	}
	if lf.panics > 0 {
		t.Errorf("the controller logged %d panics (logs in %s)", lf.panics, c.dir)
	}
}
