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
	a := compareGenerated(t, *cases, Generate)
	rate := 100 * float64(a.agree) / float64(a.pairs)
	t.Logf("fidelity: %d clusters, %d pod/node pairs (%d feasible for kube-scheduler), agreement %d/%d = %.3f%%",
		*cases, a.pairs, a.feasible, a.agree, a.pairs, rate)
	fmt.Printf("fidelity: %d clusters, %d pod/node pairs (%d feasible), agreement %.3f%%\n", *cases, a.pairs, a.feasible, rate)
	a.check(t)
}

// agreement counts how berth's verdicts compare with kube-scheduler's.
type agreement struct {
	pairs, agree, feasible int
	problems               []string
}

// check fails on every disagreement (naming the first ones) and when the
// cases were all feasible or all infeasible (they would test little).
func (a agreement) check(t *testing.T) {
	t.Helper()
	if a.agree != a.pairs {
		t.Errorf("%d disagreements, first ones:\n%s", a.pairs-a.agree, strings.Join(a.problems, "\n"))
	}
	if a.feasible == 0 || a.feasible == a.pairs {
		t.Errorf("the generator must produce both feasible and infeasible pairs (feasible %d of %d)", a.feasible, a.pairs)
	}
}

// compareGenerated runs the clusters gen makes of seeds 1..n through
// kube-scheduler and berth.
func compareGenerated(t *testing.T, n int, gen func(seed int64) Case) agreement {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var a agreement
	for seed := int64(1); seed <= int64(n); seed++ {
		c := gen(seed)
		want, got := verdicts(ctx, t, fmt.Sprintf("seed %d", seed), c)
		for name, w := range want.ok {
			a.pairs++
			if w {
				a.feasible++
			}
			if got.ok[name] == w {
				a.agree++
				continue
			}
			if len(a.problems) < 20 {
				a.problems = append(a.problems, fmt.Sprintf("seed %d node %s: kube-scheduler feasible=%v (%s), berth feasible=%v (%s)",
					seed, name, w, want.why[name], got.ok[name], got.why[name]))
			}
		}
	}
	return a
}

// verdict is, per node, whether the pod fits and why not.
type verdict struct {
	ok  map[string]bool
	why map[string]string
}

// verdicts runs one case through kube-scheduler's filters and berth's; an
// error of either fails the test (what names the case).
func verdicts(ctx context.Context, t *testing.T, what string, c Case) (want, got verdict) {
	t.Helper()
	up := newUpstream(ctx, t, c)
	var err error
	if want.ok, want.why, err = up.feasible(ctx, c.Pod); err != nil {
		t.Fatalf("%s: kube-scheduler: %v", what, err)
	}
	if got.ok, got.why, err = ours(c); err != nil {
		t.Fatalf("%s: berth: %v", what, err)
	}
	return want, got
}
