package explain

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/cloudprovider/clusterapi"
	"github.com/berth-dev/berth/internal/cloudprovider/kwok"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/planner/scaledown/drain"
	"github.com/berth-dev/berth/internal/podutil"
	"github.com/berth-dev/berth/internal/quantity"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/capitest"
	"github.com/berth-dev/berth/internal/testing/expect"
	"github.com/berth-dev/berth/internal/testing/testenv"
)

var env *testenv.Env

// TestMain starts the control plane for the tests that read a live
// cluster; with -short only the tests of the pure part run.
func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	testenv.Main(m, &env)
}

// live returns a namespace for the test, or skips it under -short.
func live(t *testing.T, name string) string {
	t.Helper()
	if env == nil {
		t.Skip("needs the control plane (runs without -short)")
	}
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	return name
}

// create creates obj and deletes it when the test ends.
func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.Client.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), obj, client.GracePeriodSeconds(0)) })
}

// run executes `berth explain ARGS` through cobra against the control
// plane, with --kubeconfig and --context as a user passes them.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := NewCommand()
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	var out bytes.Buffer
	cmd.SetOut(&out)
	// The connection flags come first, so that a case's own flags win.
	cmd.SetArgs(append([]string{args[0], "--kubeconfig", env.Cluster.KubeconfigPath(), "--context", "berth-dev"}, args[1:]...))
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// runJSON runs the command with -o json and decodes its answer.
func runJSON(t *testing.T, args ...string) Explanation {
	t.Helper()
	out, err := run(t, append(args, "-o", "json")...)
	if err != nil {
		t.Fatal(err)
	}
	var e Explanation
	if err := json.Unmarshal([]byte(out), &e); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	return e
}

// launchNode creates a Ready, initialized KWOK node of the group, as berth
// launches one, and removes it when the test ends.
func launchNode(t *testing.T, ng *v1alpha1.NodeGroup) string { return launch(t, ng, "") }

// launch is launchNode, of a standby node for the Headroom standbyFor
// when it is set (Ready, not suspended: scale-down would take it for an
// empty node).
func launch(t *testing.T, ng *v1alpha1.NodeGroup, standbyFor string) string {
	t.Helper()
	cloud := kwok.New(env.Client, clock.RealClock{})
	inst, err := cloud.Create(context.Background(), cloudprovider.CreateRequest{NodeGroup: ng, StandbyFor: standbyFor,
		Offering: cloudprovider.Offering{InstanceType: "m-2", Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeOnDemand}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: inst.NodeName}})
	})
	node := &corev1.Node{}
	expect.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string, error) {
		err := env.Client.Get(ctx, client.ObjectKey{Name: inst.NodeName}, node)
		return err == nil && nodeutil.Ready(node), "node " + inst.NodeName + " not Ready yet", err
	})
	patch := client.MergeFrom(node.DeepCopy())
	node.Labels[v1alpha1.LabelInitialized] = "true" // what the launch timeout controller writes once it is Ready
	if err := env.Client.Patch(context.Background(), node, patch); err != nil {
		t.Fatal(err)
	}
	return inst.NodeName
}

func nodeGroup(t *testing.T, name string) *v1alpha1.NodeGroup {
	t.Helper()
	ng := b.NodeGroup(name, b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")))
	create(t, ng)
	return ng
}

// awaitUnschedulable waits until the scheduler found no node for the pod.
func awaitUnschedulable(t *testing.T, p *corev1.Pod) {
	t.Helper()
	expect.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), p)
		return err == nil && podutil.FailedToSchedule(p), "the scheduler has not tried the pod yet", err
	})
}

func TestExplainAPendingPodThatFitsAGroupNamesTheNodeToLaunch(t *testing.T) {
	ns := live(t, "ex-fits")
	nodeGroup(t, "ex-fits")
	p := b.Pod("web", b.Namespace(ns), b.NoUID(), b.CPU("500m"), b.NodeSelector(v1alpha1.LabelNodeGroup, "ex-fits"))
	create(t, p)
	awaitUnschedulable(t, p)
	e := runJSON(t, "pod", ns+"/web")
	if e.Decision != DecisionLaunchNode || len(e.Launch) != 1 || e.Launch[0].NodeGroup != "ex-fits" || e.Launch[0].InstanceType != "m-2" {
		t.Fatalf("explanation %+v, want a m-2 node of ex-fits launched", e)
	}
	out, err := run(t, "pod", "web", "-n", ns)
	if err != nil || !strings.Contains(out, "Decision: LaunchNode (TriggeredScaleUp)") || !strings.Contains(out, "instance type m-2") {
		t.Errorf("text output (error %v):\n%s", err, out)
	}
}

