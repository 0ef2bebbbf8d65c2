package webhook_test

import (
	"context"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/internal/webhook"
)

// TestAnEditedWebhookConfigurationIsPutBack: the configuration berth
// keeps is written once and then left as it is (no update while nothing
// changed, the API server's defaults included); an edit by hand that
// could block pod creation (a 30 s timeout, the exclusion of the system
// namespaces removed) is put back by the next sync. Before, only the CA
// bundle and the endpoint were compared.
func TestAnEditedWebhookConfigurationIsPutBack(t *testing.T) {
	t.Run("url", func(t *testing.T) { editedConfigurationIsPutBack(t, webhook.Endpoint{URL: "https://127.0.0.1:9443"}) })
	t.Run("service", func(t *testing.T) {
		editedConfigurationIsPutBack(t, webhook.Endpoint{Service: &admissionregistrationv1.ServiceReference{Namespace: "berth-system", Name: "berth-webhook"}})
	})
}

func editedConfigurationIsPutBack(t *testing.T, endpoint webhook.Endpoint) {
	ctx := context.Background()
	cfg := &webhook.Config{Client: env.Client, Endpoint: endpoint}
	ca := []byte("not a real bundle")
	if err := cfg.Ensure(ctx, true, ca); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cfg.Ensure(context.Background(), false, nil) })
	get := func() *admissionregistrationv1.MutatingWebhookConfiguration {
		t.Helper()
		cur := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: webhook.ConfigName}, cur); err != nil {
			t.Fatal(err)
		}
		return cur
	}
	written := get()
	if err := cfg.Ensure(ctx, true, ca); err != nil {
		t.Fatal(err)
	}
	if again := get(); again.ResourceVersion != written.ResourceVersion {
		t.Errorf("a sync with nothing changed wrote the configuration (resourceVersion %s -> %s)", written.ResourceVersion, again.ResourceVersion)
	}
	edited := written.DeepCopy()
	timeout := int32(30)
	edited.Webhooks[0].TimeoutSeconds = &timeout
	edited.Webhooks[0].NamespaceSelector = nil
	if err := env.Client.Update(ctx, edited); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Ensure(ctx, true, ca); err != nil {
		t.Fatal(err)
	}
	back := get().Webhooks[0]
	if back.TimeoutSeconds == nil || *back.TimeoutSeconds != 2 || back.NamespaceSelector == nil || len(back.NamespaceSelector.MatchExpressions) != 1 {
		t.Errorf("after a sync: timeout %v, namespace selector %v; want 2 s and the system namespaces excluded", back.TimeoutSeconds, back.NamespaceSelector)
	}
}
