package kwok_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/clock"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/cloudprovider/kwok"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
	"github.com/berth-dev/berth/internal/testing/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// TestCreateLaunchesANodeThatBootsAfterTheLaunchDelay: the node carries
// what the planner assumed (labels, taints, capacity), stays NotReady for
// the launch delay and then KWOK makes it Ready.
func TestCreateLaunchesANodeThatBootsAfterTheLaunchDelay(t *testing.T) {
	ctx := context.Background()
	ng := b.NodeGroup("kwok-delay",
		b.TemplateLabel("size", "large"),
		b.TemplateTaint("size", "large", corev1.TaintEffectNoSchedule),
		b.InstanceType("large-4", "4", "16Gi", b.Spot("zone-b", "0.05")),
		b.ExtraCapacity("example.com/gpu", "2"),
		b.LaunchDelay(metav1.Duration{Duration: 3 * time.Second}))
	ng.Spec.Template.StartupTaints = []v1alpha1.NodeTaint{{Key: "agent-not-ready", Effect: v1alpha1.TaintEffect(corev1.TaintEffectNoSchedule)}}
	ng.UID = "uid-kwok-delay"
	p := kwok.New(env.Client, clock.RealClock{})
	inst, err := p.Create(ctx, cloudprovider.CreateRequest{NodeGroup: ng, Offering: cloudprovider.Offering{InstanceType: "large-4", Zone: "zone-b", CapacityType: v1alpha1.CapacityTypeSpot}})
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: inst.NodeName}, node); err != nil {
		t.Fatal(err)
	}
	wantLabels := map[string]string{
		"size": "large", v1alpha1.LabelNodeGroup: "kwok-delay", v1alpha1.LabelInstanceType: "large-4", v1alpha1.LabelZone: "zone-b",
		v1alpha1.LabelCapacityType: "spot", v1alpha1.LabelHostname: inst.NodeName, v1alpha1.LabelOS: "linux", v1alpha1.LabelArch: "amd64",
	}
	if got := node.Annotations[v1alpha1.AnnotationLaunchedBy]; got != "uid-kwok-delay" {
		t.Errorf("owner mark %q, want the node group's UID", got)
	}
	for k, v := range wantLabels {
		if node.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, node.Labels[k], v)
		}
	}
	taints := map[string]bool{}
	for _, tn := range node.Spec.Taints {
		taints[tn.Key] = true
	}
	if !taints["size"] || !taints["agent-not-ready"] {
		t.Errorf("taints %v lack the template or startup taint", node.Spec.Taints)
	}
	if q := node.Status.Allocatable["example.com/gpu"]; q.Value() != 2 {
		t.Errorf("allocatable gpu %v, want 2", q.String())
	}
	if node.Spec.ProviderID != "kwok://"+inst.NodeName {
		t.Errorf("provider ID %q", node.Spec.ProviderID)
	}
	if ready(node) {
		t.Fatal("node is Ready right after launch; want NotReady for the launch delay")
	}
	expect.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string, error) {
		n := &corev1.Node{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: inst.NodeName}, n); err != nil {
			return false, "", err
		}
		return ready(n), "node not Ready yet", nil
	})
	if age := time.Since(node.CreationTimestamp.Time); age < 3*time.Second-time.Second {
		t.Errorf("node became Ready after %s, before the 3s launch delay", age)
	}

	got, err := p.List(ctx, "kwok-delay")
	if err != nil || len(got) != 1 || got[0].NodeName != inst.NodeName || got[0].Offering.Zone != "zone-b" {
		t.Errorf("List = %+v, %v", got, err)
	}
	if err := p.Delete(ctx, inst.NodeName); err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(ctx, inst.NodeName); !cloudprovider.IsNotFound(err) {
		t.Errorf("second Delete: %v, want NotFound", err)
	}
	if _, err := p.Get(ctx, inst.NodeName); !cloudprovider.IsNotFound(err) {
		t.Errorf("Get after Delete: %v, want NotFound", err)
	}
}

