package expect

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestPollRetriesTransientErrors(t *testing.T) {
	calls := 0
	msg, ok := poll(5*time.Second, func(context.Context) (bool, string, error) {
		calls++
		if calls < 3 {
			return false, "", errors.New("the server is currently unable to handle the request")
		}
		return true, "", nil
	})
	if !ok || calls != 3 {
		t.Errorf("poll after two transient errors: ok=%v calls=%d (%s), want success on the third call", ok, calls, msg)
	}
}

func TestPollStopsAtAPermanentError(t *testing.T) {
	start := time.Now()
	msg, ok := poll(5*time.Second, func(context.Context) (bool, string, error) {
		return false, "", Permanent(errors.New("bad fixture"))
	})
	if ok || !strings.Contains(msg, "bad fixture") || time.Since(start) > 2*time.Second {
		t.Errorf("poll with a permanent error: ok=%v msg=%q after %s, want an immediate failure naming it", ok, msg, time.Since(start))
	}
}

func TestPollReportsTheLastErrorAtTimeout(t *testing.T) {
	msg, ok := poll(300*time.Millisecond, func(context.Context) (bool, string, error) {
		return false, "", errors.New("connection refused")
	})
	if ok || !strings.Contains(msg, "connection refused") {
		t.Errorf("poll that never succeeds: ok=%v msg=%q, want a timeout naming the last error", ok, msg)
	}
}
