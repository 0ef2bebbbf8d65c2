// Package expect holds polling assertions for tests against a live cluster.
package expect

import (
	"context"
	"testing"
	"time"
)

// Eventually polls cond every 100ms until it returns true or the timeout
// passes; then it fails the test with the last reason cond gave. An error
// from cond stops the polling at once.
func Eventually(t testing.TB, timeout time.Duration, cond func(ctx context.Context) (ok bool, reason string, err error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	reason := "condition never evaluated"
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, r, err := cond(ctx)
		if err != nil && ctx.Err() == nil {
			t.Fatalf("error while waiting: %v", err)
		}
		if ok {
			return
		}
		if r != "" {
			reason = r
		}
		select {
		case <-ctx.Done():
			t.Fatalf("timed out after %s: %s", timeout, reason)
		case <-tick.C:
		}
	}
}
