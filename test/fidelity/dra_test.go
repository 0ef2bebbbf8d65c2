package fidelity

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/util/assumecache"
	"k8s.io/utils/ptr"

	"github.com/berth-dev/berth/internal/simulator/predicates"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// draUpstream runs kube-scheduler's DynamicResources PreFilter and Filter
// for one case, with the DRA manager the scheduler builds (claims through
// an assume cache, slices through the slice tracker).
func draUpstream(ctx context.Context, t *testing.T, c DRACase) (map[string]bool, map[string]string) {
	t.Helper()
	cfg, err := latest.Default()
	if err != nil {
		t.Fatal(err)
	}
	profile := cfg.Profiles[0]
	dra := []config.Plugin{{Name: names.DynamicResources}}
	profile.Plugins = &config.Plugins{
		QueueSort: config.PluginSet{Enabled: []config.Plugin{{Name: names.PrioritySort}}},
		Bind:      config.PluginSet{Enabled: []config.Plugin{{Name: names.DefaultBinder}}},
		PreFilter: config.PluginSet{Enabled: dra},
		Filter:    config.PluginSet{Enabled: dra},
	}
	client := fake.NewClientset()
	for _, o := range c.Classes {
		must(t, func() error {
			_, err := client.ResourceV1().DeviceClasses().Create(ctx, o, metav1.CreateOptions{})
			return err
		})
	}
	for _, o := range c.Slices {
		must(t, func() error {
			_, err := client.ResourceV1().ResourceSlices().Create(ctx, o, metav1.CreateOptions{})
			return err
		})
	}
	for _, o := range c.Claims {
		must(t, func() error {
			_, err := client.ResourceV1().ResourceClaims(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			return err
		})
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	tr, err := tracker.StartTracker(ctx, tracker.Options{SliceInformer: factory.Resource().V1().ResourceSlices(), KubeClient: client})
	if err != nil {
		t.Fatal(err)
	}
	claims := assumecache.NewAssumeCache(klog.FromContext(ctx), factory.Resource().V1().ResourceClaims().Informer(), "ResourceClaim", "", nil)
	manager := dynamicresources.NewDRAManager(ctx, claims, tr, factory)
	snap := cache.NewSnapshot(nil, c.Nodes)
	fw, err := frameworkruntime.NewFramework(ctx, plugins.NewInTreeRegistry(), &profile,
		frameworkruntime.WithSnapshotSharedLister(snap), frameworkruntime.WithInformerFactory(factory),
		frameworkruntime.WithClientSet(client), frameworkruntime.WithSharedDRAManager(manager))
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	// The slice tracker, the claim cache and the manager's record of
	// allocated devices (a handler of the claim cache) fill from the
	// informers asynchronously: wait until they hold every object. A
	// device not yet recorded as allocated would be free to the plugin.
	allocated := allocatedDevices(c)
	synced := func() bool {
		sl, err := tr.ListPatchedResourceSlices()
		if err != nil || !tr.HasSynced() || len(sl) != len(c.Slices) || len(claims.List(nil)) != len(c.Claims) {
			return false
		}
		got, err := manager.ResourceClaims().ListAllAllocatedDevices()
		return err == nil && got.Equal(allocated)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !synced() {
		if time.Now().After(deadline) {
			t.Fatal("kube-scheduler's DRA manager did not see every slice, claim and allocated device within 30 s")
		}
		time.Sleep(time.Millisecond)
	}
	state := framework.NewCycleState()
	out, why := map[string]bool{}, map[string]string{}
	infos, err := snap.NodeInfos().List()
	if err != nil {
		t.Fatal(err)
	}
	_, st, _ := fw.RunPreFilterPlugins(ctx, state, c.Pod)
	for _, ni := range infos {
		name := ni.Node().Name
		if !st.IsSuccess() && !st.IsSkip() {
			out[name], why[name] = false, "prefilter: "+st.Message()
			continue
		}
		fs := fw.RunFilterPlugins(ctx, state, c.Pod, ni)
		out[name] = fs.IsSuccess()
		if !fs.IsSuccess() {
			why[name] = fs.Message()
		}
	}
	return out, why
}

// allocatedDevices is the set of devices a case's claims hold, as
// kube-scheduler counts them (a result with admin access holds none).
func allocatedDevices(c DRACase) sets.Set[structured.DeviceID] {
	out := sets.New[structured.DeviceID]()
	for _, cl := range c.Claims {
		if cl.Status.Allocation == nil {
			continue
		}
		for _, r := range cl.Status.Allocation.Devices.Results {
			if !ptr.Deref(r.AdminAccess, false) {
				out.Insert(structured.MakeDeviceID(r.Driver, r.Pool, r.Device))
			}
		}
	}
	return out
}

func must(t *testing.T, f func() error) {
	t.Helper()
	if err := f(); err != nil {
		t.Fatal(err)
	}
}

// draOurs is berth's DynamicResources filter on the same case.
func draOurs(c DRACase) (map[string]bool, map[string]string, error) {
	in := snapshot.Input{DRA: snapshot.DRA{DeviceClasses: c.Classes, Slices: c.Slices, Claims: c.Claims}}
	for _, n := range c.Nodes {
		in.Nodes = append(in.Nodes, snapshot.NodeInput{Node: n})
	}
	s, err := snapshot.New(in)
	if err != nil {
		return nil, nil, err
	}
	class, err := s.Classify(c.Pod)
	if err != nil {
		return nil, nil, err
	}
	out, why := map[string]bool{}, map[string]string{}
	for _, n := range s.Nodes {
		st := predicates.DynamicResources{}.Filter(s, class, n)
		out[n.Name], why[n.Name] = !st.Failed(), st.Message()
	}
	return out, why, nil
}

// TestDRAFidelity compares berth's DynamicResources filter with
// kube-scheduler's plugin on random clusters with slices, classes, CEL
// selectors, counts, All mode, matchAttribute constraints, shared claims
// and admin access. Every disagreement fails the test.
func TestDRAFidelity(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := max(*cases/10, 50)
	var pairs, agree, feasible int
	var problems []string
	for seed := int64(1); seed <= int64(n); seed++ {
		c := GenerateDRA(seed)
		want, wantWhy := draUpstream(ctx, t, c)
		got, gotWhy, err := draOurs(c)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		for name, w := range want {
			pairs++
			if w {
				feasible++
			}
			if got[name] == w {
				agree++
				continue
			}
			if len(problems) < 20 {
				problems = append(problems, fmt.Sprintf("seed %d node %s: kube-scheduler feasible=%v (%s), berth feasible=%v (%s)",
					seed, name, w, wantWhy[name], got[name], gotWhy[name]))
			}
		}
	}
	rate := 100 * float64(agree) / float64(pairs)
	t.Logf("DRA fidelity: %d clusters, %d pod/node pairs (%d feasible for kube-scheduler), agreement %d/%d = %.3f%%", n, pairs, feasible, agree, pairs, rate)
	fmt.Printf("DRA fidelity: %d clusters, %d pod/node pairs (%d feasible), agreement %.3f%%\n", n, pairs, feasible, rate)
	if agree != pairs {
		t.Errorf("%d disagreements, first ones:\n%s", pairs-agree, strings.Join(problems, "\n"))
	}
	if feasible == 0 || feasible == pairs {
		t.Errorf("the generator must produce both feasible and infeasible pairs (feasible %d of %d)", feasible, pairs)
	}
}
