package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// problem is what keeps a phase from being settled, with the invariant
// it breaks if it never goes.
type problem struct{ kind, detail string }

// settle waits until the phase's planned state holds for hold without a
// break. On time-out the problems still there become
// violations and settle returns false.
func settle(t *testing.T, w *chaosWatcher, ns string, ph chaosPhase, timeout, hold time.Duration) bool {
	t.Helper()
	began := time.Now()
	var since time.Time
	var last []problem
	for time.Since(began) < timeout {
		probs, err := phaseProblems(context.Background(), ns, ph)
		switch {
		case err != nil:
			last = []problem{{violCount, "reading the cluster: " + err.Error()}}
		case len(probs) > 0:
			since, last = time.Time{}, probs
		case since.IsZero():
			since = time.Now()
		case time.Since(since) >= hold:
			t.Logf("%s (web %d, filler %d): planned nodes %v reached, held %s; %s after the phase began; pods by node: %s",
				ph.name, ph.web, ph.filler, ph.planned(), hold, since.Sub(began).Round(100*time.Millisecond), layout(ns))
			return true
		}
		time.Sleep(500 * time.Millisecond)
	}
	for _, p := range last {
		w.add(p.kind, "%s (web %d, filler %d), after %s: %s", ph.name, ph.web, ph.filler, timeout, p.detail)
	}
	t.Logf("%s did not settle; the cluster now:\n%s", ph.name, describeChaos(ns))
	return false
}

// layout is each node's pods by kind, e.g. "web-foreign[web web]".
func layout(ns string) string {
	ctx := context.Background()
	pods, placeholders := &corev1.PodList{}, &corev1.PodList{}
	if env.Client.List(ctx, pods, client.InNamespace(ns)) != nil ||
		env.Client.List(ctx, placeholders, client.InNamespace(v1alpha1.SystemNamespace), client.MatchingLabels{v1alpha1.LabelHeadroom: "chaos-spare"}) != nil {
		return "(could not read the pods)"
	}
	on := map[string][]string{}
	for _, p := range append(pods.Items, placeholders.Items...) {
		kind := p.Labels[labelChaosKind]
		if p.Namespace == v1alpha1.SystemNamespace {
			kind = kindPlaceholder
		}
		on[strings.TrimPrefix(p.Spec.NodeName, "chaos-")] = append(on[strings.TrimPrefix(p.Spec.NodeName, "chaos-")], kind)
	}
	var out []string
	for node, kinds := range on {
		sort.Strings(kinds)
		out = append(out, node+"["+strings.Join(kinds, " ")+"]")
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// describeChaos lists the soak's nodes with their pods and latest events,
// and the pods that wait: what a phase that did not settle looked like.
func describeChaos(ns string) string {
	ctx := context.Background()
	nodes, pods, placeholders := &corev1.NodeList{}, &corev1.PodList{}, &corev1.PodList{}
	if env.Client.List(ctx, nodes, client.HasLabels{v1alpha1.LabelNodeGroup}) != nil || env.Client.List(ctx, pods, client.InNamespace(ns)) != nil ||
		env.Client.List(ctx, placeholders, client.InNamespace(v1alpha1.SystemNamespace), client.MatchingLabels{v1alpha1.LabelHeadroom: "chaos-spare"}) != nil {
		return "(could not read the cluster)"
	}
	on := map[string][]string{}
	var waiting []string
	for _, p := range append(pods.Items, placeholders.Items...) {
		if p.Spec.NodeName == "" {
			waiting = append(waiting, fmt.Sprintf("%s (nominated to %q)", p.Name, p.Status.NominatedNodeName))
			continue
		}
		on[p.Spec.NodeName] = append(on[p.Spec.NodeName], p.Name+"("+string(p.Status.Phase)+")")
	}
	var out []string
	for _, n := range nodes.Items {
		if !strings.HasPrefix(n.Labels[v1alpha1.LabelNodeGroup], "chaos-") {
			continue
		}
		list, _ := env.Clientset.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + n.Name})
		var evs []string
		for _, e := range list.Items {
			evs = append(evs, e.Reason+": "+e.Message)
		}
		if len(evs) > 3 {
			evs = evs[len(evs)-3:]
		}
		out = append(out, fmt.Sprintf("  %s owned=%t taints=%v pods=%v\n      events: %s", n.Name, n.Annotations[v1alpha1.AnnotationLaunchedBy] != "",
			n.Spec.Taints, on[n.Name], strings.Join(evs, " | ")))
	}
	sort.Strings(out)
	return strings.Join(out, "\n") + fmt.Sprintf("\n  waiting for a node: %v", waiting)
}

