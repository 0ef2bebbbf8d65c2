package e2e

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// faultRates are the shares of requests the chaos proxy spoils. Requests
// are drawn once: a request gets at most one of the request faults.
type faultRates struct {
	Error    float64 // 500 or 503, never forwarded
	Conflict float64 // of writes: 409 Conflict, never forwarded
	Delay    float64 // forwarded after 1 s to MaxDelay
	Lost     float64 // of writes: forwarded, the answer replaced by 504 (the write may have happened)
	MaxDelay time.Duration
	// Watches: refused with 410 Expired (the informer relists), started
	// late (WatchDelay share, up to MaxWatchDelay), every event lagged
	// (WatchLag share, up to MaxDelay), and every watch cut after a random
	// time between the two WatchCut bounds (half cleanly, half reset).
	WatchExpire, WatchDelay, WatchLag float64
	MaxWatchDelay                     time.Duration
	WatchCut                          [2]time.Duration
}

// Fault kinds as the report names them.
const (
	faultError       = "error 500/503"
	faultConflict    = "conflict 409 on a write"
	faultDelay       = "slow response (1-3 s)"
	faultLost        = "write forwarded, answer lost (504)"
	faultWatchExpire = "watch refused 410 (relist)"
	faultWatchDelay  = "watch start delayed (1-4 s)"
	faultWatchLag    = "watch events lagged"
	faultWatchCut    = "watch closed"
	faultWatchReset  = "watch reset"
)

// berthWrite is a write berth's controller made that reached the API
// server, with the API server's answer.
type berthWrite struct {
	At                    time.Time
	Verb, Resource, Sub   string
	Namespace, Name, Path string
	Code                  int
}

// chaosProxy stands between berth's controller and the API server: it
// forwards every request with the admin's credentials (the controller's
// Impersonate-* headers pass through, so the API server still acts as
// berth's service account) and spoils a seeded share of them. It also
// records every pod and node write berth made, as the API server answered
// it: the test's record of what berth itself did.
type chaosProxy struct {
	rates   faultRates
	forward *httputil.ReverseProxy
	server  *httptest.Server

	mu       sync.Mutex
	rng      *mrand.Rand
	enabled  bool
	requests int
	faults   map[string]int
	writes   []berthWrite
}

type watchKey struct{}

// quiet drops the proxy's own log lines (aborted watches, clients gone).
var quiet = log.New(io.Discard, "", 0)

// newChaosProxy starts the proxy in front of the API server that cfg (an
// admin configuration) reaches.
func newChaosProxy(cfg *rest.Config, rates faultRates, seed uint64) (*chaosProxy, error) {
	target, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	upstream, err := rest.TransportFor(rest.CopyConfig(cfg))
	if err != nil {
		return nil, err
	}
	p := &chaosProxy{rates: rates, rng: mrand.New(mrand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), enabled: true, faults: map[string]int{}}
	p.forward = &httputil.ReverseProxy{
		Rewrite:        func(r *httputil.ProxyRequest) { r.SetURL(target); r.Out.Host = target.Host },
		Transport:      upstream,
		FlushInterval:  -1, // watches stream
		ModifyResponse: p.spoilWatch,
		ErrorLog:       quiet,
	}
	cert, err := selfSignedCert()
	if err != nil {
		return nil, err
	}
	p.server = httptest.NewUnstartedServer(p)
	p.server.EnableHTTP2 = true
	p.server.Config.ErrorLog = quiet
	p.server.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	p.server.StartTLS()
	return p, nil
}

// close stops the proxy; open watches end.
func (p *chaosProxy) close() {
	p.server.CloseClientConnections()
	p.server.Close()
}

// setEnabled turns fault injection on or off (forwarding goes on).
func (p *chaosProxy) setEnabled(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.enabled = on
}

// kubeconfig writes a kubeconfig that reaches the API server through the
// proxy as berth's service account.
func (p *chaosProxy) kubeconfig(dir string) (string, error) {
	cert := p.server.Certificate()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["chaos"] = &clientcmdapi.Cluster{Server: p.server.URL,
		CertificateAuthorityData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})}
	cfg.AuthInfos["berth"] = &clientcmdapi.AuthInfo{Impersonate: controllerSA}
	cfg.Contexts["chaos"] = &clientcmdapi.Context{Cluster: "chaos", AuthInfo: "berth"}
	cfg.CurrentContext = "chaos"
	path := filepath.Join(dir, "chaos.kubeconfig")
	return path, clientcmd.WriteToFile(*cfg, path)
}

// draw returns a uniform number in [0, 1) and counts the request.
func (p *chaosProxy) draw() (float64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests++
	return p.rng.Float64(), p.enabled
}

// float is a uniform number in [0, 1).
func (p *chaosProxy) float() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rng.Float64()
}

func (p *chaosProxy) between(lo, hi time.Duration) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(p.rng.Int64N(int64(hi-lo)))
}

func (p *chaosProxy) count(kind string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults[kind]++
}

func isWrite(r *http.Request) bool {
	return r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch || r.Method == http.MethodDelete
}

