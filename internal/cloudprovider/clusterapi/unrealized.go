package clusterapi

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// objectKey names a scalable object, whatever its group's timeout and
// the apiVersion it is read at (one object, one lock and one record).
type objectKey struct {
	kind            v1alpha1.ClusterAPIKind
	namespace, name string
}

func (r ref) key() objectKey { return objectKey{kind: r.kind, namespace: r.namespace, name: r.name} }

// unrealized says why no replica is added to the object ("" when one may
// be): it has had more replicas than Machines (those being deleted
// counted: the MachineSet counts them too, and makes a new one only once
// they are gone) for longer than the group's machine timeout. The
// MachineSet makes no Machine for them (its preflight checks hold a
// scale-up while the control plane upgrades; a paused Cluster makes
// none): adding another would only raise replicas again, up to maxSize,
// while the pods wait. The launch
// then fails as an offering without capacity, so the pods go to other
// groups. When the object's replicas were first seen ahead of its
// Machines is kept in memory (a restart waits a timeout again). A
// MachinePool is not judged: its infrastructure may make no Machines.
func (p *Provider) unrealized(r ref, obj *unstructured.Unstructured, ms []machine) string {
	since, replicas, ok := p.observeAhead(r, obj, ms)
	if !ok || p.clock.Now().Sub(since) <= r.timeout {
		return ""
	}
	return fmt.Sprintf("%s has %d replicas but %d Machines, for more than %s: its MachineSet makes no Machine "+
		"(preflight checks during a control-plane upgrade, a paused Cluster?); not adding a replica", r, replicas, len(ms), r.timeout)
}

// observeAhead records whether the object's replicas are ahead of its
// Machines now, and since when (the first time seen so); it is called
// each round (RefreshNodeGroup) and at each launch, so that a time recorded once is
// not taken for a wait that lasted since. ok is false when they are not
// ahead (or for a MachinePool, which is not judged).
func (p *Provider) observeAhead(r ref, obj *unstructured.Unstructured, ms []machine) (since time.Time, replicas int64, ok bool) {
	if r.kind == v1alpha1.ClusterAPIMachinePool {
		return time.Time{}, 0, false
	}
	replicas, found, err := unstructured.NestedInt64(obj.Object, "spec", "replicas")
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil || !found || replicas <= int64(len(ms)) {
		delete(p.ahead, r.key())
		return time.Time{}, replicas, false
	}
	since, seen := p.ahead[r.key()]
	if !seen {
		since = p.clock.Now()
		p.ahead[r.key()] = since
	}
	return since, replicas, true
}
