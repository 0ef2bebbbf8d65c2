package e2e

import (
	"os"
	"strings"
	"testing"
	"time"
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
