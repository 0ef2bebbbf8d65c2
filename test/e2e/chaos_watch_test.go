package e2e

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// labelChaosKind says what a pod of the soak is; the watcher judges its
// disappearance by it.
const labelChaosKind = "chaos.berth.dev/kind"

// Pod kinds of the soak.
const (
	kindWeb         = "web"            // Deployment under a PDB
	kindFiller      = "filler"         // Deployment without a PDB
	kindBare        = "bare"           // no controller: the drain rules keep its node
	kindNoDisrupt   = "do-not-disrupt" // berth.dev/do-not-disrupt: the drain rules keep its node
	kindPlaceholder = "placeholder"    // berth's own headroom pod in berth-system
)

// Invariants, as violations name them.
const (
	violProtectedDeleted = "protected pod deleted"
	violPodLost          = "pod gone without eviction"
	violNodeUnderPod     = "node deleted under a pod never evicted"
	violPDB              = "PDB below its minimum"
	violForeignNode      = "node berth did not launch deleted"
	violBerthDeletedPod  = "berth deleted a workload pod directly"
	violCount            = "cycle missed its planned node count"
	violLeftover         = "left tainted, cordoned or gated"
	violWatcherGap       = "watcher missed a deletion"
)

type violation struct {
	At           time.Time
	Kind, Detail string
}

// podRecord is what the watcher saw of a pod, with the resourceVersions
// (etcd revisions, so ordered across kinds) of its binding, its deletion
// timestamp and its removal.
type podRecord struct {
	key                               types.NamespacedName
	kind, node                        string
	boundRV, terminatingRV, deletedRV uint64
}

type nodeDeletion struct {
	name, group string
	rv          uint64
	at          time.Time
	owned       bool
	judged      bool
}

// chaosWatcher checks the soak's invariants from its own watches, with the
// admin's client straight to the API server (never through the proxy).
// It records every pod and node deletion and every PDB status change.
type chaosWatcher struct {
	ns     string
	groups map[string]types.UID
	stop   chan struct{}

	mu         sync.Mutex
	pods       map[types.UID]*podRecord
	healthy    map[types.UID]bool
	seen       map[string]bool
	draining   map[string]bool
	deletions  []nodeDeletion
	violations []violation
	launched   map[string]int
	removed    map[string]int
	// PDB: the minimum to keep (0: off), whether the check is armed and
	// healthy pods are below it now, the lowest count and status margin
	// seen while armed.
	pdbWant, minHealthy, minMargin int32
	armed, statusArmed, below      bool
	statusBelow                    bool
	lastMargin                     *int32
	pdbChanges                     int
	evicted, rsDeleted, phDeleted  int
	phPreempted, phOnDeleted       int
	terminatingOnDeleted           int
}

// startChaosWatcher watches pods (of ns and berth's placeholders), the
// nodes of groups (name -> UID) and the PDBs of ns until stopped.
func startChaosWatcher(ns string, groups map[string]types.UID) (*chaosWatcher, error) {
	w := &chaosWatcher{ns: ns, groups: groups, stop: make(chan struct{}), pods: map[types.UID]*podRecord{}, healthy: map[types.UID]bool{},
		seen: map[string]bool{}, draining: map[string]bool{}, launched: map[string]int{}, removed: map[string]int{},
		minHealthy: 1 << 30, minMargin: 1 << 30}
	f := informers.NewSharedInformerFactory(env.Clientset, 0)
	handlers := []struct {
		inf cache.SharedIndexInformer
		fn  func(obj any, deleted bool)
	}{
		{f.Core().V1().Pods().Informer(), w.podEvent},
		{f.Core().V1().Nodes().Informer(), w.nodeEvent},
		{f.Policy().V1().PodDisruptionBudgets().Informer(), w.pdbEvent},
	}
	for _, h := range handlers {
		fn := h.fn
		if _, err := h.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { fn(o, false) },
			UpdateFunc: func(_, o any) { fn(o, false) },
			DeleteFunc: func(o any) { fn(o, true) },
		}); err != nil {
			return nil, err
		}
	}
	f.Start(w.stop)
	for typ, ok := range f.WaitForCacheSync(w.stop) {
		if !ok {
			return nil, fmt.Errorf("watcher: %v never synced", typ)
		}
	}
	return w, nil
}

func (w *chaosWatcher) close() { close(w.stop) }

func rvOf(s string) uint64 { v, _ := strconv.ParseUint(s, 10, 64); return v }

