package explain

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/clusterread"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

var now = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// unschedulable is what the scheduler writes on a pod it found no node for.
func unschedulable(p *corev1.Pod) {
	p.Status.Phase = corev1.PodPending
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/1 nodes are available"}}
}

// podWant is what a case checks of an explanation: the fields a user
// reads first, and words the message and hints must contain.
type podWant struct {
	Decision  Decision
	Reason    string
	NodeGroup string
	Node      string
	Launch    []string // "group/instance type"
	Groups    []string // groups with a verdict
	message   string   // in the message or a group's verdict
	hint      string
}

func TestExplainPod(t *testing.T) {
	small := b.NodeGroup("small", b.InstanceType("standard-2", "2", "4Gi", b.OnDemand("zone-a", "0.1")))
	tainted := b.NodeGroup("gpu", b.InstanceType("gpu-8", "8", "32Gi", b.OnDemand("zone-a", "2.0")), b.TemplateTaint("gpu", "true", corev1.TaintEffectNoSchedule))
	full := b.NodeGroup("full", b.Size(0, 0))
	existing := b.Node("small-1", "2", "4Gi", b.LaunchedBy(small))
	pending := func(opts ...b.PodOption) *corev1.Pod {
		p := b.Pod("web", opts...)
		unschedulable(p)
		return p
	}
	tests := []struct {
		name   string
		groups []*v1alpha1.NodeGroup
		nodes  []*corev1.Node
		pod    *corev1.Pod
		want   podWant
	}{
		{name: "a pending pod that fits a group gets a node of it, with its instance type",
			groups: []*v1alpha1.NodeGroup{small}, pod: pending(b.CPU("500m")),
			want: podWant{Decision: DecisionLaunchNode, Reason: v1alpha1.EventReasonTriggeredScaleUp, NodeGroup: "small",
				Launch: []string{"small/standard-2"}, message: "instance type standard-2"}},
		{name: "a pod the scheduler has not tried yet is planned anyway",
			groups: []*v1alpha1.NodeGroup{small}, pod: b.Pod("web", b.CPU("500m")),
			want: podWant{Decision: DecisionLaunchNode, Reason: v1alpha1.EventReasonTriggeredScaleUp, NodeGroup: "small", Launch: []string{"small/standard-2"}}},
		{name: "a pod whose selector no group has is explained per group, with what to change",
			groups: []*v1alpha1.NodeGroup{small, tainted}, pod: pending(b.NodeSelector("disk", "nvme")),
			want: podWant{Decision: DecisionNoNodeGroupFits, Reason: v1alpha1.EventReasonNotTriggerScaleUp, Groups: []string{"gpu", "small"},
				message: "0/2 node groups fit", hint: "spec.template.labels"}},
		{name: "a pod larger than every instance type is told to lower its requests",
			groups: []*v1alpha1.NodeGroup{small}, pod: pending(b.CPU("64")),
			want: podWant{Decision: DecisionNoNodeGroupFits, Reason: v1alpha1.EventReasonNotTriggerScaleUp, Groups: []string{"small"},
				message: "insufficient cpu", hint: "lower the pod's requests"}},
		{name: "a pod without the group's toleration is told to add it",
			groups: []*v1alpha1.NodeGroup{tainted}, pod: pending(b.CPU("1")),
			want: podWant{Decision: DecisionNoNodeGroupFits, Reason: v1alpha1.EventReasonNotTriggerScaleUp, Groups: []string{"gpu"},
				message: "untolerated taint gpu=true:NoSchedule", hint: "add a toleration"}},
		{name: "a group at its maxSize is told to raise it",
			groups: []*v1alpha1.NodeGroup{full}, pod: pending(b.CPU("1")),
			want: podWant{Decision: DecisionNoNodeGroupFits, Reason: v1alpha1.EventReasonNotTriggerScaleUp, Groups: []string{"full"},
				message: "maxSize 0", hint: "spec.maxSize"}},
		{name: "without node groups the hint is to create one",
			pod:  pending(b.CPU("1")),
			want: podWant{Decision: DecisionNoNodeGroupFits, Reason: v1alpha1.EventReasonNotTriggerScaleUp, message: "0/0 node groups fit", hint: "create a NodeGroup"}},
		{name: "a pod that fits an existing node needs no new node",
			groups: []*v1alpha1.NodeGroup{small}, nodes: []*corev1.Node{existing}, pod: pending(b.CPU("1")),
			want: podWant{Decision: DecisionFitsExistingNode, NodeGroup: "small", Node: "small-1", message: "no new node is needed"}},
		{name: "a pod nominated to a node that exists waits for it",
			groups: []*v1alpha1.NodeGroup{small}, nodes: []*corev1.Node{existing},
			pod:  pending(b.CPU("1"), func(p *corev1.Pod) { p.Status.NominatedNodeName = "small-1" }),
			want: podWant{Decision: DecisionNominated, NodeGroup: "small", Node: "small-1", message: "nominated to node small-1"}},
		{name: "a bound pod needs nothing, and the hint points at its node",
			groups: []*v1alpha1.NodeGroup{small}, nodes: []*corev1.Node{existing}, pod: b.Pod("web", b.NodeName("small-1")),
			want: podWant{Decision: DecisionBound, NodeGroup: "small", Node: "small-1", hint: "berth explain node small-1"}},
		{name: "a DaemonSet pod never makes berth launch a node",
			groups: []*v1alpha1.NodeGroup{small}, pod: pending(b.OwnedBy("DaemonSet", "agent")),
			want: podWant{Decision: DecisionNotPlanned, Reason: ReasonDaemonSetPod}},
		{name: "a finished pod needs no node",
			groups: []*v1alpha1.NodeGroup{small}, pod: b.Pod("web", b.Phase(corev1.PodSucceeded)),
			want: podWant{Decision: DecisionNotPlanned, Reason: ReasonFinished}},
		{name: "a pod held by someone else's scheduling gate is not planned",
			groups: []*v1alpha1.NodeGroup{small},
			pod:    b.Pod("web", func(p *corev1.Pod) { p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/wait"}} }),
			want:   podWant{Decision: DecisionNotPlanned, Reason: ReasonSchedulingGated, message: "example.com/wait"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cl := &clusterread.Cluster{NodeGroups: tc.groups, Nodes: tc.nodes, Pods: []*corev1.Pod{tc.pod}}
			f, err := planPod(cl, tc.pod, nil, Settings{Now: now, LaunchGrace: scaleup.DefaultLaunchGrace})
			if err != nil {
				t.Fatal(err)
			}
			e := explainPod(f)
			got := podWant{Decision: e.Decision, Reason: e.Reason, NodeGroup: e.NodeGroup, Node: e.Node}
			for _, l := range e.Launch {
				got.Launch = append(got.Launch, l.NodeGroup+"/"+l.InstanceType)
			}
			for _, g := range e.NodeGroups {
				got.Groups = append(got.Groups, g.NodeGroup)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(podWant{}), cmp.FilterPath(func(p cmp.Path) bool {
				return p.Last().String() == ".message" || p.Last().String() == ".hint"
			}, cmp.Ignore())); diff != "" {
				t.Errorf("(-want +got):\n%s\nmessage: %s", diff, e.Message)
			}
			said := e.Message
			for _, g := range e.NodeGroups {
				said += "\n" + g.NodeGroup + ": " + g.Reason
			}
			if !strings.Contains(said, tc.want.message) {
				t.Errorf("message and verdicts %q, want them to contain %q", said, tc.want.message)
			}
			if !strings.Contains(strings.Join(e.Hints, "\n"), tc.want.hint) {
				t.Errorf("hints %q, want one to contain %q", e.Hints, tc.want.hint)
			}
		})
	}
}

// TestAGroupWhoseMachinesCannotBeListedLaunchesNothing: the controller
// launches nothing in a group whose launching instances its provider
// could not list (they would look gone and be launched again); explain
// plans the pod in the other group, as the controller does.
func TestAGroupWhoseMachinesCannotBeListedLaunchesNothing(t *testing.T) {
	cheap := b.NodeGroup("cheap", b.InstanceType("standard-2", "2", "4Gi", b.OnDemand("zone-a", "0.1")))
	dear := b.NodeGroup("dear", b.InstanceType("standard-2", "2", "4Gi", b.OnDemand("zone-a", "0.3")))
	pod := b.Pod("web", b.CPU("500m"))
	unschedulable(pod)
	cl := &clusterread.Cluster{NodeGroups: []*v1alpha1.NodeGroup{cheap, dear}, Pods: []*corev1.Pod{pod}}
	for _, tc := range []struct {
		unlisted []*v1alpha1.NodeGroup
		want     string
	}{{nil, "cheap"}, {[]*v1alpha1.NodeGroup{cheap}, "dear"}} {
		f, err := planPod(cl, pod, nil, Settings{Now: now, LaunchGrace: scaleup.DefaultLaunchGrace, unlisted: tc.unlisted})
		if err != nil {
			t.Fatal(err)
		}
		if e := explainPod(f); e.Decision != DecisionLaunchNode || e.NodeGroup != tc.want {
			t.Errorf("unlisted %d group(s): %s in %q, want a launch in %s", len(tc.unlisted), e.Decision, e.NodeGroup, tc.want)
		}
	}
}

func TestGroupVerdictsReadThePlannersMessageBackPerGroup(t *testing.T) {
	tests := []struct {
		name, msg string
		groups    []string
		want      []GroupVerdict
	}{
		{"one reason per group", "0/2 node groups fit: a: node group at maxSize 3; b: untolerated taint x=y:NoSchedule", []string{"a", "b"},
			[]GroupVerdict{{NodeGroup: "a", Reason: "node group at maxSize 3"}, {NodeGroup: "b", Reason: "untolerated taint x=y:NoSchedule"}}},
		{"a reason that itself contains '; ' stays with its group", "0/2 node groups fit: a: node group limit on cpu reached (4 of 4); cluster limit on cpu reached (9 of 9); b: Too many pods",
			[]string{"a", "b"},
			[]GroupVerdict{{NodeGroup: "a", Reason: "node group limit on cpu reached (4 of 4); cluster limit on cpu reached (9 of 9)"}, {NodeGroup: "b", Reason: "Too many pods"}}},
		{"a message of another shape gives no verdicts", "berth cannot read this pod: bad claim", []string{"a"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, groupVerdicts(tc.msg, tc.groups)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestTheLatestScaleUpEventIsTheControllersLastWord(t *testing.T) {
	at := func(reason string, d time.Duration, note string) eventsv1.Event {
		return eventsv1.Event{Reason: reason, Note: note, EventTime: metav1.NewMicroTime(now.Add(-d))}
	}
	evs := []eventsv1.Event{
		at(v1alpha1.EventReasonNotTriggerScaleUp, 5*time.Minute, "0/1 node groups fit"),
		at(v1alpha1.EventReasonTriggeredScaleUp, time.Minute, "Launching node small-x"),
		at("Scheduled", 0, "someone else's event"),
	}
	e := explainPod(podFacts{pod: b.Pod("web", b.NodeName("small-x")), event: latestScaleUp(evs), now: now})
	want := "berth's latest event on the pod (TriggeredScaleUp, 1m0s ago): Launching node small-x"
	if len(e.Live) == 0 || e.Live[0] != want {
		t.Errorf("live %q, want first %q", e.Live, want)
	}
}

// TestTheLaunchGraceIsTheControllersMaxProvisionTime: a node of berth's
// launched 20 minutes ago is not Ready yet (and tainted so). With the controller's
// default --max-provision-time (15m) it no longer counts as booting, and
// the pending pod needs a new node; told the controller runs with 30m,
// explain counts it as booting, and the pod waits for it.
func TestTheLaunchGraceIsTheControllersMaxProvisionTime(t *testing.T) {
	small := b.NodeGroup("small", b.InstanceType("standard-2", "2", "4Gi", b.OnDemand("zone-a", "0.1")))
	slow := b.Node("small-1", "2", "4Gi", b.LaunchedBy(small), b.Booting(), b.NodeTaint(corev1.TaintNodeNotReady, "", corev1.TaintEffectNoSchedule), func(n *corev1.Node) {
		n.CreationTimestamp = metav1.NewTime(now.Add(-20 * time.Minute))
	})
	pod := b.Pod("web", b.CPU("1"))
	unschedulable(pod)
	for _, tc := range []struct {
		grace time.Duration
		want  Decision
	}{{scaleup.DefaultLaunchGrace, DecisionLaunchNode}, {30 * time.Minute, DecisionFitsExistingNode}} {
		cl := &clusterread.Cluster{NodeGroups: []*v1alpha1.NodeGroup{small}, Nodes: []*corev1.Node{slow}, Pods: []*corev1.Pod{pod}}
		f, err := planPod(cl, pod, nil, Settings{Now: now, LaunchGrace: tc.grace})
		if err != nil {
			t.Fatal(err)
		}
		if got := explainPod(f).Decision; got != tc.want {
			t.Errorf("launch grace %s: %s, want %s", tc.grace, got, tc.want)
		}
	}
}
