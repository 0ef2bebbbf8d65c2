package snapshot

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// A workload pod with a companion (a pod created on its node only after it
// is bound, like a CSI driver's mount pod) carries the companion's requests
// (AnnotationCompanionRequests) and a share key (LabelCompanionShareKey).
// While it is pending, the planner places it only where the companion fits
// too, unless the node already has the key: there the companion is shared
// and needs no more room. Pods bound to a node with a key (workloads,
// companion placeholders) give the node that key.

// maxAddOnCPU and maxAddOnMemory bound a companion's requests read from an
// annotation anyone who can edit the pod can write.
const (
	maxAddOnCPU    = 1 << 20 // millicores: about 1000 cores
	maxAddOnMemory = 1 << 50 // bytes: 1 PiB
)

// companionRequests returns the companion requests of a pod, or nothing
// when the pod has none or they cannot be read.
func companionRequests(pod *corev1.Pod) Resources {
	raw, ok := pod.Annotations[v1alpha1.AnnotationCompanionRequests]
	if !ok || pod.Labels[v1alpha1.LabelCompanionShareKey] == "" {
		return Resources{}
	}
	var rl corev1.ResourceList
	if err := json.Unmarshal([]byte(raw), &rl); err != nil {
		return Resources{}
	}
	cpu, mem := rl[corev1.ResourceCPU], rl[corev1.ResourceMemory]
	if !within(cpu, maxAddOnCPU, true) || !within(mem, maxAddOnMemory, false) {
		return Resources{}
	}
	return Resources{MilliCPU: cpu.MilliValue(), Memory: mem.Value()}
}

func within(q resource.Quantity, limit int64, milli bool) bool {
	if q.Sign() < 0 {
		return false
	}
	if milli {
		return q.Cmp(*resource.NewMilliQuantity(limit, resource.DecimalSI)) <= 0
	}
	return q.Cmp(*resource.NewQuantity(limit, resource.BinarySI)) <= 0
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

// HasShareKey reports whether a pod on n carries the companion share key.
func (n *Node) HasShareKey(key string) bool { return n.shareKeys[key] > 0 }

// charge accounts for a pod placed on n: its requests (with its
// companion's when the pod is pending and n lacks its share key) and its
// share key. A bound pod's companion already has its own pod.
func (n *Node) charge(p *Pod) {
	c := p.Class
	req := &c.Base
	if p.Spec.NodeName == "" {
		req = c.RequestsOn(n)
	}
	p.addOn = req != &c.Base
	n.Requested.Add(req)
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
	if p.addOn {
		n.Requested.Sub(&c.AddOn)
		p.addOn = false
	}
	if c.ShareKey != "" {
		if n.shareKeys[c.ShareKey]--; n.shareKeys[c.ShareKey] <= 0 {
			delete(n.shareKeys, c.ShareKey)
		}
	}
}
