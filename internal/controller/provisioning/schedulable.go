package provisioning

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/nodeutil"
)

// schedulableSince remembers when each node was first seen schedulable,
// to tell when a nomination berth made has had its chance. Safe for
// concurrent use: pod events read it while a round writes it.
type schedulableSince struct {
	mu    sync.Mutex
	since map[string]time.Time
}

func newSchedulableSince() *schedulableSince { return &schedulableSince{since: map[string]time.Time{}} }

// observe records the nodes schedulable now and forgets nodes that are
// gone; it returns the names of all the nodes given.
func (s *schedulableSince) observe(nodes []*corev1.Node, now time.Time) map[string]bool {
	known := make(map[string]bool, len(nodes))
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range nodes {
		known[n.Name] = true
		if _, seen := s.since[n.Name]; !seen && nodeutil.Schedulable(n) {
			s.since[n.Name] = now
		}
	}
	for name := range s.since {
		if !known[name] {
			delete(s.since, name)
		}
	}
	return known
}

// of returns when the node was first seen schedulable, if it was.
func (s *schedulableSince) of(node string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.since[node]
	return t, ok
}