// phaseProblems reads the cluster from the API server and lists what
// differs from the phase's plan.
func phaseProblems(ctx context.Context, ns string, ph chaosPhase) ([]problem, error) {
	probs, err := nodeProblems(ctx, ph.planned())
	if err != nil {
		return nil, err
	}
	pods := &corev1.PodList{}
	if err := env.Client.List(ctx, pods, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	placeholders := &corev1.PodList{}
	if err := env.Client.List(ctx, placeholders, client.InNamespace(v1alpha1.SystemNamespace), client.MatchingLabels{v1alpha1.LabelHeadroom: "chaos-spare"}); err != nil {
		return nil, err
	}
	want := map[string]int{kindWeb: int(ph.web), kindFiller: int(ph.filler), kindBare: 2, kindNoDisrupt: 2}
	have, running := map[string]int{}, map[string]int{}
	for _, p := range append(pods.Items, placeholders.Items...) {
		if len(p.Spec.SchedulingGates) > 0 {
			probs = append(probs, problem{violLeftover, fmt.Sprintf("pod %s/%s is gated %v", p.Namespace, p.Name, p.Spec.SchedulingGates)})
		}
		kind := p.Labels[labelChaosKind]
		if p.Namespace == v1alpha1.SystemNamespace {
			kind = kindPlaceholder
		}
		if p.DeletionTimestamp == nil {
			have[kind]++
			if p.Status.Phase == corev1.PodRunning && podReady(&p) {
				running[kind]++
			}
		}
	}
	want[kindPlaceholder] = 1
	for _, kind := range []string{kindWeb, kindFiller, kindBare, kindNoDisrupt, kindPlaceholder} {
		if have[kind] != want[kind] || running[kind] != want[kind] {
			probs = append(probs, problem{violCount, fmt.Sprintf("%s pods: %d, %d running, want %d running", kind, have[kind], running[kind], want[kind])})
		}
	}
	return probs, nil
}

// nodeProblems compares each group's live nodes with the plan and finds
// nodes left tainted by berth, marked for a drain or cordoned.
func nodeProblems(ctx context.Context, planned map[string]int) ([]problem, error) {
	nodes := &corev1.NodeList{}
	if err := env.Client.List(ctx, nodes, client.HasLabels{v1alpha1.LabelNodeGroup}); err != nil {
		return nil, err
	}
	var probs []problem
	live := map[string]int{}
	for _, n := range nodes.Items {
		if _, ours := planned[n.Labels[v1alpha1.LabelNodeGroup]]; !ours || n.DeletionTimestamp != nil {
			continue
		}
		live[n.Labels[v1alpha1.LabelNodeGroup]]++
		var marks []string
		for _, taint := range n.Spec.Taints {
			if strings.HasPrefix(taint.Key, "berth.dev/") {
				marks = append(marks, "taint "+taint.Key)
			}
		}
		for _, a := range []string{v1alpha1.AnnotationDisruptionStarted, v1alpha1.AnnotationReplacedBy} {
			if _, ok := n.Annotations[a]; ok {
				marks = append(marks, "annotation "+a)
			}
		}
		if n.Spec.Unschedulable {
			marks = append(marks, "cordoned")
		}
		if len(marks) > 0 {
			probs = append(probs, problem{violLeftover, fmt.Sprintf("node %s: %s", n.Name, strings.Join(marks, ", "))})
		}
	}
	var groups []string
	for g := range planned {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	for _, g := range groups {
		if live[g] != planned[g] {
			probs = append(probs, problem{violCount, fmt.Sprintf("group %s has %d nodes, planned %d", g, live[g], planned[g])})
		}
	}
	return probs, nil
}
