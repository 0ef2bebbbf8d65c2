package explain

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/clusterread"
	"github.com/berth-dev/berth/internal/planner/scaledown"
	"github.com/berth-dev/berth/internal/planner/scaledown/drain"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// group is a node group as read from the API server (with a UID) whose
// nodes are removable at once.
func group(name string, opts ...b.NodeGroupOption) *v1alpha1.NodeGroup {
	g := b.NodeGroup(name, append([]b.NodeGroupOption{b.InstanceType("standard-2", "2", "4Gi", b.OnDemand("zone-a", "0.1"))}, opts...)...)
	g.UID = types.UID("uid-" + name)
	return g
}

// launched is a Ready node berth launched for g and has seen Ready.
func launched(g *v1alpha1.NodeGroup, name string, opts ...b.NodeOption) *corev1.Node {
	n := cloudprovider.NodeFor(g, cloudprovider.Offering{InstanceType: "standard-2", Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeOnDemand}, name)
	n.Labels[v1alpha1.LabelInitialized] = "true"
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	for _, o := range opts {
		o(n)
	}
	return n
}

func replicated(name, node, cpu string, opts ...b.PodOption) *corev1.Pod {
	return b.Pod(name, append([]b.PodOption{b.NodeName(node), b.CPU(cpu), b.OwnedBy("ReplicaSet", "web")}, opts...)...)
}

type nodeWant struct {
	Decision Decision
	Reason   string
	Pod      string
	said     string // in the message, a hint, a live line or a note
}

