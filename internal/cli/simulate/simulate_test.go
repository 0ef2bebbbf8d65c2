package simulate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/sim"
)

func run(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	cmd := NewCommand()
	if args[0] == "trace" {
		cmd = NewTraceCommand()
		args = args[1:]
	}
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}

func write(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const cluster = `apiVersion: berth.dev/v1alpha1
kind: NodeGroup
metadata: {name: general}
spec:
  maxSize: 50
  instanceTypes:
  - name: m-4
    capacity: {cpu: "4", memory: 16Gi}
    offerings: [{zone: zone-a, capacityType: on-demand, pricePerHour: "0.20"}]
  provider: {kwok: {launchDelay: 60s}}
---
apiVersion: berth.dev/v1alpha1
kind: Headroom
metadata: {name: spare}
spec:
  scope: {nodeGroups: [general]}
  units: {count: 4, resources: {cpu: "1", memory: 1Gi}}
`

// A trace generated, then simulated under three policies: the table and
// the JSON name each policy; more headroom costs more and makes fewer
// pods wait; the policy file's Headroom replaced the cluster's (same name).
func TestSimulatePolicies(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "batch.jsonl")
	if _, errOut, err := run(t, "trace", "generate", "--family", "batch", "--duration", "3h", "--scale", "0.5", "--out", tr); err != nil {
		t.Fatal(err)
	} else if !strings.Contains(errOut, "wrote "+tr) {
		t.Errorf("generate said %q", errOut)
	}
	cl := write(t, dir, "cluster.yaml", cluster)
	big := write(t, dir, "big.yaml", `apiVersion: berth.dev/v1alpha1
kind: Headroom
metadata: {name: spare}
spec:
  scope: {nodeGroups: [general]}
  units: {count: 40, resources: {cpu: "2", memory: 4Gi}}
`)
	out, _, err := run(t, "--trace", tr, "--cluster", cl, "--policy", "no-headroom", "--policy", "current", "--policy", big, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var rep sim.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 3 || rep.Results[0].Policy != "no-headroom" || rep.Results[1].Policy != "current" || rep.Results[2].Policy != "big" {
		t.Fatalf("policies %+v", rep.Results)
	}
	none, cur, more := rep.Results[0], rep.Results[1], rep.Results[2]
	// batch waves of 20 pods of 2 cpu: 40 units of 2 cpu hold a whole wave.
	if !(none.Cost < cur.Cost && cur.Cost < more.Cost) {
		t.Errorf("cost none %.2f, 4 units %.2f, 40 units %.2f: want rising", none.Cost, cur.Cost, more.Cost)
	}
	if none.HeadroomCost != 0 || more.HeadroomShare <= cur.HeadroomShare {
		t.Errorf("headroom share none %.3f, 4 units %.3f, 40 units %.3f", none.HeadroomShare, cur.HeadroomShare, more.HeadroomShare)
	}
	if none.PodsWaited != none.Pods || more.PodsWaited >= none.PodsWaited/2 {
		t.Errorf("pods waited: none %d of %d, 40 units %d", none.PodsWaited, none.Pods, more.PodsWaited)
	}
	if none.Wait.P50 < 60 || none.Wait.P50 > 62*1.02 {
		t.Errorf("without headroom a wave waits a boot (60 s) and the batch window: p50 %.1f s", none.Wait.P50)
	}
	table, _, err := run(t, "--trace", tr, "--cluster", cl, "--policy", "no-headroom", "--policy", big)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"POLICY", "no-headroom", "big", "wait p95", "headroom share", "NODE-HOURS", "m-4"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	page := filepath.Join(dir, "r.html")
	if _, _, err := run(t, "--trace", tr, "--cluster", cl, "-o", "html", "--out", page); err != nil {
		t.Fatal(err)
	}
	html, _ := os.ReadFile(page)
	if n := strings.Count(string(html), `<svg class="chart"`); n != 5 || strings.Contains(string(html), "<script") || strings.Contains(string(html), "http://") && !strings.Contains(string(html), `xmlns="http://www.w3.org/2000/svg"`) {
		t.Errorf("report has %d charts (want 5), must be self-contained", n)
	}
}

func TestSimulateRejectsBadInput(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "t.jsonl")
	if _, _, err := run(t, "trace", "generate", "--family", "ci", "--duration", "1h", "--out", tr); err != nil {
		t.Fatal(err)
	}
	cl := write(t, dir, "cluster.yaml", cluster)
	empty := write(t, dir, "empty.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
	badGroup := write(t, dir, "bad.yaml", "apiVersion: berth.dev/v1alpha1\nkind: NodeGroup\nmetadata: {name: g}\nspec: {maxSize: -1}\n")
	sameName := write(t, filepath.Join(t.TempDir()), "current.yaml", "apiVersion: berth.dev/v1alpha1\nkind: Headroom\nmetadata: {name: spare}\nspec: {units: {count: 1, resources: {cpu: '1'}}}\n")
	notTrace := write(t, dir, "not.jsonl", "hello\n")
	// A Headroom scoped to a group no policy has (a renamed group) kept
	// nothing, silently: both columns of the report were the same.
	lostScope := write(t, dir, "lost.yaml", "apiVersion: berth.dev/v1alpha1\nkind: Headroom\nmetadata: {name: spare}\nspec: {scope: {nodeGroups: [main]}, units: {count: 8, resources: {cpu: '1'}}}\n")
	// A group that only a policy has may have its own launch delay.
	bigGroup := write(t, dir, "big.yaml", "apiVersion: berth.dev/v1alpha1\nkind: NodeGroup\nmetadata: {name: big}\nspec: {maxSize: 5, instanceTypes: [{name: b-16, capacity: {cpu: '16', memory: 64Gi}, offerings: [{zone: z, capacityType: on-demand, pricePerHour: '1'}]}], provider: {kwok: {}}}\n")
	if _, _, err := run(t, "--trace", tr, "--cluster", cl, "--policy", bigGroup, "--launch-delay", "big=30s"); err != nil {
		t.Errorf("--launch-delay of a group only a policy has: %v", err)
	}
	if _, _, err := run(t, "--trace", tr, "--cluster", cl, "--policy", bigGroup, "--launch-delay", "bigg=30s"); err == nil || !strings.Contains(err.Error(), "neither the cluster nor a policy has node group bigg") {
		t.Errorf("--launch-delay of a group no policy has: %v, want it refused", err)
	}
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"output":         {[]string{"--trace", tr, "--cluster", cl, "-o", "yaml"}, "--output must be table, json or html"},
		"trace on stdin": {[]string{"--trace", "-", "--cluster", cl}, "--trace must be a file"},
		"no trace":       {[]string{"--cluster", cl}, `required flag(s) "trace" not set`},
		"no group":       {[]string{"--trace", tr, "--cluster", empty}, "no NodeGroup"},
		"bad group":      {[]string{"--trace", tr, "--cluster", badGroup}, "bad.yaml"},
		"empty policy":   {[]string{"--trace", tr, "--cluster", cl, "--policy", empty}, "no NodeGroup or Headroom in it"},
		"same names":     {[]string{"--trace", tr, "--cluster", cl, "--policy", "current", "--policy", sameName}, "two policies are named current"},
		"not a trace":    {[]string{"--trace", notTrace, "--cluster", cl}, "trace line 1 (header)"},
		"delay":          {[]string{"--trace", tr, "--cluster", cl, "--launch-delay", "general=soon"}, `--launch-delay "general=soon"`},
		"interval":       {[]string{"--trace", tr, "--cluster", cl, "--scale-down-interval", "0s"}, "--scale-down-interval must be at least 100ms, not 0s"},
		"tiny interval":  {[]string{"--trace", tr, "--cluster", cl, "--resync-period", "1ns"}, "--resync-period must be at least 100ms, not 1ns"},
		"missing file":   {[]string{"--trace", filepath.Join(dir, "nope"), "--cluster", cl}, "no such file"},
		"lost scope":     {[]string{"--trace", tr, "--cluster", cl, "--policy", lostScope}, `policy lost: Headroom spare: spec.scope.nodeGroups: node group "main" does not exist`},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := run(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"family":                    {[]string{"trace", "generate", "--family", "weekly"}, "unknown family"},
		"duration":                  {[]string{"trace", "generate", "--family", "ci", "--duration", "0s"}, "--duration must be"},
		"scale":                     {[]string{"trace", "generate", "--family", "ci", "--scale", "-1"}, "--scale must be"},
		"NaN scale":                 {[]string{"trace", "generate", "--family", "diurnal", "--scale", "NaN"}, "--scale must be above 0 and at most 1000, not NaN"},
		"a duration under a second": {[]string{"trace", "generate", "--family", "ci", "--duration", "10ms"}, "--duration must be between 1s and 744h"},
		"start":                     {[]string{"trace", "generate", "--family", "ci", "--start", "monday"}, "--start"},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := run(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// --launch-delay: GROUP=D beats D for all, which beats recorded times,
// which beat the group's own (a negative answer).
func TestLaunchDelays(t *testing.T) {
	groups := []*v1alpha1.NodeGroup{{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}}, {ObjectMeta: metav1.ObjectMeta{Name: "general"}}}
	f, err := parseLaunchDelays([]string{"gpu=5m", "90s"}, map[string][]float64{"general": {40}}, groups)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parseLaunchDelays([]string{"genral=10m"}, nil, groups); err == nil || !strings.Contains(err.Error(), "neither the cluster nor a policy has node group genral") {
		t.Errorf("a misspelled group: %v, want it refused", err)
	}
	if d := f("gpu", nil); d.String() != "5m0s" {
		t.Errorf("gpu: %s", d)
	}
	if d := f("general", nil); d.String() != "1m30s" {
		t.Errorf("general with a flag for all: %s", d)
	}
	f, _ = parseLaunchDelays(nil, map[string][]float64{"general": {40}}, groups)
	if d := f("general", rand.New(rand.NewPCG(1, 2))); d.String() != "40s" {
		t.Errorf("recorded: %s", d)
	}
	if d := f("other", nil); d >= 0 {
		t.Errorf("a group without a flag or a recording keeps its own: %s", d)
	}
	if f, _ := parseLaunchDelays(nil, nil, groups); f != nil {
		t.Error("no flags and no recording: the engine's default")
	}
}

// TestAContainerThatOnlyLimitsRequestsItsLimitsInATrace: three pods of a
// trace whose containers set only limits of 3 cpu cost what three pods
// requesting 3 cpu cost (a node of 4 cpu each), as the API server admits
// them. Before, they requested nothing and shared one node.
func TestAContainerThatOnlyLimitsRequestsItsLimitsInATrace(t *testing.T) {
	dir := t.TempDir()
	cl := write(t, dir, "cluster.yaml", cluster)
	trace := func(name, resources string) string {
		lines := []string{`{"version":1,"start":"2026-01-05T00:00:00Z"}`}
		for i := range 3 {
			lines = append(lines, fmt.Sprintf(`{"at":1,"op":"create","pod":{"namespace":"a","name":"p%d","spec":{"containers":[{"name":"c","resources":%s}]}}}`, i, resources))
		}
		lines = append(lines, `{"at":3600,"op":"end"}`)
		return write(t, dir, name, strings.Join(lines, "\n")+"\n")
	}
	cost := func(tr string) float64 {
		out, _, err := run(t, "--trace", tr, "--cluster", cl, "--policy", "no-headroom", "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		var rep sim.Report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		return rep.Results[0].Cost
	}
	limits, requests := cost(trace("limits.jsonl", `{"limits":{"cpu":"3"}}`)), cost(trace("requests.jsonl", `{"requests":{"cpu":"3"}}`))
	if limits != requests || requests == 0 {
		t.Errorf("cost of pods that only limit 3 cpu %.3f, of pods that request it %.3f: want the same", limits, requests)
	}
}
