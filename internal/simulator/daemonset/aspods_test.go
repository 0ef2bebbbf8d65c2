package daemonset_test

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/internal/simulator/daemonset"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// agent is the DaemonSet "agent" (UID uid-agent, as b.OwnedBy names its
// owner) at template generation gen ("" for a DaemonSet without the
// annotation), asking for 100m and selecting the pool "general" by
// required node affinity.
func agent(gen string) *appsv1.DaemonSet {
	d := ds("agent", "100m", "64Mi", nil)
	d.UID = "uid-agent"
	if gen != "" {
		d.Annotations = map[string]string{appsv1.DeprecatedTemplateGeneration: gen}
	}
	d.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
			b.Term(b.Expr("pool", corev1.NodeSelectorOpIn, "general"))}}}}
	return d
}

// agentPod is a pod of agent on node, made at minute min from the
// template of generation gen, as admitted: asking for cpu, and with the
// node affinity the DaemonSet controller gives it (the node's name only).
func agentPod(name, node, gen, cpu string, min int) *corev1.Pod {
	p := b.Pod(name, b.Namespace("kube-system"), b.OwnedBy("DaemonSet", "agent"), b.CPU(cpu), b.NodeName(node),
		b.RequireNodeAffinity(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}))
	if gen != "" {
		p.Labels = map[string]string{"pod-template-generation": gen}
	}
	p.CreationTimestamp = metav1.NewTime(time.Date(2026, 11, 29, 12, min, 0, 0, time.UTC))
	return p
}

// TestADaemonSetIsReadAsItsNewestPodOfItsTemplateRuns: what a
// DaemonSet's pod holds on a new node is read from its newest pod made
// from its current template (a LimitRange, webhook or vertical
// autoscaler gives pods what the template does not say), on nodes the
// template's affinity selects; a DaemonSet none of whose pods are of its
// template (a rollout under way) is read from its template; pods of
// other controllers, or that only name a DaemonSet as an owner, are not
// its pods.
func TestADaemonSetIsReadAsItsNewestPodOfItsTemplateRuns(t *testing.T) {
	general := b.Node("n", "4", "8Gi", b.NodeLabels("pool", "general"))
	other := b.Node("o", "4", "8Gi", b.NodeLabels("pool", "gpu"))
	notController := agentPod("not-controller", "n-9", "2", "3", 59)
	notController.OwnerReferences[0].Controller = nil
	replicaSet := b.Pod("web", b.Namespace("kube-system"), b.OwnedBy("ReplicaSet", "agent"), b.CPU("3"))
	replicaSet.OwnerReferences[0].UID = "uid-agent"
	for _, tc := range []struct {
		name      string
		ds        *appsv1.DaemonSet
		pods      []*corev1.Pod
		wantMilli int64
	}{
		{"the newest pod of the current generation", agent("2"), []*corev1.Pod{
			agentPod("a", "n-1", "2", "300m", 1), agentPod("b", "n-2", "2", "500m", 3), agentPod("c", "n-3", "1", "900m", 5)}, 500},
		{"of pods made at the same time, the last by name", agent("2"), []*corev1.Pod{
			agentPod("a", "n-1", "2", "300m", 1), agentPod("b", "n-2", "2", "500m", 1)}, 500},
		{"a rollout whose new pods are not made: the template", agent("3"), []*corev1.Pod{
			agentPod("a", "n-1", "2", "300m", 1)}, 100},
		{"no annotation: the newest pod of any generation", agent(""), []*corev1.Pod{
			agentPod("a", "n-1", "2", "300m", 1), agentPod("c", "n-3", "1", "900m", 5)}, 900},
		{"pods of other controllers, or that do not say it controls them", agent("2"), []*corev1.Pod{
			notController, replicaSet}, 100},
		{"no pods: the template", agent("2"), nil, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.ds.DeepCopy()
			// The choice does not depend on the pods' order: as given,
			// reversed, shuffled.
			for seed := range uint64(6) {
				pods := slices.Clone(tc.pods)
				switch seed {
				case 0:
				case 1:
					slices.Reverse(pods)
				default:
					rand.New(rand.NewPCG(seed, 1)).Shuffle(len(pods), func(i, j int) { pods[i], pods[j] = pods[j], pods[i] })
				}
				got := daemonset.Pods(daemonset.AsRun([]*appsv1.DaemonSet{tc.ds}, daemonset.NewestOf(pods), daemonset.Admission{}))[0]
				if got.Requests.MilliCPU != tc.wantMilli {
					t.Fatalf("requests %dm of cpu, want %dm", got.Requests.MilliCPU, tc.wantMilli)
				}
				if !got.RunsOn(general) || got.RunsOn(other) {
					t.Errorf("runs on the general pool's node: %v, on another pool's: %v; want its template's affinity",
						got.RunsOn(general), got.RunsOn(other))
				}
			}
			if d := cmp.Diff(before, tc.ds); d != "" {
				t.Errorf("the DaemonSet given was changed:\n%s", d)
			}
		})
	}
}

