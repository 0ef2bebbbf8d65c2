package plan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/planner/scaleup"
)

func runPlan(t *testing.T, input string, args ...string) (string, error) {
	t.Helper()
	cmd := NewCommand()
	var out, errOut bytes.Buffer
	cmd.SetIn(strings.NewReader(input))
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(append([]string{"-f", "-"}, args...))
	err := cmd.Execute()
	return out.String(), err
}

const group = `apiVersion: berth.dev/v1alpha1
kind: NodeGroup
metadata: {name: general}
spec:
  maxSize: 3
  instanceTypes:
  - name: m-2
    capacity: {cpu: "2", memory: 4Gi}
    offerings: [{zone: zone-a, capacityType: spot, pricePerHour: "0.05"}]
  provider: {kwok: {}}
`

func TestPlanRejectsBadInputNamingTheDocument(t *testing.T) {
	tests := []struct{ name, input, want string }{
		{"malformed YAML", group + "---\napiVersion: v1\nkind: Pod\nmetadata: {name: a\n", "document 2: malformed YAML"},
		{"unknown kind", group + "---\napiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n", `document 2 (Widget "w"): unknown kind example.com/v1/Widget`},
		{"pod without a name", group + "---\napiVersion: v1\nkind: Pod\nmetadata: {namespace: default}\nspec: {}\n", `document 2 (Pod ""): metadata.name is required`},
		{"document without kind", "metadata: {name: x}\n", "document 1: apiVersion and kind are required"},
		{"pod in a List without a name", "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Pod, metadata: {}}\n", "document 1, item 1"},
		{"node group with min above max", strings.Replace(group, "maxSize: 3", "minSize: 4\n  maxSize: 3", 1), "spec.minSize"},
		{"node group with an unknown field", strings.Replace(group, "maxSize: 3", "maxSize: 3\n  maxSise: 4", 1), `unknown field "maxSise"`},
		{"invalid price", strings.Replace(group, `"0.05"`, `"cheap"`, 1), `pricePerHour: Invalid value: "cheap": pricePerHour must be a non-negative decimal`},
		{"NaN price", strings.Replace(group, `"0.05"`, `"NaN"`, 1), `pricePerHour must be a non-negative decimal`},
		// The same rules as the API server's, from the same CRD: kubectl apply
		// would reject these too.
		{"node group name too long for its node names", strings.Replace(group, "name: general", "name: "+strings.Repeat("g", 58), 1), "name must be at most 57 characters"},
		{"template label value with a space", strings.Replace(group, "maxSize: 3", "maxSize: 3\n  template: {labels: {team: a b}}", 1), "spec.template.labels.team"},
		{"negative max size", strings.Replace(group, "maxSize: 3", "maxSize: -3", 1), "spec.maxSize"},
		{"duplicate instance types", strings.Replace(group, "  provider:", `  - name: m-2
    capacity: {cpu: "4", memory: 8Gi}
    offerings: [{zone: zone-a, capacityType: spot, pricePerHour: "0.1"}]
  provider:`, 1), "Duplicate value"},
		// apimachinery's parser does not return on the first; comparisons
		// with the second write out thirty million digits.
		{"a pod asking for cpu with a ten-digit exponent", group + "---\napiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c, resources: {requests: {cpu: \"1e2147483648\"}}}]}\n",
			"document 2: the number 1e2147483648 has an exponent of more than 3 digits"},
		{"a node group capacity with an eight-digit exponent", strings.Replace(group, `cpu: "2"`, `cpu: 1E30000000`, 1),
			"document 1: the number 1E30000000 has an exponent of more than 3 digits"},
		{"a List inside a List", "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: List, items: []}\n", "document 1, item 1: a List inside a List"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := runPlan(t, tt.input)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestPlanJSONListsNewNodesAndUnschedulablePods(t *testing.T) {
	input := group + `---
apiVersion: v1
kind: Pod
metadata: {name: small}
spec: {containers: [{name: c, image: i, resources: {requests: {cpu: "1"}}}]}
---
apiVersion: v1
kind: Pod
metadata: {name: huge}
spec: {containers: [{name: c, image: i, resources: {requests: {cpu: "8"}}}]}
`
	out, err := runPlan(t, input, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var p scaleup.Plan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("output is not a plan: %v\n%s", err, out)
	}
	if len(p.NewNodes) != 1 || p.NewNodes[0].InstanceType != "m-2" || p.NewNodes[0].CapacityType != "spot" ||
		len(p.NewNodes[0].Pods) != 1 || p.NewNodes[0].Pods[0].Name != "small" {
		t.Errorf("new nodes: %+v", p.NewNodes)
	}
	if len(p.Unschedulable) != 1 || p.Unschedulable[0].Pod.Name != "huge" ||
		!strings.Contains(p.Unschedulable[0].Message, "general: insufficient cpu (needs 8, max 2)") {
		t.Errorf("unschedulable: %+v", p.Unschedulable)
	}
	if p.PricePerHour != 0.05 {
		t.Errorf("price %v, want 0.05", p.PricePerHour)
	}
}

func TestPlanRejectsUnknownOutputFormat(t *testing.T) {
	if _, err := runPlan(t, group, "-o", "yaml"); err == nil || !strings.Contains(err.Error(), "--output must be table or json") {
		t.Errorf("got %v", err)
	}
}

// TestPlanSkipsAnUnreadablePendingPod: a pending pod with a malformed
// selector is reported, and the other pods are still planned.
func TestPlanSkipsAnUnreadablePendingPod(t *testing.T) {
	input := group + `---
apiVersion: v1
kind: Pod
metadata: {name: broken}
spec:
  affinity:
    podAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - topologyKey: kubernetes.io/hostname
        labelSelector: {matchExpressions: [{key: app, operator: Sometimes, values: [x]}]}
  containers: [{name: c, image: i}]
---
apiVersion: v1
kind: Pod
metadata: {name: fine}
spec: {containers: [{name: c, image: i, resources: {requests: {cpu: "1"}}}]}
`
	out, err := runPlan(t, input, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var p scaleup.Plan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	if len(p.NewNodes) != 1 || p.NewNodes[0].Pods[0].Name != "fine" {
		t.Errorf("new nodes %+v, want one for the readable pod", p.NewNodes)
	}
	if len(p.Unschedulable) != 1 || p.Unschedulable[0].Pod.Name != "broken" || !strings.Contains(p.Unschedulable[0].Message, "berth cannot read this pod") {
		t.Errorf("unschedulable %+v", p.Unschedulable)
	}
}

// node is a Ready node of 2 cpu that berth launched for the group
// "general" (uid uid-general), as a YAML document.
func node(name string) string {
	return `---
apiVersion: v1
kind: Node
metadata:
  name: ` + name + `
  labels: {berth.dev/nodegroup: general, berth.dev/initialized: "true", kubernetes.io/hostname: ` + name + `}
  annotations: {berth.dev/launched-by: uid-general}
status:
  capacity: {cpu: "2", memory: 4Gi, pods: "110"}
  allocatable: {cpu: "2", memory: 4Gi, pods: "110"}
  conditions: [{type: Ready, status: "True"}]
`
}

// TestPlanScaleDown: the scale-down side of a snapshot, by the
// controller's planner: node b's pod fits on a, so b would go; a stays
// because of its bare pod, and says so.
func TestPlanScaleDown(t *testing.T) {
	input := strings.Replace(group, "metadata: {name: general}", "metadata: {name: general, uid: uid-general}", 1) + node("a") + node("b") + `---
apiVersion: v1
kind: Pod
metadata: {name: bare, namespace: default}
spec: {nodeName: a, containers: [{name: c, image: c, resources: {requests: {cpu: 500m}}}]}
status: {phase: Running}
---
apiVersion: v1
kind: Pod
metadata:
  name: web-1
  namespace: default
  ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web, uid: rs1, controller: true}]
spec: {nodeName: b, containers: [{name: c, image: c, resources: {requests: {cpu: 500m}}}]}
status: {phase: Running}
`
	out, err := runPlan(t, input, "--scale-down")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"REMOVABLE NODES: 1", "default/web-1 -> a", "NotReplicated", "pod default/bare is not backed by a controller"} {
		if !strings.Contains(out, want) {
			t.Errorf("output does not contain %q:\n%s", want, out)
		}
	}
}

// TestPlanScaleDownNamesAClosedDisruptionWindow: node b would go, and
// the plan says so whatever the group's window; with a window that is
// closed now (a minute a day, twelve hours from now), it
// adds that the controller starts the removal only once it opens; an
// open window adds nothing.
func TestPlanScaleDownNamesAClosedDisruptionWindow(t *testing.T) {
	// A window of a minute twelve hours away is closed whenever the test
	// runs; one every minute is always open.
	away := time.Now().UTC().Add(12 * time.Hour)
	for _, tc := range []struct {
		cron   string
		closed bool
	}{{fmt.Sprintf("%d %d * * *", away.Minute(), away.Hour()), true}, {"* * * * *", false}} {
		g := strings.Replace(group, "metadata: {name: general}", "metadata: {name: general, uid: uid-general}", 1) +
			"  disruption: {window: {cron: \"" + tc.cron + "\", duration: 1m}}\n"
		out, err := runPlan(t, g+node("a")+node("b"), "--scale-down")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "REMOVABLE NODES: 1") {
			t.Errorf("window %q: no removal planned:\n%s", tc.cron, out)
		}
		said := strings.Contains(out, "DISRUPTION WINDOWS CLOSED NOW: 1") && strings.Contains(out, "node group general: its disruption window")
		if said != tc.closed {
			t.Errorf("window %q: says it is closed: %v, want %v:\n%s", tc.cron, said, tc.closed, out)
		}
	}
}

// TestPlanScaleDownSizesAReplacementWithItsDaemonSets: as
// TestPlanScaleDownShowsAReplacement, but a DaemonSet runs on the group's
// nodes, its pod on big asking for 700m (its template asks for 100m, as
// a LimitRange would leave it). The replacement must hold that pod beside
// web-1's 500m: an m-2, not an m-1, as the controller plans it.
func TestPlanScaleDownSizesAReplacementWithItsDaemonSets(t *testing.T) {
	input := strings.Replace(replaced, "  - name: m-1\n", `  - name: m-2
    capacity: {cpu: "2", memory: 4Gi}
    offerings: [{zone: zone-a, capacityType: on-demand, pricePerHour: "0.10"}]
  - name: m-1
`, 1) + `---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: kube-system, uid: uid-agent, annotations: {deprecated.daemonset.template.generation: "1"}}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec: {containers: [{name: a, image: a, resources: {requests: {cpu: 100m}}}]}
---
apiVersion: v1
kind: Pod
metadata:
  name: agent-big
  namespace: kube-system
  labels: {app: agent, pod-template-generation: "1"}
  ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: agent, uid: uid-agent, controller: true}]
spec: {nodeName: big, containers: [{name: a, image: a, resources: {requests: {cpu: 700m}}}]}
status: {phase: Running}
`
	out, err := runPlan(t, input, "--scale-down")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"REPLACED BY A CHEAPER NODE: 1", "m-2", "0.1000"} {
		if !strings.Contains(out, want) {
			t.Errorf("output does not contain %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "m-1") {
		t.Errorf("the replacement is an m-1, which has no room for the DaemonSet's pod beside web-1:\n%s", out)
	}
}

// replaced is a node of 4 cpu running one pod of 500m, in a group that
// also offers a node of 1 cpu at a quarter of its price.
const replaced = `apiVersion: berth.dev/v1alpha1
kind: NodeGroup
metadata: {name: general, uid: uid-general}
spec:
  maxSize: 3
  instanceTypes:
  - name: m-4
    capacity: {cpu: "4", memory: 8Gi}
    offerings: [{zone: zone-a, capacityType: on-demand, pricePerHour: "0.20"}]
  - name: m-1
    capacity: {cpu: "1", memory: 2Gi}
    offerings: [{zone: zone-a, capacityType: on-demand, pricePerHour: "0.05"}]
  provider: {kwok: {}}
---
apiVersion: v1
kind: Node
metadata:
  name: big
  labels: {berth.dev/nodegroup: general, berth.dev/initialized: "true", kubernetes.io/hostname: big, topology.kubernetes.io/zone: zone-a,
    node.kubernetes.io/instance-type: m-4, berth.dev/capacity-type: on-demand}
  annotations: {berth.dev/launched-by: uid-general}
status:
  capacity: {cpu: "4", memory: 8Gi, pods: "110"}
  allocatable: {cpu: "4", memory: 8Gi, pods: "110"}
  conditions: [{type: Ready, status: "True"}]
---
apiVersion: v1
kind: Pod
metadata:
  name: web-1
  namespace: default
  ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web, uid: rs1, controller: true}]
spec: {nodeName: big, containers: [{name: c, image: c, resources: {requests: {cpu: 500m, memory: 256Mi}}}]}
status: {phase: Running}
`

// TestPlanScaleDownShowsAReplacement: a node of 4 cpu running one pod of
// 500m is replaced by a 1-cpu node at a quarter of its price; the table
// says so, with both prices, and does not list the node as staying.
func TestPlanScaleDownShowsAReplacement(t *testing.T) {
	input := replaced
	out, err := runPlan(t, input, "--scale-down")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"REPLACED BY A CHEAPER NODE: 1", "m-1", "0.2000", "0.0500"} {
		if !strings.Contains(out, want) {
			t.Errorf("output does not contain %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "NODES THAT STAY") {
		t.Errorf("the replaced node is listed as staying:\n%s", out)
	}
}
