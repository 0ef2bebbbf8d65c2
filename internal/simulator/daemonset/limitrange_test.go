package daemonset_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/internal/simulator/daemonset"
)

func list(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

// limitRange is a LimitRange of kube-system with one item of type t.
func limitRange(name string, t corev1.LimitType, item corev1.LimitRangeItem) *corev1.LimitRange {
	item.Type = t
	return &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{item}}}
}

// strs is a resource list as strings, for comparing.
func strs(rl corev1.ResourceList) map[string]string {
	if len(rl) == 0 {
		return nil
	}
	out := map[string]string{}
	for name, q := range rl {
		out[string(name)] = q.String()
	}
	return out
}

// TestADaemonSetWithoutAPodGetsItsNamespacesLimitRangeDefaults: a
// DaemonSet whose pods do not exist yet is read as the LimitRanger
// admission plugin will admit them: each container gets the default
// request and limit of each resource it does not set, after the API
// server's own defaults (a container that limits a resource requests
// that limit), from the LimitRanges of the DaemonSet's namespace read as
// the API server defaults them (a default limit from max, a default
// request from the default limit, else from min); of two LimitRanges
// that default one resource, the first by name. A DaemonSet read from
// its pod keeps what the pod holds.
func TestADaemonSetWithoutAPodGetsItsNamespacesLimitRangeDefaults(t *testing.T) {
	c := corev1.LimitTypeContainer
	for _, tc := range []struct {
		name                   string
		requests, limits       corev1.ResourceList // the container's own
		lrs                    []*corev1.LimitRange
		pod                    bool
		wantRequests, wantLims map[string]string
	}{
		{name: "a container that sets nothing gets the default request and limit",
			lrs:          []*corev1.LimitRange{limitRange("d", c, corev1.LimitRangeItem{DefaultRequest: list("cpu", "250m"), Default: list("cpu", "1")})},
			wantRequests: map[string]string{"cpu": "250m"}, wantLims: map[string]string{"cpu": "1"}},
		{name: "a default limit alone is the default request too",
			lrs:          []*corev1.LimitRange{limitRange("d", c, corev1.LimitRangeItem{Default: list("memory", "512Mi")})},
			wantRequests: map[string]string{"memory": "512Mi"}, wantLims: map[string]string{"memory": "512Mi"}},
		{name: "a max alone is the default limit and request",
			lrs:          []*corev1.LimitRange{limitRange("d", c, corev1.LimitRangeItem{Max: list("cpu", "2")})},
			wantRequests: map[string]string{"cpu": "2"}, wantLims: map[string]string{"cpu": "2"}},
		{name: "a min alone is the default request",
			lrs:          []*corev1.LimitRange{limitRange("d", c, corev1.LimitRangeItem{Min: list("cpu", "50m")})},
			wantRequests: map[string]string{"cpu": "50m"}},
		{name: "a container that limits a resource requests its limit, not the default request",
			limits:       list("cpu", "300m"),
			lrs:          []*corev1.LimitRange{limitRange("d", c, corev1.LimitRangeItem{DefaultRequest: list("cpu", "100m")})},
			wantRequests: map[string]string{"cpu": "300m"}, wantLims: map[string]string{"cpu": "300m"}},
		{name: "a container's own request stays and its missing limit is defaulted",
			requests:     list("cpu", "200m"),
			lrs:          []*corev1.LimitRange{limitRange("d", c, corev1.LimitRangeItem{Default: list("cpu", "1")})},
			wantRequests: map[string]string{"cpu": "200m"}, wantLims: map[string]string{"cpu": "1"}},
		{name: "of two LimitRanges the first by name defaults a resource, the other the rest",
			lrs: []*corev1.LimitRange{
				limitRange("b", c, corev1.LimitRangeItem{DefaultRequest: list("cpu", "900m", "memory", "1Gi")}),
				limitRange("a", c, corev1.LimitRangeItem{DefaultRequest: list("cpu", "100m")})},
			wantRequests: map[string]string{"cpu": "100m", "memory": "1Gi"}},
		{name: "a LimitRange of another namespace gives nothing",
			lrs: func() []*corev1.LimitRange {
				lr := limitRange("d", c, corev1.LimitRangeItem{DefaultRequest: list("cpu", "250m")})
				lr.Namespace = "default"
				return []*corev1.LimitRange{lr}
			}()},
		{name: "a LimitRange of pods gives no container a default",
			lrs: []*corev1.LimitRange{limitRange("d", corev1.LimitTypePod, corev1.LimitRangeItem{Max: list("cpu", "4")})}},
		{name: "a DaemonSet read from its pod keeps what the pod holds",
			pod:          true,
			lrs:          []*corev1.LimitRange{limitRange("d", c, corev1.LimitRangeItem{DefaultRequest: list("cpu", "100m")})},
			wantRequests: map[string]string{"cpu": "1500m"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := agent("1")
			d.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: tc.requests, Limits: tc.limits}
			stored := d.DeepCopy()
			newest := daemonset.Newest{}
			if tc.pod {
				newest = daemonset.NewestOf([]*corev1.Pod{agentPod("agent-1", "n-1", "1", "1500m", 0)})
			}
			got := daemonset.AsRun([]*appsv1.DaemonSet{d}, newest, daemonset.Admission{LimitRanges: tc.lrs})[0]
			// The requests as the planner reads them (with a Pod's defaults).
			if diff := cmp.Diff(tc.wantRequests, strs(daemonset.Pods([]*appsv1.DaemonSet{got})[0].List)); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantLims, strs(got.Spec.Template.Spec.Containers[0].Resources.Limits)); diff != "" {
				t.Errorf("limits (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(stored, d); diff != "" {
				t.Errorf("the DaemonSet given changed (-before +after):\n%s", diff)
			}
			defaulted := len(tc.wantRequests)+len(tc.wantLims) > 0 && !tc.pod && tc.requests == nil && tc.limits == nil
			if defaulted && got.Annotations[daemonset.AnnotationAsRun] == "" {
				t.Errorf("a DaemonSet read with defaults is not marked as such: the option cache would keep options of other defaults")
			}
		})
	}
}

// TestWhatALimitRangeGivesNamesTheDaemonSet: the mark that tells the
// option cache what a DaemonSet's pod holds changes with the LimitRange
// that gives it, so options built for one default are not kept for
// another.
func TestWhatALimitRangeGivesNamesTheDaemonSet(t *testing.T) {
	mark := func(cpu string) string {
		lr := limitRange("d", corev1.LimitTypeContainer, corev1.LimitRangeItem{DefaultRequest: list("cpu", cpu)})
		d := agent("1")
		d.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
		return daemonset.AsRun([]*appsv1.DaemonSet{d}, nil, daemonset.Admission{LimitRanges: []*corev1.LimitRange{lr}})[0].Annotations[daemonset.AnnotationAsRun]
	}
	if a, b := mark("100m"), mark("200m"); a == "" || a == b {
		t.Errorf("marks for 100m and 200m: %q and %q, want two different ones", a, b)
	}
}
