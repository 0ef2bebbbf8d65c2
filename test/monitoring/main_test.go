package main

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	in := Input{
		Metrics: []string{"berth_provisioning_pending_pods", "up_like_total"},
		Exprs: []Expr{
			{Where: "good", Expr: `max(berth_provisioning_pending_pods) > 0`},
			{Where: "rate", Expr: `sum by (nodegroup) (rate(up_like_total[5m]))`},
			{Where: "syntax", Expr: `sum(rate(berth_provisioning_pending_pods[5m])`},
			{Where: "unknown", Expr: `berth_no_such_metric > 1`},
			{Where: "nameless", Expr: `{job="x"}`},
		},
	}
	got := strings.Join(Check(in), "\n")
	for _, want := range []string{"syntax:", "unknown: metric berth_no_such_metric", "nameless: a selector without a metric name"} {
		if !strings.Contains(got, want) {
			t.Errorf("no problem %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "good:") || strings.Contains(got, "rate:") {
		t.Errorf("a valid expression was refused:\n%s", got)
	}
}
