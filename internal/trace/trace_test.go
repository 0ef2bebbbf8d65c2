package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/quantity"
)

func TestReaderRejectsBadTraces(t *testing.T) {
	const header = `{"version":1,"start":"2026-01-05T00:00:00Z"}` + "\n"
	for name, tc := range map[string]struct{ in, want string }{
		"empty":           {"", "empty, want a header line"},
		"other version":   {`{"version":2,"start":"2026-01-05T00:00:00Z"}`, "version 2, this berth reads version 1"},
		"header not json": {"hello\n", "trace line 1 (header)"},
		"time goes back": {header + `{"at":5,"op":"delete","namespace":"a","name":"b"}` + "\n" + `{"at":4,"op":"delete","namespace":"a","name":"b"}`,
			"trace line 3: at 4.000 is before the previous event's 5.000"},
		"unknown op":         {header + `{"at":1,"op":"bind"}`, `trace line 2: op "bind", want create, delete or end`},
		"create without pod": {header + `{"at":1,"op":"create"}`, "create needs a pod with a namespace and a name"},
		"delete without name": {header + `{"at":1,"op":"delete","namespace":"a"}`,
			"delete needs a namespace and a name"},
		"event after end": {header + `{"at":1,"op":"end"}` + "\n" + `{"at":2,"op":"delete","namespace":"a","name":"b"}`,
			"trace line 3: an event after the end event"},
		"bad json": {header + `{"at":1,`, "trace line 2"},
		// apimachinery's parser does not return on this quantity.
		"huge exponent": {header + `{"at":1,"op":"create","pod":{"namespace":"a","name":"p","spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1e2147483648"}}}]}}}`,
			"trace line 2: the number 1e2147483648 has an exponent of more than 3 digits"},
		"line too long": {header + `{"at":1,"op":"create","pod":{"namespace":"a","name":"` + strings.Repeat("x", MaxLine) + `"}}`, "token too long: a trace line is at most 8388608 bytes"},
		"running pod after the start": {header + `{"at":1,"op":"create","running":true,"pod":{"namespace":"a","name":"p"}}`,
			"trace line 2: running marks a create at 0 before every other event"},
		"running pod after another event": {header + `{"at":0,"op":"create","pod":{"namespace":"a","name":"p"}}` + "\n" +
			`{"at":0,"op":"create","running":true,"pod":{"namespace":"a","name":"q"}}`, "trace line 3: running marks a create at 0"},
		"running delete": {header + `{"at":0,"op":"delete","running":true,"namespace":"a","name":"b"}`, "trace line 2: running marks a create"},
		"a time past the span": {header + `{"at":1e10,"op":"delete","namespace":"a","name":"b"}`,
			"trace line 2: at 1e+10: want seconds since the trace's start, from 0 to 7776000"},
		"a negative time": {header + `{"at":-1,"op":"delete","namespace":"a","name":"b"}`, "trace line 2: at -1: want seconds"},
		"a negative request": {header + `{"at":1,"op":"create","pod":{"namespace":"a","name":"p","spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"-1"}}}]}}}`,
			"trace line 2: pod a/p: spec.containers[c].resources.requests.cpu is -1: quantities must not be negative"},
		"a pod on a node": {header + `{"at":1,"op":"create","pod":{"namespace":"a","name":"p","spec":{"nodeName":"n1","containers":[{"name":"c"}]}}}`,
			"trace line 2: pod a/p: spec.nodeName is set"},
		"a pod created twice": {header + `{"at":1,"op":"create","pod":{"namespace":"a","name":"p"}}` + "\n" +
			`{"at":2,"op":"create","pod":{"namespace":"a","name":"p"}}`, "trace line 3: pod a/p is created again while it exists"},
		"a launch delay of 1e300 s": {`{"version":1,"start":"2026-01-05T00:00:00Z","launchDelays":{"general":[1e300]}}`,
			"launchDelays of general: 1e+300, want seconds above 0"},
		"a negative launch delay": {`{"version":1,"start":"2026-01-05T00:00:00Z","launchDelays":{"general":[-100]}}`,
			"launchDelays of general: -100"},
		"unknown fields": {header + `{"at":1,"op":"delete","namespace":"a","name":"b","extra":{"deep":[1,2]}}` + "\n" + `{"at":0,"op":"end"}`, "trace line 3: at 0.000 is before"},
	} {
		t.Run(name, func(t *testing.T) {
			err := readAll(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func readAll(in string) error {
	r, err := NewReader(strings.NewReader(in))
	if err != nil {
		return err
	}
	for {
		if _, err := r.Next(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// TestReaderBoundsRequestsAsTheControllersCacheDoes: apimachinery reads
// "e999999999" as zero with that exponent, and reading its millicores took
// 1.4 s, on every read by the simulator. The reader bounds it as the
// controller's cache does: zero, cheap to read; other requests as written.
func TestReaderBoundsRequestsAsTheControllersCacheDoes(t *testing.T) {
	r, err := NewReader(strings.NewReader(`{"version":1,"start":"2026-01-05T00:00:00Z"}` + "\n" +
		`{"at":1,"op":"create","pod":{"namespace":"a","name":"p","spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"e999999999","memory":"1Gi"}}}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	e, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	req := e.Pod.Spec.Containers[0].Resources.Requests
	if cpu := req[corev1.ResourceCPU]; !quantity.InRange(corev1.ResourceCPU, cpu) || !cpu.IsZero() {
		t.Errorf("cpu %s, scale %d; want a zero cheap to read", cpu.String(), cpu.AsDec().Scale())
	}
	if mem := req[corev1.ResourceMemory]; mem.Value() != 1<<30 {
		t.Errorf("memory %s, want 1Gi as written", mem.String())
	}
}

// A trace written and read back is the same, header and events.
func TestWriteRead(t *testing.T) {
	h, events, err := Generate(Params{Family: FamilyMix, Seed: 3, Duration: 3 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	h.LaunchDelays = map[string][]float64{"general": {41.5, 39}}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, h)
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
	r, err := NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Header.Start.Equal(h.Start) || r.Header.LaunchDelays["general"][0] != 41.5 || r.Header.Source != h.Source {
		t.Errorf("header read back as %+v, wrote %+v", r.Header, h)
	}
	n := 0
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if e.At != events[n].At || e.Op != events[n].Op || e.Key() != events[n].Key() {
			t.Fatalf("event %d read back as %+v, wrote %+v", n, e, events[n])
		}
		n++
	}
	if n != len(events) || events[n-1].Op != OpEnd || events[n-1].At != 3*3600 {
		t.Errorf("read %d events of %d; the last must be the end at 10800 s", n, len(events))
	}
}

// Each family is what its documentation says.
func TestGenerateFamilies(t *testing.T) {
	count := func(family string, scale float64) (creates int, peak int, byNS map[string]int) {
		_, events, err := Generate(Params{Family: family, Seed: 7, Scale: scale})
		if err != nil {
			t.Fatal(err)
		}
		live := 0
		byNS = map[string]int{}
		for _, e := range events {
			switch e.Op {
			case OpCreate:
				creates++
				live++
				byNS[e.Pod.Namespace]++
			case OpDelete:
				live--
			}
			peak = max(peak, live)
		}
		return creates, peak, byNS
	}
	// diurnal: 10 pods at 6:00, 60 at 18:00, in steps of 6.
	_, events, _ := Generate(Params{Family: FamilyDiurnal, Seed: 7})
	liveAt := func(at float64) int {
		n := 0
		for _, e := range events {
			switch {
			case e.At > at:
				return n
			case e.Op == OpCreate:
				n++
			case e.Op == OpDelete:
				n--
			}
		}
		return n
	}
	if got := liveAt(6 * 3600); got != 12 {
		t.Errorf("diurnal at 6:00: %d pods, want 10 rounded to a step of 6: 12", got)
	}
	if got := liveAt(18 * 3600); got != 60 {
		t.Errorf("diurnal at 18:00: %d pods, want 60", got)
	}
	// The web replicas of the start were running before it, and come
	// first in the mix, before batch's wave of 0:00.
	_, mix, _ := Generate(Params{Family: FamilyMix, Seed: 7})
	running, started := 0, false
	for i, e := range mix {
		switch {
		case e.Running && (started || e.Pod.Namespace != "web"):
			t.Fatalf("mix event %d: running pod %s after another event or not of web", i, e.Key())
		case e.Running:
			running++
		default:
			started = true
		}
	}
	if running != 36 {
		t.Errorf("mix: %d pods running at the start, want diurnal's 36 (35 rounded to a step of 6)", running)
	}
	// batch: 40 pods every full hour, 24 waves in a day.
	if c, _, _ := count(FamilyBatch, 1); c != 24*40 {
		t.Errorf("batch: %d pods, want 960", c)
	}
	if c, _, _ := count(FamilyBatch, 2.5); c != 24*100 {
		t.Errorf("batch at scale 2.5: %d pods, want 2400", c)
	}
	// ci: bursts of 5-40, about 6*10+1*14 = 74 bursts a day.
	c, _, _ := count(FamilyCI, 1)
	if c < 74*5/2 || c > 74*40*2 {
		t.Errorf("ci: %d pods, want about 74 bursts of 5 to 40", c)
	}
	// mix: the three in their namespaces.
	_, _, ns := count(FamilyMix, 1)
	if ns["web"] == 0 || ns["ci"] == 0 || ns["batch"] != 960 {
		t.Errorf("mix by namespace %v, want web, ci and 960 batch pods", ns)
	}
	// The same parameters give the same trace; another seed another one.
	_, a, _ := Generate(Params{Family: FamilyCI, Seed: 1})
	_, b, _ := Generate(Params{Family: FamilyCI, Seed: 1})
	_, other, _ := Generate(Params{Family: FamilyCI, Seed: 2})
	if len(a) != len(b) || a[10].At != b[10].At || (len(a) == len(other) && a[10].At == other[10].At) {
		t.Error("generate is not determined by its seed")
	}
	if _, _, err := Generate(Params{Family: "weekly"}); err == nil || !strings.Contains(err.Error(), "want one of") {
		t.Errorf("unknown family: %v", err)
	}
}

// What the Writer writes the Reader reads, up to the longest line: a pod
// whose line is MaxLine bytes long reads back, and one byte more is
// refused by the Writer, not written for the Reader to refuse.
func TestTheLongestLineWrittenIsRead(t *testing.T) {
	event := func(nameLen int) *Event {
		return &Event{At: 1, Op: OpCreate, Pod: &Pod{Namespace: "a", Name: strings.Repeat("x", nameLen)}}
	}
	short, err := json.Marshal(event(0))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Header{Start: time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	longest := event(MaxLine - len(short))
	if err := w.Write(longest); err != nil {
		t.Fatalf("writing a line of MaxLine bytes: %v", err)
	}
	if err := w.Write(event(MaxLine - len(short) + 1)); !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("writing a line of MaxLine+1 bytes: %v, want ErrLineTooLong", err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if w.Events() != 1 {
		t.Errorf("the writer counts %d events, want the 1 written", w.Events())
	}
	r, err := NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	e, err := r.Next()
	if err != nil {
		t.Fatalf("reading the line of MaxLine bytes: %v", err)
	}
	if e.Key() != longest.Key() {
		t.Errorf("read back pod %.20s..., want %.20s...", e.Key(), longest.Key())
	}
	if _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("after the one event: %v, want EOF", err)
	}
}

// A trace's start must be one the simulator's clock holds: before 1970
// (or none at all) its nanoseconds are negative and a target's waits
// indexed a table with them (a panic); past 2262 they wrap.
func TestAStartTheClockCannotHoldIsRefused(t *testing.T) {
	for name, header := range map[string]string{
		"before 1970": `{"version":1,"start":"1969-06-01T00:00:00Z"}`,
		"no start":    `{"version":1}`,
		"after 2200":  `{"version":1,"start":"2262-01-01T00:00:00Z"}`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := NewReader(strings.NewReader(header + "\n")); err == nil || !strings.Contains(err.Error(), "want a time from 1970") {
				t.Errorf("header %s: %v, want a refusal naming the range", header, err)
			}
		})
	}
}