// TestWhatADaemonSetsPodHoldsNamesIt: two reads of a DaemonSet from
// pods that hold the same are marked alike, and from a pod that holds
// more, differently (what is kept from round to round for the
// DaemonSet's generation is known by the mark); a DaemonSet read from
// its template is not marked and is the one given.
func TestWhatADaemonSetsPodHoldsNamesIt(t *testing.T) {
	mark := func(pods ...*corev1.Pod) string {
		return daemonset.AsRun([]*appsv1.DaemonSet{agent("2")}, daemonset.NewestOf(pods), daemonset.Admission{})[0].Annotations[daemonset.AnnotationAsRun]
	}
	a, b2, more := mark(agentPod("a", "n-1", "2", "300m", 1)), mark(agentPod("b", "n-2", "2", "300m", 2)), mark(agentPod("c", "n-3", "2", "301m", 3))
	if a == "" || a != b2 || a == more {
		t.Errorf("marks %q, %q (the same requests) and %q (more): want the first two alike and the third not", a, b2, more)
	}
	d := agent("3")
	if got := daemonset.AsRun([]*appsv1.DaemonSet{d}, daemonset.NewestOf([]*corev1.Pod{agentPod("a", "n-1", "2", "300m", 1)}), daemonset.Admission{})[0]; got != d {
		t.Errorf("a DaemonSet read from its template is a copy (%v)", got.Annotations)
	}
}

// TestATemplateReadFromAPodHasNothingAPodGetsLater: what the DaemonSet
// controller writes for the pod's node (its name, an affinity naming it),
// and what a pod gets after it is made (an ephemeral debug container,
// scheduling gates a webhook added at its admission) are not in the
// template made from it; its requests are.
func TestATemplateReadFromAPodHasNothingAPodGetsLater(t *testing.T) {
	p := agentPod("a", "n-1", "2", "300m", 1)
	p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug"}}}
	p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/gate"}}
	got := daemonset.AsRun([]*appsv1.DaemonSet{agent("2")}, daemonset.NewestOf([]*corev1.Pod{p}), daemonset.Admission{})[0].Spec.Template.Spec
	if got.NodeName != "" || len(got.EphemeralContainers) > 0 || len(got.SchedulingGates) > 0 {
		t.Errorf("node %q, ephemeral containers %v, gates %v; want none", got.NodeName, got.EphemeralContainers, got.SchedulingGates)
	}
	if diff := cmp.Diff(agent("2").Spec.Template.Spec.Affinity, got.Affinity); diff != "" {
		t.Errorf("affinity (-template +got):\n%s", diff)
	}
	if q := got.Containers[0].Resources.Requests[corev1.ResourceCPU]; q.String() != "300m" {
		t.Errorf("requests %s of cpu, want the pod's 300m", q.String())
	}
}
