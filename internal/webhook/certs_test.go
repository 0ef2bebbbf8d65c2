package webhook_test

import (
	"context"
	"crypto/x509"
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/berth-dev/berth/internal/testing/testenv"
	"github.com/berth-dev/berth/internal/webhook"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// trusts reports whether a CA bundle verifies the certificate a replica
// serves, for the address the API server calls.
func trusts(t *testing.T, bundle []byte, c *webhook.Certs) bool {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		t.Fatalf("CA bundle holds no certificate")
	}
	cert, err := c.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	_, err = leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "127.0.0.1", CurrentTime: time.Now().Add(9 * 30 * 24 * time.Hour)})
	return err == nil
}

// TestARenewedCertificatesBundleTrustsTheReplicaNotYetRenewed: two
// replicas serve the certificate of one Secret. Eight months on, one
// renews it; the other still serves the old one until its next hourly
// check. The CA bundle the renewing replica publishes trusts both, and
// the other replica loads the new certificate when it reads the Secret.
func TestARenewedCertificatesBundleTrustsTheReplicaNotYetRenewed(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Now())
	replica := func() *webhook.Certs {
		return &webhook.Certs{Client: env.Client, Secret: client.ObjectKey{Namespace: "default", Name: "renewal-cert"},
			IPs: []net.IP{net.ParseIP("127.0.0.1")}, Clock: clk}
	}
	a, b := replica(), replica()
	for _, c := range []*webhook.Certs{a, b} {
		if _, err := c.Ensure(ctx); err != nil {
			t.Fatal(err)
		}
	}
	clk.Step(9 * 30 * 24 * time.Hour) // past the renewal point, before expiry
	if changed, err := a.Ensure(ctx); err != nil || !changed {
		t.Fatalf("renewal: changed %v, %v; want a new certificate", changed, err)
	}
	bundle := a.CABundle()
	if !trusts(t, bundle, a) {
		t.Errorf("the bundle does not trust the renewed certificate")
	}
	if !trusts(t, bundle, b) {
		t.Errorf("the bundle does not trust the certificate the other replica still serves")
	}
	if changed, err := b.Ensure(ctx); err != nil || !changed {
		t.Fatalf("the other replica's check: changed %v, %v; want it to load the renewed certificate", changed, err)
	}
	if !trusts(t, bundle, b) {
		t.Errorf("the bundle does not trust the other replica's renewed certificate")
	}
}

// TestTwoReplicasStartingTogetherServeOneCertificate: on a fresh install
// both replicas find no Secret; one stores its certificate first. The
// other's create is refused (AlreadyExists): it loads the stored one
// instead of failing, which made the controller exit once.
func TestTwoReplicasStartingTogetherServeOneCertificate(t *testing.T) {
	ctx := context.Background()
	key := client.ObjectKey{Namespace: "default", Name: "berth-webhook-cert-race"}
	clk := clocktesting.NewFakeClock(time.Now())
	first := &webhook.Certs{Client: env.Client, Secret: key, IPs: []net.IP{net.ParseIP("127.0.0.1")}, Clock: clk}
	missed := false
	late := interceptor.NewClient(env.WatchingClient(t), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, k client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Secret); ok && k == key && !missed {
				missed = true // it read before the first replica stored its certificate
				if _, err := first.Ensure(ctx); err != nil {
					return err
				}
				return apierrors.NewNotFound(corev1.Resource("secrets"), k.Name)
			}
			return c.Get(ctx, k, obj, opts...)
		},
	})
	second := &webhook.Certs{Client: late, Secret: key, IPs: []net.IP{net.ParseIP("127.0.0.1")}, Clock: clk}
	if _, err := second.Ensure(ctx); err != nil {
		t.Fatalf("the second replica's Ensure: %v, want the first replica's certificate loaded", err)
	}
	if !trusts(t, first.CABundle(), second) {
		t.Error("the second replica serves a certificate the first replica's bundle does not trust")
	}
	_ = env.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})
}
