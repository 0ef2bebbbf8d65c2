package clusterread_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/berth-dev/berth/internal/clusterread"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
	"github.com/berth-dev/berth/internal/testing/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// TestReadFromStoresSeesWhatListSees: a round reading pods and nodes
// from the informers' stores (no copy at all) reads the same objects as
// one listing them from the same cache, on a real API server.
func TestReadFromStoresSeesWhatListSees(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range 3 {
		n := b.Node(fmt.Sprintf("store-%d", i), "4", "16Gi")
		if err := env.Client.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), n) })
		for j := range 2 {
			p := b.Pod(fmt.Sprintf("store-%d-%d", i, j), b.NoUID(), b.NodeName(n.Name), b.CPU("100m"))
			if err := env.Client.Create(ctx, p); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = env.Client.Delete(context.Background(), p) })
		}
	}
	cache, err := crcache.New(env.Config, crcache.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = cache.Start(ctx) }()
	if !cache.WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}
	names := func(parts clusterread.Parts) ([]string, []string, error) {
		cl, err := clusterread.Read(ctx, cache, parts)
		if err != nil {
			return nil, nil, err
		}
		var pods, nodes []string
		for _, p := range cl.Pods {
			pods = append(pods, p.Namespace+"/"+p.Name+" on "+p.Spec.NodeName)
		}
		for _, n := range cl.Nodes {
			nodes = append(nodes, n.Name)
		}
		slices.Sort(pods)
		slices.Sort(nodes)
		return pods, nodes, nil
	}
	var listed, listedNodes []string
	expect.Eventually(t, 30*time.Second, func(context.Context) (bool, string, error) {
		pods, nodes, err := names(clusterread.Parts{SharedNodes: true})
		listed, listedNodes = pods, nodes
		return len(pods) >= 6 && len(nodes) >= 3, fmt.Sprintf("%d pods and %d nodes in the cache", len(pods), len(nodes)), err
	})
	pods, nodes, err := names(clusterread.Parts{SharedNodes: true, Informers: cache})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(listed, pods); diff != "" {
		t.Errorf("pods from the stores (-listed +stored):\n%s", diff)
	}
	if diff := cmp.Diff(listedNodes, nodes); diff != "" {
		t.Errorf("nodes from the stores (-listed +stored):\n%s", diff)
	}
	// The stores hand out the cache's own objects: the same pointers twice.
	first, err := clusterread.Read(ctx, cache, clusterread.Parts{Informers: cache})
	if err != nil {
		t.Fatal(err)
	}
	second, err := clusterread.Read(ctx, cache, clusterread.Parts{Informers: cache})
	if err != nil {
		t.Fatal(err)
	}
	same := map[*corev1.Pod]bool{}
	for _, p := range first.Pods {
		same[p] = true
	}
	for _, p := range second.Pods {
		if !same[p] {
			t.Fatalf("pod %s/%s is a new object in the second read: the stores were copied", p.Namespace, p.Name)
		}
	}
}
