package clusterapi

import (
	"context"
	"slices"
	"time"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
)

// Pending returns the group's live Machines without a Node yet, named by
// the Machine; those without infrastructure past the machine timeout, and
// those their infrastructure provider failed, are GivenUp.
func (p *Provider) Pending(ctx context.Context, ng *v1alpha1.NodeGroup) ([]*cloudprovider.Instance, error) {
	if ng.Spec.Provider.ClusterAPI == nil {
		return nil, nil
	}
	r, err := refOf(ng)
	if err != nil {
		return nil, err
	}
	if why, err := p.shadowed(ctx, ng, r); err != nil || why != "" {
		return nil, err // another group's Machines
	}
	ms, err := p.machines(ctx, r)
	if err != nil {
		return nil, err
	}
	p.stampLate(ctx, ng, r, ms)
	now := p.clock.Now()
	var out []*cloudprovider.Instance
	for _, m := range ms {
		if m.Deleting || m.NodeName != "" {
			continue
		}
		inst := instance(ng, m)
		inst.NodeName = m.Name
		inst.GivenUp = givenUp(m, now, r.timeout)
		out = append(out, inst)
	}
	return out, nil
}

// lateLaunch is a launch of berth's whose Machine did not show within
// MachineWait: the object's Machines before it and their MachineSets,
// and when it was made.
type lateLaunch struct {
	before, sets map[string]bool
	at           time.Time
}

// newLateLaunch records a launch made at at whose Machine is not among ms.
func newLateLaunch(ms []machine, at time.Time) lateLaunch {
	l := lateLaunch{before: machineNames(ms), sets: map[string]bool{}, at: at}
	for _, m := range ms {
		if !m.Deleting && m.MachineSet != "" {
			l.sets[m.MachineSet] = true
		}
	}
	return l
}

// lateLaunchWindow is how long after a launch a Machine of its object
// made then is still taken for that launch's (stampLate); clockSkew is
// how much earlier than the launch by berth's clock the API server may
// date it.
const (
	lateLaunchWindow = 10 * time.Minute
	clockSkew        = time.Minute
)

// mayBe reports whether m may be the Machine of launch l: new since it,
// made (by the API server's clock) within lateLaunchWindow of it, and of
// a MachineSet the object had then (a new MachineSet's Machine is a
// rollout's).
func (l lateLaunch) mayBe(m machine) bool {
	return !l.before[m.Name] && !m.Deleting && !m.Created.Before(l.at.Add(-clockSkew)) && !m.Created.After(l.at.Add(lateLaunchWindow)) &&
		(len(l.sets) == 0 || l.sets[m.MachineSet])
}

// stampLate marks as berth's, as Create does the Machine it waited for,
// a Machine that showed after Create stopped waiting for it (a busy
// MachineSet controller): for each such launch of the object in the last
// lateLaunchWindow, the oldest Machine that may be its (lateLaunch.mayBe)
// and that no other launch claimed. Unmarked, its node would not be
// berth's launch, and the launch timeout would not remove it if it never
// turned Ready. Cluster API does not say which replica made which
// Machine: a rollout's or a remediation's Machine made in that window
// in one of the object's MachineSets may be taken for berth's.
func (p *Provider) stampLate(ctx context.Context, ng *v1alpha1.NodeGroup, r ref, ms []machine) {
	p.mu.Lock()
	p.forgetLateLaunches(p.clock.Now())
	late := p.unmatched[r.key()]
	if len(late) == 0 { // every round of every group without a late launch
		p.mu.Unlock()
		return
	}
	byAge := slices.Clone(ms)
	slices.SortStableFunc(byAge, func(a, b machine) int { return a.Created.Compare(b.Created) })
	var found []machine
	var left []lateLaunch
	for _, l := range late {
		cands := slices.DeleteFunc(slices.Clone(byAge), func(m machine) bool { return !l.mayBe(m) })
		if m, ok := p.claimLocked(cands, nil); ok {
			found = append(found, m)
		} else {
			left = append(left, l)
		}
	}
	if len(left) == 0 {
		delete(p.unmatched, r.key())
	} else {
		p.unmatched[r.key()] = left
	}
	p.mu.Unlock()
	for _, m := range found {
		p.stampLaunch(ctx, ng, m)
	}
}

// forgetLateLaunches drops the late launches of every object older than
// lateLaunchWindow (those of a group deleted since are never looked at
// again). p.mu must be held.
func (p *Provider) forgetLateLaunches(now time.Time) {
	for k, ls := range p.unmatched {
		ls = slices.DeleteFunc(ls, func(l lateLaunch) bool { return now.Sub(l.at) > lateLaunchWindow })
		if len(ls) == 0 {
			delete(p.unmatched, k)
		} else {
			p.unmatched[k] = ls
		}
	}
}

// machineNames are the names of ms.
func machineNames(ms []machine) map[string]bool {
	out := make(map[string]bool, len(ms))
	for _, m := range ms {
		out[m.Name] = true
	}
	return out
}

// awaitNewMachine waits (up to MachineWait) for a Machine that was not
// among old and that no other launch claimed, and claims it.
func (p *Provider) awaitNewMachine(ctx context.Context, r ref, old map[string]bool) (machine, bool) {
	wait := p.MachineWait
	if wait == 0 {
		wait = 5 * time.Second
	}
	if wait < 0 {
		return machine{}, false
	}
	deadline := time.Now().Add(wait)
	for {
		if ms, err := p.machines(ctx, r); err == nil {
			if m, ok := p.claim(ms, old); ok {
				return m, true
			}
		}
		if time.Now().After(deadline) {
			return machine{}, false
		}
		select {
		case <-ctx.Done():
			return machine{}, false
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// claim picks the first new, unclaimed Machine and claims it; claims
// older than an hour are forgotten.
func (p *Provider) claim(ms []machine, old map[string]bool) (machine, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.claimLocked(ms, old)
}

// claimLocked is claim with p.mu held.
func (p *Provider) claimLocked(ms []machine, old map[string]bool) (machine, bool) {
	now := time.Now()
	for uid, at := range p.claimed {
		if now.Sub(at) > time.Hour {
			delete(p.claimed, uid)
		}
	}
	for _, m := range ms {
		uid := m.obj.GetUID()
		if old[m.Name] || m.Deleting {
			continue
		}
		if _, taken := p.claimed[uid]; taken {
			continue
		}
		p.claimed[uid] = now
		return m, true
	}
	return machine{}, false
}
