package controller

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/scheme"
	"github.com/berth-dev/berth/internal/webhook"
)

// hookSetup is the companion admission webhook: its certificate, its
// configuration and where it listens; nil fields when it is disabled.
type hookSetup struct {
	certs  *webhook.Certs
	config *webhook.Config
	host   string
	port   int
}

// webhook prepares the webhook: it loads or issues the serving
// certificate before the manager starts, so that the server has one.
func (o *options) webhook(ctx context.Context, cfg *rest.Config) (*hookSetup, error) {
	if o.webhookAddr == "0" {
		return &hookSetup{}, nil
	}
	host, portStr, err := net.SplitHostPort(o.webhookAddr)
	if err != nil {
		return nil, fmt.Errorf("--webhook-bind-address %q: %w", o.webhookAddr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("--webhook-bind-address %q: bad port", o.webhookAddr)
	}
	direct, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, err
	}
	h := &hookSetup{host: host, port: port}
	certs := &webhook.Certs{Client: direct, Secret: client.ObjectKey{Namespace: v1alpha1.SystemNamespace, Name: "berth-webhook-cert"}, Clock: clock.RealClock{}}
	var ep webhook.Endpoint
	if o.webhookURL != "" {
		u, err := url.Parse(o.webhookURL)
		if err != nil {
			return nil, fmt.Errorf("--webhook-url: %w", err)
		}
		ep.URL = strings.TrimSuffix(o.webhookURL, "/")
		if ip := net.ParseIP(u.Hostname()); ip != nil {
			certs.IPs = []net.IP{ip}
		} else {
			certs.DNSNames = []string{u.Hostname()}
		}
	} else {
		ns, name, _ := strings.Cut(o.webhookService, "/")
		ep.Service = &admissionregistrationv1.ServiceReference{Namespace: ns, Name: name}
		certs.DNSNames = []string{name + "." + ns + ".svc", name + "." + ns + ".svc.cluster.local"}
	}
	if _, err := certs.Ensure(ctx); err != nil {
		return nil, err
	}
	h.certs, h.config = certs, &webhook.Config{Client: direct, Endpoint: ep}
	certs.OnRotate = h.config.UpdateCA
	return h, nil
}

// server is the manager's webhook server, serving berth's own certificate.
func (h *hookSetup) server() crwebhook.Server {
	if h.certs == nil {
		return nil
	}
	return crwebhook.NewServer(crwebhook.Options{Host: h.host, Port: h.port, TLSOpts: []func(*tls.Config){func(c *tls.Config) {
		c.GetCertificate = h.certs.GetCertificate
		c.MinVersion = tls.VersionTLS12
	}}})
}
