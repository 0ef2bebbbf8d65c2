package daemonset_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/internal/simulator/daemonset"
)

// TestADaemonSetWithoutAPodGetsItsRuntimeClass: a DaemonSet whose pods
// do not exist yet and name a RuntimeClass is read as the RuntimeClass
// admission plugin will admit them: the class's pod overhead (which the
// pod then requests on a node) and its node selector. Not its
// tolerations: the DaemonSet controller makes pods only for nodes the
// template tolerates, before admission. A pod the plugin refuses (an
// overhead or a node selector of its own that differs, a class that does
// not exist) is never made, and the template is read as it is. A
// DaemonSet read from its pod keeps what the pod holds.
func TestADaemonSetWithoutAPodGetsItsRuntimeClass(t *testing.T) {
	kata := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "kata"}, Handler: "kata",
		Overhead: &nodev1.Overhead{PodFixed: list("cpu", "250m", "memory", "160Mi")},
		Scheduling: &nodev1.Scheduling{NodeSelector: map[string]string{"runtime": "kata"},
			Tolerations: []corev1.Toleration{{Key: "kata", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}}
	name := func(n string) *string { return &n }
	for _, tc := range []struct {
		name         string
		edit         func(*corev1.PodSpec)
		pod          bool
		wantRequests map[string]string
		wantSelector map[string]string
		wantKata     bool // tolerates the kata taint (once)
	}{
		{name: "the class's overhead and node selector, not its toleration",
			edit:         func(s *corev1.PodSpec) { s.RuntimeClassName = name("kata") },
			wantRequests: map[string]string{"cpu": "350m", "memory": "224Mi"}, wantSelector: map[string]string{"pool": "general", "runtime": "kata"}},
		{name: "a toleration the template has stays",
			edit: func(s *corev1.PodSpec) {
				s.RuntimeClassName = name("kata")
				s.Tolerations = []corev1.Toleration{{Key: "kata", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
			},
			wantRequests: map[string]string{"cpu": "350m", "memory": "224Mi"}, wantSelector: map[string]string{"pool": "general", "runtime": "kata"}, wantKata: true},
		{name: "an overhead of its own that differs: refused, read as it is",
			edit: func(s *corev1.PodSpec) {
				s.RuntimeClassName, s.Overhead = name("kata"), list("cpu", "1")
			},
			wantRequests: map[string]string{"cpu": "1100m", "memory": "64Mi"}, wantSelector: map[string]string{"pool": "general"}},
		{name: "a node selector of its own that differs: refused, read as it is",
			edit: func(s *corev1.PodSpec) {
				s.RuntimeClassName, s.NodeSelector["runtime"] = name("kata"), "runc"
			},
			wantRequests: map[string]string{"cpu": "100m", "memory": "64Mi"}, wantSelector: map[string]string{"pool": "general", "runtime": "runc"}},
		{name: "a class that does not exist: read as it is",
			edit:         func(s *corev1.PodSpec) { s.RuntimeClassName = name("gvisor") },
			wantRequests: map[string]string{"cpu": "100m", "memory": "64Mi"}, wantSelector: map[string]string{"pool": "general"}},
		{name: "no class named: read as it is",
			edit:         func(*corev1.PodSpec) {},
			wantRequests: map[string]string{"cpu": "100m", "memory": "64Mi"}, wantSelector: map[string]string{"pool": "general"}},
		{name: "read from its pod: what the pod holds, but the template's tolerations",
			edit: func(s *corev1.PodSpec) { s.RuntimeClassName = name("kata") }, pod: true,
			wantRequests: map[string]string{"cpu": "1500m"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := ds("agent", "100m", "64Mi", map[string]string{"pool": "general"})
			d.UID = "uid-agent"
			tc.edit(&d.Spec.Template.Spec)
			stored := d.DeepCopy()
			newest := daemonset.Newest{}
			if tc.pod {
				pod := agentPod("agent-1", "n-1", "", "1500m", 0)
				pod.Spec.Tolerations = kata.Scheduling.Tolerations // admitted with the class's
				newest = daemonset.NewestOf([]*corev1.Pod{pod})
			}
			got := daemonset.AsRun([]*appsv1.DaemonSet{d}, newest, daemonset.Admission{RuntimeClasses: []*nodev1.RuntimeClass{kata}})[0]
			if diff := cmp.Diff(tc.wantRequests, strs(daemonset.Pods([]*appsv1.DaemonSet{got})[0].List)); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			if !tc.pod {
				if diff := cmp.Diff(tc.wantSelector, got.Spec.Template.Spec.NodeSelector); diff != "" {
					t.Errorf("node selector (-want +got):\n%s", diff)
				}
			}
			tolerates := 0
			for _, tol := range got.Spec.Template.Spec.Tolerations {
				if tol.Key == "kata" {
					tolerates++
				}
			}
			if want := map[bool]int{true: 1}[tc.wantKata]; tolerates != want {
				t.Errorf("tolerates the kata taint %d times, want %d", tolerates, want)
			}
			if diff := cmp.Diff(stored, d); diff != "" {
				t.Errorf("the DaemonSet given changed (-before +after):\n%s", diff)
			}
		})
	}
}
