package sim

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestNiceAxis(t *testing.T) {
	for _, tc := range []struct{ v, end, step float64 }{
		{24, 25, 5}, {0.9, 1, 0.2}, {100, 100, 20}, {61, 80, 20}, {12, 12.5, 2.5}, {7, 8, 2}, {0, 1, 0.25}, {1234, 1250, 250},
	} {
		if end, step := niceAxis(tc.v); end != tc.end || step != tc.step {
			t.Errorf("niceAxis(%v) = %v, %v; want %v, %v", tc.v, end, step, tc.end, tc.step)
		}
	}
}

// The page has five charts, each with a line per policy that has points,
// and the table; it loads nothing from elsewhere.
func TestReportHTML(t *testing.T) {
	var results []*Result
	for _, c := range []Config{cfg("none"), cfg("units", units(4, "1", false))} {
		r, err := Run(c, traceOf(t, burst()...))
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, r)
	}
	var buf bytes.Buffer
	rep := &Report{Trace: "burst.jsonl", Start: t0, Results: results}
	if err := rep.WriteHTML(&buf); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	charts := regexp.MustCompile(`<svg class="chart" id="(\w+)" data-points="(\d+)"`).FindAllStringSubmatch(page, -1)
	if len(charts) != 5 {
		t.Fatalf("%d charts, want 5", len(charts))
	}
	for _, c := range charts {
		if n, _ := strconv.Atoi(c[2]); n == 0 {
			t.Errorf("chart %s has no data", c[1])
		}
	}
	// The wait chart: "units" had no pod wait, so only "none" has points.
	lines := regexp.MustCompile(`<polyline data-points="(\d+)"[^>]*><title>([^<]+)</title>`).FindAllStringSubmatch(page, -1)
	if len(lines) != 10 {
		t.Fatalf("%d lines, want 2 policies x 5 charts", len(lines))
	}
	for i, l := range lines[:8] {
		if l[1] == "0" {
			t.Errorf("line %d (%s) has no points", i, l[2])
		}
	}
	if lines[8][2] != "none" || lines[8][1] == "0" || lines[9][1] != "0" {
		t.Errorf("wait lines %v", lines[8:])
	}
	for _, bad := range []string{"<script", "src=", "href=", "@import"} {
		if strings.Contains(page, bad) {
			t.Errorf("page contains %q: it must be self-contained", bad)
		}
	}
	if !strings.Contains(page, "wait p99") || !strings.Contains(page, "units") {
		t.Error("page lacks the table")
	}
}
