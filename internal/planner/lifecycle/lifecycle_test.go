package lifecycle_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/lifecycle"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

var now = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func group(mutate ...func(*v1alpha1.NodeGroup)) *v1alpha1.NodeGroup {
	ng := b.NodeGroup("g", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10"), b.Spot("zone-a", "0.04")))
	ng.UID = "uid-g"
	for _, m := range mutate {
		m(ng)
	}
	return ng
}

// launched is a node of g as berth launched it, created at created.
func launched(ng *v1alpha1.NodeGroup, created time.Time, opts ...b.NodeOption) *corev1.Node {
	n := b.Node("n", "2", "8Gi", append([]b.NodeOption{b.LaunchedBy(ng), b.NodeLabels(v1alpha1.LabelInstanceType, "m-2",
		v1alpha1.LabelZone, "zone-a", v1alpha1.LabelCapacityType, "spot"), b.NodeAnnotation(v1alpha1.AnnotationLaunchHash, ng.LaunchHash())}, opts...)...)
	n.CreationTimestamp = metav1.Time{Time: created}
	return n
}

// reasons are the verdicts' reasons, in order, joined by commas.
func reasons(vs []*lifecycle.Verdict) string {
	var out []string
	for _, v := range vs {
		out = append(out, string(v.Reason))
	}
	return strings.Join(out, ",")
}

func TestVerdicts(t *testing.T) {
	old := now.Add(-48 * time.Hour)
	notReadyFor := func(d time.Duration) b.NodeOption {
		return func(n *corev1.Node) {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Time{Time: now.Add(-d)}}}
		}
	}
	repair := func(ng *v1alpha1.NodeGroup) { ng.Spec.Disruption.Repair = &v1alpha1.Repair{} }
	tests := []struct {
		name string
		ng   *v1alpha1.NodeGroup
		node func(ng *v1alpha1.NodeGroup) *corev1.Node
		held bool
		want string
	}{
		{name: "a node as launched has no reason to go", ng: group(), node: func(ng *v1alpha1.NodeGroup) *corev1.Node { return launched(ng, old) }},
		{name: "AWS NTH's spot interruption taint is a notice", ng: group(), want: "Interrupted", node: func(ng *v1alpha1.NodeGroup) *corev1.Node {
			return launched(ng, old, b.NodeTaint("aws-node-termination-handler/spot-itn", "x", corev1.TaintEffectNoSchedule))
		}},
		{name: "GKE's impending termination taint is a notice", ng: group(), want: "Interrupted", node: func(ng *v1alpha1.NodeGroup) *corev1.Node {
			return launched(ng, old, b.NodeTaint("cloud.google.com/impending-node-termination", "", corev1.TaintEffectNoSchedule))
		}},
		{name: "a configured condition is a notice", want: "Interrupted",
			ng: group(func(ng *v1alpha1.NodeGroup) {
				ng.Spec.Disruption.Interruption = &v1alpha1.Interruption{Conditions: []string{"VMEventScheduled"}}
			}),
			node: func(ng *v1alpha1.NodeGroup) *corev1.Node {
				n := launched(ng, old)
				n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: "VMEventScheduled", Status: corev1.ConditionTrue})
				return n
			}},
		{name: "a rebalance recommendation is ignored unless opted in", ng: group(), node: func(ng *v1alpha1.NodeGroup) *corev1.Node {
			return launched(ng, old, b.NodeTaint("aws-node-termination-handler/rebalance-recommendation", "", corev1.TaintEffectPreferNoSchedule))
		}},
		{name: "a rebalance recommendation opted in replaces the node ahead of time", want: "Drifted",
			ng: group(func(ng *v1alpha1.NodeGroup) {
				ng.Spec.Disruption.Interruption = &v1alpha1.Interruption{Rebalance: true}
			}),
			node: func(ng *v1alpha1.NodeGroup) *corev1.Node {
				return launched(ng, old, b.NodeTaint("aws-node-termination-handler/rebalance-recommendation", "", corev1.TaintEffectPreferNoSchedule))
			}},
		{name: "a template label changed since the launch is drift", want: "Drifted",
			ng:   group(func(ng *v1alpha1.NodeGroup) { b.TemplateLabel("tier", "gold")(ng) }),
			node: func(*v1alpha1.NodeGroup) *corev1.Node { return launched(group(), old) }},
		{name: "an offering that left the group is drift", want: "Drifted", ng: group(),
			node: func(ng *v1alpha1.NodeGroup) *corev1.Node {
				return launched(ng, old, b.NodeLabels(v1alpha1.LabelInstanceType, "gone-4"))
			}},
		{name: "a Cluster API node in a zone the group does not list has not drifted: Cluster API chose it, and a replacement lands there too",
			ng: group(func(ng *v1alpha1.NodeGroup) {
				ng.Spec.Provider.ClusterAPI = &v1alpha1.ClusterAPIProvider{Namespace: "default", Name: "md"}
			}),
			node: func(ng *v1alpha1.NodeGroup) *corev1.Node {
				return launched(ng, old, b.NodeLabels(v1alpha1.LabelZone, "eu-west-1b"))
			}},
		{name: "a node without a launch hash has not drifted", ng: group(func(ng *v1alpha1.NodeGroup) { b.TemplateLabel("tier", "gold")(ng) }),
			node: func(ng *v1alpha1.NodeGroup) *corev1.Node {
				n := launched(ng, old)
				delete(n.Annotations, v1alpha1.AnnotationLaunchHash)
				return n
			}},
		{name: "a node older than expireAfter (plus its spread) expires", want: "Expired",
			ng: group(func(ng *v1alpha1.NodeGroup) {
				ng.Spec.Disruption.ExpireAfter = &metav1.Duration{Duration: 24 * time.Hour}
			}),
			node: func(ng *v1alpha1.NodeGroup) *corev1.Node { return launched(ng, now.Add(-26*time.Hour)) }},
		{name: "a young node does not expire", ng: group(func(ng *v1alpha1.NodeGroup) {
			ng.Spec.Disruption.ExpireAfter = &metav1.Duration{Duration: 24 * time.Hour}
		}),
			node: func(ng *v1alpha1.NodeGroup) *corev1.Node { return launched(ng, now.Add(-23*time.Hour)) }},
		{name: "a node of unknown age does not expire", ng: group(func(ng *v1alpha1.NodeGroup) {
			ng.Spec.Disruption.ExpireAfter = &metav1.Duration{Duration: 24 * time.Hour}
		}),
			node: func(ng *v1alpha1.NodeGroup) *corev1.Node { return launched(ng, time.Time{}) }},
		{name: "without repair a NotReady node is left alone", ng: group(),
			node: func(ng *v1alpha1.NodeGroup) *corev1.Node { return launched(ng, old, notReadyFor(time.Hour)) }},
		{name: "with repair a node NotReady past the toleration is unhealthy", ng: group(repair), want: "Unhealthy",
			node: func(ng *v1alpha1.NodeGroup) *corev1.Node { return launched(ng, old, notReadyFor(11*time.Minute)) }},
		{name: "with repair a node NotReady for a moment is not", ng: group(repair),
			node: func(ng *v1alpha1.NodeGroup) *corev1.Node { return launched(ng, old, notReadyFor(time.Minute)) }},
		{name: "a node never seen Ready is the launch timeout's, not repair's", ng: group(repair),
			node: func(ng *v1alpha1.NodeGroup) *corev1.Node {
				n := launched(ng, old, notReadyFor(time.Hour))
				delete(n.Labels, v1alpha1.LabelInitialized)
				return n
			}},
		{name: "an adopted Cluster API node NotReady since before berth knew it is repaired (the launch timeout never takes it)", ng: group(repair), want: "Unhealthy",
			node: func(ng *v1alpha1.NodeGroup) *corev1.Node {
				n := launched(ng, old, notReadyFor(time.Hour), b.NodeAnnotation(v1alpha1.AnnotationAdoptedAt, now.Add(-2*time.Hour).Format(time.RFC3339)))
				delete(n.Labels, v1alpha1.LabelInitialized)
				return n
			}},
		{name: "an adopted Cluster API node adopted as it registered and never Ready is the launch timeout's (a replica berth added, still booting)", ng: group(repair),
			node: func(ng *v1alpha1.NodeGroup) *corev1.Node {
				created := now.Add(-time.Hour)
				n := launched(ng, created, notReadyFor(time.Hour), b.NodeAnnotation(v1alpha1.AnnotationAdoptedAt, created.Add(5*time.Second).Format(time.RFC3339)))
				delete(n.Labels, v1alpha1.LabelInitialized)
				return n
			}},
		{name: "no repair when the group holds its repairs (a partition)", ng: group(repair), held: true,
			node: func(ng *v1alpha1.NodeGroup) *corev1.Node { return launched(ng, old, notReadyFor(time.Hour)) }},
		{name: "a drifted node past expireAfter may go for either, drift first", want: "Drifted,Expired",
			ng: group(func(ng *v1alpha1.NodeGroup) {
				b.TemplateLabel("tier", "gold")(ng)
				ng.Spec.Disruption.ExpireAfter = &metav1.Duration{Duration: 24 * time.Hour}
			}),
			node: func(*v1alpha1.NodeGroup) *corev1.Node { return launched(group(), old) }},
		{name: "an unhealthy node with a rebalance recommendation is repaired first", want: "Unhealthy,Drifted",
			ng: group(repair, func(ng *v1alpha1.NodeGroup) {
				ng.Spec.Disruption.Interruption = &v1alpha1.Interruption{Rebalance: true}
			}),
			node: func(ng *v1alpha1.NodeGroup) *corev1.Node {
				return launched(ng, old, notReadyFor(time.Hour),
					b.NodeTaint("aws-node-termination-handler/rebalance-recommendation", "", corev1.TaintEffectPreferNoSchedule))
			}},
		{name: "an interruption wins over drift", want: "Interrupted", ng: group(func(ng *v1alpha1.NodeGroup) { b.TemplateLabel("tier", "gold")(ng) }),
			node: func(*v1alpha1.NodeGroup) *corev1.Node {
				return launched(group(), old, b.NodeTaint(v1alpha1.TaintInterruption, "", corev1.TaintEffectNoSchedule))
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := reasons(lifecycle.Verdicts(tt.ng, tt.node(tt.ng), now, lifecycle.DefaultMaxProvisionTime, tt.held)); got != tt.want {
				t.Errorf("reasons %q, want %q", got, tt.want)
			}
		})
	}
}

