package dashboard

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/testing/builders"
)

var now = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

func groupNode(name, group, typ, zone, ct string, opts ...builders.NodeOption) corev1.Node {
	opts = append([]builders.NodeOption{builders.NodeLabels(v1alpha1.LabelNodeGroup, group, v1alpha1.LabelInstanceType, typ,
		v1alpha1.LabelZone, zone, v1alpha1.LabelCapacityType, ct)}, opts...)
	n := builders.Node(name, "2", "4Gi", opts...)
	n.CreationTimestamp = metav1.NewTime(now.Add(-10 * time.Minute))
	return *n
}

func withDisruption(status corev1.ConditionStatus, reason, msg string) builders.NodeOption {
	return func(n *corev1.Node) {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: v1alpha1.NodeConditionDisruption, Status: status,
			Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(now.Add(-time.Minute))})
	}
}

func TestNodesAreCountedByOfferingAndPricedByIt(t *testing.T) {
	ng := builders.NodeGroup("general", builders.Size(0, 5),
		builders.InstanceType("c-2", "2", "4Gi", builders.Spot("zone-a", "0.03"), builders.OnDemand("zone-a", "0.085")),
		builders.InstanceType("m-4", "4", "16Gi", builders.Spot("zone-b", "0.05")))
	in := Input{Now: now, NodeGroups: []v1alpha1.NodeGroup{*ng}, Nodes: []corev1.Node{
		groupNode("b", "general", "c-2", "zone-a", "spot"),
		groupNode("a", "general", "c-2", "zone-a", "spot"),
		groupNode("c", "general", "m-4", "zone-b", "spot", builders.NotReady()),
		groupNode("d", "general", "c-2", "zone-a", "on-demand"),
		*builders.Node("not-berths", "8", "8Gi"),
	}}
	v := Build(in)
	g := v.NodeGroups[0]
	if diff := cmp.Diff([]Offering{
		{InstanceType: "c-2", Zone: "zone-a", CapacityType: "on-demand", Nodes: 1, PricePerHour: 0.085},
		{InstanceType: "c-2", Zone: "zone-a", CapacityType: "spot", Nodes: 2, PricePerHour: 0.03},
		{InstanceType: "m-4", Zone: "zone-b", CapacityType: "spot", Nodes: 1, PricePerHour: 0.05},
	}, g.Offerings); diff != "" {
		t.Errorf("offerings (-want +got):\n%s", diff)
	}
	if g.Nodes != 4 || g.ReadyNodes != 3 || g.NodeList[0].Name != "a" || g.NodeList[0].Age != "10m" {
		t.Errorf("group %+v", g)
	}
	want := Sample{Time: now, Nodes: 4, ReadyNodes: 3, PricePerHour: 0.03*2 + 0.05 + 0.085}
	if diff := cmp.Diff(want, v.Totals, cmp.Comparer(func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 })); diff != "" {
		t.Errorf("totals (-want +got):\n%s", diff)
	}
}