func TestExplainAPodNoGroupCanHostSaysWhyPerGroup(t *testing.T) {
	ns := live(t, "ex-stuck")
	nodeGroup(t, "ex-stuck")
	p := b.Pod("stuck", b.Namespace(ns), b.NoUID(), b.CPU("100m"), b.NodeSelector("disk", "nothing-has-it"))
	create(t, p)
	awaitUnschedulable(t, p)
	e := runJSON(t, "pod", ns+"/stuck")
	if e.Decision != DecisionNoNodeGroupFits || e.Reason != v1alpha1.EventReasonNotTriggerScaleUp {
		t.Fatalf("explanation %+v, want NoNodeGroupFits", e)
	}
	var verdict string
	for _, g := range e.NodeGroups {
		if g.NodeGroup == "ex-stuck" {
			verdict = g.Reason
		}
	}
	if !strings.Contains(verdict, "node affinity/selector") {
		t.Errorf("ex-stuck's verdict %q, want the selector named (all: %+v)", verdict, e.NodeGroups)
	}
	if !strings.Contains(strings.Join(e.Hints, "\n"), "spec.template.labels") {
		t.Errorf("hints %q, want the group's template labels named", e.Hints)
	}
}

func TestExplainANodeWithABarePodNamesTheRuleAndTheAnnotation(t *testing.T) {
	ns := live(t, "ex-bare")
	ng := nodeGroup(t, "ex-bare")
	node := launchNode(t, ng)
	create(t, b.Pod("bare", b.Namespace(ns), b.NoUID(), b.NodeName(node)))
	e := runJSON(t, "node", node)
	if e.Decision != DecisionKeep || e.Reason != string(drain.ReasonNotReplicated) || e.Pod != ns+"/bare" {
		t.Fatalf("explanation %+v, want the node kept by NotReplicated for %s/bare", e, ns)
	}
	out, err := run(t, "node", node, "-o", "text")
	if err != nil || !strings.Contains(out, `cluster-autoscaler.kubernetes.io/safe-to-evict: "true"`) {
		t.Errorf("text output (error %v), want the safe-to-evict hint:\n%s", err, out)
	}
}

func TestExplainADriftedNodeSaysDrifted(t *testing.T) {
	live(t, "ex-drift")
	ng := nodeGroup(t, "ex-drift")
	node := launchNode(t, ng)
	if e := runJSON(t, "node", node); e.Decision != DecisionRemove || e.Reason != string(v1alpha1.ReasonEmpty) {
		t.Fatalf("before the template changes: %+v, want the empty node removable", e)
	}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(ng), ng); err != nil {
		t.Fatal(err)
	}
	b.TemplateLabel("tier", "gold")(ng)
	if err := env.Client.Update(context.Background(), ng); err != nil {
		t.Fatal(err)
	}
	e := runJSON(t, "node", node)
	if e.Decision != DecisionDisrupt || e.Reason != string(v1alpha1.ReasonDrifted) || !strings.Contains(e.Message, "template") {
		t.Fatalf("explanation %+v, want the node disrupted as Drifted", e)
	}
}

