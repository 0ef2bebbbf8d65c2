package standby

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// TestATargetsStandbyCountSurvivesASpecEdit: a Headroom with a target
// keeps 22 standby units the headroom controller resolved; an edit of its
// spec (a new generation its controller has not resolved yet) does not
// bring the count back to spec.standby.count (8), which would delete 14
// suspended nodes, to launch them again a moment later.
func TestATargetsStandbyCountSurvivesASpecEdit(t *testing.T) {
	h := &v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: "h", Generation: 2}, Spec: v1alpha1.HeadroomSpec{
		Target:  &v1alpha1.HeadroomTarget{Wait: metav1.Duration{Duration: 5 * time.Second}, Percent: 95},
		Standby: &v1alpha1.StandbyHeadroom{Count: 8}},
		Status: v1alpha1.HeadroomStatus{ObservedGeneration: 1, Standby: &v1alpha1.StandbyStatus{DesiredUnits: 22}}}
	if got := wanted(h); got != 22 {
		t.Errorf("standby units wanted after a spec edit = %d, want the 22 resolved last", got)
	}
	h.Spec.Target = nil
	if got := wanted(h); got != 8 {
		t.Errorf("standby units wanted without a target = %d, want spec.standby.count 8", got)
	}
	h.Spec.Target, h.Status.Standby = &v1alpha1.HeadroomTarget{Percent: 95}, nil
	if got := wanted(h); got != 8 {
		t.Errorf("standby units wanted before anything was resolved = %d, want spec.standby.count 8", got)
	}
}
