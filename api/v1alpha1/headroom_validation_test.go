package v1alpha1_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cbv1beta1 "github.com/berth-dev/berth/api/capacitybuffer/v1beta1"
	"github.com/berth-dev/berth/api/v1alpha1"
)

func headroom(name string, mutate func(*v1alpha1.HeadroomSpec)) *v1alpha1.Headroom {
	h := &v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.HeadroomSpec{
		Units: &v1alpha1.HeadroomUnits{Count: 2, UnitShape: v1alpha1.UnitShape{Resources: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}},
	}}
	if mutate != nil {
		mutate(&h.Spec)
	}
	return h
}

func window(cron string) v1alpha1.HeadroomSchedule {
	return v1alpha1.HeadroomSchedule{Name: "w", Cron: cron, Duration: metav1.Duration{Duration: time.Hour}, Units: v1alpha1.ScheduleUnits{Count: 3}}
}

// TestHeadroomAndBufferValidation: invalid Headrooms and CapacityBuffers
// are rejected by the real API server with messages naming the field.
func TestHeadroomAndBufferValidation(t *testing.T) {
	tests := []struct {
		name    string
		obj     client.Object
		wantErr []string
	}{
		{name: "manual units are accepted", obj: headroom("hr-valid", nil)},
		{name: "automatic, schedules, placeholders and a per-node reserve are accepted", obj: headroom("hr-full", func(s *v1alpha1.HeadroomSpec) {
			s.Automatic = &v1alpha1.AutomaticHeadroom{Percentage: 20}
			s.Schedules = []v1alpha1.HeadroomSchedule{window("0 8 * * 1-5"), window("@daily")}
			s.Placeholders = true
			s.PerNode = &v1alpha1.PerNodeReserve{Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}
			s.Scope.NodeGroups = []string{"general"}
		})},
		{name: "a unit without resources is rejected naming units", obj: headroom("hr-nores", func(s *v1alpha1.HeadroomSpec) {
			s.Units.Resources = nil
		}), wantErr: []string{"spec.units", "a unit must request at least one resource"}},
		{name: "a percentage above 200 is rejected naming automatic.percentage", obj: headroom("hr-pct", func(s *v1alpha1.HeadroomSpec) {
			s.Automatic = &v1alpha1.AutomaticHeadroom{Percentage: 201}
		}), wantErr: []string{"spec.automatic.percentage", "less than or equal to 200"}},
		{name: "a negative wait is rejected naming target.wait", obj: headroom("hr-wait", func(s *v1alpha1.HeadroomSpec) {
			s.Target = &v1alpha1.HeadroomTarget{Wait: metav1.Duration{Duration: -5 * time.Second}, Percent: 95}
		}), wantErr: []string{"spec.target.wait", "wait must be a duration"}},
		{name: "a malformed cron is rejected naming the schedule's cron", obj: headroom("hr-cron", func(s *v1alpha1.HeadroomSpec) {
			s.Schedules = []v1alpha1.HeadroomSchedule{window("every monday at 8")}
		}), wantErr: []string{"spec.schedules[0].cron", "cron must be a 5-field expression"}},
		{name: "a headroom with nothing to keep is rejected", obj: headroom("hr-empty", func(s *v1alpha1.HeadroomSpec) {
			s.Units = nil
		}), wantErr: []string{"spec", "set at least one of units, automatic, schedules, target, standby or perNode"}},
		{name: "standby units alone, with the unit shape from units, are accepted", obj: headroom("hr-standby", func(s *v1alpha1.HeadroomSpec) {
			s.Units.Count = 0
			s.Standby = &v1alpha1.StandbyHeadroom{Count: 8}
		})},
		{name: "standby without a unit shape is rejected naming standby", obj: headroom("hr-standby-noshape", func(s *v1alpha1.HeadroomSpec) {
			s.Units = nil
			s.Automatic = &v1alpha1.AutomaticHeadroom{Percentage: 10}
			s.Standby = &v1alpha1.StandbyHeadroom{Count: 8}
		}), wantErr: []string{"standby needs the unit shape"}},
		{name: "a standby count above 10000 is rejected naming standby.count", obj: headroom("hr-standby-count", func(s *v1alpha1.HeadroomSpec) {
			s.Standby = &v1alpha1.StandbyHeadroom{Count: 10001}
		}), wantErr: []string{"spec.standby.count"}},
		{name: "a target with units to keep while learning is accepted", obj: headroom("hr-target", func(s *v1alpha1.HeadroomSpec) {
			s.Target = &v1alpha1.HeadroomTarget{Wait: metav1.Duration{Duration: 5 * time.Second}, Percent: 95, MinUnits: ptr(int32(1)), MaxUnits: ptr(int32(40)), MaxCostPerHour: "12.5"}
		})},
		{name: "a name longer than a label value is rejected", obj: headroom(strings.Repeat("h", 64), nil),
			wantErr: []string{"name must be at most 63 characters"}},
		{name: "a history of a nanosecond is rejected naming target.history", obj: headroom("hr-history", func(s *v1alpha1.HeadroomSpec) {
			s.Target = &v1alpha1.HeadroomTarget{Wait: metav1.Duration{Duration: 5 * time.Second}, History: &metav1.Duration{Duration: time.Nanosecond}}
		}), wantErr: []string{"spec.target.history", "history must be between 1h and 2160h"}},
		{name: "a history of 90 days is accepted", obj: headroom("hr-history-90d", func(s *v1alpha1.HeadroomSpec) {
			s.Target = &v1alpha1.HeadroomTarget{Wait: metav1.Duration{Duration: 5 * time.Second}, History: &metav1.Duration{Duration: 2160 * time.Hour}}
		})},
		{name: "a target without units or automatic is rejected naming target", obj: headroom("hr-target-alone", func(s *v1alpha1.HeadroomSpec) {
			s.Units = nil
			s.Target = &v1alpha1.HeadroomTarget{Wait: metav1.Duration{Duration: 5 * time.Second}}
		}), wantErr: []string{"target needs the unit shape"}},
		{name: "a target that keeps its one unit shape is accepted", obj: headroom("hr-target-unit", func(s *v1alpha1.HeadroomSpec) {
			s.Target = &v1alpha1.HeadroomTarget{Wait: metav1.Duration{Duration: 5 * time.Second}, Shapes: v1alpha1.TargetShapesUnit}
		})},
		{name: "a target shapes value berth does not know is rejected naming target.shapes", obj: headroom("hr-target-shapes", func(s *v1alpha1.HeadroomSpec) {
			s.Target = &v1alpha1.HeadroomTarget{Wait: metav1.Duration{Duration: 5 * time.Second}, Shapes: "Guessed"}
		}), wantErr: []string{"spec.target.shapes", "Learned", "Unit"}},
		{name: "a target percent below 50 is rejected naming target.percent", obj: headroom("hr-target-pct", func(s *v1alpha1.HeadroomSpec) {
			s.Target = &v1alpha1.HeadroomTarget{Wait: metav1.Duration{Duration: 5 * time.Second}, Percent: 20}
		}), wantErr: []string{"spec.target.percent"}},
		{name: "a target whose minUnits exceed maxUnits is rejected", obj: headroom("hr-target-minmax", func(s *v1alpha1.HeadroomSpec) {
			s.Target = &v1alpha1.HeadroomTarget{Wait: metav1.Duration{Duration: 5 * time.Second}, MinUnits: ptr(int32(5)), MaxUnits: ptr(int32(2))}
		}), wantErr: []string{"minUnits must not exceed maxUnits"}},
		{name: "a per-node reserve without resources is rejected naming perNode.resources", obj: headroom("hr-pernode", func(s *v1alpha1.HeadroomSpec) {
			s.PerNode = &v1alpha1.PerNodeReserve{Resources: corev1.ResourceList{}}
		}), wantErr: []string{"spec.perNode.resources", "must reserve at least one resource"}},
		{name: "a capacity buffer with both refs is rejected", obj: &cbv1beta1.CapacityBuffer{
			ObjectMeta: metav1.ObjectMeta{Name: "cb-both", Namespace: "default"},
			Spec: cbv1beta1.CapacityBufferSpec{PodTemplateRef: &cbv1beta1.LocalObjectRef{Name: "t"}, Replicas: ptr(int32(1)),
				ScalableRef: &cbv1beta1.ScalableRef{Kind: "Deployment", Name: "web"}},
		}, wantErr: []string{"set either podTemplateRef or scalableRef, not both"}},
		{name: "a capacity buffer with a template but no replicas or limits is rejected", obj: &cbv1beta1.CapacityBuffer{
			ObjectMeta: metav1.ObjectMeta{Name: "cb-norep", Namespace: "default"},
			Spec:       cbv1beta1.CapacityBufferSpec{PodTemplateRef: &cbv1beta1.LocalObjectRef{Name: "t"}},
		}, wantErr: []string{"with podTemplateRef, replicas or limits must be set"}},
		{name: "a capacity buffer asking for more than 10000 chunks is rejected naming replicas", obj: &cbv1beta1.CapacityBuffer{
			ObjectMeta: metav1.ObjectMeta{Name: "cb-huge", Namespace: "default"},
			Spec:       cbv1beta1.CapacityBufferSpec{PodTemplateRef: &cbv1beta1.LocalObjectRef{Name: "t"}, Replicas: ptr(int32(2147483647))},
		}, wantErr: []string{"spec.replicas", "less than or equal to 10000"}},
		{name: "a capacity buffer with a huge percentage is rejected naming percentage", obj: &cbv1beta1.CapacityBuffer{
			ObjectMeta: metav1.ObjectMeta{Name: "cb-pct", Namespace: "default"},
			Spec: cbv1beta1.CapacityBufferSpec{ScalableRef: &cbv1beta1.ScalableRef{Kind: "Deployment", Name: "web"},
				Percentage: ptr(int32(2000000000))},
		}, wantErr: []string{"spec.percentage", "less than or equal to 10000"}},
		{name: "a capacity buffer with a negative limit is rejected naming limits", obj: &cbv1beta1.CapacityBuffer{
			ObjectMeta: metav1.ObjectMeta{Name: "cb-neg", Namespace: "default"},
			Spec: cbv1beta1.CapacityBufferSpec{PodTemplateRef: &cbv1beta1.LocalObjectRef{Name: "t"},
				Limits: &cbv1beta1.ResourceList{"cpu": resource.MustParse("-4")}},
		}, wantErr: []string{"spec.limits", "must not be negative"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := env.Client.Create(context.Background(), tt.obj)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("valid object rejected: %v", err)
				}
				return
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want an Invalid error, got %v", err)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err.Error(), want)
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
