// Package scenarios checks the planner on the YAML snapshots of this folder
// against expectations written by hand in <name>.expect.yaml.
package scenarios

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/scenario"
	"github.com/berth-dev/berth/internal/testing/workload"
)

// expectation is what a user checks of a plan. Every field is optional
// except newNodes, which must list every new node.
type expectation struct {
	NewNodes []struct {
		NodeGroup    string `json:"nodeGroup"`
		InstanceType string `json:"instanceType"`
		CapacityType string `json:"capacityType"`
		Zone         string `json:"zone"`
		Count        int    `json:"count"`
	} `json:"newNodes"`
	PricePerHour   *float64            `json:"pricePerHour"`
	Existing       map[string]string   `json:"existing"`
	Apart          [][]string          `json:"apart"`
	Together       [][]string          `json:"together"`
	OnGroup        map[string]string   `json:"onGroup"`
	OnCapacityType map[string]string   `json:"onCapacityType"`
	Unschedulable  map[string][]string `json:"unschedulable"`
	// ClusterLimits, when set, is the cluster-wide limit the plan is made
	// with (`berth plan --cluster-max-cpu/--cluster-max-memory`).
	ClusterLimits corev1.ResourceList `json:"clusterLimits"`
}

func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("*.expect.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, exp := range files {
		name := strings.TrimSuffix(exp, ".expect.yaml")
		t.Run(name, func(t *testing.T) {
			in := loadInput(t, name)
			data, err := os.ReadFile(exp)
			if err != nil {
				t.Fatal(err)
			}
			var want expectation
			if err := yaml.UnmarshalStrict(data, &want); err != nil {
				t.Fatal(err)
			}
			in.Limits.Resources = want.ClusterLimits
			plan, err := scaleup.Run(in)
			if err != nil {
				t.Fatal(err)
			}
			for _, problem := range check(plan, &want) {
				t.Error(problem)
			}
			if t.Failed() {
				out, _ := yaml.Marshal(plan)
				t.Logf("plan:\n%s", out)
			}
		})
	}
}

// loadInput reads scenario <name>.yaml as the planner's input, with
// Headrooms resolved at a fixed time.
func loadInput(t *testing.T, name string) scaleup.Input {
	t.Helper()
	f, err := os.Open(name + ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	sc, err := scenario.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	in, err := sc.Input(time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func check(plan *scaleup.Plan, want *expectation) []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	// New nodes: every expected shape with its count, and nothing else.
	matched := make([]bool, len(plan.NewNodes))
	for _, w := range want.NewNodes {
		n := 0
		for i, got := range plan.NewNodes {
			if !matched[i] && got.NodeGroup == w.NodeGroup && (w.InstanceType == "" || got.InstanceType == w.InstanceType) &&
				(w.CapacityType == "" || got.CapacityType == w.CapacityType) && (w.Zone == "" || got.Zone == w.Zone) && n < w.Count {
				matched[i] = true
				n++
			}
		}
		if n != w.Count {
			add("want %d new %s/%s/%s/%s nodes, found %d", w.Count, w.NodeGroup, w.InstanceType, w.CapacityType, w.Zone, n)
		}
	}
	for i, m := range matched {
		if !m {
			n := plan.NewNodes[i]
			add("unexpected new node %s: %s/%s/%s/%s", n.Name, n.NodeGroup, n.InstanceType, n.CapacityType, n.Zone)
		}
	}
	if want.PricePerHour != nil && math.Abs(plan.PricePerHour-*want.PricePerHour) > 1e-9 {
		add("price per hour %.4f, want %.4f", plan.PricePerHour, *want.PricePerHour)
	}

	nodeOf := map[string]scaleup.NewNode{}
	for _, n := range plan.NewNodes {
		for _, p := range n.Pods {
			nodeOf[p.String()] = n
		}
	}
	existing := map[string]string{}
	for _, p := range plan.ExistingNodePlacements {
		existing[p.Pod.String()] = p.Node
	}
	where := func(pod string) string {
		if n, ok := nodeOf[pod]; ok {
			return n.Name
		}
		return existing[pod]
	}
	for pod, node := range want.Existing {
		if existing[pod] != node {
			add("pod %s on existing node %q, want %q", pod, existing[pod], node)
		}
	}
	for _, group := range want.Apart {
		seen := map[string]string{}
		for _, pod := range group {
			w := where(pod)
			if w == "" {
				add("pod %s not placed", pod)
			} else if other, dup := seen[w]; dup {
				add("pods %s and %s share node %s, want them apart", other, pod, w)
			}
			seen[w] = pod
		}
	}
	for _, group := range want.Together {
		for _, pod := range group[1:] {
			if where(pod) == "" || where(pod) != where(group[0]) {
				add("pods %s (%s) and %s (%s) are not together", group[0], where(group[0]), pod, where(pod))
			}
		}
	}
	for pod, g := range want.OnGroup {
		if nodeOf[pod].NodeGroup != g {
			add("pod %s on node group %q, want %q", pod, nodeOf[pod].NodeGroup, g)
		}
	}
	for pod, ct := range want.OnCapacityType {
		if nodeOf[pod].CapacityType != ct {
			add("pod %s on capacity type %q, want %q", pod, nodeOf[pod].CapacityType, ct)
		}
	}
	var unsched []string
	for _, u := range plan.Unschedulable {
		unsched = append(unsched, u.Pod.String())
		subs, ok := want.Unschedulable[u.Pod.String()]
		if !ok {
			add("pod %s unexpectedly unschedulable: %s", u.Pod, u.Message)
			continue
		}
		for _, s := range subs {
			if !strings.Contains(u.Message, s) {
				add("message for %s is %q, want it to contain %q", u.Pod, u.Message, s)
			}
		}
	}
	for pod := range want.Unschedulable {
		if !slices.Contains(unsched, pod) {
			add("pod %s was expected to be unschedulable", pod)
		}
	}
	return problems
}

// TestPlansDoNotDependOnListOrder: the controller lists pods from its cache,
// `berth plan` from a file; the same cluster must give the same plan in any
// order.
func TestPlansDoNotDependOnListOrder(t *testing.T) {
	files, _ := filepath.Glob("*.expect.yaml")
	for _, exp := range files {
		name := strings.TrimSuffix(exp, ".expect.yaml")
		t.Run(name, func(t *testing.T) {
			in := loadInput(t, name)
			a, err := scaleup.Run(in)
			if err != nil {
				t.Fatal(err)
			}
			slices.Reverse(in.Pending)
			slices.Reverse(in.Pods)
			slices.Reverse(in.Nodes)
			b, err := scaleup.Run(in)
			if err != nil {
				t.Fatal(err)
			}
			ya, _ := yaml.Marshal(a)
			yb, _ := yaml.Marshal(b)
			if string(ya) != string(yb) {
				t.Errorf("reversing the input changed the plan:\n%s\nvs\n%s", ya, yb)
			}
		})
	}
	t.Run("benchmark workload", func(t *testing.T) {
		in := scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{workload.NodeGroup(60)}, Pending: workload.Pods(300, 7)}
		a, err := scaleup.Run(in)
		if err != nil {
			t.Fatal(err)
		}
		slices.Reverse(in.Pending)
		b, err := scaleup.Run(in)
		if err != nil {
			t.Fatal(err)
		}
		if a.PricePerHour != b.PricePerHour || len(a.NewNodes) != len(b.NewNodes) {
			t.Errorf("reversing 300 pods changed the plan: %d nodes %.3f/h vs %d nodes %.3f/h", len(a.NewNodes), a.PricePerHour, len(b.NewNodes), b.PricePerHour)
		}
	})
}
