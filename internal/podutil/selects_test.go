package podutil_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/podutil"
	"github.com/berth-dev/berth/internal/testing/builders"
)

// TestWhichTermsSelectAPod: a pending pod's required affinity,
// anti-affinity and DoNotSchedule spreads decide where it may go relative
// to the pods they select; a bound pod's anti-affinity only keeps others
// away; only affinity says the pod must go where the other is.
func TestWhichTermsSelectAPod(t *testing.T) {
	cache := builders.Pod("cache", builders.Labels("app", "cache"))
	other := builders.Pod("other", builders.Labels("app", "other"))
	elsewhere := builders.Pod("cache", builders.Labels("app", "cache"))
	elsewhere.Namespace = "elsewhere"
	const host = corev1.LabelHostname
	tests := []struct {
		name           string
		pod, of        *corev1.Pod
		pending, bound bool // RequiredTermSelects, pending and bound
		mustGoBesideIt bool // RequiredAffinitySelects
	}{
		{"a pod that must run beside the cache", builders.Pod("app", builders.PodAffinity(builders.AffinityTerm(host, "app", "cache"))), cache,
			true, false, true},
		{"a pod that must not run beside the cache", builders.Pod("app", builders.PodAntiAffinity(builders.AffinityTerm(host, "app", "cache"))), cache,
			true, true, false},
		{"a pod spread over the cache's pods", builders.Pod("app", builders.Spread(host, 1, "app", "cache")), cache,
			true, false, false},
		{"a pod whose affinity selects another app", builders.Pod("app", builders.PodAffinity(builders.AffinityTerm(host, "app", "cache"))), other,
			false, false, false},
		{"a pod whose affinity selects the same labels in another namespace", builders.Pod("app", builders.PodAffinity(builders.AffinityTerm(host, "app", "cache"))), elsewhere,
			false, false, false},
		{"a pod with no terms", builders.Pod("app"), cache, false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := podutil.RequiredTermSelects(tt.pod, tt.of, true); got != tt.pending {
				t.Errorf("RequiredTermSelects(pending) = %v, want %v", got, tt.pending)
			}
			if got := podutil.RequiredTermSelects(tt.pod, tt.of, false); got != tt.bound {
				t.Errorf("RequiredTermSelects(bound) = %v, want %v", got, tt.bound)
			}
			if got := podutil.RequiredAffinitySelects(tt.pod, tt.of); got != tt.mustGoBesideIt {
				t.Errorf("RequiredAffinitySelects = %v, want %v", got, tt.mustGoBesideIt)
			}
		})
	}
}