// TestFailureInjectionReturnsInsufficientCapacity: a failing offering
// yields the typed error and creates nothing; others still launch.
func TestFailureInjectionReturnsInsufficientCapacity(t *testing.T) {
	ctx := context.Background()
	ng := b.NodeGroup("kwok-fail",
		b.InstanceType("m-2", "2", "4Gi", b.Spot("zone-a", "0.03"), b.OnDemand("zone-a", "0.1")),
		b.FailOffering(v1alpha1.OfferingSelector{CapacityType: v1alpha1.CapacityTypeSpot}))
	ng.UID = "uid-kwok-fail"
	p := kwok.New(env.Client, clock.RealClock{})
	_, err := p.Create(ctx, cloudprovider.CreateRequest{NodeGroup: ng, Offering: cloudprovider.Offering{InstanceType: "m-2", Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeSpot}})
	if !cloudprovider.IsInsufficientCapacity(err) {
		t.Fatalf("spot launch: %v, want InsufficientCapacity", err)
	}
	if got, _ := p.List(ctx, "kwok-fail"); len(got) != 0 {
		t.Errorf("a failed launch left %d nodes", len(got))
	}
	if _, err := p.Create(ctx, cloudprovider.CreateRequest{NodeGroup: ng, Offering: cloudprovider.Offering{InstanceType: "m-2", Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeOnDemand}}); err != nil {
		t.Errorf("on-demand launch: %v", err)
	}
}

// TestCreatePublishesTheInstanceTypesDevices: a node of an instance type
// with devices gets the ResourceSlices a DRA driver would publish (a
// complete pool named after the node), owned by the node.
func TestCreatePublishesTheInstanceTypesDevices(t *testing.T) {
	ctx := context.Background()
	ng := b.NodeGroup("kwok-gpu",
		b.InstanceType("gpu-2", "8", "32Gi", b.OnDemand("zone-a", "2")),
		b.Devices("gpu.example.com", "gpu", 2, map[string]string{"model": "a100"}))
	ng.UID = "uid-kwok-gpu"
	p := kwok.New(env.Client, clock.RealClock{})
	inst, err := p.Create(ctx, cloudprovider.CreateRequest{NodeGroup: ng, Offering: cloudprovider.Offering{InstanceType: "gpu-2", Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeOnDemand}})
	if err != nil {
		t.Fatal(err)
	}
	slices := &resourcev1.ResourceSliceList{}
	if err := env.Client.List(ctx, slices); err != nil {
		t.Fatal(err)
	}
	var mine []resourcev1.ResourceSlice
	for _, sl := range slices.Items {
		if sl.Spec.NodeName != nil && *sl.Spec.NodeName == inst.NodeName {
			mine = append(mine, sl)
		}
	}
	if len(mine) != 1 {
		t.Fatalf("node %s has %d resourceslices, want 1", inst.NodeName, len(mine))
	}
	sl := mine[0]
	if sl.Spec.Driver != "gpu.example.com" || sl.Spec.Pool.Name != inst.NodeName || sl.Spec.Pool.ResourceSliceCount != 1 || len(sl.Spec.Devices) != 2 {
		t.Errorf("slice = driver %s, pool %+v, %d devices; want gpu.example.com, pool %s of 1 slice, 2 devices", sl.Spec.Driver, sl.Spec.Pool, len(sl.Spec.Devices), inst.NodeName)
	}
	if len(sl.OwnerReferences) != 1 || sl.OwnerReferences[0].Kind != "Node" || sl.OwnerReferences[0].Name != inst.NodeName {
		t.Errorf("slice owners = %+v, want the node %s", sl.OwnerReferences, inst.NodeName)
	}
}