func isWatch(r *http.Request) bool {
	w := r.URL.Query().Get("watch")
	return w == "true" || w == "1"
}

func (p *chaosProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	x, on := p.draw()
	if isWatch(r) {
		p.serveWatch(w, r, x, on)
		return
	}
	rt := p.rates
	write := isWrite(r)
	switch {
	case !on:
	case x < rt.Error:
		p.count(faultError)
		code := http.StatusInternalServerError
		if x < rt.Error/2 {
			code = http.StatusServiceUnavailable
		}
		writeStatus(w, code, metav1.StatusReasonInternalError, "chaos: injected server error")
		return
	case write && x < rt.Error+rt.Conflict:
		p.count(faultConflict)
		writeStatus(w, http.StatusConflict, metav1.StatusReasonConflict, "chaos: injected conflict; the object has been modified, please apply your changes to the latest version and try again")
		return
	case x < rt.Error+rt.Conflict+rt.Delay:
		p.count(faultDelay)
		if !sleepCtx(r.Context(), p.between(time.Second, rt.MaxDelay)) {
			return
		}
	case write && x < rt.Error+rt.Conflict+rt.Delay+rt.Lost:
		p.count(faultLost)
		rec := httptest.NewRecorder()
		p.forward.ServeHTTP(rec, r)
		p.record(r, rec.Code)
		writeStatus(w, http.StatusGatewayTimeout, metav1.StatusReasonTimeout, "chaos: the request reached the API server but its answer was lost")
		return
	}
	sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
	p.forward.ServeHTTP(sw, r)
	p.record(r, sw.code)
}

// serveWatch refuses, delays or forwards a watch; spoilWatch lags and cuts
// its stream.
func (p *chaosProxy) serveWatch(w http.ResponseWriter, r *http.Request, x float64, on bool) {
	rt := p.rates
	if on && x < rt.WatchExpire {
		p.count(faultWatchExpire)
		writeStatus(w, http.StatusGone, metav1.StatusReasonExpired, "chaos: too old resource version")
		return
	}
	if on && x < rt.WatchExpire+rt.WatchDelay {
		p.count(faultWatchDelay)
		if !sleepCtx(r.Context(), p.between(time.Second, rt.MaxWatchDelay)) {
			return
		}
	}
	p.forward.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), watchKey{}, on)))
}

func (p *chaosProxy) spoilWatch(resp *http.Response) error {
	on, _ := resp.Request.Context().Value(watchKey{}).(bool)
	if !on || resp.StatusCode != http.StatusOK {
		return nil
	}
	x := p.float()
	b := &chaosBody{up: resp.Body, ch: make(chan chunk, 64), cut: make(chan struct{}), closed: make(chan struct{}), reset: x < 0.5}
	if x < p.rates.WatchLag {
		p.count(faultWatchLag)
		b.lag = p.between(500*time.Millisecond, p.rates.MaxDelay)
	}
	kind := faultWatchCut
	if b.reset {
		kind = faultWatchReset
	}
	b.timer = time.AfterFunc(p.between(p.rates.WatchCut[0], p.rates.WatchCut[1]), func() { p.count(kind); close(b.cut) })
	go b.pump()
	resp.Body = b
	return nil
}

// writePath is a pod or node path: /api/v1[/namespaces/NS]/RESOURCE[/NAME[/SUB]].
var writePath = regexp.MustCompile(`^/api/v1/(?:namespaces/([^/]+)/)?(pods|nodes)(?:/([^/]+))?(?:/([^/]+))?$`)

// record keeps a pod or node write that reached the API server, and every
// DELETE outside berth's own namespace.
func (p *chaosProxy) record(r *http.Request, code int) {
	if !isWrite(r) {
		return
	}
	m := writePath.FindStringSubmatch(r.URL.Path)
	wr := berthWrite{At: time.Now(), Verb: r.Method, Path: r.URL.Path, Code: code}
	switch {
	case m != nil:
		wr.Namespace, wr.Resource, wr.Name, wr.Sub = m[1], m[2], m[3], m[4]
	case r.Method == http.MethodDelete && !strings.Contains(r.URL.Path, "/namespaces/"+v1alpha1.SystemNamespace+"/"):
		wr.Resource = "other"
	default:
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.writes = append(p.writes, wr)
}

// snapshot returns the counts and writes so far.
func (p *chaosProxy) snapshot() (requests int, faults map[string]int, writes []berthWrite) {
	p.mu.Lock()
	defer p.mu.Unlock()
	faults = make(map[string]int, len(p.faults))
	for k, v := range p.faults {
		faults[k] = v
	}
	return p.requests, faults, append([]berthWrite(nil), p.writes...)
}

// faultSummary is "kind: n" for every kind, sorted.
func faultSummary(faults map[string]int) string {
	var parts []string
	total := 0
	for k, v := range faults {
		parts = append(parts, fmt.Sprintf("%s: %d", k, v))
		total += v
	}
	sort.Strings(parts)
	return fmt.Sprintf("%d (%s)", total, strings.Join(parts, ", "))
}
