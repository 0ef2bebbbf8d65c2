package dashboard

import (
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/berth-dev/berth/internal/scheme"
	"github.com/berth-dev/berth/internal/testing/builders"
)

func newTestServer(t *testing.T, objs ...client.Object) (*Server, *httptest.Server) {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).Build()
	clock := now
	s := NewServer(c, time.Minute, func() time.Time { clock = clock.Add(time.Minute); return clock })
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return s, ts
}

// got is what a GET answered.
type got struct {
	StatusCode int
	Header     http.Header
}

func get(t *testing.T, url string) (got, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return got{StatusCode: resp.StatusCode, Header: resp.Header}, string(body)
}

func TestThePageAndItsFilesComeFromTheBinaryUnderAStrictPolicy(t *testing.T) {
	_, ts := newTestServer(t)
	for path, want := range map[string]string{"/": "<title>berth dashboard</title>", "/app.js": "api/state", "/style.css": ".badge"} {
		resp, body := get(t, ts.URL+path)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("GET %s: %d, body without %q", path, resp.StatusCode, want)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "unsafe") {
			t.Errorf("GET %s: Content-Security-Policy %q", path, csp)
		}
	}
}

func TestTheFilesReferenceNothingOutsideThePage(t *testing.T) {
	// The one absolute URL allowed is SVG's namespace name, which nothing
	// loads.
	external := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	err := fs.WalkDir(assets, "assets", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(assets, path)
		if err != nil {
			return err
		}
		for _, m := range external.FindAllString(string(data), -1) {
			if m != "http://www.w3.org" {
				t.Errorf("%s refers to %s", path, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestTheStateIsTheViewWithItsHistory(t *testing.T) {
	s, ts := newTestServer(t, builders.Node("n", "2", "4Gi"), builders.Pod("web", builders.NoUID()))
	s.Refresh(context.Background())
	s.Refresh(context.Background())
	resp, body := get(t, ts.URL+"/api/state")
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	var st state
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.History) != 2 || st.IntervalSeconds != 60 || !st.Time.Equal(now.Add(2*time.Minute)) || st.Totals.Pending != 1 {
		t.Errorf("state: %d samples, interval %v, time %s, pending %d", len(st.History), st.IntervalSeconds, st.Time, st.Totals.Pending)
	}
}

func TestTheDashboardOnlyReads(t *testing.T) {
	_, ts := newTestServer(t)
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		req, err := http.NewRequest(method, ts.URL+"/api/state", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s /api/state: %d", method, resp.StatusCode)
		}
	}
}

func TestAListThatFailsIsNamedAndTheRestShows(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(builders.Node("n", "2", "4Gi")).
		WithInterceptorFuncs(interceptorFailingOn(&corev1.PodList{})).Build()
	in, problems := Read(context.Background(), c, now)
	if len(in.Nodes) != 1 || len(problems) != 1 || !strings.Contains(problems[0], "listing pods") {
		t.Errorf("nodes %d, problems %q", len(in.Nodes), problems)
	}
}

// TestAListThatNeverAnswersIsNamedAndTheRestShows: a cache's list of a
// resource the user may not list waits for an informer that never syncs;
// the refresh gives up on it after ListTimeout, names it, and shows the
// rest. Before, the page said "reading the cluster" for ever.
func TestAListThatNeverAnswersIsNamedAndTheRestShows(t *testing.T) {
	defer func(d time.Duration) { ListTimeout = d }(ListTimeout)
	ListTimeout = 100 * time.Millisecond
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(builders.Node("n", "2", "4Gi")).
		WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*corev1.PodList); ok {
				<-ctx.Done() // an informer that never syncs
				return ctx.Err()
			}
			return c.List(ctx, list, opts...)
		}}).Build()
	done := make(chan struct{})
	var in Input
	var problems []string
	go func() { in, problems = Read(context.Background(), c, now); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Read did not return while the pod list never answered")
	}
	if len(in.Nodes) != 1 || len(problems) != 1 || !strings.Contains(problems[0], "listing pods") {
		t.Errorf("nodes %d, problems %q", len(in.Nodes), problems)
	}
}

// TestOnlyRequestsForALoopbackHostAreServed: the page has no
// authentication; a site whose name a browser on this machine resolves
// to 127.0.0.1 (DNS rebinding) would read it through the browser. Only
// requests naming localhost or a loopback address are answered.
func TestOnlyRequestsForALoopbackHostAreServed(t *testing.T) {
	_, ts := newTestServer(t)
	for host, want := range map[string]int{"127.0.0.1:8090": http.StatusOK, "localhost:8090": http.StatusOK, "[::1]:8090": http.StatusOK,
		"localhost": http.StatusOK, "rebound.example.com:8090": http.StatusForbidden, "10.0.0.5:8090": http.StatusForbidden} {
		req, err := http.NewRequest(http.MethodGet, ts.URL+"/api/state", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET /api/state for host %s: %d, want %d", host, resp.StatusCode, want)
		}
	}
}