// TestLaunchersTogetherNeverPassMaxSize: the provisioner's workers and the
// standby controller launch into the same group from views (an informer
// cache) that do not show each other's nodes yet. Eight creates at once
// into a group of maxSize 3, through a cached client, launch 3 nodes;
// the others are refused with a MaxSizeError, and so is one more once the
// cache shows the 3. When one of them is deleted, a launch succeeds again.
func TestLaunchersTogetherNeverPassMaxSize(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cache, err := crcache.New(env.Config, crcache.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = cache.Start(ctx) }()
	if _, err := cache.GetInformer(ctx, &corev1.Node{}); err != nil {
		t.Fatal(err)
	}
	if !cache.WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}
	cached, err := client.New(env.Config, client.Options{Scheme: env.Client.Scheme(), Cache: &client.CacheOptions{Reader: cache}})
	if err != nil {
		t.Fatal(err)
	}
	ng := b.NodeGroup("kwok-max", b.Size(0, 3), b.InstanceType("small-2", "2", "4Gi", b.OnDemand("zone-a", "0.1")))
	ng.UID = "uid-kwok-max"
	p := kwok.New(cached, clock.RealClock{})
	req := cloudprovider.CreateRequest{NodeGroup: ng, Offering: cloudprovider.Offering{InstanceType: "small-2", Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeOnDemand}}
	errs := make([]error, 8)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { _, errs[i] = p.Create(ctx, req) })
	}
	wg.Wait()
	launched := 0
	for _, err := range errs {
		switch {
		case err == nil:
			launched++
		case !cloudprovider.IsMaxSize(err):
			t.Errorf("a create failed with %v, want a MaxSizeError", err)
		}
	}
	nodes := &corev1.NodeList{}
	if err := env.Client.List(ctx, nodes, client.MatchingLabels{v1alpha1.LabelNodeGroup: "kwok-max"}); err != nil {
		t.Fatal(err)
	}
	if launched != 3 || len(nodes.Items) != 3 {
		t.Fatalf("%d creates succeeded and the group has %d nodes, want 3 and 3 (maxSize)", launched, len(nodes.Items))
	}
	expect.Eventually(t, 10*time.Second, func(ctx context.Context) (bool, string, error) {
		l := &corev1.NodeList{}
		err := cached.List(ctx, l, client.MatchingLabels{v1alpha1.LabelNodeGroup: "kwok-max"})
		return len(l.Items) == 3, fmt.Sprintf("the cache shows %d nodes, want 3", len(l.Items)), err
	})
	if _, err := p.Create(ctx, req); !cloudprovider.IsMaxSize(err) {
		t.Fatalf("a create into the full group returned %v, want a MaxSizeError", err)
	}
	if err := p.Delete(ctx, nodes.Items[0].Name); err != nil {
		t.Fatal(err)
	}
	expect.Eventually(t, 10*time.Second, func(ctx context.Context) (bool, string, error) {
		l := &corev1.NodeList{}
		err := cached.List(ctx, l, client.MatchingLabels{v1alpha1.LabelNodeGroup: "kwok-max"})
		return len(l.Items) == 2, fmt.Sprintf("the cache shows %d nodes, want 2", len(l.Items)), err
	})
	inst, err := p.Create(ctx, req)
	if err != nil {
		t.Fatalf("a create after a delete: %v", err)
	}
	t.Cleanup(func() {
		for _, n := range append(nodes.Items[1:], corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: inst.NodeName}}) {
			_ = env.Client.Delete(context.Background(), &n)
		}
	})
}

// TestAReplacementPassesMaxSizeByOneAtMost: a full group (maxSize 2)
// takes a replacement for both its nodes (3 nodes while they leave).
// Once that replacement is given up and its node stays, the group is
// past maxSize: another replacement for the same two nodes is refused
// with a MaxSizeError (it would make 4), as is a plain launch.
func TestAReplacementPassesMaxSizeByOneAtMost(t *testing.T) {
	ctx := context.Background()
	ng := b.NodeGroup("kwok-replace", b.Size(0, 2), b.InstanceType("small-2", "2", "4Gi", b.OnDemand("zone-a", "0.1")))
	ng.UID = "uid-kwok-replace"
	p := kwok.New(env.Client, clock.RealClock{})
	req := cloudprovider.CreateRequest{NodeGroup: ng, Offering: cloudprovider.Offering{InstanceType: "small-2", Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeOnDemand}}
	var names []string
	t.Cleanup(func() {
		for _, name := range names {
			_ = env.Client.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
		}
	})
	for range 2 {
		inst, err := p.Create(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, inst.NodeName)
	}
	replace := req
	replace.Replaces = slices.Clone(names)
	inst, err := p.Create(ctx, replace)
	if err != nil {
		t.Fatalf("a replacement in the full group: %v, want it launched", err)
	}
	names = append(names, inst.NodeName)
	if _, err := p.Create(ctx, replace); !cloudprovider.IsMaxSize(err) {
		t.Errorf("a second replacement of the same nodes in a group of 3 nodes (maxSize 2) returned %v, want a MaxSizeError", err)
	}
	if _, err := p.Create(ctx, req); !cloudprovider.IsMaxSize(err) {
		t.Errorf("a launch into a group of 3 nodes (maxSize 2) returned %v, want a MaxSizeError", err)
	}
	nodes := &corev1.NodeList{}
	if err := env.Client.List(ctx, nodes, client.MatchingLabels{v1alpha1.LabelNodeGroup: "kwok-replace"}); err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 3 {
		t.Errorf("the group has %d nodes, want 3 (maxSize 2 and one replacement)", len(nodes.Items))
	}
}

