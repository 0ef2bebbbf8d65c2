package policy_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// TestBerthKeepsDemandHistoriesOnlyInItsNamespace: berth saves a
// Headroom's learned demand in the ConfigMap berth-demand-<headroom> of
// berth-system (found by the end-to-end target test: the policy refused
// it); it may write no other ConfigMap there, nor one of that name
// elsewhere.
func TestBerthKeepsDemandHistoriesOnlyInItsNamespace(t *testing.T) {
	berth := installed(t)
	ctx := context.Background()
	cm := func(ns, name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"history.json": "{}"}}
	}
	own := cm(v1alpha1.SystemNamespace, "berth-demand-policy-test")
	if err := berth.Create(ctx, own); err != nil {
		t.Fatalf("berth saving a demand history: %v", err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), own) })
	own.Data["history.json"] = `{"version":1}`
	if err := berth.Update(ctx, own); err != nil {
		t.Errorf("berth updating a demand history: %v", err)
	}
	for _, c := range []*corev1.ConfigMap{cm(v1alpha1.SystemNamespace, "berth-settings"), cm("default", "berth-demand-policy-test")} {
		if err := berth.Create(ctx, c); !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
			_ = env.Client.Delete(ctx, c)
			t.Errorf("berth creating ConfigMap %s/%s: %v, want it refused", c.Namespace, c.Name, err)
		}
	}
}
