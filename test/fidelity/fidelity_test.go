package fidelity

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"

	"github.com/berth-dev/berth/internal/simulator/predicates"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

var cases = flag.Int("cases", 3000, "number of random clusters to compare")

// filterPlugins are the kube-scheduler Filter plugins berth models. The
// others (volume binding, volume limits and zone, gang scheduling,
// declared features) need API objects the random clusters do not have; PV
// node affinity is covered by berth's own table tests. DynamicResources
// has its own generator and comparison (dra_test.go).
var filterPlugins = []string{
	names.NodeUnschedulable, names.NodeName, names.TaintToleration, names.NodeAffinity,
	names.NodePorts, names.NodeResourcesFit, names.PodTopologySpread, names.InterPodAffinity,
}

func TestMain(m *testing.M) {
	klog.InitFlags(nil)
	_ = flag.Set("v", "0")
	metrics.Register()
	os.Exit(m.Run())
}

// upstream is kube-scheduler's filtering for one cluster.
type upstream struct {
	fw   framework.Framework
	snap *cache.Snapshot
}

func newUpstream(ctx context.Context, t *testing.T, c Case) *upstream {
	t.Helper()
	cfg, err := latest.Default()
	if err != nil {
		t.Fatal(err)
	}
	profile := cfg.Profiles[0]
	enabled := make([]config.Plugin, 0, len(filterPlugins))
	for _, n := range filterPlugins {
		enabled = append(enabled, config.Plugin{Name: n})
	}
	var pre []config.Plugin
	for _, n := range []string{names.NodeAffinity, names.NodePorts, names.NodeResourcesFit, names.PodTopologySpread, names.InterPodAffinity} {
		pre = append(pre, config.Plugin{Name: n})
	}
	profile.Plugins = &config.Plugins{
		QueueSort: config.PluginSet{Enabled: []config.Plugin{{Name: names.PrioritySort}}},
		Bind:      config.PluginSet{Enabled: []config.Plugin{{Name: names.DefaultBinder}}},
		PreFilter: config.PluginSet{Enabled: pre},
		Filter:    config.PluginSet{Enabled: enabled},
	}
	client := fake.NewClientset()
	for _, ns := range c.Namespaces {
		if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	snap := cache.NewSnapshot(c.Pods, c.Nodes)
	fw, err := frameworkruntime.NewFramework(ctx, plugins.NewInTreeRegistry(), &profile,
		frameworkruntime.WithSnapshotSharedLister(snap),
		frameworkruntime.WithInformerFactory(factory),
		frameworkruntime.WithClientSet(client),
	)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return &upstream{fw: fw, snap: snap}
}

// feasible returns, per node name, whether kube-scheduler's filters pass.
func (u *upstream) feasible(ctx context.Context, pod *corev1.Pod) (map[string]bool, map[string]string, error) {
	state := framework.NewCycleState()
	out, why := map[string]bool{}, map[string]string{}
	infos, err := u.snap.NodeInfos().List()
	if err != nil {
		return nil, nil, err
	}
	res, st, _ := u.fw.RunPreFilterPlugins(ctx, state, pod)
	for _, ni := range infos {
		name := ni.Node().Name
		switch {
		case !st.IsSuccess() && !st.IsSkip():
			out[name], why[name] = false, "prefilter: "+st.Message()
		case res != nil && !res.AllNodes() && !res.NodeNames.Has(name):
			out[name], why[name] = false, "prefilter result excludes node"
		default:
			fs := u.fw.RunFilterPlugins(ctx, state, pod, ni)
			out[name] = fs.IsSuccess()
			if !fs.IsSuccess() {
				why[name] = fmt.Sprintf("%s: %s", fs.Plugin(), fs.Message())
			}
		}
	}
	return out, why, nil
}

// ours returns berth's verdict per node name.
func ours(c Case) (map[string]bool, map[string]string, error) {
	in := snapshot.Input{Pods: c.Pods, Namespaces: c.Namespaces}
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
	s.Prepare(class)
	out, why := map[string]bool{}, map[string]string{}
	for _, n := range s.Nodes {
		st := predicates.Run(predicates.Default(), s, class, n)
		out[n.Name] = !st.Failed()
		why[n.Name] = st.Message()
	}
	return out, why, nil
}

// TestFidelity compares berth's filters with kube-scheduler's on random
// clusters and reports the agreement rate. Every disagreement fails the
// test: it is a bug, or a deliberate difference to document here.
func TestFidelity(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var pairs, agree, feasibleUp int
	var problems []string
	for seed := int64(1); seed <= int64(*cases); seed++ {
		c := Generate(seed)
		up := newUpstream(ctx, t, c)
		want, wantWhy, err := up.feasible(ctx, c.Pod)
		if err != nil {
			t.Fatal(err)
		}
		got, gotWhy, err := ours(c)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		for name, w := range want {
			pairs++
			if w {
				feasibleUp++
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
	t.Logf("fidelity: %d clusters, %d pod/node pairs (%d feasible for kube-scheduler), agreement %d/%d = %.3f%%",
		*cases, pairs, feasibleUp, agree, pairs, rate)
	fmt.Printf("fidelity: %d clusters, %d pod/node pairs (%d feasible), agreement %.3f%%\n", *cases, pairs, feasibleUp, rate)
	if agree != pairs {
		t.Errorf("%d disagreements, first ones:\n%s", pairs-agree, strings.Join(problems, "\n"))
	}
	if feasibleUp == 0 || feasibleUp == pairs {
		t.Errorf("the generator must produce both feasible and infeasible pairs (feasible %d of %d)", feasibleUp, pairs)
	}
}
