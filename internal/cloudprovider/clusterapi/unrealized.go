package clusterapi

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// objectKey names a scalable object, whatever its group's timeout.
type objectKey struct {
	gv              schema.GroupVersion
	kind            v1alpha1.ClusterAPIKind
	namespace, name string
}

func (r ref) key() objectKey {
	return objectKey{gv: r.gv, kind: r.kind, namespace: r.namespace, name: r.name}
}

// unrealized says why no replica is added to the object ("" when one may
// be): it has had more replicas than live Machines for longer than the
// group's machine timeout. The MachineSet controller makes no Machine
// for them (its preflight checks hold a scale-up while the control plane
// upgrades; a paused Cluster makes none): adding another would only
// raise replicas again, up to maxSize, while the pods wait. The launch
// then fails as an offering without capacity, so the pods go to other
// groups. When the object's replicas were first seen ahead of its
// Machines is kept in memory (a restart waits a timeout again). A
// MachinePool is not judged: its infrastructure may make no Machines.
func (p *Provider) unrealized(r ref, obj *unstructured.Unstructured, ms []machine) string {
	if r.kind == v1alpha1.ClusterAPIMachinePool {
		return ""
	}
	replicas, found, err := unstructured.NestedInt64(obj.Object, "spec", "replicas")
	live := int64(0)
	for _, m := range ms {
		if !m.Deleting {
			live++
		}
	}
	now := p.clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil || !found || replicas <= live {
		delete(p.ahead, r.key())
		return ""
	}
	since, ok := p.ahead[r.key()]
	if !ok {
		p.ahead[r.key()] = now
		return ""
	}
	if now.Sub(since) <= r.timeout {
		return ""
	}
	return fmt.Sprintf("%s has %d replicas but %d live Machines, for more than %s: its MachineSet makes no Machine "+
		"(preflight checks during a control-plane upgrade, a paused Cluster?); not adding a replica", r, replicas, live, r.timeout)
}

// addedWithoutMachine notes that a replica berth added made no Machine
// within MachineWait: the object's replicas are ahead of its Machines
// from now, unless they were already.
func (p *Provider) addedWithoutMachine(r ref) {
	if r.kind == v1alpha1.ClusterAPIMachinePool {
		return
	}
	now := p.clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.ahead[r.key()]; !ok {
		p.ahead[r.key()] = now
	}
}
