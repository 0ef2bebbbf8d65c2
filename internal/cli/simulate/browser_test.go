package simulate

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/berth-dev/berth/internal/testing/browser"
)

// TestTheHTMLReportRendersInABrowser opens berth simulate's HTML report of
// three policies in a real headless Chromium: the page loads with no
// console error, exception or request, and every chart is drawn with a
// line per policy that has points on the page (not only in the source).
// The screenshot is kept in $BERTH_TEST_ARTIFACTS.
func TestTheHTMLReportRendersInABrowser(t *testing.T) {
	exe := browser.Chromium(t)
	dir := t.TempDir()
	tr := filepath.Join(dir, "mix.jsonl")
	if _, _, err := run(t, "trace", "generate", "--family", "mix", "--duration", "4h", "--scale", "0.5", "--out", tr); err != nil {
		t.Fatal(err)
	}
	cl := write(t, dir, "cluster.yaml", cluster)
	page := filepath.Join(dir, "report.html")
	if _, _, err := run(t, "--trace", tr, "--cluster", cl, "--policy", "no-headroom", "--policy", "current", "-o", "html", "--out", page); err != nil {
		t.Fatal(err)
	}

	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), chromedp.ExecPath(exe), chromedp.Headless,
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.WindowSize(1100, 1600))
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelT()
	var mu sync.Mutex
	var problems, requests []string
	must(t, chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeWarning || ev.Type == runtime.ConsoleAPICalledTypeAssert {
				problems = append(problems, fmt.Sprintf("console.%s", ev.Type))
			}
		case *runtime.EventExceptionThrown:
			problems = append(problems, "exception: "+ev.ExceptionDetails.Text)
		case *cdplog.EventEntryAdded:
			if ev.Entry.Level == cdplog.EntryLevelError {
				problems = append(problems, fmt.Sprintf("log (%s): %s %s", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL))
			}
		case *network.EventRequestWillBeSent:
			requests = append(requests, ev.Request.URL)
		}
	}))
	_, err := chromedp.Call(ctx, cdplog.Enable, cdp.Empty{})
	must(t, err)
	_, err = chromedp.Call(ctx, network.Enable, network.EnableParams{})
	must(t, err)
	url := "file://" + page
	must(t, chromedp.Do(ctx, chromedp.Navigate(url)))
	// Per chart: its id, its drawn width, and per line the points the
	// browser parsed and the length it drew.
	type line struct {
		Policy string  `json:"policy"`
		Points int     `json:"points"`
		Length float64 `json:"length"`
	}
	type drawn struct {
		ID    string  `json:"id"`
		Width float64 `json:"width"`
		Lines []line  `json:"lines"`
	}
	charts, err := chromedp.Run(ctx, chromedp.Evaluate[[]drawn](`[...document.querySelectorAll("svg.chart")].map(s => ({
		id: s.id, width: s.getBoundingClientRect().width,
		lines: [...s.querySelectorAll("polyline")].map(l => ({policy: l.textContent, points: l.points.numberOfItems, length: l.getTotalLength()}))
	}))`))
	must(t, err)
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(90))
	must(t, err)
	if len(charts) != 5 {
		t.Fatalf("%d charts drawn, want 5: %v", len(charts), charts)
	}
	for _, c := range charts {
		if c.Width < 500 {
			t.Errorf("chart %s drawn %v px wide", c.ID, c.Width)
		}
		if len(c.Lines) != 2 {
			t.Errorf("chart %s has %d lines, want one per policy", c.ID, len(c.Lines))
		}
		withData := 0
		for _, l := range c.Lines {
			if l.Points > 1 && l.Length > 0 {
				withData++
			}
		}
		// Each chart has data: both policies' lines, except the wait
		// chart, where a policy whose pods never waited may have none.
		if withData == 0 || (c.ID != "wait" && withData != 2) {
			t.Errorf("chart %s: %d lines with data: %+v", c.ID, withData, c.Lines)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Errorf("browser: %s", p)
	}
	for _, r := range requests {
		if r != url {
			t.Errorf("the page requested %s: it must be self-contained", r)
		}
	}
	saveArtifact(t, "simulate-report.png", png)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func saveArtifact(t *testing.T, name string, data []byte) {
	t.Helper()
	dir := os.Getenv("BERTH_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "berth-test-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o644); err != nil { //nolint:gosec // a screenshot for people to look at
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(data))
}
