package fidelity

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaleup"
)

// swapLister lets one framework read a new snapshot per pod checked.
type swapLister struct{ cur *cache.Snapshot }

func (s *swapLister) NodeInfos() fwk.NodeInfoLister           { return s.cur.NodeInfos() }
func (s *swapLister) StorageInfos() fwk.StorageInfoLister     { return s.cur.StorageInfos() }
func (s *swapLister) PodGroupStates() fwk.PodGroupStateLister { return s.cur.PodGroupStates() }

// filterFramework is kube-scheduler's framework with the Filter plugins
// berth models (filterPlugins) reading lister.
func filterFramework(ctx context.Context, t *testing.T, lister fwk.SharedLister) framework.Framework {
	t.Helper()
	cfg, err := latest.Default()
	if err != nil {
		t.Fatal(err)
	}
	profile := cfg.Profiles[0]
	var enabled []config.Plugin
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
	factory := informers.NewSharedInformerFactory(client, 0)
	fw, err := frameworkruntime.NewFramework(ctx, plugins.NewInTreeRegistry(), &profile,
		frameworkruntime.WithSnapshotSharedLister(lister), frameworkruntime.WithInformerFactory(factory),
		frameworkruntime.WithClientSet(client))
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return fw
}

// materialized is a plan carried out: the nodes it launches, with the
// labels of the offering chosen for each, and every pod bound where the
// plan put it (DaemonSet pods on the new nodes too).
type materialized struct {
	nodes  []*corev1.Node
	pods   []*corev1.Pod
	placed map[*corev1.Pod]string // pending pod -> node
	onNew  int
}

func materialize(t *testing.T, c PlanCase, plan *scaleup.Plan) materialized {
	t.Helper()
	m := materialized{nodes: append([]*corev1.Node(nil), c.Nodes...), pods: append([]*corev1.Pod(nil), c.Bound...), placed: map[*corev1.Pod]string{}}
	groups := map[string]*v1alpha1.NodeGroup{}
	for _, ng := range c.Groups {
		groups[ng.Name] = ng
	}
	where := map[types.NamespacedName]string{}
	for _, nn := range plan.NewNodes {
		ng := groups[nn.NodeGroup]
		it, off := ng.FindOffering(nn.InstanceType, nn.Zone, v1alpha1.CapacityType(nn.CapacityType))
		if it == nil {
			t.Fatalf("plan launches %s/%s/%s/%s, which the group does not offer", nn.NodeGroup, nn.InstanceType, nn.Zone, nn.CapacityType)
		}
		n := nodeOf(ng, it, off, nn.Name)
		m.nodes = append(m.nodes, n)
		for _, ds := range c.DaemonSets {
			if runsOn(ds, n) {
				p := &corev1.Pod{Spec: *ds.Spec.Template.Spec.DeepCopy()}
				p.Name, p.Namespace, p.UID, p.Spec.NodeName = "agent-"+n.Name, ds.Namespace, types.UID("uid-agent-"+n.Name), n.Name
				m.pods = append(m.pods, p)
			}
		}
		for _, ref := range nn.Pods {
			where[ref.Key()] = nn.Name
		}
		m.onNew += len(nn.Pods)
	}
	for _, pl := range plan.ExistingNodePlacements {
		where[pl.Pod.Key()] = pl.Node
	}
	for _, p := range c.Pending {
		node, ok := where[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}]
		if !ok {
			continue
		}
		bound := p.DeepCopy()
		bound.Spec.NodeName = node
		m.pods = append(m.pods, bound)
		m.placed[bound] = node
	}
	return m
}

// accepts runs kube-scheduler's filters for pod on node with every other
// pod of the materialized plan in place.
func (m materialized) accepts(ctx context.Context, fw framework.Framework, lister *swapLister, pod *corev1.Pod, node string) (bool, string) {
	others := make([]*corev1.Pod, 0, len(m.pods)-1)
	for _, p := range m.pods {
		if p != pod {
			others = append(others, p)
		}
	}
	lister.cur = cache.NewSnapshot(others, m.nodes)
	incoming := pod.DeepCopy()
	incoming.Spec.NodeName = ""
	state := framework.NewCycleState()
	res, st, _ := fw.RunPreFilterPlugins(ctx, state, incoming)
	if !st.IsSuccess() && !st.IsSkip() {
		return false, "prefilter: " + st.Message()
	}
	if res != nil && !res.AllNodes() && !res.NodeNames.Has(node) {
		return false, "prefilter result excludes the node"
	}
	ni, err := lister.cur.NodeInfos().Get(node)
	if err != nil {
		return false, err.Error()
	}
	if fs := fw.RunFilterPlugins(ctx, state, incoming, ni); !fs.IsSuccess() {
		return false, fmt.Sprintf("%s: %s", fs.Plugin(), fs.Message())
	}
	return true, ""
}

// TestPlansHoldWhenTheNodesArrive plans a scale-up with berth on random
// clusters (GeneratePlan), carries the plan out (the new nodes with the
// labels of the offerings chosen, every pod bound where the plan put it)
// and asks kube-scheduler's filters whether each placed pod may run on its
// node with all the others in place: a plan the scheduler refuses costs a
// second scale-up or a pod that waits. Every refusal fails the test.
func TestPlansHoldWhenTheNodesArrive(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lister := &swapLister{}
	fw := filterFramework(ctx, t, lister)
	var placements, accepted, onNew, unplaced int
	var problems []string
	for seed := int64(1); seed <= int64(*cases); seed++ {
		c := GeneratePlan(seed)
		if os.Getenv("SEEDLOG") != "" {
			fmt.Fprintln(os.Stderr, "seed", seed)
		}
		plan, err := scaleup.Run(scaleup.Input{NodeGroups: c.Groups, Nodes: c.Nodes, Pods: c.Bound, Pending: c.Pending, DaemonSets: c.DaemonSets})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		m := materialize(t, c, plan)
		onNew += m.onNew
		unplaced += len(plan.Unschedulable)
		for pod, node := range m.placed {
			placements++
			ok, why := m.accepts(ctx, fw, lister, pod, node)
			if ok {
				accepted++
				continue
			}
			if len(problems) < 20 {
				problems = append(problems, fmt.Sprintf("seed %d: %s planned on %s, kube-scheduler refuses: %s", seed, pod.Name, node, why))
			}
			if dir := os.Getenv("FIDELITY_DUMP"); dir != "" {
				if err := dump(filepath.Join(dir, fmt.Sprintf("plan-seed-%d.yaml", seed)), c); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	t.Logf("plans: %d clusters, %d placements (%d on new nodes, %d pods left unschedulable), %d accepted by kube-scheduler", *cases, placements, onNew, unplaced, accepted)
	fmt.Printf("plan fidelity: %d clusters, %d placements (%d on new nodes), accepted %d/%d\n", *cases, placements, onNew, accepted, placements)
	if accepted != placements {
		t.Errorf("%d placements refused, first ones:\n%s", placements-accepted, strings.Join(problems, "\n"))
	}
}
