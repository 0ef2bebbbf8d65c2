package clusterapi

import (
	"context"
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

// awaitNewMachine waits (up to MachineWait) for a Machine that was not
// among before and that no other launch claimed, and claims it.
func (p *Provider) awaitNewMachine(ctx context.Context, r ref, before []machine) (machine, bool) {
	wait := p.MachineWait
	if wait == 0 {
		wait = 5 * time.Second
	}
	if wait < 0 {
		return machine{}, false
	}
	old := make(map[string]bool, len(before))
	for _, m := range before {
		old[m.Name] = true
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
