package headroom

import (
	"fmt"
	"math"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	hr "github.com/berth-dev/berth/internal/headroom"
	"github.com/berth-dev/berth/internal/headroom/demand"
	"github.com/berth-dev/berth/internal/state"
)

// Event reasons of a Headroom with a target.
const (
	// ReasonTargetUnits: the units the target keeps changed, and why.
	ReasonTargetUnits = "TargetUnits"
)

// reportTarget writes status.target (how the target sized the units, the
// history, the measured waits) and the TargetMet condition, and records
// an event when the target's units or phase change.
func (r *Reconciler) reportTarget(h *v1alpha1.Headroom, status *v1alpha1.HeadroomStatus, res hr.Resolved, learned state.Target, known bool) {
	if h.Spec.Target == nil || res.Target == nil {
		status.Target = nil
		meta.RemoveStatusCondition(&status.Conditions, v1alpha1.ConditionTargetMet)
		return
	}
	window := learned.Window
	if window <= 0 {
		window, _ = hr.LaunchWindow(res.Groups, nil)
	}
	ts := res.Target.Status(window)
	if known {
		if !learned.Since.IsZero() {
			ts.LearningSince = &metav1.Time{Time: learned.Since}
		}
		ts.Windows, ts.Bursts = learned.Windows, learned.Bursts
		ts.LastHour = measured(learned.LastHour, h.Spec.Target)
		ts.LastDay = measured(learned.LastDay, h.Spec.Target)
	}
	was := h.Status.Target
	if was == nil || was.Phase != ts.Phase || was.Units != ts.Units || h.Status.DesiredUnits != res.Total() {
		r.Recorder.Eventf(h, nil, corev1.EventTypeNormal, ReasonTargetUnits, "Resolve", "%s", ts.Message)
	}
	status.Target = ts
	c := metav1.Condition{Type: v1alpha1.ConditionTargetMet, Status: metav1.ConditionUnknown, Reason: v1alpha1.ReasonTargetNoPods,
		Message: "no pod in scope got capacity in the last hour", ObservedGeneration: h.Generation}
	if m := ts.LastHour; m != nil && m.Pods > 0 {
		c.Status, c.Reason = metav1.ConditionFalse, v1alpha1.ReasonTargetMissed
		if m.Met {
			c.Status, c.Reason = metav1.ConditionTrue, v1alpha1.ReasonTargetMet
		}
		c.Message = fmt.Sprintf("last hour: %s %% of %d pods got capacity within %s (target %d %%); p%d wait %s",
			m.WithinPercent, m.Pods, h.Spec.Target.Wait.Duration, percentOf(h.Spec.Target), percentOf(h.Spec.Target), m.Quantile)
	}
	meta.SetStatusCondition(&status.Conditions, c)
}

func percentOf(t *v1alpha1.HeadroomTarget) int32 { return int32(math.Round(hr.Share(t) * 100)) }

// measured renders measured waits against the target; nil without pods.
func measured(m demand.Measured, t *v1alpha1.HeadroomTarget) *v1alpha1.MeasuredWait {
	if m.Pods == 0 {
		return nil
	}
	share := float64(m.Within) / float64(m.Pods)
	q := "over " + strconv.FormatFloat(demand.WaitEdges[len(demand.WaitEdges)-1], 'f', -1, 64) + "s"
	if !math.IsInf(m.Quantile, 1) {
		q = "at most " + (time.Duration(m.Quantile * float64(time.Second))).String()
	}
	return &v1alpha1.MeasuredWait{Pods: m.Pods, WithinPercent: strconv.FormatFloat(100*share, 'f', 1, 64), Quantile: q,
		Met: share >= hr.Share(t)}
}
