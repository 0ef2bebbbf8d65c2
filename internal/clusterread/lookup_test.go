package clusterread

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/berth-dev/berth/internal/scheme"
)

// TestAnObjectTheCacheDoesNotShowIsReadFresh: a StatefulSet's claim and
// a namespace created a moment before the pod are not in the cache yet;
// the lookup reads them from the API server, so the pod is selected by
// the profile that names them. Without Fresh, they are taken as missing.
func TestAnObjectTheCacheDoesNotShowIsReadFresh(t *testing.T) {
	ctx := context.Background()
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "data-web-0"},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("s3")}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"companions": "on"}}}
	cache := fake.NewClientBuilder().WithScheme(scheme.New()).Build()
	api := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(claim, ns).Build()

	if got, err := (Lookup{Reader: cache}).Claim(ctx, "shop", "data-web-0"); err != nil || got != nil {
		t.Fatalf("the cache alone: %v, %v; want none", got, err)
	}
	l := Lookup{Reader: cache, Fresh: api}
	got, err := l.Claim(ctx, "shop", "data-web-0")
	if err != nil || got == nil || *got.Spec.StorageClassName != "s3" {
		t.Errorf("claim read fresh: %v, %v; want the API server's", got, err)
	}
	labels, err := l.NamespaceLabels(ctx, "shop")
	if err != nil || labels["companions"] != "on" {
		t.Errorf("namespace labels read fresh: %v, %v", labels, err)
	}
	if got, err := l.Volume(ctx, "nope"); err != nil || got != nil {
		t.Errorf("a volume neither has: %v, %v; want none", got, err)
	}
}
