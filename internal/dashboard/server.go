package dashboard

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"io/fs"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/berth-dev/berth/internal/netaddr"
)

// assets are the page's files, compiled into the binary: the page loads
// nothing from anywhere else (its Content-Security-Policy says so).
//
//go:embed assets
var assets embed.FS

// contentSecurityPolicy allows the page only its own files and its own API.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Server samples the cluster every interval and serves the page and the
// latest view.
type Server struct {
	reader   client.Reader
	interval time.Duration
	now      func() time.Time

	mu      sync.Mutex
	history *History
	view    View
}

// NewServer reads the cluster from r (a cache, so that a refresh costs the
// API server nothing) every interval.
func NewServer(r client.Reader, interval time.Duration, now func() time.Time) *Server {
	return &Server{reader: r, interval: interval, now: now, history: NewHistory(interval)}
}

// Refresh reads the cluster, builds the view and records a sample.
func (s *Server) Refresh(ctx context.Context) {
	in, problems := Read(ctx, s.reader, s.now())
	v := Build(in)
	v.Problems = problems
	s.mu.Lock()
	defer s.mu.Unlock()
	s.history.Add(v.Totals)
	v.History = s.history.Samples()
	s.view = v
}

// View returns the latest view.
func (s *Server) View() View {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.view
}

// Run refreshes now and then every interval until ctx ends.
func (s *Server) Run(ctx context.Context) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		s.Refresh(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Handler serves the page (GET /), its files and the view as JSON (GET
// /api/state). Nothing else, and no other method: the dashboard only
// reads.
func (s *Server) Handler() http.Handler {
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded folder is part of the binary
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/state", s.serveState)
	mux.Handle("GET /", http.FileServerFS(static))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackHost(r.Host) {
			// A page of another site whose name resolves to 127.0.0.1
			// (DNS rebinding) would read the cluster's state through a
			// browser on this machine: only requests naming a loopback
			// host are served.
			http.Error(w, "berth dashboard answers requests for localhost or a loopback address only", http.StatusForbidden)
			return
		}
		w.Header().Set("Content-Security-Policy", contentSecurityPolicy)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		mux.ServeHTTP(w, r)
	})
}

// loopbackHost reports whether a request's Host (host, or host:port)
// names localhost or a loopback address.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	return netaddr.LoopbackHost(strings.Trim(host, "[]"))
}

// state is /api/state: the view and how often it changes.
type state struct {
	View
	IntervalSeconds float64 `json:"intervalSeconds"`
}

func (s *Server) serveState(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if err := json.NewEncoder(w).Encode(state{View: s.View(), IntervalSeconds: s.interval.Seconds()}); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// Serve samples the cluster and serves the dashboard on ln until ctx
// ends.
func Serve(ctx context.Context, ln net.Listener, r client.Reader, interval time.Duration) error {
	s := NewServer(r, interval, time.Now)
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go s.Run(ctx)
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutdown); err != nil {
			log.FromContext(ctx).Error(err, "stopping the dashboard's server")
		}
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
