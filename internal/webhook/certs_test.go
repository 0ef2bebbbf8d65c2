package webhook_test

import (
	"context"
	"crypto/x509"
	"net"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
