package e2e

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// nodeEvent counts the launches and removals of the soak's groups, notes
// the nodes being drained, and records every deletion; the deletion of a
// node without berth's owner mark is a violation at once.
func (w *chaosWatcher) nodeEvent(obj any, deleted bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	obj, unknown := unwrap(obj)
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	group := n.Labels[v1alpha1.LabelNodeGroup]
	uid, ours := w.groups[group]
	if !ours {
		return
	}
	if unknown {
		w.violate(violWatcherGap, "deletion of node %s seen only on a relist", n.Name)
	}
	owned := uid != "" && n.Annotations[v1alpha1.AnnotationLaunchedBy] == string(uid)
	if !deleted {
		if owned && !w.seen[n.Name] {
			w.launched[group]++
		}
		w.seen[n.Name] = true
		w.draining[n.Name] = hasTaint(n, v1alpha1.TaintDisrupted)
		return
	}
	delete(w.draining, n.Name)
	w.deletions = append(w.deletions, nodeDeletion{name: n.Name, group: group, rv: rvOf(n.ResourceVersion), at: time.Now(), owned: owned})
	if owned {
		w.removed[group]++
	} else {
		w.violate(violForeignNode, "node %s of group %s deleted without berth's owner mark (launched-by %q)", n.Name, group, n.Annotations[v1alpha1.AnnotationLaunchedBy])
	}
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// drainUnderWay reports whether a node of the soak is tainted for removal.
func (w *chaosWatcher) drainUnderWay() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, d := range w.draining {
		if d {
			return true
		}
	}
	return false
}

// judgeNodeDeletions checks the node deletions older than settle (so that
// the pod events before them have arrived): every pod bound to the node
// before its deletion was gone or being deleted by then. A pod still there
// was never evicted; for a bare or do-not-disrupt pod that is also a node
// the drain rules protect.
func (w *chaosWatcher) judgeNodeDeletions(settle time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range w.deletions {
		d := &w.deletions[i]
		if d.judged || time.Since(d.at) < settle {
			continue
		}
		d.judged = true
		for _, rec := range w.pods {
			if rec.node != d.name || rec.boundRV == 0 || rec.boundRV > d.rv || (rec.deletedRV != 0 && rec.deletedRV < d.rv) {
				continue
			}
			switch {
			case rec.terminatingRV != 0 && rec.terminatingRV < d.rv:
				w.terminatingOnDeleted++
			case rec.kind == kindPlaceholder:
				w.phOnDeleted++
			case rec.kind == kindBare || rec.kind == kindNoDisrupt:
				w.violate(violNodeUnderPod, "node %s deleted under %s pod %s, which the drain rules protect", d.name, rec.kind, rec.key)
			default:
				w.violate(violNodeUnderPod, "node %s deleted under %s pod %s, which was never evicted", d.name, rec.kind, rec.key)
			}
		}
	}
}
