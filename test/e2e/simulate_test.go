package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cli/record"
	"github.com/berth-dev/berth/internal/sim"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/expect"
	"github.com/berth-dev/berth/internal/trace"
)

// fidelityTrace is a seven-minute trace of 252 pods in two workloads
// pinned to one node group: bursts that need nodes, deletions that leave
// nodes empty or half-used (consolidation with evictions), and a burst
// that headroom half absorbs.
func fidelityTrace(ns, group string) []*trace.Event {
	var out []*trace.Event
	seq := map[string]int{}
	var names = map[string][]string{}
	create := func(at float64, workload, cpu, mem string, n int) {
		for range n {
			seq[workload]++
			name := fmt.Sprintf("%s-%d", workload, seq[workload])
			names[workload] = append(names[workload], name)
			out = append(out, &trace.Event{At: at, Op: trace.OpCreate, Pod: &trace.Pod{Namespace: ns, Name: name,
				Workload: ns + "/" + workload, Labels: map[string]string{"app": workload},
				Spec: corev1.PodSpec{NodeSelector: map[string]string{v1alpha1.LabelNodeGroup: group},
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}}}})
		}
	}
	// remove deletes every step-th of the workload's pods from first on.
	remove := func(at float64, workload string, first, n, step int) {
		for i := 0; i < n; i++ {
			out = append(out, &trace.Event{At: at, Op: trace.OpDelete, Namespace: ns, Name: names[workload][first+i*step]})
		}
	}
	create(0, "web", "300m", "256Mi", 48)
	create(45, "job", "1", "1Gi", 24)
	create(100, "web", "300m", "256Mi", 60)
	remove(150, "job", 0, 24, 1)
	remove(170, "web", 0, 24, 2) // every other of the first 48
	create(200, "job", "1", "1Gi", 40)
	remove(260, "web", 48, 60, 1)
	create(300, "web", "300m", "256Mi", 80)
	remove(360, "job", 24, 40, 1)
	out = append(out, &trace.Event{At: 420, Op: trace.OpEnd})
	slices.SortStableFunc(out, func(a, b *trace.Event) int {
		switch {
		case a.At < b.At:
			return -1
		case a.At > b.At:
			return 1
		}
		return 0
	})
	return out
}

// liveRun is what the real system did with the trace.
type liveRun struct {
	// nodes is the group's node count (launching included) every
	// sampleEvery from the start.
	nodes []int
	// nodeSeconds by instance type.
	nodeSeconds map[string]float64
	// waits of the pods (created to bound), evictions' new pods included.
	waits     []float64
	evictions int
	// created is when each trace pod was created, since the start.
	created map[string]float64
	// launches are "at instance-type" of each node seen, in order.
	launches []string
}

const sampleEvery = 5 * time.Second

