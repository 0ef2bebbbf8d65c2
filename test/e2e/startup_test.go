package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/testing/expect"
)

// TestCachesThatDoNotSyncInTimeStopTheController: --cache-sync-timeout
// reaches the controllers. Given no time to list the cluster, berth exits
// with an error saying a cache did not sync, rather than wait for ever or
// act on part of the cluster; every other test starts it with the
// default (10 minutes), time enough.
func TestCachesThatDoNotSyncInTimeStopTheController(t *testing.T) {
	p := startController(t, "--cache-sync-timeout=1ms", "--leader-elect=false")
	select {
	case <-p.done:
	case <-time.After(2 * time.Minute):
		t.Fatal("berth still runs 2 minutes after starting with --cache-sync-timeout=1ms")
	}
	if code := p.cmd.ProcessState.ExitCode(); code == 0 {
		t.Errorf("berth exited with code 0; want an error")
	}
	data, err := os.ReadFile(p.log)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "timed out waiting for") {
		t.Error("berth's log does not say a cache did not sync") // the harness prints the log's end
	}
}

// TestReadyOnlyOnceTheCachesSynced: berth's readiness checks its informer
// caches and its webhook server, so that a rollout or a drain never takes
// the last replica that can lead while the new one still lists the
// cluster (it said ready at once before, on a ping alone).
func TestReadyOnlyOnceTheCachesSynced(t *testing.T) {
	p := startController(t, "--leader-elect=false")
	var body string
	expect.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.probes+"/readyz?verbose", nil)
		if err != nil {
			return false, "", err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err.Error(), nil
		}
		defer func() { _ = resp.Body.Close() }()
		data, _ := io.ReadAll(resp.Body)
		body = string(data)
		return resp.StatusCode == http.StatusOK, fmt.Sprintf("readyz %d: %s", resp.StatusCode, body), nil
	})
	for _, check := range []string{"[+]caches ok", "[+]webhook ok"} {
		if !strings.Contains(body, check) {
			t.Errorf("readyz says %q, want it to list %q", body, check)
		}
	}
}