func TestExplainRefusesWhatDoesNotExist(t *testing.T) {
	live(t, "ex-errors")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"a pod that does not exist", []string{"pod", "ex-errors/nope"}, "pod ex-errors/nope not found"},
		{"a node that does not exist", []string{"node", "nope"}, "node nope not found"},
		{"an output format that does not exist", []string{"node", "nope", "-o", "xml"}, "--output must be text, json or yaml"},
		{"a pod name with too many slashes", []string{"pod", "a/b/c"}, "want NAMESPACE/NAME"},
		{"a kubeconfig context that does not exist", []string{"node", "nope", "--context", "elsewhere"}, "loading kubeconfig"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := run(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// TestExplainReadsHugeRequestsBounded: the API server stores a pod whose
// cpu request is 1e3000000 (a million digits), and every sum or
// comparison of it with an ordinary quantity writes out those digits (a
// good part of a second each). berth explain reads the API server
// without the controller's cache; it reads such a pod bounded as the
// cache does, to what kube-scheduler reads from it (MilliValue keeps the
// low 64 bits of 10^3000003: zero), and so answers what the controller
// would: a node of the group, where the scheduler will bind the pod.
func TestExplainReadsHugeRequestsBounded(t *testing.T) {
	ns := live(t, "ex-huge")
	nodeGroup(t, "ex-huge")
	huge := resource.MustParse("1e3000000")
	if huge.MilliValue() != 0 {
		t.Fatalf("kube-scheduler reads %d millicores from 1e3000000, the test expects 0", huge.MilliValue())
	}
	p := b.Pod("huge", b.Namespace(ns), b.NoUID(), b.CPU("100m"), b.NodeSelector(v1alpha1.LabelNodeGroup, "ex-huge"))
	p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "init", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: huge}}}}
	create(t, p)

	o := &options{kubeconfig: env.Cluster.KubeconfigPath(), context: "berth-dev"}
	c, err := o.client()
	if err != nil {
		t.Fatal(err)
	}
	read := &corev1.Pod{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(p), read); err != nil {
		t.Fatal(err)
	}
	if q := read.Spec.InitContainers[0].Resources.Requests[corev1.ResourceCPU]; !quantity.InRange(corev1.ResourceCPU, q) {
		t.Errorf("berth explain reads the init container's cpu as stored (%d characters), not bounded", len(q.String()))
	}
	if e := runJSON(t, "pod", ns+"/huge"); e.Decision != DecisionLaunchNode || len(e.Launch) != 1 || e.Launch[0].NodeGroup != "ex-huge" {
		t.Errorf("explanation %+v, want a node of ex-huge launched, as for a pod kube-scheduler reads as requesting 100m", e)
	}
}

// TestExplainAStandbyNodeNamesItsHeadroom: a standby node is kept by the
// standby controller, whatever scale-down would say of an empty node.
func TestExplainAStandbyNodeNamesItsHeadroom(t *testing.T) {
	live(t, "ex-standby")
	node := launch(t, nodeGroup(t, "ex-standby"), "web")
	e := runJSON(t, "node", node)
	if e.Decision != DecisionKeep || e.Reason != ReasonStandby || !strings.Contains(e.Message, "Headroom web") {
		t.Fatalf("explanation %+v, want Keep/%s naming Headroom web", e, ReasonStandby)
	}
}

// TestExplainReadsAClusterAPIGroupsObjectWithTheControllersFlag: a
// clusterAPI group whose spec says 1 cpu, and whose MachineDeployment's
// annotations say 4 cpu and a label (Cluster Autoscaler's scale-from-zero
// annotations), as the controller reads them with --clusterapi. A pod of
// 3 cpu selecting that label fits the group only as the annotations
// describe it: explain with --clusterapi names the node to launch, as the
// controller launches it; without the flag it plans the spec, and says
// no group fits.
func TestExplainReadsAClusterAPIGroupsObjectWithTheControllersFlag(t *testing.T) {
	ns := live(t, "ex-capi")
	capitest.InstallCRDs(t, env.Client)
	create(t, capitest.MachineDeployment(ns, "ex-capi-md", 0, map[string]string{
		clusterapi.AnnotationMinSize: "0", clusterapi.AnnotationMaxSize: "3",
		clusterapi.AnnotationCPU: "4", clusterapi.AnnotationMemory: "8Gi", clusterapi.AnnotationLabels: "ex.berth.dev/capi=true",
	}))
	ng := b.NodeGroup("ex-capi", b.Size(0, 10), b.InstanceType("capi-small", "1", "1Gi", b.OnDemand("zone-a", "0.20")))
	ng.Spec.Provider = v1alpha1.Provider{ClusterAPI: &v1alpha1.ClusterAPIProvider{Namespace: ns, Name: "ex-capi-md"}}
	create(t, ng)
	p := b.Pod("big", b.Namespace(ns), b.NoUID(), b.CPU("3"), b.NodeSelector("ex.berth.dev/capi", "true"))
	create(t, p)
	awaitUnschedulable(t, p)

	if e := runJSON(t, "pod", ns+"/big", "--clusterapi"); e.Decision != DecisionLaunchNode || len(e.Launch) != 1 || e.Launch[0].NodeGroup != "ex-capi" {
		t.Errorf("with --clusterapi: %+v, want a node of ex-capi launched (as its MachineDeployment's annotations describe it)", e)
	}
	if e := runJSON(t, "pod", ns+"/big"); e.Decision != DecisionNoNodeGroupFits {
		t.Errorf("without --clusterapi: decision %s, want %s (the group's spec: 1 cpu, no such label)", e.Decision, DecisionNoNodeGroupFits)
	}
}

