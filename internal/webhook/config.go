package webhook

import (
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// ConfigName is the MutatingWebhookConfiguration berth manages.
const ConfigName = "berth-companion"

// PodPath is where the pod defaulter is served.
const PodPath = "/mutate-pod"

// Endpoint tells the API server how to reach the webhook: a URL (berth
// running outside the cluster, as with `berth dev up`) or a Service.
type Endpoint struct {
	URL     string
	Service *admissionregistrationv1.ServiceReference
}

// Config keeps the MutatingWebhookConfiguration: present, with the current
// CA bundle, while some CompanionProfile exists; absent otherwise, so that
// without profiles pod creation never calls berth.
type Config struct {
	Client   client.Client
	Endpoint Endpoint
}

// Ensure creates, updates or deletes the configuration. Replicas and
// reconcilers may race: a create or update that loses is tried again on
// the object as it is now.
func (c *Config) Ensure(ctx context.Context, want bool, caBundle []byte) error {
	return retry.OnError(retry.DefaultRetry, func(err error) bool {
		return apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err)
	}, func() error { return c.ensure(ctx, want, caBundle) })
}

func (c *Config) ensure(ctx context.Context, want bool, caBundle []byte) error {
	cur := &admissionregistrationv1.MutatingWebhookConfiguration{}
	err := c.Client.Get(ctx, client.ObjectKey{Name: ConfigName}, cur)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading webhook configuration: %w", err)
	}
	exists := err == nil
	switch {
	case !want && exists:
		return client.IgnoreNotFound(c.Client.Delete(ctx, cur))
	case !want:
		return nil
	}
	desired := c.webhook(caBundle)
	if !exists {
		obj := &admissionregistrationv1.MutatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: ConfigName, Labels: map[string]string{"app.kubernetes.io/managed-by": "berth"}},
			Webhooks:   []admissionregistrationv1.MutatingWebhook{desired},
		}
		return c.Client.Create(ctx, obj)
	}
	// The whole webhook as berth makes it (the API server's defaults
	// spelled out): an edit by hand (a longer timeout, a namespace
	// selector removed) or the webhook of an earlier berth is put back.
	if len(cur.Webhooks) == 1 && equality.Semantic.DeepEqual(cur.Webhooks[0], desired) {
		return nil
	}
	cur.Webhooks = []admissionregistrationv1.MutatingWebhook{desired}
	return c.Client.Update(ctx, cur)
}

// webhook is the one webhook: pod CREATE only, never blocking (failure
// policy Ignore, 2 s timeout), not for berth's own pods nor for the
// system namespaces.
func (c *Config) webhook(caBundle []byte) admissionregistrationv1.MutatingWebhook {
	cc := admissionregistrationv1.WebhookClientConfig{CABundle: caBundle}
	if c.Endpoint.URL != "" {
		cc.URL = ptr.To(c.Endpoint.URL + PodPath)
	} else if c.Endpoint.Service != nil {
		svc := *c.Endpoint.Service
		svc.Path = ptr.To(PodPath)
		if svc.Port == nil {
			svc.Port = ptr.To[int32](443) // the API server's default
		}
		cc.Service = &svc
	}
	return admissionregistrationv1.MutatingWebhook{
		Name:                    "companion.berth.dev",
		ClientConfig:            cc,
		FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
		MatchPolicy:             ptr.To(admissionregistrationv1.Equivalent), // the API server's default
		SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
		TimeoutSeconds:          ptr.To[int32](2),
		AdmissionReviewVersions: []string{"v1"},
		ReinvocationPolicy:      ptr.To(admissionregistrationv1.NeverReinvocationPolicy),
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule: admissionregistrationv1.Rule{
				APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"},
				Scope: ptr.To(admissionregistrationv1.NamespacedScope),
			},
		}},
		NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn,
			Values: []string{metav1.NamespaceSystem, v1alpha1.SystemNamespace},
		}}},
		ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: v1alpha1.LabelHeadroomRole, Operator: metav1.LabelSelectorOpDoesNotExist,
		}}},
	}
}

// UpdateCA puts a new CA bundle in the configuration if it exists.
func (c *Config) UpdateCA(ctx context.Context, caBundle []byte) {
	cur := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: ConfigName}, cur); err != nil {
		return
	}
	_ = c.Ensure(ctx, true, caBundle)
}
