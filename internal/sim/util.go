package sim

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaledown"
	"github.com/berth-dev/berth/internal/podutil"
)

// typesUID is a stable UID for a simulated object.
func typesUID(ns, name string) types.UID {
	sum := sha256.Sum256([]byte(ns + "/" + name))
	return types.UID(hex.EncodeToString(sum[:8]))
}

// ownerRef makes a pod owned by its workload ("namespace/name") as a
// ReplicaSet's pod is: replicated, for the drain rules.
func ownerRef(workload string) []metav1.OwnerReference {
	name := workload
	if i := strings.LastIndex(workload, "/"); i >= 0 {
		name = workload[i+1:]
	}
	return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: name, UID: typesUID("rs", workload), Controller: ptr.To(true)}}
}

func isDaemon(p *corev1.Pod) bool { return podutil.IsOwnedByDaemonSet(p) }

// windowOpen reports whether the group's disruption window is open (a
// window that cannot be read keeps removals off, as in the controller).
func windowOpen(g *v1alpha1.NodeGroup, now time.Time) bool {
	open, err := scaledown.WindowOpen(g, now)
	return err == nil && open
}

// sortedNodes are the nodes by name (rounds visit them in a fixed order).
func (e *Engine) sortedNodes() []*node {
	out := make([]*node, 0, len(e.nodes))
	for _, n := range e.nodes {
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b *node) int { return cmp.Compare(a.obj.Name, b.obj.Name) })
	return out
}
