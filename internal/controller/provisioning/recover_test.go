package provisioning_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/cloudprovider/kwok"
	"github.com/berth-dev/berth/internal/controller/provisioning"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/podutil"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
)

// unlisted is a cloud that cannot list one node group's instances (a
// Cluster API group while the controller runs without --clusterapi, or
// its management cluster down) while broken; it launches with KWOK.
type unlisted struct {
	cloudprovider.CloudProvider
	group  string
	broken bool
}

func (c *unlisted) List(ctx context.Context, group string) ([]*cloudprovider.Instance, error) {
	if c.broken && group == c.group {
		return nil, errors.New("no kind is registered for the type v1beta2.MachineDeployment")
	}
	return c.CloudProvider.List(ctx, group)
}

// TestAGroupWhoseInstancesCannotBeListedStopsNoOtherGroup: when the
// provisioner starts leading, the provider cannot list the instances of
// the cheaper of two groups a pod may use. The round does not fail: it
// launches in the other group, leaves the unlisted one out (an instance
// launched there before could be launched again), and says why on it;
// once the provider lists it again, the next pod gets the cheaper group.
func TestAGroupWhoseInstancesCannotBeListedStopsNoOtherGroup(t *testing.T) {
	f := setup(t, b.NodeGroup("prov-listed", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.20")), b.TemplateLabel("pool", "prov-list")))
	cheap := b.NodeGroup("prov-unlisted", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")), b.TemplateLabel("pool", "prov-list"))
	f.alsoGroup(cheap)
	cloud := &unlisted{CloudProvider: kwok.New(env.Client, clock.RealClock{}), group: cheap.Name, broken: true}
	f.useCloud(cloud)
	launch := func(name string) *cloudprovider.Instance { return f.launchFor(name, "prov-list") }
	if got := launch("first"); got.NodeGroup != "prov-listed" {
		t.Errorf("launched in %s while the cheaper group's instances could not be listed, want prov-listed", got.NodeGroup)
	}
	said := false
	for _, e := range f.events.For(cheap.Name) {
		said = said || (e.Reason == provisioning.ReasonProviderListFailed && e.Type == corev1.EventTypeWarning)
	}
	if !said {
		t.Errorf("no %s event on %s: %+v", provisioning.ReasonProviderListFailed, cheap.Name, f.events.For(cheap.Name))
	}
	cloud.broken = false
	if got := launch("second"); got.NodeGroup != cheap.Name {
		t.Errorf("launched in %s once the provider lists the cheaper group again, want %s", got.NodeGroup, cheap.Name)
	}
}

// panicking is a cloud whose launches panic (a provider's bug).
type panicking struct{ cloudprovider.CloudProvider }

func (panicking) Create(context.Context, cloudprovider.CreateRequest) (*cloudprovider.Instance, error) {
	panic("provider bug")
}

// TestAPanickingLaunchFailsTheRoundNotTheProcess: a provider's panic in
// one of the round's parallel launches is the round's error (the
// controller retries it); the process goes on.
func TestAPanickingLaunchFailsTheRoundNotTheProcess(t *testing.T) {
	f := setup(t, b.NodeGroup("prov-panic", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10"))))
	f.useCloud(panicking{kwok.New(env.Client, clock.RealClock{})})
	f.pods(1, b.CPU("1"))
	_, err := f.prov.RunOnce(context.Background())
	if err == nil || !strings.Contains(err.Error(), "panicked: provider bug") {
		t.Fatalf("round error %v, want the launch's panic", err)
	}
}

// booting is a cloud whose provider reports one instance of a group as
// launching, without a Node, since a given time (a Cluster API Machine).
type booting struct {
	cloudprovider.CloudProvider
	group      string
	since      time.Time
	providerID string
}

func (c *booting) Pending(_ context.Context, ng *v1alpha1.NodeGroup) ([]*cloudprovider.Instance, error) {
	if ng.Name != c.group {
		return nil, nil
	}
	return []*cloudprovider.Instance{{NodeName: c.group + "-machine-0", NodeGroup: c.group, CreatedAt: c.since, ProviderID: c.providerID,
		Offering: cloudprovider.Offering{InstanceType: "m-2", Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeOnDemand}}}, nil
}

// TestAMachineWhoseNodeNeverRegistersStopsCountingAsCapacity: a machine
// launching for a minute counts as a booting node, and the pod that fits
// on it gets no other node; so does one waiting for its infrastructure
// for 20 minutes (the provider gives that up); one that has its
// infrastructure and launches for longer than the max provision time (15
// minutes here) without its Node registering (its kubelet never joined)
// no longer counts, and the pod gets a node, not in the offering whose
// machine hung: that one is avoided as a failed launch, once for the
// machine however many rounds see it.
func TestAMachineWhoseNodeNeverRegistersStopsCountingAsCapacity(t *testing.T) {
	f := setup(t, b.NodeGroup("prov-stuck", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10"), b.OnDemand("zone-b", "0.12"))))
	cloud := &booting{CloudProvider: kwok.New(env.Client, clock.RealClock{}), group: f.group, since: time.Now().Add(-time.Minute), providerID: "test:///m-0"}
	f.useCloud(cloud)
	f.pods(1, b.CPU("1"))
	if res := f.run(); len(res.Launched) != 0 {
		t.Fatalf("launched %d nodes while a machine boots that holds the pod, want 0", len(res.Launched))
	}
	cloud.since, cloud.providerID = time.Now().Add(-20*time.Minute), ""
	if res := f.run(); len(res.Launched) != 0 {
		t.Fatalf("launched %d nodes while a machine waits for its infrastructure, want 0 (the provider gives it up)", len(res.Launched))
	}
	cloud.providerID = "test:///m-0"
	res := f.run()
	if len(res.Launched) != 1 || res.Launched[0].Offering.Zone != "zone-b" {
		t.Errorf("launched %+v while the only machine (zone-a) has not registered its node for 20 minutes, want one node in zone-b", res.Launched)
	}
	f.run()
	fails := f.offerings.Failures(f.group)
	if len(fails) != 1 || fails[0].Offering.Zone != "zone-a" || fails[0].Streak != 1 {
		t.Errorf("failures of the group after two rounds %+v, want zone-a's once", fails)
	}
}

// TestAMachineWhoseNodeNeverRegisteredStillCountsAgainstTheLimits: a group
// limited to 2 cpu has one 2-cpu machine whose Node never registered: it
// is still there, and billed. The pod it was launched for gets no second
// machine in the group (two would run past the limit).
func TestAMachineWhoseNodeNeverRegisteredStillCountsAgainstTheLimits(t *testing.T) {
	f := setup(t, b.NodeGroup("prov-stuck-limit", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10"), b.OnDemand("zone-b", "0.12")),
		b.GroupLimits(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")})))
	f.useCloud(&booting{CloudProvider: kwok.New(env.Client, clock.RealClock{}), group: f.group, since: time.Now().Add(-20 * time.Minute), providerID: "test:///m-0"})
	f.pods(1, b.CPU("1"))
	if res := f.run(); len(res.Launched) != 0 {
		t.Errorf("launched %+v beside the 2-cpu machine that never registered, in a group limited to 2 cpu, want nothing", res.Launched)
	}
}

// TestAMachineWhoseNodeRegisteredLateIsNoFailedLaunch: a machine the
// provider still lists as launching 20 minutes after its launch (its
// record not updated yet) whose Node has registered under the machine's
// name is a node like any other: its offering is not avoided as a launch
// that hung.
func TestAMachineWhoseNodeRegisteredLateIsNoFailedLaunch(t *testing.T) {
	registeredLate(t, "prov-late", "-machine-0", "")
}

// TestAMachineWhoseNodeRegisteredLateUnderTheCloudsNameIsNoFailedLaunch:
// so is one whose Node registered under the name the cloud gave it,
// with the machine's provider ID.
func TestAMachineWhoseNodeRegisteredLateUnderTheCloudsNameIsNoFailedLaunch(t *testing.T) {
	registeredLate(t, "prov-late-named", "-ip-10-0-3-17", "test:///m-0")
}

// TestAMachineWhoseNodeRegisteredLateWithOtherSlashesIsNoFailedLaunch:
// so is one whose Node's provider ID differs from the machine's only in
// the slashes after the scheme (the kubelet's "test://m-0", Cluster
// API's "test:///m-0"), which Cluster API takes for the same machine.
func TestAMachineWhoseNodeRegisteredLateWithOtherSlashesIsNoFailedLaunch(t *testing.T) {
	registeredLate(t, "prov-late-slash", "-ip-10-0-3-18", "test://m-0")
}

func registeredLate(t *testing.T, group, node, providerID string) {
	t.Helper()
	ng := b.NodeGroup(group, b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10"), b.OnDemand("zone-b", "0.12")))
	f := setup(t, ng)
	f.useCloud(&booting{CloudProvider: kwok.New(env.Client, clock.RealClock{}), group: f.group, since: time.Now().Add(-20 * time.Minute), providerID: "test:///m-0"})
	n := cloudprovider.NodeFor(ng, cloudprovider.Offering{InstanceType: "m-2", Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeOnDemand}, f.group+node)
	n.Spec.ProviderID = providerID
	if err := env.Client.Create(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	f.run()
	f.run()
	if fails := f.offerings.Failures(f.group); len(fails) != 0 {
		t.Errorf("failures of the group %+v after rounds that saw the machine's Node, want none", fails)
	}
}

// denying is a cloud whose launches in one group fail with an error of the
// API call itself (a webhook that denies nodes with a 500); it launches
// the others with KWOK.
type denying struct {
	cloudprovider.CloudProvider
	group string
}

func (c *denying) Create(ctx context.Context, req cloudprovider.CreateRequest) (*cloudprovider.Instance, error) {
	if req.NodeGroup.Name == c.group {
		return nil, apierrors.NewInternalError(errors.New(`failed calling webhook "nodes.example.com": connection refused`))
	}
	return c.CloudProvider.Create(ctx, req)
}

// TestATransientErrorThatPersistsIsTheOfferingsAfterAll: launches in the
// cheaper of two groups fail with a 500 every time. The first two rounds'
// (three launches each, in parallel, for three pods that need a node each)
// are taken for the API call's failure (the round is retried, the
// offering kept); in the third round in a row the failure is the
// offering's: it is avoided, the group is told, and the round launches in
// the other group.
func TestATransientErrorThatPersistsIsTheOfferingsAfterAll(t *testing.T) {
	f := setup(t, b.NodeGroup("prov-other", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.20")), b.TemplateLabel("pool", "prov-deny")))
	cheap := b.NodeGroup("prov-deny", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")), b.TemplateLabel("pool", "prov-deny"))
	f.alsoGroup(cheap)
	f.useCloud(&denying{CloudProvider: kwok.New(env.Client, clock.RealClock{}), group: cheap.Name})
	for i := range 3 {
		f.poolPod(fmt.Sprintf("denied-%d", i), "prov-deny", "1500m")
	}
	for i := range 2 {
		if _, err := f.prov.RunOnce(context.Background()); err == nil {
			t.Fatalf("round %d with a failed API call reported no error", i+1)
		}
		if u := f.offerings.Unavailable(); len(u) != 0 {
			t.Fatalf("round %d: unavailable offerings %v after %d transient errors, want none", i+1, u, i+1)
		}
	}
	res := f.run()
	if len(res.Launched) != 3 || res.Launched[0].NodeGroup != f.group {
		t.Errorf("third round launched %+v, want three nodes of %s", res.Launched, f.group)
	}
	if u := f.offerings.Unavailable(); len(u) != 1 || u[0].NodeGroup != cheap.Name {
		t.Errorf("unavailable offerings %v, want the offering of %s", u, cheap.Name)
	}
	told := false
	for _, e := range f.events.For(cheap.Name) {
		told = told || e.Reason == provisioning.ReasonLaunchFailed
	}
	if !told {
		t.Errorf("no %s event on %s", provisioning.ReasonLaunchFailed, cheap.Name)
	}
}

// TestABootingMachineKeepsRoomForItsDaemonSets: a machine of 2 cpu boots
// without a Node yet, and a DaemonSet of 1 cpu runs on the group's nodes.
// Two pending pods of 1 cpu: the machine holds one of them beside the
// DaemonSet's pod once it registers, not both, so the other gets a node.
func TestABootingMachineKeepsRoomForItsDaemonSets(t *testing.T) {
	f := setup(t, b.NodeGroup("prov-ds-room", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10"))))
	f.useCloud(&booting{CloudProvider: kwok.New(env.Client, clock.RealClock{}), group: f.group, since: time.Now().Add(-time.Minute), providerID: "test:///m-0"})
	labels := map[string]string{"app": "agent"}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: f.ns}, Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			NodeSelector: map[string]string{v1alpha1.LabelNodeGroup: f.group},
			Containers: []corev1.Container{{Name: "agent", Image: "agent", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}}}
	if err := env.Client.Create(context.Background(), ds); err != nil {
		t.Fatal(err)
	}
	f.pods(2, b.CPU("1"))
	if res := f.run(); len(res.Launched) != 1 {
		t.Errorf("launched %d nodes, want 1: the booting machine holds one pod beside the DaemonSet's, not two", len(res.Launched))
	}
}

// unlistedLaunches is a KWOK cloud that implements PendingLister and whose
// launching instances of one group cannot be listed (a Cluster API
// management cluster timing out) while broken.
type unlistedLaunches struct {
	cloudprovider.CloudProvider
	group  string
	broken bool
}

func (c *unlistedLaunches) Pending(_ context.Context, ng *v1alpha1.NodeGroup) ([]*cloudprovider.Instance, error) {
	if c.broken && ng.Name == c.group {
		return nil, errors.New("the server was unable to return a response in the time allotted")
	}
	return nil, nil
}

// TestARoundThatCannotListAGroupsLaunchesLaunchesNothingThere (Cluster
// Autoscaler's upcoming nodes): while the instances a group is launching
// cannot be listed, the machines booting there would look gone and their
// pods would get another; the round launches in the other group instead
// (it launched in the cheaper group, blind to what boots there), and in
// the cheaper one again once it lists.
func TestARoundThatCannotListAGroupsLaunchesLaunchesNothingThere(t *testing.T) {
	f := setup(t, b.NodeGroup("prov-launch-listed", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.20")), b.TemplateLabel("pool", "prov-launch")))
	cheap := b.NodeGroup("prov-launch-unlisted", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")), b.TemplateLabel("pool", "prov-launch"))
	f.alsoGroup(cheap)
	cloud := &unlistedLaunches{CloudProvider: kwok.New(env.Client, clock.RealClock{}), group: cheap.Name, broken: true}
	f.useCloud(cloud)
	launch := func(name string) *cloudprovider.Instance { return f.launchFor(name, "prov-launch") }
	if got := launch("first"); got.NodeGroup != "prov-launch-listed" {
		t.Errorf("launched in %s while the cheaper group's launches could not be listed, want prov-launch-listed", got.NodeGroup)
	}
	cloud.broken = false
	if got := launch("second"); got.NodeGroup != cheap.Name {
		t.Errorf("launched in %s once the provider lists the cheaper group's launches again, want %s", got.NodeGroup, cheap.Name)
	}
}

// bootingMachines launches machines whose Nodes never register in the
// test (a Cluster API Machine booting), lists them as launching, and
// cannot list those of the broken group.
type bootingMachines struct {
	cloudprovider.CloudProvider
	launched []*cloudprovider.Instance
	broken   string
}

func (c *bootingMachines) Create(_ context.Context, req cloudprovider.CreateRequest) (*cloudprovider.Instance, error) {
	inst := &cloudprovider.Instance{NodeName: fmt.Sprintf("%s-machine-%d", req.NodeGroup.Name, len(c.launched)), NodeGroup: req.NodeGroup.Name,
		Offering: req.Offering, CreatedAt: time.Now()}
	c.launched = append(c.launched, inst)
	return inst, nil
}

func (c *bootingMachines) Pending(_ context.Context, ng *v1alpha1.NodeGroup) ([]*cloudprovider.Instance, error) {
	if ng.Name == c.broken {
		return nil, errors.New("the server was unable to return a response in the time allotted")
	}
	var out []*cloudprovider.Instance
	for _, inst := range c.launched {
		if inst.NodeGroup == ng.Name {
			out = append(out, inst)
		}
	}
	return out, nil
}

// TestAPodWhoseMachineBootsIsNotLaunchedForAgainWhileTheMachinesCannotBeListed:
// berth launched a machine for a pod; a later round sees it booting
// through the provider's listing; then a round cannot list it. The pod
// keeps its machine: no node is launched for it in the other group (one
// was: the machine looked gone).
func TestAPodWhoseMachineBootsIsNotLaunchedForAgainWhileTheMachinesCannotBeListed(t *testing.T) {
	f := setup(t, b.NodeGroup("prov-boot-dear", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.20")), b.TemplateLabel("pool", "prov-boot")))
	f.alsoGroup(b.NodeGroup("prov-boot-cheap", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")), b.TemplateLabel("pool", "prov-boot")))
	cloud := &bootingMachines{CloudProvider: kwok.New(env.Client, clock.RealClock{})}
	f.useCloud(cloud)
	pod := f.poolPod("waits", "prov-boot", "1500m")
	round := func(name string) *provisioning.Result {
		t.Helper()
		res, err := f.prov.RunOnce(context.Background())
		if err != nil {
			t.Fatalf("round %s: %v", name, err)
		}
		return res
	}
	if res := round("first"); len(res.Launched) != 1 || res.Launched[0].NodeGroup != "prov-boot-cheap" {
		t.Fatalf("first round launched %v, want one machine in prov-boot-cheap", res.Launched)
	}
	expect.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string, error) {
		got := &corev1.Pod{}
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), got)
		return err == nil && got.Status.NominatedNodeName != "", "pod not nominated yet", err
	})
	if res := round("listed"); len(res.Launched) != 0 {
		t.Fatalf("a round that lists the booting machine launched %v", res.Launched)
	}
	cloud.broken = "prov-boot-cheap"
	for _, name := range []string{"unlisted", "unlisted again"} {
		if res := round(name); len(res.Launched) != 0 {
			t.Errorf("round %s, the booting machine not listed: launched %v, want nothing", name, res.Launched)
		}
	}
}

// TestAPodWhoseMachineIsGoneGetsAnotherWhileAnotherGroupCannotBeListed:
// berth launched a machine for a pod in one group, and the machine is
// gone (its group lists it no more) while another group's launches cannot
// be listed. The pod gets a node again: berth knows which group its
// machine was of, and that group lists. Before, any unlisted group kept
// every pod whose nominated node was gone waiting, for as long as it
// stayed unlisted.
func TestAPodWhoseMachineIsGoneGetsAnotherWhileAnotherGroupCannotBeListed(t *testing.T) {
	f := setup(t, b.NodeGroup("prov-gone-dear", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.20")), b.TemplateLabel("pool", "prov-gone")))
	f.alsoGroup(b.NodeGroup("prov-gone-cheap", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")), b.TemplateLabel("pool", "prov-gone")))
	cloud := &bootingMachines{CloudProvider: kwok.New(env.Client, clock.RealClock{})}
	f.useCloud(cloud)
	pod := f.poolPod("waits", "prov-gone", "1500m")
	res := f.run()
	if len(res.Launched) != 1 || res.Launched[0].NodeGroup != "prov-gone-cheap" {
		t.Fatalf("first round launched %v, want one machine in prov-gone-cheap", res.Launched)
	}
	first := res.Launched[0].NodeName
	expect.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string, error) {
		got := &corev1.Pod{}
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), got)
		return err == nil && got.Status.NominatedNodeName == first, "pod not nominated yet", err
	})
	if res := f.run(); len(res.Launched) != 0 { // the machine listed as booting
		t.Fatalf("a round that lists the booting machine launched %v", res.Launched)
	}
	cloud.launched, cloud.broken = nil, "prov-gone-dear"
	res = f.run()
	if len(res.Launched) != 1 || res.Launched[0].NodeGroup != "prov-gone-cheap" {
		t.Fatalf("the pod's machine gone, the other group unlisted: launched %d machines, want another in prov-gone-cheap", len(res.Launched))
	}
}

// TestAPodNominatedToANodeThatNeverCameUpGetsAnother (Karpenter: a second
// node for a pod whose in-flight node is terminating): berth launched a
// node for a pod and nominated the pod to it; the node is still not Ready
// past the max provision time (here 2 s). The pod needs a node again and
// gets one (it was held on the dead node's room for as long as the node
// stayed, which for a Cluster API Node is until its Machine goes).
func TestAPodNominatedToANodeThatNeverCameUpGetsAnother(t *testing.T) {
	f := setup(t, b.NodeGroup("prov-never-up", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")),
		b.LaunchDelay(metav1.Duration{Duration: time.Hour})))
	prov := provisioning.New(provisioning.Deps{Client: env.Client, Cloud: kwok.New(env.Client, clock.RealClock{}), Offerings: f.offerings,
		Recorder: f.events, Clock: clock.RealClock{}},
		provisioning.Options{BatchIdle: time.Second, BatchMax: 5 * time.Second, Resync: time.Minute, Limits: scaleup.Limits{Resources: scaleup.DefaultClusterLimits},
			MaxProvisionTime: 2 * time.Second})
	pod := f.pods(1, b.CPU("1500m"))[0]
	res, err := prov.RunOnce(context.Background())
	if err != nil || len(res.Launched) != 1 {
		t.Fatalf("first round: %v, launched %v; want one node", err, res)
	}
	first := res.Launched[0].NodeName
	expect.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string, error) {
		got := &corev1.Pod{}
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), got)
		return err == nil && got.Status.NominatedNodeName == first, "pod not nominated to " + first + " yet", err
	})
	time.Sleep(3 * time.Second) // past the max provision time; the node is still not Ready
	// The scheduler clears the nomination when it retries the pod; the
	// running controller restores it (onPodUpdate), RunOnce alone does
	// not: as it would be.
	got := &corev1.Pod{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), got); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(got.DeepCopy())
	got.Status.NominatedNodeName = first
	if err := env.Client.Status().Patch(context.Background(), got, patch); err != nil {
		t.Fatal(err)
	}
	res, err = prov.RunOnce(context.Background())
	if err != nil || len(res.Launched) != 1 || res.Launched[0].NodeName == first {
		t.Fatalf("round past the max provision time: %v, launched %v; want another node for the pod", err, res)
	}
}

// poolPod creates a pod of cpu that selects the pool label's value (the
// groups of the test carry it) and waits until the scheduler has marked it
// unschedulable.
func (f *fixture) poolPod(name, pool, cpu string) *corev1.Pod {
	f.t.Helper()
	pod := b.Pod(name, b.Namespace(f.ns), b.NoUID(), b.NodeSelector("pool", pool), b.CPU(cpu))
	if err := env.Client.Create(context.Background(), pod); err != nil {
		f.t.Fatal(err)
	}
	expect.Eventually(f.t, time.Minute, func(ctx context.Context) (bool, string, error) {
		got := &corev1.Pod{}
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), got)
		return err == nil && podutil.IsProvisionable(got), "pod " + name + " not marked unschedulable yet", err
	})
	return pod
}

// launchFor creates a pod selecting pool (poolPod) and runs a round,
// which must launch one node; it returns that node.
func (f *fixture) launchFor(name, pool string) *cloudprovider.Instance {
	f.t.Helper()
	f.poolPod(name, pool, "1500m")
	res, err := f.prov.RunOnce(context.Background())
	if err != nil || len(res.Launched) != 1 {
		f.t.Fatalf("the round for %s: %v, launched %v; want one node", name, err, res)
	}
	return res.Launched[0]
}

// TestMachinesBootingInAGroupThatCannotBeListedStillCountAgainstTheNodeCap:
// a group has a machine booting that berth did not launch in this
// process (a restart, or a replica scaled by hand), so only the
// provider's listing shows it. The cluster is at --max-nodes-total with
// it. Then the group's machines cannot be listed: the machine still
// counts, as the last listing showed it, and no node is launched in the
// other group for a pod only that group fits. Before, the machine
// counted as gone and the other group went past the cap.
func TestMachinesBootingInAGroupThatCannotBeListedStillCountAgainstTheNodeCap(t *testing.T) {
	f := setup(t, b.NodeGroup("prov-cap-boot", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")), b.TemplateLabel("pool", "prov-cap")))
	f.alsoGroup(b.NodeGroup("prov-cap-other", b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.20")), b.TemplateLabel("pool", "prov-cap")))
	nodes := &corev1.NodeList{}
	if err := env.Client.List(context.Background(), nodes); err != nil {
		t.Fatal(err)
	}
	cloud := &bootingMachines{CloudProvider: kwok.New(env.Client, clock.RealClock{})}
	cloud.launched = []*cloudprovider.Instance{{NodeName: "prov-cap-boot-machine-0", NodeGroup: "prov-cap-boot",
		Offering: cloudprovider.Offering{InstanceType: "m-2", Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeOnDemand}, CreatedAt: time.Now()}}
	f.prov = provisioning.New(provisioning.Deps{Client: env.Client, Cloud: cloud, Offerings: f.offerings, Recorder: f.events, Clock: clock.RealClock{}},
		provisioning.Options{BatchIdle: time.Second, BatchMax: 5 * time.Second, Resync: time.Minute, MaxProvisionTime: 15 * time.Minute,
			Limits: scaleup.Limits{Resources: scaleup.DefaultClusterLimits, Nodes: scaleup.NodeCaps{Total: len(nodes.Items) + 1}}})
	f.poolPod("big", "prov-cap", "3") // fits only prov-cap-other's m-4
	if res := f.run(); len(res.Launched) != 0 {
		t.Fatalf("the booting machine listed, the cluster at its node cap: launched %v, want nothing", res.Launched)
	}
	cloud.broken = "prov-cap-boot"
	for _, round := range []string{"unlisted", "unlisted again"} {
		if res := f.run(); len(res.Launched) != 0 {
			t.Errorf("round %s, the booting machine not listed: launched %v past the node cap, want nothing", round, res.Launched)
		}
	}
}

// TestAPodThatNeverPreemptsIsNotHeldForEverWhereAnotherControllerNominatedIt:
// a burst-critical pod (its class never preempts) is nominated by
// another controller (nodereserve handing over a per-node reserve) to a
// full node, and never binds there. berth holds its room
// there for handOverGrace, then launches a node for it. Before, it held
// the pod there for ever: the scheduler never clears the nomination of a
// pod that never preempts, and berth waited for the scheduler.
func TestAPodThatNeverPreemptsIsNotHeldForEverWhereAnotherControllerNominatedIt(t *testing.T) {
	ctx := context.Background()
	f := setup(t, b.NodeGroup("prov-handover", b.InstanceType("m-2", "2", "8Gi", b.OnDemand("zone-a", "0.10"))))
	never := corev1.PreemptNever
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.PriorityClassBurstCritical}, Value: v1alpha1.PriorityBurstCritical, PreemptionPolicy: &never}
	if err := env.Client.Create(ctx, pc); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	full := b.Node("prov-handover-full", "2", "8Gi", b.KWOK(), b.NodeLabels(v1alpha1.LabelNodeGroup, f.group, v1alpha1.LabelInitialized, "true"))
	if err := env.Client.Create(ctx, full); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), full) })
	// Ready, as a node a reserve is handed over on is.
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		n := &corev1.Node{}
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(full), n)
		return err == nil && nodeutil.Schedulable(n), "node " + full.Name + " not schedulable yet", err
	})
	if err := env.Client.Create(ctx, b.Pod("work", b.Namespace(f.ns), b.NoUID(), b.NodeName(full.Name), b.CPU("2"))); err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	prov := provisioning.New(provisioning.Deps{Client: env.Client, Cloud: kwok.New(env.Client, clock.RealClock{}), Offerings: f.offerings,
		Recorder: f.events, Clock: clk},
		provisioning.Options{BatchIdle: time.Second, BatchMax: 5 * time.Second, Resync: time.Minute,
			Limits: scaleup.Limits{Resources: scaleup.DefaultClusterLimits}, MaxProvisionTime: 15 * time.Minute})
	// A first round before the hand-over: after a restart the first round
	// takes every nomination up as berth's own, and this one is made
	// while the controller runs.
	if _, err := prov.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	pod := f.pods(1, b.CPU("1"), func(p *corev1.Pod) { p.Spec.PriorityClassName = pc.Name })[0]
	got := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), got); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(got.DeepCopy())
	got.Status.NominatedNodeName = full.Name
	if err := env.Client.Status().Patch(ctx, got, patch); err != nil {
		t.Fatal(err)
	}
	if res, err := prov.RunOnce(ctx); err != nil || len(res.Launched) != 0 {
		t.Fatalf("first round: %v, launched %v; want the pod held on the node it was handed", err, res)
	}
	clk.Step(time.Minute)
	if res, err := prov.RunOnce(ctx); err != nil || len(res.Launched) != 1 {
		now := &corev1.Pod{}
		_ = env.Client.Get(ctx, client.ObjectKeyFromObject(pod), now)
		t.Fatalf("a minute later, the pod still unbound: %v, launched %v; want a node for it (pod: node %q, nominated %q, conditions %+v)",
			err, res, now.Spec.NodeName, now.Status.NominatedNodeName, now.Status.Conditions)
	}
}