// TestWhichInterruptionsTakeTheCapacity: the offering of an interrupted
// node is avoided when the cloud takes the capacity back (a spot
// interruption), not for a maintenance notice nor on an on-demand node,
// whose replacement of the same offering is as good (Karpenter marks an
// offering unavailable only on a spot interruption).
func TestWhichInterruptionsTakeTheCapacity(t *testing.T) {
	taint := func(key string) b.NodeOption { return b.NodeTaint(key, "", corev1.TaintEffectNoSchedule) }
	onDemand := b.NodeLabels(v1alpha1.LabelCapacityType, "on-demand")
	tests := []struct {
		name string
		node *corev1.Node
		want bool
	}{
		{"a spot node's interruption notice", launched(group(), now, taint("aws-node-termination-handler/spot-itn")), true},
		{"GKE's preemption of a spot node", launched(group(), now, taint("cloud.google.com/impending-node-termination")), true},
		{"the provider's own notice on a spot node", launched(group(), now, taint(v1alpha1.TaintInterruption)), true},
		{"scheduled maintenance of a spot node", launched(group(), now, taint("aws-node-termination-handler/scheduled-maintenance")), false},
		{"an Auto Scaling group's termination of a spot node", launched(group(), now, taint("aws-node-termination-handler/asg-lifecycle-termination")), false},
		{"an on-demand node's notice", launched(group(), now, onDemand, taint("aws-node-termination-handler/spot-itn")), false},
		{"a spot node without a notice", launched(group(), now), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := lifecycle.TakesCapacity(tt.node, lifecycle.Interrupted(group(), tt.node, now)); got != tt.want {
				t.Errorf("TakesCapacity = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestRepairHoldsWhenMoreOfTheGroupFailsThanItRepairsAtOnce: at the
// default 20 %, rounded up, a group of up to five nodes may have one
// repaired (Karpenter's rounding; a group of one or three was never
// repaired), a group of ten two; nodes down for a moment count (a
// partition takes them down together, each reaches its toleration in its
// own time), nodes never seen Ready do not (they are booting).
func TestRepairHoldsWhenMoreOfTheGroupFailsThanItRepairsAtOnce(t *testing.T) {
	ng := group(func(ng *v1alpha1.NodeGroup) { ng.Spec.Disruption.Repair = &v1alpha1.Repair{} })
	down := func(d time.Duration) *corev1.Node {
		return launched(ng, now.Add(-48*time.Hour), func(n *corev1.Node) {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, LastTransitionTime: metav1.Time{Time: now.Add(-d)}}}
		})
	}
	booting := func() *corev1.Node {
		n := down(time.Hour)
		delete(n.Labels, v1alpha1.LabelInitialized)
		return n
	}
	nodes := func(healthy int, others ...*corev1.Node) []*corev1.Node {
		out := slices.Clone(others)
		for range healthy {
			out = append(out, launched(ng, now.Add(-48*time.Hour)))
		}
		return out
	}
	tests := []struct {
		name  string
		nodes []*corev1.Node
		held  bool
	}{
		{"the one node of a group of one is repaired", nodes(0, down(time.Hour)), false},
		{"one node of three", nodes(2, down(time.Hour)), false},
		{"one node of five", nodes(4, down(time.Hour)), false},
		{"two nodes of five are held", nodes(3, down(time.Hour), down(time.Hour)), true},
		{"two nodes of ten", nodes(8, down(time.Hour), down(time.Hour)), false},
		{"one node past its toleration and two down for a moment, of ten, are held", nodes(7, down(time.Hour), down(time.Minute), down(time.Minute)), true},
		{"one node down and four booting, of ten", nodes(5, down(time.Hour), booting(), booting(), booting(), booting()), false},
		{"two of five up are held, a sixth booting or not", nodes(3, down(time.Hour), down(time.Hour), booting()), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if held, failing, allowed := lifecycle.RepairHold(ng, tt.nodes, lifecycle.DefaultMaxProvisionTime); held != tt.held {
				t.Errorf("held %v (%d failing, %d allowed), want %v", held, failing, allowed, tt.held)
			}
		})
	}
}

func TestInterruptionDeadline(t *testing.T) {
	ng := group(func(ng *v1alpha1.NodeGroup) {
		ng.Spec.Disruption.Interruption = &v1alpha1.Interruption{NoticePeriod: &metav1.Duration{Duration: 90 * time.Second}}
	})
	n := launched(ng, now.Add(-time.Hour), b.NodeTaint(v1alpha1.TaintInterruption, "", corev1.TaintEffectNoSchedule))
	if v := lifecycle.Interrupted(ng, n, now); v == nil || !v.Deadline.Equal(now.Add(90*time.Second)) {
		t.Errorf("deadline %+v, want now + the notice period", v)
	}
	at := now.Add(3 * time.Minute)
	n.Annotations[v1alpha1.AnnotationInterruptionDeadline] = at.Format(time.RFC3339)
	if v := lifecycle.Interrupted(ng, n, now); v == nil || !v.Deadline.Equal(at) {
		t.Errorf("deadline %+v, want the annotation's %s", v, at)
	}
}

// TestAMaintenanceNoticeIsDrainedForAnHour: a spot interruption notice
// gives the node 2 minutes (the cloud takes it then), but a maintenance
// notice (AWS Node Termination Handler's scheduled maintenance, an Auto
// Scaling group's termination, announced well ahead, or held by a
// lifecycle hook) gives it an hour to drain within its
// PodDisruptionBudgets: Karpenter drains on such a notice and never
// forces it (found comparing with Karpenter's interruption controller).
// A group's noticePeriod applies to every signal. A node whose instance
// is shut down (the cloud controller manager's taint) is a notice too.
func TestAMaintenanceNoticeIsDrainedForAnHour(t *testing.T) {
	for _, tt := range []struct {
		taint  string
		notice *metav1.Duration
		want   time.Duration
	}{
		{"aws-node-termination-handler/spot-itn", nil, 2 * time.Minute},
		{"aws-node-termination-handler/scheduled-maintenance", nil, time.Hour},
		{"aws-node-termination-handler/asg-lifecycle-termination", nil, time.Hour},
		{"aws-node-termination-handler/scheduled-maintenance", &metav1.Duration{Duration: 10 * time.Minute}, 10 * time.Minute},
		{lifecycle.TaintShutdown, nil, 2 * time.Minute},
	} {
		ng := group(func(ng *v1alpha1.NodeGroup) {
			if tt.notice != nil {
				ng.Spec.Disruption.Interruption = &v1alpha1.Interruption{NoticePeriod: tt.notice}
			}
		})
		n := launched(ng, now.Add(-time.Hour), b.NodeTaint(tt.taint, "", corev1.TaintEffectNoSchedule))
		if v := lifecycle.Interrupted(ng, n, now); v == nil || !v.Deadline.Equal(now.Add(tt.want)) {
			t.Errorf("%s (noticePeriod %v): verdict %+v, want a deadline %s from now", tt.taint, tt.notice, v, tt.want)
		}
	}
}

// TestASpotNoticeBesideAMaintenanceNoticeKeepsItsTwoMinutes: a spot
// node of an Auto Scaling group gets the spot interruption notice and
// then the group's lifecycle termination (Node Termination Handler adds
// both taints). The cloud takes the node 2 minutes after the spot
// notice: the second taint must not make it an hour, nor stop the spot
// offering being avoided. (Found by a review.)
func TestASpotNoticeBesideAMaintenanceNoticeKeepsItsTwoMinutes(t *testing.T) {
	for _, order := range [][]string{
		{"aws-node-termination-handler/spot-itn", "aws-node-termination-handler/asg-lifecycle-termination"},
		{"aws-node-termination-handler/asg-lifecycle-termination", "aws-node-termination-handler/spot-itn"},
	} {
		ng := group()
		n := launched(ng, now.Add(-time.Hour), b.NodeTaint(order[0], "", corev1.TaintEffectNoSchedule), b.NodeTaint(order[1], "", corev1.TaintEffectNoSchedule))
		v := lifecycle.Interrupted(ng, n, now)
		if v == nil || !v.Deadline.Equal(now.Add(2*time.Minute)) || !lifecycle.TakesCapacity(n, v) {
			t.Errorf("taints %v: verdict %+v (takes capacity: %v), want the spot notice's 2 minutes and its offering avoided", order, v, lifecycle.TakesCapacity(n, v))
		}
	}
}

// TestExpirySpreads: nodes launched together expire at different times,
// within a tenth of expireAfter.
func TestExpirySpreads(t *testing.T) {
	seen := map[time.Duration]bool{}
	for _, name := range []string{"a", "b", "c", "d", "e", "f"} {
		d := lifecycle.Spread(name, 10*time.Hour)
		if d < 0 || d >= time.Hour {
			t.Errorf("spread of %s = %s, want within [0, 1h)", name, d)
		}
		seen[d] = true
	}
	if len(seen) < 5 {
		t.Errorf("six nodes got only %d different delays", len(seen))
	}
}

// TestAnExpireAfterNearTheLargestDurationNeverExpires: an expireAfter a
// user sets as "never" (within an hour of the largest duration) plus a
// node's spread is past what a Duration holds; no node launched a minute
// ago expires (the sum wrapped negative, and a fifth of nodes expired at
// once).
func TestAnExpireAfterNearTheLargestDurationNeverExpires(t *testing.T) {
	ng := group(func(ng *v1alpha1.NodeGroup) {
		ng.Spec.Disruption.ExpireAfter = &metav1.Duration{Duration: time.Duration(math.MaxInt64) - 30*time.Minute}
	})
	for i := range 100 {
		n := launched(ng, now.Add(-time.Minute))
		n.Name = fmt.Sprintf("n-%d", i)
		if v := lifecycle.Expired(ng, n, now); v != nil {
			t.Fatalf("node %s launched a minute ago: %s; want it not expired", n.Name, v.Message)
		}
	}
}

// TestTaintsReorderedAreNotDrift (Karpenter hashes a NodePool's lists as
// sets): a group whose taints are written in another order (a manifest
// rendered again) describes the same nodes: none has drifted (every node
// of the group drifted and was replaced). A node launched before taints
// were hashed as a set, with the hash of the order written, has not
// drifted either; a taint changed is drift.
func TestTaintsReorderedAreNotDrift(t *testing.T) {
	taint := func(key string) v1alpha1.NodeTaint {
		return v1alpha1.NodeTaint{Key: key, Effect: v1alpha1.TaintEffect(corev1.TaintEffectNoSchedule)}
	}
	withTaints := func(ts ...v1alpha1.NodeTaint) *v1alpha1.NodeGroup {
		return group(func(ng *v1alpha1.NodeGroup) { ng.Spec.Template.Taints = ts })
	}
	old := now.Add(-48 * time.Hour)
	launchedBA := launched(withTaints(taint("c"), taint("a"), taint("b")), old)
	if v := lifecycle.Drifted(withTaints(taint("b"), taint("c"), taint("a")), launchedBA); v != nil {
		t.Errorf("taints reordered: %s, want no drift", v.Message)
	}
	legacy := launched(withTaints(taint("b"), taint("a")), old)
	legacy.Annotations[v1alpha1.AnnotationLaunchHash] = legacyHash(withTaints(taint("b"), taint("a")))
	if v := lifecycle.Drifted(withTaints(taint("b"), taint("a")), legacy); v != nil {
		t.Errorf("a node hashed with its taints in the order written: %s, want no drift", v.Message)
	}
	if v := lifecycle.Drifted(withTaints(taint("a"), taint("c")), launchedBA); v == nil {
		t.Error("a taint changed: no drift, want Drifted")
	}
}

// legacyHash is the launch hash berth wrote before it hashed taints as a
// set: the template's labels and taints in the order written.
func legacyHash(ng *v1alpha1.NodeGroup) string {
	data, _ := json.Marshal(struct {
		Labels        map[string]v1alpha1.LabelValue `json:"labels,omitempty"`
		Taints        []v1alpha1.NodeTaint           `json:"taints,omitempty"`
		StartupTaints []v1alpha1.NodeTaint           `json:"startupTaints,omitempty"`
	}{ng.Spec.Template.Labels, ng.Spec.Template.Taints, ng.Spec.Template.StartupTaints})
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// TestAClusterAPIGroupsTaintsAreNotDrift: a Cluster API group's taints
// describe what its Machines' bootstrap gives the nodes; berth does not
// apply them, so a replacement would be a Machine of the same object with
// the same taints as the node it replaces. Changing them drifts no node
// (it did: every node was replaced by an identical one), with the spec as
// stored or as pinned for a provider's copy; a label berth applies, or
// another Cluster API object, still drifts. A node adopted before, whose
// hash counted the taints (hashed here by hand), has not drifted while
// they are unchanged.
func TestAClusterAPIGroupsTaintsAreNotDrift(t *testing.T) {
	capi := func(taint string, mutate ...func(*v1alpha1.NodeGroup)) *v1alpha1.NodeGroup {
		return group(append([]func(*v1alpha1.NodeGroup){func(ng *v1alpha1.NodeGroup) {
			ng.Spec.Provider.ClusterAPI = &v1alpha1.ClusterAPIProvider{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "MachineDeployment", Namespace: "default", Name: "md"}
			ng.Spec.Template.Taints = []v1alpha1.NodeTaint{{Key: taint, Effect: v1alpha1.TaintEffect(corev1.TaintEffectNoSchedule)}}
		}}, mutate...)...)
	}
	old := now.Add(-48 * time.Hour)
	n := launched(capi("gpu"), old)
	retainted := capi("dedicated")
	if v := lifecycle.Drifted(retainted, n); v != nil {
		t.Errorf("Cluster API group's taints changed: %s, want no drift", v.Message)
	}
	pinned := retainted.DeepCopy()
	pinned.PinLaunchHash()
	if v := lifecycle.Drifted(pinned, n); v != nil {
		t.Errorf("Cluster API group's taints changed, hash pinned: %s, want no drift", v.Message)
	}
	if v := lifecycle.Drifted(capi("gpu", b.TemplateLabel("tier", "gold")), n); v == nil {
		t.Error("Cluster API group's template label changed: no drift, want Drifted")
	}
	if v := lifecycle.Drifted(capi("gpu", func(ng *v1alpha1.NodeGroup) { ng.Spec.Provider.ClusterAPI.Name = "md-2" }), n); v == nil {
		t.Error("Cluster API group's object changed: no drift, want Drifted")
	}

	before := launched(capi("gpu"), old)
	data, _ := json.Marshal(struct {
		Taints     []v1alpha1.NodeTaint `json:"taints,omitempty"`
		ClusterAPI []string             `json:"clusterAPI,omitempty"`
	}{[]v1alpha1.NodeTaint{{Key: "gpu", Effect: v1alpha1.TaintEffect(corev1.TaintEffectNoSchedule)}},
		[]string{"cluster.x-k8s.io/v1beta2", "MachineDeployment", "default", "md"}})
	sum := sha256.Sum256(data)
	before.Annotations[v1alpha1.AnnotationLaunchHash] = hex.EncodeToString(sum[:8])
	for _, ng := range []*v1alpha1.NodeGroup{capi("gpu"), func() *v1alpha1.NodeGroup { ng := capi("gpu"); ng.PinLaunchHash(); return ng }()} {
		if v := lifecycle.Drifted(ng, before); v != nil {
			t.Errorf("a node hashed with its group's taints before they were left out: %s, want no drift", v.Message)
		}
	}
}
