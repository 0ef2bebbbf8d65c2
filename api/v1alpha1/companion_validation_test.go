package v1alpha1_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
)

func companionProfile(name string, mutate func(*v1alpha1.CompanionProfileSpec)) *v1alpha1.CompanionProfile {
	p := &v1alpha1.CompanionProfile{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.CompanionProfileSpec{
		Workloads: v1alpha1.CompanionWorkloads{CSIDriver: "fuse.example.com"},
		Companion: v1alpha1.CompanionShape{Resources: corev1.ResourceList{corev1.ResourceCPU: resourceMust("500m")}},
		Recognize: v1alpha1.CompanionRecognition{Namespace: "fuse-system", Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "fuse-mount"}}},
	}}
	if mutate != nil {
		mutate(&p.Spec)
	}
	return p
}

// TestCompanionProfileValidation: the API server refuses, with a message
// naming the field, the profiles berth could not apply (a selector its
// code rejects, companions recognised in any namespace), so none of them
// can hold workloads gated.
func TestCompanionProfileValidation(t *testing.T) {
	expr := func(key string, op metav1.LabelSelectorOperator, values ...string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: op, Values: values}}}
	}
	tests := []struct {
		name   string
		mutate func(*v1alpha1.CompanionProfileSpec)
		// wantErr holds substrings of the error; empty means accepted.
		wantErr []string
	}{
		{name: "a profile with the companions' namespace and valid selectors is accepted", mutate: func(s *v1alpha1.CompanionProfileSpec) {
			s.Workloads.PodSelector = expr("app", metav1.LabelSelectorOpIn, "web", "api")
			s.Workloads.NamespaceSelector = expr("fuse", metav1.LabelSelectorOpExists)
		}},
		{name: "a profile recognising companions in any namespace is rejected", mutate: func(s *v1alpha1.CompanionProfileSpec) {
			s.Recognize.Namespace = ""
		}, wantErr: []string{"spec.recognize.namespace"}},
		{name: "a companions' namespace that is not a namespace name is rejected", mutate: func(s *v1alpha1.CompanionProfileSpec) {
			s.Recognize.Namespace = "Fuse System"
		}, wantErr: []string{"spec.recognize.namespace"}},
		{name: "an operator the selector code does not know is rejected", mutate: func(s *v1alpha1.CompanionProfileSpec) {
			s.Workloads.PodSelector = expr("app", "Equals", "web")
		}, wantErr: []string{"spec.workloads.podSelector", "operator must be In, NotIn, Exists or DoesNotExist"}},
		{name: "a lower-case operator in the namespace selector is rejected", mutate: func(s *v1alpha1.CompanionProfileSpec) {
			s.Workloads.NamespaceSelector = expr("fuse", "exists")
		}, wantErr: []string{"spec.workloads.namespaceSelector", "operator must be"}},
		{name: "In without values is rejected", mutate: func(s *v1alpha1.CompanionProfileSpec) {
			s.Recognize.Selector = *expr("app", metav1.LabelSelectorOpIn)
		}, wantErr: []string{"spec.recognize.selector", "need values"}},
		{name: "Exists with values is rejected", mutate: func(s *v1alpha1.CompanionProfileSpec) {
			s.Workloads.PodSelector = expr("app", metav1.LabelSelectorOpExists, "web")
		}, wantErr: []string{"spec.workloads.podSelector", "need values"}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := companionProfile("cp-"+strings.Repeat("x", i+1), tc.mutate)
			err := env.Client.Create(context.Background(), p)
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				return
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want an Invalid error naming %v, got %v", tc.wantErr, err)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}
