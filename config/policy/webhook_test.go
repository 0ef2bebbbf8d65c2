package policy_test

import (
	"context"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/webhook"
)

// TestBerthWritesOnlyItsWebhook: berth's account may create any
// MutatingWebhookConfiguration as far as RBAC goes (create cannot be
// narrowed to a name); the policy lets it write only berth-companion, as
// internal/webhook writes it: pod creation only, never blocking, never
// for kube-system or berth-system, served by a Service in berth-system or
// at a loopback URL. A stolen token cannot send the cluster's pods
// elsewhere.
func TestBerthWritesOnlyItsWebhook(t *testing.T) {
	berth := installed(t)
	ctx := context.Background()
	ca := []byte("not checked by the API server")
	config := func(e webhook.Endpoint) *webhook.Config { return &webhook.Config{Client: berth, Endpoint: e} }
	service := func(ns string) webhook.Endpoint {
		return webhook.Endpoint{Service: &admissionregistrationv1.ServiceReference{Namespace: ns, Name: "berth-controller-webhook"}}
	}

	// What berth does: create it behind its Service, point it at a
	// loopback URL (berth running next to the API server), delete it.
	if err := config(service(v1alpha1.SystemNamespace)).Ensure(ctx, true, ca); err != nil {
		t.Fatalf("berth creating its webhook configuration: %v", err)
	}
	for _, url := range []string{"https://127.0.0.1:9443", "https://localhost:9443", "https://[::1]:9443"} {
		if err := config(webhook.Endpoint{URL: url}).Ensure(ctx, true, ca); err != nil {
			t.Errorf("berth pointing its webhook at %s: %v", url, err)
		}
	}

	for _, c := range []struct {
		name  string
		write func(ctx context.Context) error
	}{
		{"point its webhook at another host", func(ctx context.Context) error {
			return config(webhook.Endpoint{URL: "https://collector.example.com"}).Ensure(ctx, true, ca)
		}},
		{"point its webhook at a Service in another namespace", func(ctx context.Context) error {
			return config(service("default")).Ensure(ctx, true, ca)
		}},
		{"create a webhook configuration of another name", func(ctx context.Context) error {
			return berth.Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "another"}})
		}},
		{"have its webhook called on pod updates", func(ctx context.Context) error {
			return changeWebhook(ctx, berth, func(w *admissionregistrationv1.MutatingWebhook) {
				w.Rules[0].Operations = append(w.Rules[0].Operations, admissionregistrationv1.Update)
			})
		}},
		{"have its webhook called on secrets", func(ctx context.Context) error {
			return changeWebhook(ctx, berth, func(w *admissionregistrationv1.MutatingWebhook) { w.Rules[0].Resources = []string{"secrets"} })
		}},
		{"make pod creation fail while its webhook is down", func(ctx context.Context) error {
			return changeWebhook(ctx, berth, func(w *admissionregistrationv1.MutatingWebhook) {
				w.FailurePolicy = ptr.To(admissionregistrationv1.Fail)
			})
		}},
		{"have its webhook called for kube-system", func(ctx context.Context) error {
			return changeWebhook(ctx, berth, func(w *admissionregistrationv1.MutatingWebhook) {
				w.NamespaceSelector.MatchExpressions[0].Values = []string{v1alpha1.SystemNamespace}
			})
		}},
		{"add a second webhook", func(ctx context.Context) error {
			cur := &admissionregistrationv1.MutatingWebhookConfiguration{}
			if err := berth.Get(ctx, client.ObjectKey{Name: webhook.ConfigName}, cur); err != nil {
				return err
			}
			second := *cur.Webhooks[0].DeepCopy()
			second.Name = "second.berth.dev"
			cur.Webhooks = append(cur.Webhooks, second)
			return berth.Update(ctx, cur)
		}},
	} {
		if err := c.write(ctx); !deniedBy(err, webhookPolicy) {
			t.Errorf("berth's account could %s: %v, want refused by %s", c.name, err, webhookPolicy)
		}
	}

	if err := config(service(v1alpha1.SystemNamespace)).Ensure(ctx, false, nil); err != nil {
		t.Errorf("berth deleting its webhook configuration: %v", err)
	}
}

// changeWebhook updates berth-companion's one webhook with change.
func changeWebhook(ctx context.Context, c client.Client, change func(w *admissionregistrationv1.MutatingWebhook)) error {
	cur := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: webhook.ConfigName}, cur); err != nil {
		return err
	}
	change(&cur.Webhooks[0])
	return c.Update(ctx, cur)
}
