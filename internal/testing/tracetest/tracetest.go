// Package tracetest writes traces for tests.
package tracetest

import (
	"bytes"
	"testing"

	"github.com/berth-dev/berth/internal/trace"
)

// Reader writes a trace of the header and events, as berth record and
// berth trace generate write one, and opens it for reading: what a test
// reads back passed the reader's checks.
func Reader(t testing.TB, hdr trace.Header, events ...*trace.Event) *trace.Reader {
	t.Helper()
	r, err := trace.NewReader(bytes.NewReader(Bytes(t, hdr, events...)))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Bytes writes a trace of the header and events into memory.
func Bytes(t testing.TB, hdr trace.Header, events ...*trace.Event) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := trace.NewWriter(&buf, hdr)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