// TestALaunchCountsUntilTheCacheShowsIt: a cache that has not shown the
// group's nodes yet (here one that never will: it watches other nodes
// only) lists none; one launch after another, the provider still stops at
// maxSize, counting the nodes it created itself.
func TestALaunchCountsUntilTheCacheShowsIt(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	other, err := labels.Parse("berth.dev/test-never-shown=true")
	if err != nil {
		t.Fatal(err)
	}
	cache, err := crcache.New(env.Config, crcache.Options{Scheme: env.Client.Scheme(),
		ByObject: map[client.Object]crcache.ByObject{&corev1.Node{}: {Label: other}}})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = cache.Start(ctx) }()
	if _, err := cache.GetInformer(ctx, &corev1.Node{}); err != nil {
		t.Fatal(err)
	}
	if !cache.WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}
	cached, err := client.New(env.Config, client.Options{Scheme: env.Client.Scheme(), Cache: &client.CacheOptions{Reader: cache}})
	if err != nil {
		t.Fatal(err)
	}
	ng := b.NodeGroup("kwok-lag", b.Size(0, 2), b.InstanceType("small-2", "2", "4Gi", b.OnDemand("zone-a", "0.1")))
	ng.UID = "uid-kwok-lag"
	p := kwok.New(cached, clock.RealClock{})
	req := cloudprovider.CreateRequest{NodeGroup: ng, Offering: cloudprovider.Offering{InstanceType: "small-2", Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeOnDemand}}
	for i := range 3 {
		inst, err := p.Create(ctx, req)
		if i < 2 && err != nil {
			t.Fatalf("launch %d: %v", i+1, err)
		}
		if i < 2 {
			t.Cleanup(func() {
				_ = env.Client.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: inst.NodeName}})
			})
		}
		if i == 2 && !cloudprovider.IsMaxSize(err) {
			t.Fatalf("launch 3 into a group of maxSize 2 returned %v, want a MaxSizeError", err)
		}
	}
}

// TestDeleteRefusesANodeItDidNotMake: the kwok provider deletes KWOK
// nodes only. A node of a real machine (provider ID aws://..., the node
// of a group whose provider was Cluster API) is refused and stays; a KWOK
// node is deleted, even one the provider's cache has not seen yet.
func TestDeleteRefusesANodeItDidNotMake(t *testing.T) {
	ctx := context.Background()
	real := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "real-machine"}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-0a1b2c3d4e5f60718"}}
	own := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "kwok-made"}, Spec: corev1.NodeSpec{ProviderID: v1alpha1.ProviderIDPrefixKWOK + "kwok-made"}}
	for _, n := range []*corev1.Node{real, own} {
		if err := env.Client.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, real) })
	// A cache that has seen no node: Delete reads past it.
	empty := &emptyNodes{Client: env.Client}
	p := kwok.New(empty, clock.RealClock{}).WithAPIReader(env.Client)
	err := p.Delete(ctx, real.Name)
	if err == nil || cloudprovider.IsNotFound(err) {
		t.Fatalf("Delete of a node with provider ID %s: %v, want a refusal", real.Spec.ProviderID, err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(real), &corev1.Node{}); err != nil {
		t.Fatalf("the real machine's node is gone: %v", err)
	}
	if err := p.Delete(ctx, own.Name); err != nil {
		t.Fatalf("Delete of a KWOK node: %v", err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(own), &corev1.Node{}); err == nil {
		t.Error("the KWOK node is still there after Delete")
	}
	if err := p.Delete(ctx, own.Name); !cloudprovider.IsNotFound(err) {
		t.Errorf("Delete of a node gone: %v, want NotFound", err)
	}
}

// emptyNodes is a client whose reads find no node (a cache that has not
// seen them yet).
type emptyNodes struct{ client.Client }

func (c *emptyNodes) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*corev1.Node); ok {
		return apierrors.NewNotFound(corev1.Resource("nodes"), key.Name)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}
