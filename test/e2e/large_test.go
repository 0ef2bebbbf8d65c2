package e2e

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/nodeutil"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
)

// TestLargeCluster measures berth on a large cluster (BERTH_E2E_LARGE=1;
// BERTH_E2E_LARGE_NODES nodes, 1,000 by default, of 16 cpu with 30 running
// pods each, none of them berth's): the time a provisioning round takes to
// read the cluster and to plan with nothing pending (from the
// controller's metrics), its memory, and a burst of 500 pods to all
// Running, beside the scheduler alone placing the same pods on copies of
// the nodes berth launched.
func TestLargeCluster(t *testing.T) {
	if os.Getenv("BERTH_E2E_LARGE") == "" {
		t.Skip("set BERTH_E2E_LARGE=1 to measure a large cluster")
	}
	size := 1000
	if v := os.Getenv("BERTH_E2E_LARGE_NODES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("BERTH_E2E_LARGE_NODES=%q: want a positive count", v)
		}
		size = n
	}
	filler := newNamespace(t)
	start := time.Now()
	fillCluster(t, filler, size, 30)
	t.Logf("%d nodes x 30 running pods created in %s", size, time.Since(start).Round(time.Second))

	createNodeGroup(t, b.NodeGroup("large", b.Size(0, 500),
		b.InstanceType("m-4", "4", "16Gi", b.Spot("zone-a", "0.05"), b.Spot("zone-b", "0.05"), b.Spot("zone-c", "0.05")),
		b.InstanceType("m-16", "16", "64Gi", b.Spot("zone-a", "0.19"), b.Spot("zone-b", "0.19"), b.Spot("zone-c", "0.19"))))
	// The filler alone is 16,000 cpu, above the default cluster limit.
	pprof := "127.0.0.1:" + strconv.Itoa(freePort(t))
	ctrl := startController(t, "--resync-period=2s", "--cluster-max-cpu=100000", "--cluster-max-memory=1000Ti", "--pprof-bind-address="+pprof)
	// Idle rounds: nothing pending, a round every 2 s.
	time.Sleep(10 * time.Second) // the first rounds fill the informer caches
	before := ctrl.metricFamilies(t)
	time.Sleep(40 * time.Second)
	after := ctrl.metricFamilies(t)
	readIdle := meanDelta(before, after, "berth_provisioning_read_duration_seconds")
	planIdle := meanDelta(before, after, "berth_provisioning_plan_duration_seconds")
	rssIdle := ctrl.rss()
	heapIdle := heapStats(t, pprof)

	var ns string
	var wall time.Duration
	t.Run("burst", func(t *testing.T) { ns = newNamespace(t); wall = createBurst(t, ns, "large", 500) })
	burst := ctrl.metricFamilies(t)
	readBurst := meanDelta(after, burst, "berth_provisioning_read_duration_seconds")
	planBurst := meanDelta(after, burst, "berth_provisioning_plan_duration_seconds")
	nodes := groupNodes(t, "large") // the baseline copies these
	// A second burst, planned on the model of the cluster the first built
	// and brought up to date (the first burst's nodes and pods added).
	var wall2 time.Duration
	t.Run("second burst", func(t *testing.T) { wall2 = createBurst(t, newNamespace(t), "large", 500) })
	second := ctrl.metricFamilies(t)
	planSecond := meanDelta(burst, second, "berth_provisioning_plan_duration_seconds")
	peak := ctrl.peakRSS()
	builds := func(mf map[string]*dto.MetricFamily) string {
		return fmt.Sprintf("%.0f built from scratch, %.0f brought up to date",
			labelledCounter(mf, "berth_provisioning_snapshot_builds_total", "how", "scratch"),
			labelledCounter(mf, "berth_provisioning_snapshot_builds_total", "how", "incremental"))
	}
	buildsFirst, buildsAll := builds(burst), builds(second)
	ctrl.stop()

	extra := (len(nodes) + 9) / 10 // as in TestThroughput1000Pods
	for i := range len(nodes) + extra {
		copyNode(t, &nodes[i%len(nodes)], fmt.Sprintf("baseline-%d", i))
	}
	expect.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		ready := 0
		for _, n := range groupNodes(t, "baseline") {
			if nodeutil.Ready(&n) {
				ready++
			}
		}
		return ready == len(nodes)+extra, fmt.Sprintf("%d of %d baseline nodes Ready", ready, len(nodes)+extra), nil
	})
	var base time.Duration
	t.Run("baseline", func(t *testing.T) { base = createBurst(t, newNamespace(t), "baseline", 500) })

	msg := fmt.Sprintf("large cluster: %d nodes x 30 pods; idle round (nothing pending): read %s, plan %s (%d rounds); "+
		"RSS idle %d MiB (Go heap in use %s); 500-pod burst: all Running %s after the first was created, %d nodes launched, rounds read %s and plan %s on average "+
		"(plan time %s over %d rounds; models of the cluster: %s); a second 500-pod burst: all Running %s, plan time %s over %d rounds (models by then: %s); "+
		"peak RSS %d MiB; baseline (scheduler alone, %d ready nodes) %s: %.2fx",
		size, ms(readIdle.mean), ms(planIdle.mean), readIdle.count, rssIdle>>20, heapIdle,
		wall.Round(100*time.Millisecond), len(nodes), ms(readBurst.mean), ms(planBurst.mean),
		ms(planBurst.mean*time.Duration(planBurst.count)), planBurst.count, buildsFirst,
		wall2.Round(100*time.Millisecond), ms(planSecond.mean*time.Duration(planSecond.count)), planSecond.count, buildsAll, peak>>20,
		len(nodes)+extra, base.Round(100*time.Millisecond), wall.Seconds()/base.Seconds())
	t.Log(msg)
	fmt.Println(msg)
}

