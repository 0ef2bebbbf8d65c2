package dashboard

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/podutil"
)

// maxDecisions is how many of berth's latest events the page lists.
const maxDecisions = 40

// maxPending bounds the pending pods listed (the count is exact).
const maxPending = 200

// reportingController is the name berth's events are recorded under.
const reportingController = "berth"

// pending lists the pods waiting for a node, oldest first, with what
// berth does about each.
func pending(in Input) []Pending {
	latest := latestScaleUpEvents(in.Events)
	readyNodes := map[string]bool{}
	for i := range in.Nodes {
		readyNodes[in.Nodes[i].Name] = ready(&in.Nodes[i])
	}
	var pods []*corev1.Pod
	for i := range in.Pods {
		p := &in.Pods[i]
		if podutil.IsUnbound(p) && !podutil.IsDaemonSetPod(p) {
			pods = append(pods, p)
		}
	}
	slices.SortFunc(pods, func(a, b *corev1.Pod) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	out := make([]Pending, 0, len(pods))
	for _, p := range pods {
		v := Pending{Namespace: p.Namespace, Name: p.Name, Age: duration.HumanDuration(in.Now.Sub(p.CreationTimestamp.Time))}
		v.Action, v.Node, v.Message = action(p, latest[p.UID], readyNodes)
		out = append(out, v)
	}
	return out
}

// action says what berth does about a pending pod, from its nomination,
// berth's latest scale-up event about it and its scheduling state.
func action(p *corev1.Pod, ev *eventsv1.Event, readyNodes map[string]bool) (what, node, msg string) {
	if podutil.IsCompanionGated(p) {
		return ActionGated, "", "held by berth's companion gate until room for its companion is held next to it"
	}
	if node := p.Status.NominatedNodeName; node != "" && (ev == nil || ev.Reason == v1alpha1.EventReasonTriggeredScaleUp) {
		if readyNodes[node] {
			return ActionWaiting, node, "node " + node + " is Ready; the scheduler binds the pod there"
		}
		return ActionLaunching, node, "node " + node + " is launching for it"
	}
	switch {
	case ev != nil && ev.Reason == v1alpha1.EventReasonTriggeredScaleUp:
		return ActionLaunching, "", ev.Note
	case ev != nil && ev.Reason == v1alpha1.EventReasonNotTriggerScaleUp:
		return ActionUnplaceable, "", ev.Note
	case podutil.FailedToSchedule(p):
		return ActionPlanning, "", "the scheduler found no node; berth has not reported on it yet"
	}
	return ActionScheduler, "", "the scheduler has not found it unschedulable yet"
}

// latestScaleUpEvents returns berth's newest TriggeredScaleUp or
// NotTriggerScaleUp event per pod.
func latestScaleUpEvents(evs []eventsv1.Event) map[types.UID]*eventsv1.Event {
	out := map[types.UID]*eventsv1.Event{}
	for i := range evs {
		e := &evs[i]
		if !fromBerth(e) || (e.Reason != v1alpha1.EventReasonTriggeredScaleUp && e.Reason != v1alpha1.EventReasonNotTriggerScaleUp) {
			continue
		}
		if have := out[e.Regarding.UID]; have == nil || podutil.EventTime(e).After(podutil.EventTime(have)) {
			out[e.Regarding.UID] = e
		}
	}
	return out
}

// decisions are berth's latest events, newest first, at most limit.
func decisions(evs []eventsv1.Event, limit int) []Decision {
	var mine []*eventsv1.Event
	for i := range evs {
		if fromBerth(&evs[i]) {
			mine = append(mine, &evs[i])
		}
	}
	slices.SortFunc(mine, func(a, b *eventsv1.Event) int {
		return cmp.Or(podutil.EventTime(b).Compare(podutil.EventTime(a)), cmp.Compare(a.Name, b.Name))
	})
	out := make([]Decision, 0, min(len(mine), limit))
	for _, e := range mine[:min(len(mine), limit)] {
		obj := e.Regarding.Kind + " " + e.Regarding.Name
		if e.Regarding.Namespace != "" {
			obj = e.Regarding.Kind + " " + e.Regarding.Namespace + "/" + e.Regarding.Name
		}
		out = append(out, Decision{Time: podutil.EventTime(e), Type: e.Type, Reason: e.Reason, Object: obj, Message: e.Note})
	}
	return out
}

func fromBerth(e *eventsv1.Event) bool {
	return e.ReportingController == reportingController || e.DeprecatedSource.Component == reportingController
}