// replayLive plays the trace on the cluster: pods created and deleted at
// their times, owned by a ConfigMap per workload (a controller the drain
// rules accept); a pod berth evicts is created again under a new name at
// once, as its controller would (the trace's later delete then deletes
// that one), which is what the simulator models.
func replayLive(t *testing.T, ctx context.Context, events []*trace.Event, group string) liveRun {
	t.Helper()
	ns := events[0].Pod.Namespace
	owners := map[string]*corev1.ConfigMap{}
	for _, e := range events {
		if e.Op == trace.OpCreate && owners[e.Pod.Workload] == nil {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: strings.TrimPrefix(e.Pod.Workload, ns+"/")}}
			if err := env.Client.Create(ctx, cm); err != nil {
				t.Fatal(err)
			}
			owners[e.Pod.Workload] = cm
		}
	}
	var (
		mu      sync.Mutex
		created = map[string]time.Time{} // live pod name -> created
		bound   = map[string]time.Time{}
		mine    = map[string]bool{} // deletions the replayer made
		alias   = map[string]string{}
		specs   = map[string]*trace.Pod{}
		res     = liveRun{nodeSeconds: map[string]float64{}, created: map[string]float64{}}
		seen    = map[string]bool{}
		start   time.Time
		incarn  int
	)
	mkPod := func(p *trace.Pod, name string) *corev1.Pod {
		cm := owners[p.Workload]
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: p.Labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID, Controller: ptr.To(true)}}},
			Spec: *p.Spec.DeepCopy()}
		pod.Spec.Containers[0].Image = "app"
		return pod
	}
	createPod := func(p *trace.Pod, name string) {
		mu.Lock()
		created[name] = time.Now()
		mu.Unlock()
		if err := env.Client.Create(ctx, mkPod(p, name)); err != nil {
			t.Errorf("creating pod %s: %v", name, err)
		}
	}
	// Evictions: a pod of ours deleted by someone else comes back.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	factory := informers.NewSharedInformerFactoryWithOptions(env.Clientset, 0, informers.WithNamespace(ns))
	pods := factory.Core().V1().Pods().Informer()
	_, _ = pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			p := obj.(*corev1.Pod)
			mu.Lock()
			defer mu.Unlock()
			if _, ok := bound[p.Name]; !ok && p.Spec.NodeName != "" {
				bound[p.Name] = time.Now()
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			p, ok := obj.(*corev1.Pod)
			if !ok {
				return
			}
			mu.Lock()
			if mine[p.Name] {
				mu.Unlock()
				return
			}
			mine[p.Name] = true
			res.evictions++
			incarn++
			traceName := p.Name
			for k, v := range alias {
				if v == p.Name {
					traceName = k
				}
			}
			name := fmt.Sprintf("%s-r%d", strings.SplitN(traceName, "-r", 2)[0], incarn)
			alias[traceName] = name
			spec := specs[traceName]
			mu.Unlock()
			go createPod(spec, name)
		},
	})
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	defer factory.Shutdown() // after cancel (deferred later, runs first)
	defer cancel()

	start = time.Now()
	// Node sampler: count and node-seconds by instance type.
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(sampleEvery)
		defer tick.Stop()
		last := time.Now()
		for {
			nodes := &corev1.NodeList{}
			if err := env.Client.List(ctx, nodes, client.MatchingLabels{v1alpha1.LabelNodeGroup: group}); err == nil {
				now := time.Now()
				mu.Lock()
				res.nodes = append(res.nodes, len(nodes.Items))
				for _, n := range nodes.Items {
					if !seen[n.Name] {
						seen[n.Name] = true
						res.launches = append(res.launches, fmt.Sprintf("%.0f %s", n.CreationTimestamp.Sub(start).Seconds(), n.Labels[v1alpha1.LabelInstanceType]))
					}
					res.nodeSeconds[n.Labels[v1alpha1.LabelInstanceType]] += now.Sub(last).Seconds()
				}
				mu.Unlock()
				last = now
			}
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
		}
	}()
	for _, e := range events {
		time.Sleep(time.Until(start.Add(time.Duration(e.At * float64(time.Second)))))
		switch e.Op {
		case trace.OpCreate:
			mu.Lock()
			specs[e.Pod.Name] = e.Pod
			mu.Unlock()
			createPod(e.Pod, e.Pod.Name)
		case trace.OpDelete:
			mu.Lock()
			name := e.Name
			if cur, ok := alias[e.Name]; ok {
				name = cur
			}
			mine[name] = true
			mu.Unlock()
			err := env.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, client.GracePeriodSeconds(0))
			if err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting pod %s: %v", name, err)
			}
		}
	}
	close(stopSampling)
	<-sampled
	mu.Lock()
	defer mu.Unlock()
	end := time.Now()
	for name, c := range created {
		if specs[name] != nil {
			res.created[name] = c.Sub(start).Seconds()
		}
		if bd, ok := bound[name]; ok {
			res.waits = append(res.waits, bd.Sub(c).Seconds())
		} else if !mine[name] {
			res.waits = append(res.waits, end.Sub(c).Seconds()) // never bound
		}
	}
	return res
}