func TestDisruptionListsDrainsFirstThenRulesOneMayActOn(t *testing.T) {
	in := Input{Now: now, Nodes: []corev1.Node{
		groupNode("kept", "g", "t", "z", "spot", withDisruption(corev1.ConditionFalse, "NotReplicated", "pod default/bare is not backed by a controller")),
		groupNode("busy", "g", "t", "z", "spot", withDisruption(corev1.ConditionFalse, "Needed", "its pods need it")),
		groupNode("home", "g", "t", "z", "spot", withDisruption(corev1.ConditionFalse, "NoHome", "a pod fits nowhere else")),
		groupNode("draining", "g", "t", "z", "spot", withDisruption(corev1.ConditionTrue, "Draining", "berth is draining the node")),
		groupNode("plain", "g", "t", "z", "spot"),
	}}
	got := Build(in).Disruptions
	want := []Disrupted{
		{Node: "draining", NodeGroup: "g", Active: true, Reason: "Draining", Message: "berth is draining the node", Since: "60s"},
		{Node: "kept", NodeGroup: "g", Reason: "NotReplicated", Message: "pod default/bare is not backed by a controller", Since: "60s"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func scaleUpEvent(name string, pod *corev1.Pod, reason, note string, at time.Time) eventsv1.Event {
	return eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: pod.Namespace}, ReportingController: "berth",
		Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Reason:    reason, Note: note, Type: corev1.EventTypeNormal, EventTime: metav1.NewMicroTime(at)}
}

func unschedulable(p *corev1.Pod) {
	p.Status.Phase = corev1.PodPending
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
}

func TestEachPendingPodSaysWhatBerthDoesAboutIt(t *testing.T) {
	pod := func(name string, age time.Duration, opts ...builders.PodOption) *corev1.Pod {
		p := builders.Pod(name, opts...)
		p.CreationTimestamp = metav1.NewTime(now.Add(-age))
		return p
	}
	launching := pod("launching", time.Minute, unschedulable)
	launching.Status.NominatedNodeName = "new-1"
	waiting := pod("waiting", 2*time.Minute, unschedulable)
	waiting.Status.NominatedNodeName = "ready-1"
	unplaceable := pod("unplaceable", 3*time.Minute, unschedulable)
	planning := pod("planning", 4*time.Minute, unschedulable)
	fresh := pod("fresh", 5*time.Second)
	gated := pod("gated", 6*time.Minute)
	gated.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: v1alpha1.SchedulingGateCompanion}}
	gated.Annotations = map[string]string{v1alpha1.AnnotationCompanionRequests: "cpu=500m"}
	bound := pod("bound", time.Hour, builders.NodeName("ready-1"), builders.Phase(corev1.PodRunning))
	in := Input{Now: now,
		Nodes: []corev1.Node{*builders.Node("ready-1", "2", "4Gi"), *builders.Node("new-1", "2", "4Gi", builders.NotReady())},
		Pods:  []corev1.Pod{*launching, *waiting, *unplaceable, *planning, *fresh, *gated, *bound},
		Events: []eventsv1.Event{
			scaleUpEvent("e1", launching, v1alpha1.EventReasonTriggeredScaleUp, "Launching node new-1 for this pod", now),
			scaleUpEvent("e2", unplaceable, v1alpha1.EventReasonTriggeredScaleUp, "Launching node gone-1", now.Add(-time.Minute)),
			scaleUpEvent("e3", unplaceable, v1alpha1.EventReasonNotTriggerScaleUp, "0/1 node groups fit: g: insufficient cpu", now),
		}}
	var got []string
	for _, p := range Build(in).Pending {
		got = append(got, p.Name+" "+p.Action+" "+p.Node+": "+p.Message)
	}
	want := []string{
		"gated gated : held by berth's companion gate until room for its companion is held next to it",
		"planning planning : the scheduler found no node; berth has not reported on it yet",
		"unplaceable unplaceable : 0/1 node groups fit: g: insufficient cpu",
		"waiting waiting ready-1: node ready-1 is Ready; the scheduler binds the pod there",
		"launching launching new-1: node new-1 is launching for it",
		"fresh scheduler : the scheduler has not found it unschedulable yet",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestDecisionsAreBerthsEventsNewestFirst(t *testing.T) {
	p := builders.Pod("web")
	theirs := scaleUpEvent("other", p, "Scheduled", "by the scheduler", now)
	theirs.ReportingController = "default-scheduler"
	evs := []eventsv1.Event{
		scaleUpEvent("old", p, v1alpha1.EventReasonNotTriggerScaleUp, "no group fits", now.Add(-time.Hour)),
		theirs,
		scaleUpEvent("new", p, v1alpha1.EventReasonTriggeredScaleUp, "Launching node n", now),
	}
	got := decisions(evs, 1)
	want := []Decision{{Time: now, Type: "Normal", Reason: v1alpha1.EventReasonTriggeredScaleUp, Object: "Pod default/web", Message: "Launching node n"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestHeadroomsAddUp(t *testing.T) {
	h := func(name string, desired, ready int32) v1alpha1.Headroom {
		return v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1alpha1.HeadroomStatus{DesiredUnits: desired, ReadyUnits: ready}}
	}
	reserve := h("reserve", 0, 0)
	reserve.Spec.PerNode = &v1alpha1.PerNodeReserve{Resources: corev1.ResourceList{corev1.ResourceCPU: builders.Node("x", "500m", "1Gi").Status.Capacity[corev1.ResourceCPU]}}
	reserve.Status.ReservedNodes = 3
	learned := h("b", 4, 1)
	cpu := func(v string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: builders.Node("x", v, "1Gi").Status.Capacity[corev1.ResourceCPU]}
	}
	learned.Status.Unit = &v1alpha1.UnitShape{Resources: cpu("1")}
	learned.Status.LearnedUnits = []v1alpha1.LearnedUnits{{Resources: cpu("4"), Count: 2}}
	v := Build(Input{Now: now, Headrooms: []v1alpha1.Headroom{learned, h("a", 2, 2), reserve}})
	if v.Totals.HeadroomDesired != 6 || v.Totals.HeadroomReady != 3 {
		t.Errorf("totals %+v", v.Totals)
	}
	if v.Headrooms[0].Name != "a" || v.Headrooms[2].Reserve != "cpu=500m" || v.Headrooms[2].ReservedNodes != 3 {
		t.Errorf("headrooms %+v", v.Headrooms)
	}
	if got := v.Headrooms[1].Unit; got != "cpu=1; learned: 2 x cpu=4" {
		t.Errorf("unit of a Headroom with learned shapes %q, want both shapes", got)
	}
}
