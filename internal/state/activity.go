package state

import (
	"sync"
	"time"
)

// ScaleEvent is a node launched or removed, and why.
type ScaleEvent struct {
	Time    time.Time
	Node    string
	Reason  string
	Message string
}

// Activity remembers, per node group, the last node berth launched and the
// last it removed; NodeGroup status shows them. Memory only: after a
// restart the status keeps what it showed until something new happens.
// Safe for concurrent use.
type Activity struct {
	mu    sync.Mutex
	up    map[string]ScaleEvent
	down  map[string]ScaleEvent
	onSet func(nodeGroup string)
}

// NewActivity returns an empty store; onSet, if not nil, is called (outside
// the lock) with the group of every event recorded.
func NewActivity(onSet func(nodeGroup string)) *Activity {
	return &Activity{up: map[string]ScaleEvent{}, down: map[string]ScaleEvent{}, onSet: onSet}
}

// ScaledUp records a launch (nothing on a nil store).
func (a *Activity) ScaledUp(nodeGroup string, e ScaleEvent) { a.record(true, nodeGroup, e) }

// ScaledDown records a removal (nothing on a nil store).
func (a *Activity) ScaledDown(nodeGroup string, e ScaleEvent) { a.record(false, nodeGroup, e) }

func (a *Activity) record(up bool, g string, e ScaleEvent) {
	if a == nil {
		return
	}
	a.mu.Lock()
	if up {
		a.up[g] = e
	} else {
		a.down[g] = e
	}
	onSet := a.onSet
	a.mu.Unlock()
	if onSet != nil {
		onSet(g)
	}
}

// Last returns the last launch and removal of a group, if any.
func (a *Activity) Last(nodeGroup string) (up, down *ScaleEvent) {
	if a == nil {
		return nil, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if e, ok := a.up[nodeGroup]; ok {
		up = &e
	}
	if e, ok := a.down[nodeGroup]; ok {
		down = &e
	}
	return up, down
}

// SetOnChange sets the function told of every event (wired after the
// reader of the store exists).
func (a *Activity) SetOnChange(f func(nodeGroup string)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.onSet = f
}
