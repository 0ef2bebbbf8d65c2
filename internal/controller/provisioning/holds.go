package provisioning

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// publishHolds tells scale-down which node groups berth is bringing
// capacity to for pods that still wait: those of the nodes it launched
// for them (nominated, not bound yet), and those where a launch for them
// failed. waiting are the pods that wait; nodes all nodes known.
func (p *Provisioner) publishHolds(waiting map[types.NamespacedName]bool, nodes []*corev1.Node) {
	if p.Holds == nil {
		return
	}
	groupOf := make(map[string]string, len(nodes))
	for _, n := range nodes {
		groupOf[n.Name] = n.Labels[v1alpha1.LabelNodeGroup]
	}
	launching := map[types.NamespacedName]string{}
	for pod, node := range p.nominated.snapshot() {
		if g := groupOf[node]; g != "" && waiting[pod] {
			launching[pod] = g
		}
	}
	p.Holds.Publish(waiting, launching)
}
