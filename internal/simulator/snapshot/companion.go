package snapshot

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/podutil"
)

// A workload pod with a companion (a pod created on its node only after it
// is bound, like a CSI driver's mount pod) carries the companion's requests
// (AnnotationCompanionRequests) and a share key (LabelCompanionShareKey).
// While it is pending, the planner places it only where the companion fits
// too, unless the node already has the key: there the companion is shared
// and needs no more room. Pods bound to a node with a key (workloads,
// companion placeholders) give the node that key.

// companionRequests returns the companion requests of a pod with a share
// key, or nothing when it has none or they cannot be read
// (podutil.CompanionRequests, as the companion controller reads them).
func companionRequests(pod *corev1.Pod) Resources {
	if pod.Labels[v1alpha1.LabelCompanionShareKey] == "" {
		return Resources{}
	}
	req, _, err := podutil.CompanionRequests(pod)
	if err != nil {
		return Resources{}
	}
	cpu, mem := req[corev1.ResourceCPU], req[corev1.ResourceMemory]
	return Resources{MilliCPU: cpu.MilliValue(), Memory: mem.Value()}
}

// NeedsOnNewNode is what a pending pod needs on a node launched for it
// (which has no pod of its companion's share key): its own requests and
// its companion add-on's, and the pods it stands for (itself and, by its
// share key in addOnPods, the followers folded into it), as its class
// counts them (RequestsOn, PodsOn).
func NeedsOnNewNode(pod *corev1.Pod, addOnPods map[string]int) (Resources, int) {
	req := FromList(RequestsOf(pod))
	addOn := companionRequests(pod)
	if addOn.IsZero() {
		return req, 1
	}
	req.Add(&addOn)
	return req, 1 + addOnPods[pod.Labels[v1alpha1.LabelCompanionShareKey]]
}

// RequestsOn is what a pod of class c needs on node n: its own requests
// where n already has the pod's companion share key, its own and its
// companion's elsewhere.
func (c *Class) RequestsOn(n *Node) *Resources {
	if c.ShareKey != "" && n.shareKeys[c.ShareKey] > 0 {
		return &c.Base
	}
	return &c.Requests
}

// PodsOn is how many pods a pending pod of class c stands for on node n:
// itself, and the pods folded into its add-on where the add-on is
// charged (RequestsOn).
func (c *Class) PodsOn(n *Node) int {
	if c.AddOnPods > 0 && c.RequestsOn(n) != &c.Base {
		return 1 + c.AddOnPods
	}
	return 1
}

// HasShareKey reports whether a pod on n carries the companion share key.
func (n *Node) HasShareKey(key string) bool { return n.shareKeys[key] > 0 }

// charge accounts for a pod placed on n: its requests (with its
// companion's when the pod is pending and n lacks its share key) and its
// share key. A bound pod's companion already has its own pod.
func (n *Node) charge(p *Pod) {
	c := p.Class
	n.chargeAs(p, p.pending() && c.RequestsOn(n) != &c.Base)
}

// chargeAs is charge with whether the pod carries its companion's
// requests given: a pod put back by a Revert carries what it carried
// before, whichever pod of its share key came back first.
func (n *Node) chargeAs(p *Pod, addOn bool) {
	c := p.Class
	req := &c.Base
	if addOn {
		req = &c.Requests
	}
	p.addOn = addOn
	n.Requested.Add(req)
	n.podCount++
	if p.addOn {
		n.podCount += c.AddOnPods
	}
	if c.ShareKey != "" {
		if n.shareKeys == nil {
			n.shareKeys = map[string]int{}
		}
		n.shareKeys[c.ShareKey]++
	}
}

// discharge reverses charge.
func (n *Node) discharge(p *Pod) {
	c := p.Class
	n.Requested.Sub(&c.Base)
	n.podCount--
	if p.addOn {
		n.Requested.Sub(&c.AddOn)
		n.podCount -= c.AddOnPods
		p.addOn = false
	}
	if c.ShareKey != "" {
		if n.shareKeys[c.ShareKey]--; n.shareKeys[c.ShareKey] <= 0 {
			delete(n.shareKeys, c.ShareKey)
		}
	}
}
