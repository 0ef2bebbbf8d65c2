// Package webhook serves berth's admission webhook: the pod defaulter that
// gates workloads a CompanionProfile selects, the serving certificate
// berth manages itself (generated, kept in a Secret, rotated) and the
// MutatingWebhookConfiguration that points the API server at it.
package webhook

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Certificate lifetimes: the serving certificate and its CA live a year
// and are replaced when less than a third of that is left.
const (
	certValidity = 365 * 24 * time.Hour
	renewBefore  = certValidity / 3
	checkEvery   = time.Hour
)

// Secret keys.
const (
	keyCACert  = "ca.crt"
	keyTLSCert = "tls.crt"
	keyTLSKey  = "tls.key"
)

// Certs keeps the webhook's serving certificate in a Secret (so that every
// replica serves the same one and a restart reuses it), renews it before
// it expires, and hands it to the TLS server and the CA bundle to the
// webhook configuration.
type Certs struct {
	// Client reads and writes the Secret (uncached: berth watches no
	// Secrets).
	Client client.Client
	// Secret is where the certificate is kept.
	Secret client.ObjectKey
	// DNSNames and IPs the certificate is valid for.
	DNSNames []string
	IPs      []net.IP
	Clock    clock.Clock
	// OnRotate is called after a new certificate was loaded.
	OnRotate func(ctx context.Context, caBundle []byte)

	mu   sync.RWMutex
	cert *tls.Certificate
	ca   []byte
	leaf *x509.Certificate
}

// Ensure loads a valid certificate from the Secret, or makes and stores a
// new one. It returns whether the certificate changed. Another replica
// that stored one first (the Secret created or renewed in between: the
// API server's AlreadyExists or Conflict) is followed: its certificate is
// read and loaded, once.
func (c *Certs) Ensure(ctx context.Context) (bool, error) {
	changed, err := c.ensure(ctx)
	if apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) {
		return c.ensure(ctx)
	}
	return changed, err
}

func (c *Certs) ensure(ctx context.Context) (bool, error) {
	s := &corev1.Secret{}
	err := c.Client.Get(ctx, c.Secret, s)
	if err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("reading webhook certificate secret: %w", err)
	}
	if err == nil && c.usable(s.Data) {
		return c.load(s.Data)
	}
	missing := apierrors.IsNotFound(err)
	data, err := c.generate()
	if err != nil {
		return false, err
	}
	if missing {
		s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: c.Secret.Name, Namespace: c.Secret.Namespace}, Type: corev1.SecretTypeTLS, Data: data}
		if err := c.Client.Create(ctx, s); err != nil {
			return false, fmt.Errorf("storing webhook certificate: %w", err)
		}
	} else {
		// The CA bundle keeps the CA of the certificate replaced: another
		// replica serves that one until its next check, and a bundle of
		// the new CA alone would fail its handshakes until then.
		data[keyCACert] = append(data[keyCACert], validCA(s.Data[keyCACert], c.Clock.Now())...)
		s.Data = data
		if err := c.Client.Update(ctx, s); err != nil {
			return false, fmt.Errorf("renewing webhook certificate: %w", err)
		}
	}
	log.FromContext(ctx).Info("webhook serving certificate issued", "secret", c.Secret, "validUntil", c.Clock.Now().Add(certValidity).Format(time.RFC3339))
	return c.load(data)
}

// usable reports whether the stored certificate parses, covers every name
// and is not due for renewal.
func (c *Certs) usable(data map[string][]byte) bool {
	pair, err := tls.X509KeyPair(data[keyTLSCert], data[keyTLSKey])
	if err != nil || len(data[keyCACert]) == 0 {
		return false
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil || c.Clock.Now().Add(renewBefore).After(leaf.NotAfter) {
		return false
	}
	for _, n := range c.DNSNames {
		if !slices.Contains(leaf.DNSNames, n) {
			return false
		}
	}
	for _, ip := range c.IPs {
		if !slices.ContainsFunc(leaf.IPAddresses, ip.Equal) {
			return false
		}
	}
	return true
}

func (c *Certs) load(data map[string][]byte) (bool, error) {
	pair, err := tls.X509KeyPair(data[keyTLSCert], data[keyTLSKey])
	if err != nil {
		return false, fmt.Errorf("loading webhook certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return false, fmt.Errorf("parsing webhook certificate: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	changed := c.leaf == nil || !bytes.Equal(c.leaf.Raw, leaf.Raw)
	c.cert, c.leaf, c.ca = &pair, leaf, slices.Clone(data[keyCACert])
	return changed, nil
}

// validCA returns the first certificate of a PEM bundle (the CA that
// signed the stored certificate) while it is still valid, else nothing.
func validCA(bundle []byte, now time.Time) []byte {
	block, _ := pem.Decode(bundle)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil
	}
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil || !now.Before(ca.NotAfter) {
		return nil
	}
	return pem.EncodeToMemory(block)
}

// generate makes a CA and a serving certificate signed by it.
func (c *Certs) generate() (map[string][]byte, error) {
	now := c.Clock.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "berth-webhook-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(certValidity),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("creating webhook CA: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "berth-webhook"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(certValidity),
		DNSNames: c.DNSNames, IPAddresses: c.IPs,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caTmpl, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("creating webhook certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{
		keyCACert:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		keyTLSCert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyTLSKey:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

// GetCertificate serves the current certificate (tls.Config).
func (c *Certs) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.cert == nil {
		return nil, fmt.Errorf("webhook certificate not loaded yet")
	}
	return c.cert, nil
}

// CABundle is the PEM CA that signed the current certificate, followed,
// after a renewal, by the one that signed the certificate before it.
func (c *Certs) CABundle() []byte {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return slices.Clone(c.ca)
}

// Start renews the certificate every checkEvery until ctx ends (a
// manager.Runnable; every replica runs it).
func (c *Certs) Start(ctx context.Context) error {
	t := time.NewTicker(checkEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			changed, err := c.Ensure(ctx)
			if err != nil {
				log.FromContext(ctx).Error(err, "renewing the webhook certificate")
				continue
			}
			if changed && c.OnRotate != nil {
				c.OnRotate(ctx, c.CABundle())
			}
		}
	}
}

// NeedLeaderElection is false: every replica serves the webhook.
func (c *Certs) NeedLeaderElection() bool { return false }