func (w *chaosWatcher) violate(kind, format string, args ...any) {
	w.violations = append(w.violations, violation{At: time.Now(), Kind: kind, Detail: fmt.Sprintf(format, args...)})
}

// add records a violation found outside the watches (by the test).
func (w *chaosWatcher) add(kind, format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.violate(kind, format, args...)
}

// unwrap returns the object of a deletion the informer only learned of by
// relisting, and whether it was one (the watcher then missed its last
// state: a gap the caller reports for objects it checks).
func unwrap(obj any) (any, bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Obj, true
	}
	return obj, false
}

func (w *chaosWatcher) kindOf(p *corev1.Pod) string {
	switch {
	case p.Namespace == w.ns:
		return p.Labels[labelChaosKind]
	case p.Namespace == v1alpha1.SystemNamespace && p.Labels[v1alpha1.LabelHeadroomRole] != "":
		return kindPlaceholder
	}
	return ""
}

func disruptionReason(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return c.Reason
		}
	}
	return ""
}

func (w *chaosWatcher) podEvent(obj any, deleted bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	obj, unknown := unwrap(obj)
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	kind := w.kindOf(p)
	if kind == "" {
		return
	}
	if unknown {
		w.violate(violWatcherGap, "deletion of pod %s/%s seen only on a relist", p.Namespace, p.Name)
	}
	rv := rvOf(p.ResourceVersion)
	rec := w.pods[p.UID]
	if rec == nil {
		rec = &podRecord{key: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}, kind: kind}
		w.pods[p.UID] = rec
	}
	if p.Spec.NodeName != "" && rec.node == "" {
		rec.node, rec.boundRV = p.Spec.NodeName, rv
	}
	if p.DeletionTimestamp != nil && rec.terminatingRV == 0 {
		rec.terminatingRV = rv
	}
	if kind == kindWeb {
		w.healthy[p.UID] = !deleted && p.DeletionTimestamp == nil && podReady(p)
		if deleted {
			delete(w.healthy, p.UID)
		}
		w.checkHealthy()
	}
	if deleted {
		rec.deletedRV = rv
		w.judgePodDeletion(rec, disruptionReason(p))
	}
}

// judgePodDeletion: protected pods never go; workload pods go evicted
// (DisruptionTarget EvictionByEvictionAPI) or deleted by their ReplicaSet
// (no condition; berth's own deletes are checked at the proxy); any other
// reason (DeletionByPodGC: its node was deleted under it) is a loss.
func (w *chaosWatcher) judgePodDeletion(rec *podRecord, reason string) {
	switch rec.kind {
	case kindBare, kindNoDisrupt:
		w.violate(violProtectedDeleted, "%s pod %s deleted (node %s, disruption reason %q)", rec.kind, rec.key, rec.node, reason)
	case kindPlaceholder:
		if reason == "PreemptionByScheduler" {
			w.phPreempted++
		} else {
			w.phDeleted++
		}
	default:
		switch reason {
		case "EvictionByEvictionAPI":
			w.evicted++
		case "":
			w.rsDeleted++
		default:
			w.violate(violPodLost, "%s pod %s deleted by %s, not evicted (node %s)", rec.kind, rec.key, reason, rec.node)
		}
	}
}

// found returns the violations so far.
func (w *chaosWatcher) found() []violation {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]violation(nil), w.violations...)
}

// figures is the watcher's part of the report.
func (w *chaosWatcher) figures() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var groups []string
	for g := range w.groups {
		groups = append(groups, fmt.Sprintf("%s %d/%d", g, w.launched[g], w.removed[g]))
	}
	sort.Strings(groups)
	minHealthy, minMargin := fmt.Sprint(w.minHealthy), fmt.Sprint(w.minMargin)
	if w.minHealthy == 1<<30 {
		minHealthy = "-"
	}
	if w.minMargin == 1<<30 {
		minMargin = "-"
	}
	return fmt.Sprintf("nodes launched/removed (owner-marked): %s; node deletions %d\n"+
		"pods: evicted %d, deleted by their ReplicaSet %d, terminating when their node went %d; placeholders preempted %d, deleted %d, on a deleted node %d\n"+
		"PDB: %d status changes; while armed lowest healthy web pods %s, lowest currentHealthy-desiredHealthy %s",
		strings.Join(groups, ", "), len(w.deletions), w.evicted, w.rsDeleted, w.terminatingOnDeleted,
		w.phPreempted, w.phDeleted, w.phOnDeleted, w.pdbChanges, minHealthy, minMargin)
}
