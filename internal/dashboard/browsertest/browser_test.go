// Package browsertest drives berth dashboard in a real headless Chromium
// against a real control plane, with berth's controller running.
package browsertest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/internal/dashboard"
	"github.com/berth-dev/berth/internal/scheme"
	browsers "github.com/berth-dev/berth/internal/testing/browser"
	"github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
)

// browser starts a headless Chromium with a fresh profile and records
// console errors, uncaught exceptions, log errors (CSP violations among
// them) and every URL the page requests.
type browser struct {
	ctx      context.Context
	mu       sync.Mutex
	errors   []string
	requests []string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(browsers.Chromium(t)), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1300, 1800),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b := &browser{ctx: ctx}
	must(t, chromedp.Listen(ctx, func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
				b.errors = append(b.errors, fmt.Sprintf("console.%s: %s", ev.Type, args(ev.Args)))
			}
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			b.errors = append(b.errors, fmt.Sprintf("exception at %s:%d: %s", d.URL, d.LineNumber, msg))
		case *cdplog.EventEntryAdded:
			if ev.Entry.Level == cdplog.EntryLevelError {
				b.errors = append(b.errors, fmt.Sprintf("log (%s): %s %s", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL))
			}
		case *network.EventRequestWillBeSent:
			b.requests = append(b.requests, ev.Request.URL)
		}
	}))
	_, err := chromedp.Call(ctx, cdplog.Enable, cdp.Empty{})
	must(t, err)
	_, err = chromedp.Call(ctx, network.Enable, network.EnableParams{})
	must(t, err)
	return b
}

func args(as []*runtime.RemoteObject) string {
	var out []string
	for _, a := range as {
		out = append(out, strings.Trim(string(a.Value), `"`)+a.Description)
	}
	return strings.Join(out, " ")
}

func (b *browser) seen() (errs, requests []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errors...), append([]string(nil), b.requests...)
}

// TestTheDashboardShowsANodeLaunchedForAPendingPod drives the page in a
// real Chromium against a real control plane with berth's controller
// running: a pending pod makes berth launch a node, and the page shows
// the node in its group and berth's decision, without one console error
// or one request outside the page's origin. The screenshot is kept.
func TestTheDashboardShowsANodeLaunchedForAPendingPod(t *testing.T) {
	b := newBrowser(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := env.Client

	ng := builders.NodeGroup("dash", builders.Size(0, 3), builders.LaunchDelay(metav1.Duration{Duration: time.Second}),
		builders.InstanceType("d-2", "2", "4Gi", builders.Spot("zone-a", "0.04")))
	ng.TypeMeta = metav1.TypeMeta{}
	must(t, c.Create(ctx, ng))
	runController(ctx, t)
	url := serveDashboard(ctx, t)

	pod := builders.Pod("wants-a-node", builders.NoUID(), builders.CPU("1"), builders.Memory("1Gi"))
	pod.TypeMeta = metav1.TypeMeta{}
	must(t, c.Create(ctx, pod))
	var node string
	expect.Eventually(t, 90*time.Second, func(ctx context.Context) (bool, string, error) {
		got := &corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), got); err != nil {
			return false, "", err
		}
		if node = got.Spec.NodeName; node == "" {
			node = got.Status.NominatedNodeName
		}
		return node != "", "no node launched for " + pod.Name + " yet", nil
	})
	t.Logf("berth launched %s for %s", node, pod.Name)

	must(t, chromedp.Do(b.ctx, chromedp.Navigate(url)))
	var group, decisions string
	expect.Eventually(t, 60*time.Second, func(context.Context) (bool, string, error) {
		var err error
		group, err = chromedp.Run(b.ctx, chromedp.Evaluate[string](
			`(() => { const g = document.querySelector('[data-nodegroup="dash"]'); if (!g) return "";`+
				` g.querySelectorAll("details").forEach((d) => d.open = true); return g.innerText; })()`))
		if err != nil {
			return false, "", err
		}
		if decisions, err = chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.getElementById("decisions").innerText`)); err != nil {
			return false, "", err
		}
		ok := strings.Contains(group, node) && strings.Contains(group, "d-2") && strings.Contains(decisions, "Launching node "+node)
		return ok, fmt.Sprintf("the page does not show %s yet:\n%s\n%s", node, group, decisions), nil
	})
	// Let the page poll a few more times before judging its console.
	time.Sleep(3 * time.Second)
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	must(t, err)
	saveArtifact(t, "dashboard.png", png)

	errs, requests := b.seen()
	for _, e := range errs {
		t.Errorf("browser: %s", e)
	}
	for _, r := range requests {
		if !strings.HasPrefix(r, url) && !strings.HasPrefix(r, "data:") {
			t.Errorf("the page requested %s, outside %s", r, url)
		}
	}
	if len(requests) < 4 {
		t.Errorf("the page made %d requests (page, script, style, state at least): %q", len(requests), requests)
	}
}

// serveDashboard serves the dashboard on a free loopback port, reading
// through a cache as `berth dashboard` does.
func serveDashboard(ctx context.Context, t *testing.T) string {
	t.Helper()
	cc, err := cache.New(env.Config, cache.Options{Scheme: scheme.New()})
	must(t, err)
	go func() { _ = cc.Start(ctx) }()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	go func() {
		if err := dashboard.Serve(ctx, ln, cc, time.Second); err != nil {
			t.Errorf("serving the dashboard: %v", err)
		}
	}()
	return "http://" + ln.Addr().String() + "/"
}

// saveArtifact writes a file the test produced where it outlives the test:
// $BERTH_TEST_ARTIFACTS, or berth-test-artifacts in the temporary folder.
func saveArtifact(t *testing.T, name string, data []byte) {
	t.Helper()
	dir := os.Getenv("BERTH_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "berth-test-artifacts")
	}
	must(t, os.MkdirAll(dir, 0o755))
	path := filepath.Join(dir, name)
	must(t, os.WriteFile(path, data, 0o644))
	t.Logf("screenshot: %s (%d bytes)", path, len(data))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