// TestSimulationAgreesWithTheLiveSystem replays the same seven-minute
// trace (252 pods; nodes boot in 20 s; a Headroom of four 1-cpu units)
// on the real control plane with berth's controller and KWOK, and through
// the simulator with the same node group, Headroom and controller flags.
// They must agree on what a user would read in berth simulate's report:
// the node-seconds, the largest node count, the node count over time, how
// many pods waited for a node and how long. The tolerances (stated at
// each check, and in docs/simulate.md with the figures of a run) allow
// what the simulator does not model: API and watch latency, the
// scheduler's queue and backoff, KWOK's boot being a little over its
// delay, and the phase of the controller's scale-down rounds.
func TestSimulationAgreesWithTheLiveSystem(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	const group = "fidelity"
	ng := b.NodeGroup(group, b.Size(0, 40),
		b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.20")),
		b.InstanceType("m-8", "8", "32Gi", b.OnDemand("zone-a", "0.38")),
		b.LaunchDelay(metav1.Duration{Duration: 20 * time.Second}))
	hr := &v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: "fidelity"}, Spec: v1alpha1.HeadroomSpec{
		Scope: v1alpha1.HeadroomScope{NodeGroups: []string{group}},
		Units: &v1alpha1.HeadroomUnits{Count: 4, UnitShape: v1alpha1.UnitShape{Resources: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}
	events := fidelityTrace(ns, group)
	flags := []string{"--scale-down-interval=2s"}

	// The simulation first: it takes a second.
	var buf bytes.Buffer
	w, err := trace.NewWriter(&buf, trace.Header{Start: time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	_ = w.Flush()
	path := filepath.Join(t.TempDir(), "fidelity.jsonl")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := trace.NewReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var simWaits []float64
	var simLaunches []string
	simRes, err := sim.Run(sim.Config{Name: "sim", NodeGroups: []*v1alpha1.NodeGroup{ng.DeepCopy()}, Headrooms: []*v1alpha1.Headroom{hr.DeepCopy()},
		ScaleDownInterval: 2 * time.Second, Sample: sampleEvery,
		OnBound: func(_ string, created, bound time.Duration) { simWaits = append(simWaits, (bound - created).Seconds()) },
		Log: func(at time.Duration, format string, args ...any) {
			if msg := fmt.Sprintf(format, args...); strings.HasPrefix(msg, "launch ") || strings.HasPrefix(msg, "drain ") {
				simLaunches = append(simLaunches, fmt.Sprintf("%.0f %s", at.Seconds(), strings.Fields(msg)[2]))
			}
		}}, r)
	if err != nil {
		t.Fatal(err)
	}

	// The live run: the controller first, leading, with nothing to do;
	// the Headroom and the trace start together, as in the simulation.
	createNodeGroup(t, ng)
	startController(t, flags...)
	expect.Eventually(t, time.Minute, func(ctx context.Context) (bool, string, error) {
		g := &v1alpha1.NodeGroup{}
		err := env.Client.Get(ctx, client.ObjectKey{Name: group}, g)
		return err == nil && len(g.Status.Conditions) > 0, "the controller has not written the group's status yet", err
	})
	// berth record runs along: its trace must hold the replay's pods and
	// the nodes' boot times.
	recorded := filepath.Join(t.TempDir(), "recorded.jsonl")
	recCtx, stopRecording := context.WithCancel(ctx)
	recDone := make(chan error, 1)
	go func() {
		_, err := record.Record(recCtx, env.Config, record.Options{Out: recorded, Namespaces: []string{ns}}, logWriter(t))
		recDone <- err
	}()
	createHeadroom(t, hr)
	live := replayLive(t, ctx, events, group)
	stopRecording()
	if err := <-recDone; err != nil {
		t.Fatalf("berth record: %v", err)
	}

	// What a user reads: node-seconds, peak, the curve, waits.
	simNodeSeconds := 0.0
	for _, h := range simRes.NodeHours {
		simNodeSeconds += h.Hours * 3600
	}
	liveNodeSeconds := 0.0
	for _, s := range live.nodeSeconds {
		liveNodeSeconds += s
	}
	simPeak, livePeak := 0, slices.Max(live.nodes)
	var simCurve []int
	for _, s := range simRes.Series {
		simPeak = max(simPeak, s.Nodes)
		simCurve = append(simCurve, s.Nodes)
	}
	diff, worst := curveDiff(simCurve, live.nodes)
	waitedSim, waitedLive := waitedOver(simWaits, 5), waitedOver(live.waits, 5)
	t.Logf("node-seconds: simulated %.0f, live %.0f (%+.1f%%)", simNodeSeconds, liveNodeSeconds, 100*(liveNodeSeconds-simNodeSeconds)/simNodeSeconds)
	t.Logf("peak nodes: simulated %d, live %d; node count over time: mean difference %.2f nodes, largest %d", simPeak, livePeak, diff, worst)
	t.Logf("pods that waited over 5 s: simulated %d (p50 %.1f s, max %.1f s), live %d (p50 %.1f s, max %.1f s)",
		len(waitedSim), quantile(waitedSim, 0.5), slices.Max(append(waitedSim, 0)), len(waitedLive), quantile(waitedLive, 0.5), slices.Max(append(waitedLive, 0)))
	t.Logf("evictions: simulated %d, live %d; launches simulated %d", simRes.Evictions, live.evictions, simRes.Launches)
	t.Logf("launches: simulated %v", simLaunches)
	t.Logf("launches: live      %v", live.launches)
	t.Logf("simulated curve %v", simCurve)
	t.Logf("live curve      %v", live.nodes)

	// Node-seconds within 15 %: nodes boot ~1 s later live and are
	// removed up to a scale-down round (2 s) later, over ~10 nodes that
	// live 1-7 minutes each.
	if math.Abs(liveNodeSeconds-simNodeSeconds) > 0.15*simNodeSeconds {
		t.Errorf("node-seconds: simulated %.0f, live %.0f: more than 15 %% apart", simNodeSeconds, liveNodeSeconds)
	}
	// The largest node count within two nodes: a consolidation that
	// evicts a pod or two live and not simulated (it depends on which
	// node the scheduler chose among equals, and on the round's phase)
	// can cost a launch; one run saw 13 live for 11 simulated.
	if livePeak < simPeak-2 || livePeak > simPeak+2 {
		t.Errorf("peak nodes: simulated %d, live %d", simPeak, livePeak)
	}
	// The curves sampled every 5 s differ by under one node on average
	// (they step at slightly different instants).
	if diff > 1 {
		t.Errorf("node count over time differs by %.2f nodes on average, want at most 1", diff)
	}
	// The pods that waited for a node: the same bursts wait, so the counts
	// are within 20 % (or 10 pods), and the median wait within 5 s (boot
	// 20 s + batch 1 s live and simulated; live adds the scheduler's
	// reaction to a Ready node, so more live pods pass 5 s: the simulation
	// is the same every run, 130 pods on 2026-11-29, and live runs saw
	// 149-150).
	if d := math.Abs(float64(len(waitedLive) - len(waitedSim))); d > math.Max(10, 0.20*float64(len(waitedSim))) {
		t.Errorf("pods that waited over 5 s: simulated %d, live %d", len(waitedSim), len(waitedLive))
	}
	if d := math.Abs(quantile(waitedLive, 0.5) - quantile(waitedSim, 0.5)); d > 5 {
		t.Errorf("median wait of the pods that waited: simulated %.1f s, live %.1f s", quantile(waitedSim, 0.5), quantile(waitedLive, 0.5))
	}
	checkRecorded(t, recorded, live.created, group)
}

// checkRecorded: berth record's trace of the replay holds every pod the
// replay created, at the time it was created (within 1 s, the two clocks
// aligned on the first pod), their deletions, and the boot times of the
// nodes launched meanwhile (20 s and a little).
func checkRecorded(t *testing.T, path string, created map[string]float64, group string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	r, err := trace.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	deletes := 0
	for {
		e, err := r.Next()
		if err != nil {
			break
		}
		switch e.Op {
		case trace.OpCreate:
			got[e.Pod.Name] = e.At
			if len(e.Pod.Spec.Containers) != 1 || e.Pod.Spec.Containers[0].Resources.Requests.Cpu().IsZero() || e.Pod.Workload == "" {
				t.Errorf("recorded pod %s lost its requests or workload: %+v", e.Pod.Name, e.Pod)
			}
		case trace.OpDelete:
			deletes++
		}
	}
	offset := got["web-1"] - created["web-1"]
	for name, at := range created {
		rec, ok := got[name]
		if !ok || math.Abs(rec-offset-at) > 1 {
			t.Errorf("recorded trace: pod %s at %.1f (found %v), created at %.1f (+%.1f)", name, rec, ok, at, offset)
		}
	}
	if deletes < 24+24+60+40 {
		t.Errorf("recorded %d deletions, want at least the trace's 148", deletes)
	}
	delays := r.Header.LaunchDelays[group]
	if len(delays) == 0 {
		t.Fatalf("no launch delays recorded for %s: %v", group, r.Header.LaunchDelays)
	}
	for _, d := range delays {
		if d < 19 || d > 30 {
			t.Errorf("recorded launch delays %v, want 20 s and a little each", delays)
			break
		}
	}
}

// curveDiff is the mean and largest absolute difference of two series
// over their common length.
func curveDiff(a, b []int) (float64, int) {
	n := min(len(a), len(b))
	sum, worst := 0, 0
	for i := range n {
		d := a[i] - b[i]
		if d < 0 {
			d = -d
		}
		sum += d
		worst = max(worst, d)
	}
	if n == 0 {
		return math.Inf(1), 0
	}
	return float64(sum) / float64(n), worst
}

func waitedOver(waits []float64, s float64) []float64 {
	var out []float64
	for _, w := range waits {
		if w > s {
			out = append(out, w)
		}
	}
	slices.Sort(out)
	return out
}

func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func logWriter(t *testing.T) testWriter { return testWriter{t} }