func TestExplainNode(t *testing.T) {
	g := group("small")
	drifted := g.DeepCopy()
	b.TemplateLabel("tier", "gold")(drifted)
	held := g.DeepCopy()
	held.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionScaleDownSuspended, Status: metav1.ConditionTrue, Reason: "Provisioning",
		Message: "launching small-x for default/api"}}
	never, atMin, windowed := g.DeepCopy(), g.DeepCopy(), g.DeepCopy()
	never.Spec.Disruption.ConsolidationPolicy = v1alpha1.ConsolidationNever
	atMin.Spec.MinSize = 1
	windowed.Spec.Disruption.Window = &v1alpha1.DisruptionWindow{Cron: "0 22 * * *", Duration: metav1.Duration{Duration: time.Hour}}
	a, other := launched(g, "small-a"), launched(g, "small-b")
	// One large node at 0.15 would hold the pods of both small nodes
	// (0.20), but not them and the four pods that wait.
	withLarge := group("small", b.InstanceType("large-8", "8", "16Gi", b.OnDemand("zone-a", "0.15")))
	all := intstr.FromString("100%")
	withLarge.Spec.Disruption.Budget = &all
	// The same large node's offering failed to launch a minute ago.
	largeFailed := withLarge.DeepCopy()
	largeFailed.Status.UnavailableOfferings = []v1alpha1.UnavailableOffering{{InstanceType: "large-8", Zone: "zone-a",
		CapacityType: v1alpha1.CapacityTypeOnDemand, Until: metav1.NewTime(now.Add(4 * time.Minute)), Streak: 1}}
	var waiting []*corev1.Pod
	for _, name := range []string{"burst-1", "burst-2", "burst-3", "burst-4"} {
		waiting = append(waiting, b.Pod(name, b.CPU("1500m"), b.OwnedBy("ReplicaSet", "burst"), unschedulable))
	}
	tests := []struct {
		name   string
		groups []*v1alpha1.NodeGroup
		nodes  []*corev1.Node
		pods   []*corev1.Pod
		want   nodeWant
	}{
		{name: "a bare pod keeps its node, and the hint is the safe-to-evict annotation",
			groups: []*v1alpha1.NodeGroup{g}, nodes: []*corev1.Node{a}, pods: []*corev1.Pod{b.Pod("bare", b.NodeName("small-a"))},
			want: nodeWant{Decision: DecisionKeep, Reason: string(drain.ReasonNotReplicated), Pod: "default/bare",
				said: `annotate it cluster-autoscaler.kubernetes.io/safe-to-evict: "true"`}},
		{name: "a pod asking not to be disrupted keeps its node",
			groups: []*v1alpha1.NodeGroup{g}, nodes: []*corev1.Node{a, other},
			pods: []*corev1.Pod{replicated("web-1", "small-a", "500m", b.Annotation(v1alpha1.AnnotationDoNotDisrupt, "true"))},
			want: nodeWant{Decision: DecisionKeep, Reason: string(drain.ReasonDoNotDisrupt), Pod: "default/web-1", said: "remove the pod's annotation"}},
		{name: "a node whose pods fit elsewhere is removed, and the controller's timer is named",
			groups: []*v1alpha1.NodeGroup{g}, nodes: []*corev1.Node{a, other},
			pods: []*corev1.Pod{replicated("web-1", "small-a", "200m"), replicated("web-2", "small-b", "1")},
			want: nodeWant{Decision: DecisionRemove, Reason: string(scaledown.RemovalUnderutilized), said: "consolidateAfter (30s)"}},
		{name: "a second removable node waits for the group's disruption budget",
			groups: []*v1alpha1.NodeGroup{g}, nodes: []*corev1.Node{other, a},
			pods: []*corev1.Pod{replicated("web-1", "small-a", "200m"), replicated("web-2", "small-b", "1")},
			want: nodeWant{Decision: DecisionKeep, Reason: string(scaledown.ReasonBudget), said: "raise the node group's spec.disruption.budget"}},
		{name: "a pod that fits on no other node keeps its node",
			groups: []*v1alpha1.NodeGroup{g}, nodes: []*corev1.Node{a, other},
			pods: []*corev1.Pod{replicated("web-1", "small-a", "1500m"), replicated("web-2", "small-b", "1")},
			want: nodeWant{Decision: DecisionKeep, Reason: string(scaledown.ReasonNoHome), Pod: "default/web-1", said: "fits on no other node"}},
		{name: "a replacement that pods waiting would take the room of is said to be held back",
			groups: []*v1alpha1.NodeGroup{withLarge}, nodes: []*corev1.Node{a, other},
			pods: append([]*corev1.Pod{replicated("web-1", "small-a", "1500m"), replicated("web-2", "small-b", "1500m")}, waiting...),
			want: nodeWant{Decision: DecisionKeep, Reason: string(scaledown.ReasonReplacementHeld),
				said: "one large-8 node of node group small (0.1500/h) would replace small-a, small-b (0.2000/h), but pods wait for a node"}},
		{name: "a replacement is planned on two nodes that fit one cheaper node",
			groups: []*v1alpha1.NodeGroup{withLarge}, nodes: []*corev1.Node{a, other},
			pods: []*corev1.Pod{replicated("web-1", "small-a", "1500m"), replicated("web-2", "small-b", "1500m")},
			want: nodeWant{Decision: DecisionReplace, Reason: string(scaledown.RemovalUnderutilized), said: "large-8"}},
		{name: "no replacement is planned on an offering the controller avoids after a failed launch",
			groups: []*v1alpha1.NodeGroup{largeFailed}, nodes: []*corev1.Node{a, other},
			pods: []*corev1.Pod{replicated("web-1", "small-a", "1500m"), replicated("web-2", "small-b", "1500m")},
			want: nodeWant{Decision: DecisionKeep, Reason: string(scaledown.ReasonNoHome), Pod: "default/web-1", said: "fits on no other node"}},
		{name: "a drifted node is disrupted",
			groups: []*v1alpha1.NodeGroup{drifted}, nodes: []*corev1.Node{a},
			want: nodeWant{Decision: DecisionDisrupt, Reason: string(v1alpha1.ReasonDrifted), said: `reasons: [Drifted]`}},
		{name: "a node whose drain berth gave up a moment ago cools down, read from the node",
			groups: []*v1alpha1.NodeGroup{g}, nodes: []*corev1.Node{launched(g, "small-a", func(n *corev1.Node) {
				n.Annotations[v1alpha1.AnnotationDrainGivenUp] = now.Add(-time.Minute).UTC().Format(time.RFC3339)
			})},
			want: nodeWant{Decision: DecisionKeep, Reason: string(scaledown.ReasonRecentlyGivenUp), said: "it is not drained again for 5m0s"}},
		{name: "a group at its minSize keeps its last node",
			groups: []*v1alpha1.NodeGroup{atMin}, nodes: []*corev1.Node{a},
			want: nodeWant{Decision: DecisionKeep, Reason: string(scaledown.ReasonMinSize), said: "lower the node group's spec.minSize"}},
		{name: "a group that never consolidates says so",
			groups: []*v1alpha1.NodeGroup{never}, nodes: []*corev1.Node{a},
			want: nodeWant{Decision: DecisionKeep, Reason: string(scaledown.ReasonPolicy), said: "consolidationPolicy to WhenEmptyOrUnderutilized"}},
		{name: "a group held for a waiting pod keeps its nodes, read from ScaleDownSuspended",
			groups: []*v1alpha1.NodeGroup{held}, nodes: []*corev1.Node{a},
			want: nodeWant{Decision: DecisionKeep, Reason: string(scaledown.ReasonGroupHeld), said: "launching small-x for default/api"}},
		{name: "an empty node outside its group's window waits for the window",
			groups: []*v1alpha1.NodeGroup{windowed}, nodes: []*corev1.Node{a},
			want: nodeWant{Decision: DecisionRemove, Reason: string(scaledown.RemovalEmpty), said: "closed now"}},
		{name: "a node without the node group label is not berth's",
			groups: []*v1alpha1.NodeGroup{g}, nodes: []*corev1.Node{b.Node("worker-1", "4", "8Gi")},
			want: nodeWant{Decision: DecisionNotManaged, Reason: ReasonNoNodeGroup, said: "berth does not manage it"}},
		{name: "a node without berth's owner mark is not berth's to remove",
			groups: []*v1alpha1.NodeGroup{g}, nodes: []*corev1.Node{launched(g, "small-a", func(n *corev1.Node) { delete(n.Annotations, v1alpha1.AnnotationLaunchedBy) })},
			want: nodeWant{Decision: DecisionNotManaged, Reason: string(scaledown.ReasonNotOwned), said: "never removes it"}},
		{name: "a node being drained shows berth's taint and annotations",
			groups: []*v1alpha1.NodeGroup{g}, nodes: []*corev1.Node{launched(g, "small-a",
				b.NodeTaint(v1alpha1.TaintDisrupted, "", corev1.TaintEffectNoSchedule),
				b.NodeAnnotation(v1alpha1.AnnotationDisruptionReason, "Empty"),
				b.NodeAnnotation(v1alpha1.AnnotationDisruptionStarted, "2026-06-01T11:59:00Z"))},
			want: nodeWant{Decision: DecisionDraining, Reason: "Empty", said: "taint berth.dev/disrupted:NoSchedule"}},
		{name: "an interrupted node being drained says its opt-outs do not hold it",
			groups: []*v1alpha1.NodeGroup{g}, nodes: []*corev1.Node{launched(g, "small-a",
				b.NodeTaint(v1alpha1.TaintDisrupted, "", corev1.TaintEffectNoSchedule),
				b.NodeTaint(v1alpha1.TaintInterruption, "", corev1.TaintEffectNoSchedule),
				b.NodeAnnotation(v1alpha1.AnnotationDisruptionReason, "Interrupted"),
				b.NodeAnnotation(v1alpha1.AnnotationDisruptionStarted, "2026-06-01T11:59:00Z"))},
			want: nodeWant{Decision: DecisionDraining, Reason: "Interrupted", said: "neither berth.dev/do-not-disrupt nor the drain timeout holds an interrupted node"}},
		{name: "a node whose removal its provider accepted is going, whatever its pods say",
			groups: []*v1alpha1.NodeGroup{g}, nodes: []*corev1.Node{launched(g, "small-a",
				b.NodeTaint(v1alpha1.TaintDisrupted, "", corev1.TaintEffectNoSchedule),
				b.NodeAnnotation(v1alpha1.AnnotationDisruptionStarted, "2026-06-01T11:50:00Z"),
				b.NodeAnnotation(v1alpha1.AnnotationRemovalAccepted, "2026-06-01T11:59:00Z"))},
			want: nodeWant{Decision: DecisionDeleting, Reason: ReasonRemovalAccepted, said: "accepted removing it (since 2026-06-01T11:59:00Z)"}},
		{name: "a node being replaced names its replacement",
			groups: []*v1alpha1.NodeGroup{g}, nodes: []*corev1.Node{launched(g, "small-a", b.NodeAnnotation(v1alpha1.AnnotationReplacedBy, "small-new"))},
			want: nodeWant{Decision: DecisionReplacing, said: "once small-new is Ready"}},
		{name: "the controller's BerthDisruption condition is shown",
			groups: []*v1alpha1.NodeGroup{g}, nodes: []*corev1.Node{launched(g, "small-a", func(n *corev1.Node) {
				n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: v1alpha1.NodeConditionDisruption, Status: corev1.ConditionFalse,
					Reason: "NotReplicated", Message: "pod default/bare is not backed by a controller", LastTransitionTime: metav1.NewTime(now.Add(-90 * time.Second))})
			})}, pods: []*corev1.Pod{b.Pod("bare", b.NodeName("small-a"))},
			want: nodeWant{Decision: DecisionKeep, Reason: string(drain.ReasonNotReplicated), Pod: "default/bare",
				said: "condition BerthDisruption=False (NotReplicated): pod default/bare is not backed by a controller, since 1m30s ago"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cl := &clusterread.Cluster{NodeGroups: tc.groups, Nodes: tc.nodes, Pods: tc.pods}
			f, err := planNode(cl, tc.nodes[0], nil, Settings{Now: now, LaunchGrace: scaleup.DefaultLaunchGrace})
			if err != nil {
				t.Fatal(err)
			}
			e := explainNode(f)
			got := nodeWant{Decision: e.Decision, Reason: e.Reason, Pod: e.Pod}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(nodeWant{}), cmp.FilterPath(func(p cmp.Path) bool {
				return p.Last().String() == ".said"
			}, cmp.Ignore())); diff != "" {
				t.Errorf("(-want +got):\n%s\nmessage: %s", diff, e.Message)
			}
			said := strings.Join(append(append(append([]string{e.Message}, e.Hints...), e.Live...), e.Notes...), "\n")
			if !strings.Contains(said, tc.want.said) {
				t.Errorf("explanation says\n%s\nwant it to contain %q", said, tc.want.said)
			}
		})
	}
}

