package state

import (
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// Standby holds the standby controller's account of each Headroom's
// standby tier, read by the headroom controller, which writes it into
// status. Safe for concurrent use.
type Standby struct {
	mu     sync.Mutex
	byName map[string]v1alpha1.StandbyStatus
	// OnChange, if set, is called (outside the lock) with a Headroom whose
	// account changed.
	OnChange func(name string)
}

// NewStandby returns an empty store.
func NewStandby() *Standby { return &Standby{byName: map[string]v1alpha1.StandbyStatus{}} }

// Set stores a Headroom's account.
func (s *Standby) Set(name string, v v1alpha1.StandbyStatus) {
	s.mu.Lock()
	old, had := s.byName[name]
	s.byName[name] = v
	s.mu.Unlock()
	if (!had || !equality.Semantic.DeepEqual(old, v)) && s.OnChange != nil {
		s.OnChange(name)
	}
}

// Get returns a Headroom's account.
func (s *Standby) Get(name string) (v1alpha1.StandbyStatus, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.byName[name]
	return v, ok
}

// Delete forgets a Headroom.
func (s *Standby) Delete(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byName, name)
}