// fillCluster creates n KWOK nodes of 16 cpu and 64Gi (not berth's: no
// node group label) and perNode pods bound to each, and waits until the
// pods run.
func fillCluster(t *testing.T, ns string, n, perNode int) {
	t.Helper()
	ctx := context.Background()
	work := make(chan func() error)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range work {
				if err := f(); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		name := fmt.Sprintf("filler-%05d", i)
		node := b.Node(name, "16", "64Gi", b.KWOK(), b.NodeLabels(corev1.LabelTopologyZone, fmt.Sprintf("zone-%c", 'a'+i%3), "filler", "true"))
		node.TypeMeta = metav1.TypeMeta{}
		node.Status = corev1.NodeStatus{Capacity: node.Status.Capacity, Allocatable: node.Status.Allocatable}
		work <- func() error { return env.Client.Create(ctx, node) }
	}
	t.Cleanup(func() {
		_ = env.Client.DeleteAllOf(context.Background(), &corev1.Node{}, client.MatchingLabels{"filler": "true"})
	})
	for i := range n {
		node := fmt.Sprintf("filler-%05d", i)
		for j := range perNode {
			p := b.Pod(fmt.Sprintf("f-%d-%d", i, j), b.Namespace(ns), b.NoUID(), b.NodeName(node), b.CPU("450m"), b.Memory("1Gi"),
				b.Labels("app", fmt.Sprintf("app-%d", j)))
			work <- func() error { return env.Client.Create(ctx, p) }
		}
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("filling the cluster: %v", firstErr)
	}
	waitRunning(t, ns, n*perNode, 20*time.Minute)
}

// createBurst creates n pods of the throughput test's sizes selecting
// group's nodes, and returns how long until all ran.
func createBurst(t *testing.T, ns, group string, n int) time.Duration {
	t.Helper()
	r := rand.New(rand.NewSource(1))
	cpus := []string{"100m", "250m", "500m", "1"}
	start := time.Now()
	for i := range n {
		createPods(t, b.Pod(fmt.Sprintf("p-%d", i), b.Namespace(ns), b.NoUID(), b.CPU(cpus[r.Intn(len(cpus))]), b.Memory("256Mi"),
			b.NodeSelector(v1alpha1.LabelNodeGroup, group)))
	}
	waitRunning(t, ns, n, 10*time.Minute)
	return time.Since(start)
}

// histogramDelta is what a histogram recorded between two reads.
type histogramDelta struct {
	mean  time.Duration
	count int
}

func meanDelta(before, after map[string]*dto.MetricFamily, name string) histogramDelta {
	h := func(mf map[string]*dto.MetricFamily) (float64, uint64) {
		f := mf[name]
		if f == nil || len(f.GetMetric()) == 0 {
			return 0, 0
		}
		m := f.GetMetric()[0].GetHistogram()
		return m.GetSampleSum(), m.GetSampleCount()
	}
	s0, c0 := h(before)
	s1, c1 := h(after)
	if c1 <= c0 {
		return histogramDelta{}
	}
	return histogramDelta{mean: time.Duration((s1 - s0) / float64(c1-c0) * float64(time.Second)), count: int(c1 - c0)}
}

// labelledCounter is the value of the counter's series whose label has
// the value given (0 when there is none).
func labelledCounter(mf map[string]*dto.MetricFamily, name, label, value string) float64 {
	for _, m := range mf[name].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label && l.GetValue() == value {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

// heapStats reads the controller's heap figures from its pprof endpoint
// (the runtime.MemStats lines of /debug/pprof/heap?debug=1) and keeps the
// heap profile in BERTH_E2E_LOG_DIR when set, for go tool pprof.
func heapStats(t *testing.T, addr string) string {
	t.Helper()
	get := func(path string) []byte {
		resp, err := http.Get("http://" + addr + path) //nolint:noctx // a test's one-off read
		if err != nil {
			t.Fatalf("reading the controller's heap profile: %v", err)
		}
		defer func() { _ = resp.Body.Close() }()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	if dir := os.Getenv("BERTH_E2E_LOG_DIR"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, "large-heap.pprof"), get("/debug/pprof/heap"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var inuse, alloc string
	for _, line := range strings.Split(string(get("/debug/pprof/heap?debug=1")), "\n") {
		if v, ok := strings.CutPrefix(line, "# HeapInuse = "); ok {
			inuse = v
		}
		if v, ok := strings.CutPrefix(line, "# HeapAlloc = "); ok {
			alloc = v
		}
	}
	mib := func(v string) string {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return "?"
		}
		return strconv.FormatInt(n>>20, 10) + " MiB"
	}
	return mib(inuse) + ", objects allocated " + mib(alloc)
}