// TestExplainNodeHonoursTheNodeCaps (a review): explain plans a node's
// removal within the controller's --max-nodes-total, as the controller
// does. A drifted node whose pod fits on no other node needs a
// replacement; with the cluster at its cap of nodes (past it here) the
// controller launches none and keeps the node, and so says explain.
func TestExplainNodeHonoursTheNodeCaps(t *testing.T) {
	g := group("small")
	drifted := g.DeepCopy()
	b.TemplateLabel("tier", "gold")(drifted)
	a := launched(g, "small-a")
	cl := &clusterread.Cluster{NodeGroups: []*v1alpha1.NodeGroup{drifted}, Nodes: []*corev1.Node{a, b.Node("worker-1", "1", "2Gi")},
		Pods: []*corev1.Pod{replicated("web-1", "small-a", "1500m")}}
	for _, tc := range []struct {
		caps    scaleup.NodeCaps
		disrupt bool
	}{{caps: scaleup.NodeCaps{}, disrupt: true}, {caps: scaleup.NodeCaps{Total: 1}, disrupt: false}} {
		f, err := planNode(cl, a, nil, Settings{Now: now, LaunchGrace: scaleup.DefaultLaunchGrace, Limits: scaleup.Limits{Nodes: tc.caps}})
		if err != nil {
			t.Fatal(err)
		}
		if e := explainNode(f); (e.Decision == DecisionDisrupt) != tc.disrupt {
			t.Errorf("caps %+v: %s %s: %s; want disrupted: %v", tc.caps, e.Decision, e.Reason, e.Message, tc.disrupt)
		}
	}
}
