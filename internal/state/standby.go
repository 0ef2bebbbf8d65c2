package state

import (
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// Standby holds the standby controller's account of the standby tier of
// each Headroom and standby CapacityBuffer (by HeadroomKey, BufferKey),
// read by their controllers, which write it into status. Safe for
// concurrent use.
type Standby struct {
	mu    sync.Mutex
	byKey map[Key]v1alpha1.StandbyStatus
	// OnChange, if set, is called (outside the lock) with the owner whose
	// account changed.
	OnChange func(key Key)
}

// NewStandby returns an empty store.
func NewStandby() *Standby { return &Standby{byKey: map[Key]v1alpha1.StandbyStatus{}} }

// Set stores an owner's account.
func (s *Standby) Set(key Key, v v1alpha1.StandbyStatus) {
	s.mu.Lock()
	old, had := s.byKey[key]
	s.byKey[key] = v
	s.mu.Unlock()
	if (!had || !equality.Semantic.DeepEqual(old, v)) && s.OnChange != nil {
		s.OnChange(key)
	}
}

// Get returns an owner's account.
func (s *Standby) Get(key Key) (v1alpha1.StandbyStatus, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.byKey[key]
	return v, ok
}

// Delete forgets an owner.
func (s *Standby) Delete(key Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byKey, key)
}