// TestExplainPodCountsAClusterAPIMachineStillBooting: the group's
// MachineDeployment has a Machine booting (no Node yet) with room for the
// pending pod. The controller counts it as a launching node and waits for
// it; with --clusterapi, explain says the pod fits that node instead of
// saying a node would be launched.
func TestExplainPodCountsAClusterAPIMachineStillBooting(t *testing.T) {
	ns := live(t, "ex-capi-boot")
	capitest.InstallCRDs(t, env.Client)
	create(t, capitest.MachineDeployment(ns, "ex-boot-md", 1, map[string]string{
		clusterapi.AnnotationMinSize: "0", clusterapi.AnnotationMaxSize: "3",
		clusterapi.AnnotationCPU: "4", clusterapi.AnnotationMemory: "8Gi", clusterapi.AnnotationLabels: "ex.berth.dev/boot=true",
	}))
	ng := b.NodeGroup("ex-capi-boot", b.Size(0, 10), b.InstanceType("capi-small", "1", "1Gi", b.OnDemand("zone-a", "0.20")))
	ng.Spec.Provider = v1alpha1.Provider{ClusterAPI: &v1alpha1.ClusterAPIProvider{Namespace: ns, Name: "ex-boot-md"}}
	create(t, ng)
	create(t, capitest.Machine(ns, "ex-boot-md", "ex-boot-md-0"))
	p := b.Pod("big", b.Namespace(ns), b.NoUID(), b.CPU("3"), b.NodeSelector("ex.berth.dev/boot", "true"))
	create(t, p)
	awaitUnschedulable(t, p)

	e := runJSON(t, "pod", ns+"/big", "--clusterapi")
	if e.Decision != DecisionFitsExistingNode || e.Node != "ex-boot-md-0" || !strings.Contains(e.Message, "being launched") {
		t.Errorf("explain pod --clusterapi: %+v; want the pod to fit the Machine still booting (ex-boot-md-0), as the controller counts it", e)
	}
}

// TestExplainNodeHoldsAClusterAPIGroupItCouldNotRead: the Cluster API
// object of a group is gone. With --clusterapi, explain holds the group's
// removals, as the controller does when its provider cannot refresh the
// group (planned from its spec, the group could be taken below its
// object's bounds); the empty node is kept, and a note says why.
func TestExplainNodeHoldsAClusterAPIGroupItCouldNotRead(t *testing.T) {
	live(t, "ex-capi-gone")
	capitest.InstallCRDs(t, env.Client)
	ng := b.NodeGroup("ex-capi-gone", b.Size(0, 10), b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")))
	ng.Spec.Provider = v1alpha1.Provider{ClusterAPI: &v1alpha1.ClusterAPIProvider{Namespace: "ex-capi-gone", Name: "no-such-md"}}
	create(t, ng)
	// An adopted Machine's node (the KWOK provider launches for kwok
	// groups only): the group's labels and owner mark, Ready.
	n := b.Node("ex-capi-gone-0", "2", "8Gi")
	n.Labels[v1alpha1.LabelNodeGroup], n.Labels[v1alpha1.LabelInitialized] = ng.Name, "true"
	n.Labels[corev1.LabelInstanceTypeStable], n.Labels[corev1.LabelTopologyZone] = "m-2", "zone-a"
	n.Labels[v1alpha1.LabelCapacityType] = string(v1alpha1.CapacityTypeOnDemand)
	n.Annotations = map[string]string{v1alpha1.AnnotationLaunchedBy: string(ng.UID), v1alpha1.AnnotationKWOKNode: v1alpha1.AnnotationKWOKNodeValue}
	create(t, n)
	expect.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(n), n)
		return err == nil && nodeutil.Ready(n), "node not Ready yet", err
	})
	node := n.Name

	e := runJSON(t, "node", node, "--clusterapi")
	if e.Decision != DecisionKeep || !strings.Contains(strings.Join(e.Notes, "\n"), "no removal starts in it") {
		t.Errorf("with --clusterapi: decision %s, reason %s, notes %q; want the node kept, its group held (its object cannot be read)", e.Decision, e.Reason, e.Notes)
	}
	if e := runJSON(t, "node", node); e.Decision != DecisionRemove || !strings.Contains(strings.Join(e.Notes, "\n"), "--clusterapi") {
		t.Errorf("without --clusterapi: decision %s, notes %q; want the empty node removable from the group's spec, and a note naming the flag", e.Decision, e.Notes)
	}
}
