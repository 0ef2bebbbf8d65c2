package clusterread

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-dev/berth/api/v1alpha1"
)

func cpu(v string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(v)}
}

// A Headroom's virtual units come from its status: desiredUnits counts
// every shape, status.learnedUnits the learned ones; the first n units
// are of its own shape, then the learned shapes'. With placeholders, only
// the learned shapes' are virtual. Counts from status are bounded again.
func TestAHeadroomsUnitsOfEveryShape(t *testing.T) {
	headroom := func(desired int32, placeholders bool, learned ...v1alpha1.LearnedUnits) *v1alpha1.Headroom {
		h := &v1alpha1.Headroom{}
		h.Name, h.Spec.Placeholders = "h", placeholders
		h.Status.DesiredUnits, h.Status.Unit, h.Status.LearnedUnits = desired, &v1alpha1.UnitShape{Resources: cpu("1")}, learned
		return h
	}
	shapes := func(s Set, n int32) []string {
		var out []string
		for _, p := range s.Pods(n) {
			out = append(out, p.Spec.Containers[0].Resources.Requests.Cpu().String())
		}
		return out
	}
	four := v1alpha1.LearnedUnits{Resources: cpu("4"), Count: 3}
	tests := []struct {
		name  string
		h     *v1alpha1.Headroom
		n     int32
		count int32
		want  []string
	}{
		{name: "its own shape first, then the learned ones", h: headroom(7, false, four), n: 7, count: 7, want: []string{"1", "1", "1", "1", "4", "4", "4"}},
		{name: "a cut takes the learned ones last", h: headroom(7, false, four), n: 5, count: 7, want: []string{"1", "1", "1", "1", "4"}},
		{name: "with placeholders only the learned shapes are virtual", h: headroom(7, true, four), n: 7, count: 3, want: []string{"4", "4", "4"}},
		{name: "learned counts beyond desiredUnits are cut", h: headroom(2, false, four), n: 10, count: 2, want: []string{"4", "4"}},
		{name: "a learned entry without resources or count is skipped",
			h: headroom(3, false, v1alpha1.LearnedUnits{Count: 5}, v1alpha1.LearnedUnits{Resources: cpu("2"), Count: -1}), n: 3, count: 3, want: []string{"1", "1", "1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ok := headroomSet(tt.h, nil)
			if !ok || s.Count != tt.count {
				t.Fatalf("set of %d units (%v), want %d", s.Count, ok, tt.count)
			}
			if d := cmp.Diff(tt.want, shapes(s, tt.n)); d != "" {
				t.Errorf("units (-want +got):\n%s", d)
			}
		})
	}
	if _, ok := headroomSet(headroom(0, true), nil); ok {
		t.Errorf("a Headroom of placeholders and no learned units has virtual units")
	}
}
