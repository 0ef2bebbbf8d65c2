package chart

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/berth-dev/berth/internal/controller/companion"
	"github.com/berth-dev/berth/internal/controller/disruption"
	"github.com/berth-dev/berth/internal/controller/headroom"
	"github.com/berth-dev/berth/internal/controller/launchtimeout"
	"github.com/berth-dev/berth/internal/controller/nodegroup"
	"github.com/berth-dev/berth/internal/controller/provisioning"
	"github.com/berth-dev/berth/internal/controller/tenant"
)

var registerOnce sync.Once

// registeredMetrics returns every series name berth's controller exposes:
// the controllers' metrics (registered as `berth controller` registers
// them) and controller-runtime's own, read from controller-runtime's
// registry; histograms and summaries with their _bucket, _sum and _count.
func registeredMetrics(t *testing.T) []string {
	t.Helper()
	registerOnce.Do(func() {
		for _, register := range []func(){provisioning.RegisterMetrics, nodegroup.RegisterMetrics, launchtimeout.RegisterMetrics,
			headroom.RegisterMetrics, tenant.RegisterMetrics, disruption.RegisterMetrics, companion.RegisterMetrics} {
			register()
		}
	})
	collector, ok := metrics.Registry.(prometheus.Collector)
	if !ok {
		t.Fatalf("controller-runtime's registry %T cannot describe its metrics", metrics.Registry)
	}
	// A vector without series yet is not gathered, but it is described.
	descs := make(chan *prometheus.Desc)
	go func() { collector.Describe(descs); close(descs) }()
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	var names []string
	for d := range descs {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			names = append(names, m[1])
		}
	}
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetType() == dto.MetricType_HISTOGRAM || f.GetType() == dto.MetricType_SUMMARY {
			names = append(names, f.GetName()+"_sum", f.GetName()+"_count")
		}
		if f.GetType() == dto.MetricType_HISTOGRAM {
			names = append(names, f.GetName()+"_bucket")
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

func TestMonitoringIsOffByDefault(t *testing.T) {
	for _, o := range render(t) {
		if o.GetKind() == "PrometheusRule" || strings.Contains(o.GetName(), "grafana") {
			t.Errorf("the default chart renders %s %s", o.GetKind(), o.GetName())
		}
	}
}

// TestDashboardAndAlertsUseOnlyBerthsMetricsAndParse renders the chart's
// Grafana dashboard and PrometheusRule and hands every expression to
// test/monitoring, which parses it with Prometheus' parser and checks each
// metric it selects against the controller's registry.
func TestDashboardAndAlertsUseOnlyBerthsMetricsAndParse(t *testing.T) {
	objs := render(t, "--set", "monitoring.grafanaDashboard.enabled=true", "--set", "monitoring.prometheusRule.enabled=true",
		"--set", "monitoring.prometheusRule.pendingPodSeconds=300")
	type expr struct {
		Where string `json:"where"`
		Expr  string `json:"expr"`
	}
	var exprs []expr
	cm := find(t, objs, "ConfigMap", "berth-controller-grafana-dashboard")
	if cm.GetLabels()["grafana_dashboard"] != "1" {
		t.Errorf("the dashboard's ConfigMap is not labelled for Grafana's sidecar: %v", cm.GetLabels())
	}
	data, _, _ := unstructured.NestedString(cm.Object, "data", "berth.json")
	var dashboard struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal([]byte(data), &dashboard); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	for _, p := range dashboard.Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, expr{Where: "dashboard panel " + p.Title, Expr: tg.Expr})
		}
	}
	rule := find(t, objs, "PrometheusRule", "berth-controller")
	groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	var alerts []string
	for _, g := range groups {
		rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
		for _, r := range rules {
			r := r.(map[string]any)
			alerts = append(alerts, r["alert"].(string))
			exprs = append(exprs, expr{Where: "alert " + r["alert"].(string), Expr: r["expr"].(string)})
		}
	}
	wantAlerts := []string{"BerthClusterAtMaxNodes", "BerthDrainsTimingOut", "BerthHeadroomNotReady", "BerthLaunchesFailing", "BerthNodeGroupAtMaxSize",
		"BerthNotLeading", "BerthPodsWaitingForCapacity", "BerthRoundsFailing"}
	slices.Sort(alerts)
	if !slices.Equal(alerts, wantAlerts) {
		t.Errorf("alerts %v, want %v", alerts, wantAlerts)
	}
	if !slices.ContainsFunc(exprs, func(e expr) bool { return strings.HasSuffix(e.Expr, "> 300") }) {
		t.Error("monitoring.prometheusRule.pendingPodSeconds did not reach its alert")
	}
	if len(exprs) < 20 {
		t.Fatalf("only %d expressions found", len(exprs))
	}
	input, err := json.Marshal(map[string]any{"metrics": registeredMetrics(t), "exprs": exprs})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "run", ".")
	cmd.Dir = filepath.Join(repoRoot(t), "test", "monitoring")
	cmd.Stdin = bytes.NewReader(input)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("test/monitoring: %v\n%s", err, out)
	}
	t.Logf("test/monitoring: %s", strings.TrimSpace(string(out)))
}

// TestNoLeaderAlertWithoutLeaderElection: with controller.leaderElect
// false no replica ever holds the lease, and BerthNotLeading would fire
// for ever; the chart leaves it out then.
func TestNoLeaderAlertWithoutLeaderElection(t *testing.T) {
	alerts := func(args ...string) []string {
		t.Helper()
		objs := render(t, append([]string{"--set", "monitoring.prometheusRule.enabled=true"}, args...)...)
		rule := find(t, objs, "PrometheusRule", "berth-controller")
		groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
		var out []string
		for _, g := range groups {
			rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
			for _, r := range rules {
				out = append(out, r.(map[string]any)["alert"].(string))
			}
		}
		return out
	}
	if !slices.Contains(alerts(), "BerthNotLeading") {
		t.Error("the default chart (leader election on) has no BerthNotLeading alert")
	}
	if got := alerts("--set", "controller.leaderElect=false", "--set", "replicas=1"); slices.Contains(got, "BerthNotLeading") {
		t.Errorf("alerts %v without leader election, want no BerthNotLeading", got)
	}
}
