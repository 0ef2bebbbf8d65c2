// Package expect holds polling assertions for tests against a live cluster.
package expect

import (
	"context"
	"errors"
	"testing"
	"time"
)

// permanentError stops Eventually at once.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent wraps an error that waiting cannot cure (a decoding error, a
// wrong test setup): Eventually fails at once instead of retrying it.
func Permanent(err error) error { return &permanentError{err: err} }

// Eventually polls cond every 100ms until it returns true or the timeout
// passes; then it fails the test with the last reason or error cond gave.
// An error from cond is retried like a false (a loaded API server times out,
// a cache is not synced yet, an update conflicts), unless it is wrapped with
// Permanent.
func Eventually(t testing.TB, timeout time.Duration, cond func(ctx context.Context) (ok bool, reason string, err error)) {
	t.Helper()
	if msg, ok := poll(timeout, cond); !ok {
		t.Fatal(msg)
	}
}

// poll runs the loop of Eventually and returns the failure message.
func poll(timeout time.Duration, cond func(ctx context.Context) (bool, string, error)) (string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// The last state cond reported and the last error it returned after
	// it are both kept: a request cut short by the deadline must not hide
	// what the test saw before.
	reason, lastErr := "", ""
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, r, err := cond(ctx)
		var perm *permanentError
		switch {
		case errors.As(err, &perm):
			return "error while waiting: " + perm.err.Error(), false
		case err != nil && ctx.Err() == nil:
			lastErr = err.Error()
		case ok:
			return "", true
		case r != "":
			reason, lastErr = r, ""
		}
		select {
		case <-ctx.Done():
			msg := reason
			switch {
			case reason == "" && lastErr == "":
				msg = "condition never evaluated"
			case reason == "":
				msg = "last error: " + lastErr
			case lastErr != "":
				msg += " (then an error: " + lastErr + ")"
			}
			return "timed out after " + timeout.String() + ": " + msg, false
		case <-tick.C:
		}
	}
}
