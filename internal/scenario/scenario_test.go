package scenario_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/clusterread"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/quantity"
	"github.com/berth-dev/berth/internal/scenario"
)

// TestLoadBoundsQuantitiesAsTheControllersCacheDoes: apimachinery reads
// "e999999999" as zero with that exponent, and reading its millicores
// took 1.4 s, on every read of the node or pod by the plan. Load
// bounds what it reads as the controller's cache does, so berth plan
// reads zero at once, as the controller would.
func TestLoadBoundsQuantitiesAsTheControllersCacheDoes(t *testing.T) {
	s, err := scenario.Load(strings.NewReader(`apiVersion: v1
kind: Node
metadata: {name: n}
status: {allocatable: {cpu: "e999999999", memory: 4Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: p}
spec: {containers: [{name: c, image: i, resources: {requests: {cpu: "500m", memory: "e999999999"}}}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	for what, r := range map[string]struct {
		name corev1.ResourceName
		list corev1.ResourceList
	}{
		"the node's allocatable": {corev1.ResourceCPU, s.Nodes[0].Status.Allocatable},
		"the pod's request":      {corev1.ResourceMemory, s.Pods[0].Spec.Containers[0].Resources.Requests},
	} {
		v := r.list[r.name]
		if !quantity.InRange(r.name, v) || !v.IsZero() {
			t.Errorf("%s %s: %s, scale %d; want a zero cheap to read", what, r.name, v.String(), v.AsDec().Scale())
		}
	}
	if cpu := s.Pods[0].Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; cpu.MilliValue() != 500 {
		t.Errorf("the pod's cpu %s, want 500m as written", cpu.String())
	}
}

// TestScaleDownInputHasThePodsThatWait: `berth plan --scale-down` sorts a
// dump's pods as the controller does: on a node, nominated to one, and
// waiting for one (the scheduler found none for it, or has not tried it
// and found none for another pod of its ReplicaSet; a pod written by
// hand, without status, waits too). A replacement is planned with the
// pods that wait, so without them the plan would show replacements the
// controller does not make.
func TestScaleDownInputHasThePodsThatWait(t *testing.T) {
	pod := func(name, owner, extra string) string {
		meta := "{name: " + name + ", namespace: default"
		if owner != "" {
			meta += ", ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: " + owner + ", uid: uid-" + owner + ", controller: true}]"
		}
		return "apiVersion: v1\nkind: Pod\nmetadata: " + meta + "}\n" +
			"spec: {" + extra + "containers: [{name: c, image: i, resources: {requests: {cpu: 100m}}}]}\n"
	}
	marked := "status: {phase: Pending, conditions: [{type: PodScheduled, status: \"False\", reason: Unschedulable}]}\n"
	tried := "status: {phase: Pending}\n"
	s, err := scenario.Load(strings.NewReader(strings.Join([]string{
		pod("bound", "", "nodeName: n, ") + "status: {phase: Running}\n",
		pod("nominated", "web", "") + "status: {phase: Pending, nominatedNodeName: n, conditions: [{type: PodScheduled, status: \"False\", reason: Unschedulable}]}\n",
		pod("marked", "web", "") + marked,
		pod("untried-web", "web", "") + tried,
		pod("untried-other", "other", "") + tried,
		pod("by-hand", "", ""),
	}, "---\n")))
	if err != nil {
		t.Fatal(err)
	}
	in, err := s.ScaleDownInput(time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	names := func(pods []*corev1.Pod) []string {
		var out []string
		for _, p := range pods {
			out = append(out, p.Name)
		}
		return out
	}
	got := [][]string{names(in.Pods), names(in.Nominated), names(in.Pending)}
	want := [][]string{{"bound"}, {"nominated"}, {"marked", "untried-web", "by-hand"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("bound, nominated, waiting (-want +got):\n%s", diff)
	}
}

// TestAllHeadroomsTogetherKeepTheControllersCap: six Headrooms of 10,000
// units each ask for 60,000; berth plan, as the controller, plans at most
// clusterread.DefaultMaxUnits of them, shared fairly (the last ones are
// not starved).
func TestAllHeadroomsTogetherKeepTheControllersCap(t *testing.T) {
	var docs []string
	for i := range 6 {
		docs = append(docs, fmt.Sprintf("apiVersion: berth.dev/v1alpha1\nkind: Headroom\nmetadata: {name: h%d}\nspec: {units: {count: 10000, resources: {cpu: 10m}}}\n", i))
	}
	docs = append(docs, "apiVersion: berth.dev/v1alpha1\nkind: NodeGroup\nmetadata: {name: general}\nspec: {minSize: 0, maxSize: 10, "+
		"provider: {kwok: {}}, instanceTypes: [{name: m-64, capacity: {cpu: \"64\", memory: 256Gi}, offerings: [{zone: a, capacityType: on-demand, pricePerHour: \"1\"}]}]}\n")
	s, err := scenario.Load(strings.NewReader(strings.Join(docs, "---\n")))
	if err != nil {
		t.Fatal(err)
	}
	in, err := s.Input(time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	per := map[string]int{}
	for _, p := range in.Pending {
		per[p.Labels[v1alpha1.LabelHeadroom]]++
	}
	if len(in.Pending) != clusterread.DefaultMaxUnits || per["h5"] == 0 {
		t.Errorf("%d units planned (%v per Headroom), want %d shared by all six", len(in.Pending), per, clusterread.DefaultMaxUnits)
	}
}

// TestNegativeQuantitiesAreRefusedAsTheAPIServerRefusesThem: a pod that
// requests -100 cpu would make room out of nothing on its node; a node of
// negative capacity would hold nothing. Both are refused at load, naming
// the document and the field.
func TestNegativeQuantitiesAreRefusedAsTheAPIServerRefusesThem(t *testing.T) {
	for name, tc := range map[string]struct{ doc, want string }{
		"a negative request": {"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {nodeName: n, containers: [{name: c, image: i, resources: {requests: {cpu: \"-100\"}}}]}\n",
			`document 1 (Pod "p"): spec.containers[c].resources.requests.cpu is -100: quantities must not be negative`},
		"a negative overhead": {"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {overhead: {memory: -1Gi}, containers: [{name: c, image: i}]}\n",
			"spec.overhead.memory is -1Gi"},
		"a negative allocatable": {"apiVersion: v1\nkind: Node\nmetadata: {name: node-1}\nstatus: {allocatable: {cpu: \"-2\"}}\n",
			`document 1 (Node "node-1"): status.allocatable.cpu is -2`},
		"a negative default request": {"apiVersion: v1\nkind: LimitRange\nmetadata: {name: d}\nspec: {limits: [{type: Container, defaultRequest: {cpu: -1}}]}\n",
			`document 1 (LimitRange "d"): spec.limits[0].defaultRequest.cpu is -1`},
		"a negative pod-level limit (defaulted into its request)": {"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {resources: {limits: {cpu: \"-6\"}}, containers: [{name: c, image: i}]}\n",
			`document 1 (Pod "p"): spec.resources.limits.cpu is -6`},
		"a DaemonSet's negative request": {"apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: agent}\nspec: {selector: {matchLabels: {a: b}}, template: {metadata: {labels: {a: b}}, " +
			"spec: {containers: [{name: c, image: i, resources: {requests: {cpu: \"-6\"}}}]}}}\n",
			`document 1 (DaemonSet "agent"): spec.template.spec.containers[c].resources.requests.cpu is -6`},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := scenario.Load(strings.NewReader(tc.doc)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestAnUnknownFieldIsNamed: a pod whose node selection is misspelt
// (nodeSelecter) was planned as if it had none, into any zone, and
// silently. The field is read past (it may be one of a newer Kubernetes
// than this berth, in a cluster's dump), and the document is named with
// it, for berth plan to warn.
func TestAnUnknownFieldIsNamed(t *testing.T) {
	doc := "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {nodeSelecter: {zone: zone-b}, containers: [{name: c, image: i}]}\n---\n" +
		"apiVersion: v1\nkind: Pod\nmetadata: {name: q}\nspec: {containers: [{name: c, image: i}]}\n"
	s, err := scenario.Load(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Pods) != 2 || len(s.UnknownFields) != 1 || !strings.Contains(s.UnknownFields[0], `document 1 (Pod "p"): unknown field "nodeSelecter"`) {
		t.Fatalf("pods %d, unknown fields %q; want both pods read, and document 1 named with its unknown field", len(s.Pods), s.UnknownFields)
	}
}

// TestADocumentThatDoesNotDecodeIsRefused: a namespaced object whose
// spec is not an object is refused with its document named, as the first
// of its kind or after another (it once crashed berth plan).
func TestADocumentThatDoesNotDecodeIsRefused(t *testing.T) {
	for _, kind := range []string{"resource.k8s.io/v1 ResourceClaim", "resource.k8s.io/v1 ResourceClaimTemplate",
		"scheduling.k8s.io/v1alpha2 PodGroup", "v1 LimitRange", "v1 Pod"} {
		apiVersion, k, _ := strings.Cut(kind, " ")
		bad := "apiVersion: " + apiVersion + "\nkind: " + k + "\nmetadata: {name: bad}\nspec: 5\n"
		for _, doc := range []string{bad, "apiVersion: " + apiVersion + "\nkind: " + k + "\nmetadata: {name: good}\n---\n" + bad} {
			if _, err := scenario.Load(strings.NewReader(doc)); err == nil || !strings.Contains(err.Error(), k+` "bad"`) {
				t.Errorf("%s: Load: %v, want an error naming the document", kind, err)
			}
		}
	}
}

// TestAContainerThatOnlyLimitsRequestsItsLimits: as the API server
// defaults a Pod, a container with limits alone requests them (and one
// that sets both keeps its requests). A DaemonSet's template is left as
// the API server leaves it.
func TestAContainerThatOnlyLimitsRequestsItsLimits(t *testing.T) {
	s, err := scenario.Load(strings.NewReader(`apiVersion: v1
kind: Pod
metadata: {name: limited}
spec:
  initContainers: [{name: init, image: i, resources: {limits: {cpu: "2"}}}]
  containers:
  - {name: a, image: i, resources: {limits: {cpu: "3", memory: 1Gi}}}
  - {name: b, image: i, resources: {requests: {cpu: 100m}, limits: {cpu: "1"}}}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: kube-system}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec: {containers: [{name: a, image: i, resources: {limits: {cpu: 500m}}}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	p := s.Pods[0].Spec
	got := []string{p.InitContainers[0].Resources.Requests.Cpu().String(), p.Containers[0].Resources.Requests.Cpu().String(),
		p.Containers[0].Resources.Requests.Memory().String(), p.Containers[1].Resources.Requests.Cpu().String(),
		s.DaemonSets[0].Spec.Template.Spec.Containers[0].Resources.Requests.Cpu().String()}
	if diff := cmp.Diff([]string{"2", "3", "1Gi", "100m", "0"}, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

// TestAPodNominatedToANodeHoldsItsRoomThere: as the controller plans it,
// a pending pod that preemption (or berth) nominated to an existing node
// is held there, not planned a node of its own; a nomination to a node
// the input does not have is stale, and the pod waits for a node.
func TestAPodNominatedToANodeHoldsItsRoomThere(t *testing.T) {
	s, err := scenario.Load(strings.NewReader(`apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "2", memory: 4Gi, pods: "110"}, conditions: [{type: Ready, status: "True"}]}
---
apiVersion: v1
kind: Pod
metadata: {name: preemptor}
spec: {priority: 1000, containers: [{name: c, image: i, resources: {requests: {cpu: "1"}}}]}
status: {phase: Pending, nominatedNodeName: n1, conditions: [{type: PodScheduled, status: "False", reason: Unschedulable}]}
---
apiVersion: v1
kind: Pod
metadata: {name: stale}
spec: {containers: [{name: c, image: i, resources: {requests: {cpu: "1"}}}]}
status: {phase: Pending, nominatedNodeName: gone, conditions: [{type: PodScheduled, status: "False", reason: Unschedulable}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	in, err := s.Input(time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Held) != 1 || in.Held[0].Name != "preemptor" || in.Held[0].Spec.NodeName != "n1" {
		t.Errorf("held %v, want preemptor held on n1", in.Held)
	}
	if len(in.Pending) != 1 || in.Pending[0].Name != "stale" {
		t.Errorf("pending %v, want only stale", in.Pending)
	}
}

// TestADaemonSetHoldsWhatItsPodsRequest: in a dump of a cluster, the
// DaemonSet's template asks for nothing and its pod (controlled by it, of
// its template's generation) for 1500m, as a LimitRange gave it. A
// pending pod of 1 cpu is planned an m-4 (0.16/h), as the controller
// plans it: an m-2 (0.10/h) has 500m left beside the DaemonSet's pod.
// Written by hand without a uid, the DaemonSet is read from its template,
// and the pod gets an m-2; with a LimitRange of kube-system that gives a
// container 1500m, or a RuntimeClass the template names with an
// overhead of 1500m, the template is read as admission will complete it,
// and the pod gets an m-4 again.
func TestADaemonSetHoldsWhatItsPodsRequest(t *testing.T) {
	const cluster = `apiVersion: berth.dev/v1alpha1
kind: NodeGroup
metadata: {name: general}
spec:
  minSize: 0
  maxSize: 10
  provider: {kwok: {}}
  instanceTypes:
  - {name: m-2, capacity: {cpu: "2", memory: 8Gi}, offerings: [{zone: a, capacityType: on-demand, pricePerHour: "0.10"}]}
  - {name: m-4, capacity: {cpu: "4", memory: 16Gi}, offerings: [{zone: a, capacityType: on-demand, pricePerHour: "0.16"}]}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: kube-system, UID_LINE annotations: {deprecated.daemonset.template.generation: "2"}}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec: {containers: [{name: a, image: i}]}
---
apiVersion: v1
kind: Node
metadata: {name: old, labels: {berth.dev/node-group: other}}
spec: {unschedulable: true}
status: {allocatable: {cpu: "2", memory: 8Gi, pods: "110"}, conditions: [{type: Ready, status: "True"}]}
---
apiVersion: v1
kind: Pod
metadata:
  name: agent-x
  namespace: kube-system
  labels: {app: agent, pod-template-generation: "2"}
  ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: agent, uid: ds-agent, controller: true}]
spec: {nodeName: old, containers: [{name: a, image: i, resources: {requests: {cpu: 1500m}}}]}
status: {phase: Running}
---
apiVersion: v1
kind: Pod
metadata: {name: web}
spec: {containers: [{name: c, image: i, resources: {requests: {cpu: "1"}}}]}
`
	const limitRange = `---
apiVersion: v1
kind: LimitRange
metadata: {name: defaults, namespace: kube-system}
spec: {limits: [{type: Container, defaultRequest: {cpu: 1500m}}]}
`
	// A RuntimeClass whose overhead is 1500m, named by the template.
	const runtimeClass = `---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: kata}
handler: kata
overhead: {podFixed: {cpu: 1500m}}
`
	for _, tc := range []struct{ uid, more, want string }{{"uid: ds-agent,", "", "m-4"}, {"", "", "m-2"}, {"", limitRange, "m-4"}, {"", runtimeClass, "m-4"}} {
		doc := strings.Replace(cluster, "UID_LINE", tc.uid, 1) + tc.more
		if tc.more == runtimeClass {
			doc = strings.Replace(doc, "spec: {containers: [{name: a, image: i}]}", "spec: {runtimeClassName: kata, containers: [{name: a, image: i}]}", 1)
		}
		s, err := scenario.Load(strings.NewReader(doc))
		if err != nil {
			t.Fatal(err)
		}
		in, err := s.Input(time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		plan, err := scaleup.Run(in)
		if err != nil {
			t.Fatal(err)
		}
		if len(plan.NewNodes) != 1 || plan.NewNodes[0].InstanceType != tc.want {
			t.Errorf("DaemonSet with %q%s: planned %+v, want one %s", tc.uid, tc.more, plan.NewNodes, tc.want)
		}
	}
}
