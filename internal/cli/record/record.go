// Package record implements `berth record`: a live cluster's pods, as
// they are created and deleted, written as a trace for berth simulate,
// with the launch-to-Ready times of the nodes berth launches meanwhile and
// the cluster's NodeGroups, Headrooms and DaemonSets.
package record

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cli/clusterflags"
	"github.com/berth-dev/berth/internal/clusterread"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/podutil"
	"github.com/berth-dev/berth/internal/quantity"
	"github.com/berth-dev/berth/internal/scheme"
	"github.com/berth-dev/berth/internal/trace"
)

// Options bound a recording.
type Options struct {
	// Out is the trace file; ClusterOut, if set, the YAML of the
	// cluster's NodeGroups, Headrooms and DaemonSets.
	Out, ClusterOut string
	// Duration stops the recording (0: when the context ends).
	Duration time.Duration
	// MaxEvents stops the recording when that many events are written.
	MaxEvents int
	// Namespaces limits the pods recorded (empty: all).
	Namespaces []string
	// Now is the clock (tests); nil: time.Now.
	Now func() time.Time
}

// DefaultMaxEvents bounds a recording's size (a few hundred bytes each).
const DefaultMaxEvents = 2_000_000

// Stats say what was recorded.
type Stats struct {
	Events, Pods, Launches int
	Duration               time.Duration
	// Stopped says why the recording ended.
	Stopped string
}

// NewCommand returns `berth record`.
func NewCommand() *cobra.Command {
	var (
		o       Options
		cluster clusterflags.Flags
	)
	cmd := &cobra.Command{
		Use:   "record --out FILE [--cluster-out FILE] [--duration 24h] [--max-events N]",
		Short: "Record a live cluster's pods as a trace for berth simulate",
		Long: `berth record watches the cluster's pods and writes each creation and
deletion (a pod that completes counts as deleted) as a trace for berth
simulate; pods running when it starts are created at time 0. It keeps
what scheduling reads of a pod (requests, selectors, affinities,
tolerations, spread, priority, owner) and skips DaemonSet pods, static
pods and berth's own headroom pods. It also records how long the nodes
berth launches take from their creation to Ready, per node group, and
with --cluster-out writes the NodeGroups, Headrooms and DaemonSets as
berth simulate --cluster reads them.

It stops after --duration, after --max-events, or on Ctrl-C, and then
writes the trace; memory is bounded by the pods alive, not the length of
the recording. It only reads (get, list and watch of pods and nodes).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := cluster.RESTConfig()
			if err != nil {
				return err
			}
			st, err := Record(cmd.Context(), cfg, o, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			_, _ = fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s: %d events of %d pods over %s, %d node launches timed (%s)\n",
				o.Out, st.Events, st.Pods, st.Duration.Round(time.Second), st.Launches, st.Stopped)
			return nil
		},
	}
	f := cmd.Flags()
	cluster.Bind(f)
	f.StringVar(&o.Out, "out", "", "trace file to write")
	f.StringVar(&o.ClusterOut, "cluster-out", "", "also write the cluster's NodeGroups, Headrooms and DaemonSets here")
	f.DurationVar(&o.Duration, "duration", 0, "stop after this long (default: on Ctrl-C)")
	f.IntVar(&o.MaxEvents, "max-events", DefaultMaxEvents, "stop after this many events")
	f.StringSliceVarP(&o.Namespaces, "namespace", "n", nil, "record only these namespaces (default: all)")
	_ = cmd.MarkFlagRequired("out")
	return cmd
}

// recorder turns informer notifications into trace events, in the order
// they are seen, into a spool file; the header (which carries the launch
// times measured along the way) is written with the trace at the end.
type recorder struct {
	mu      sync.Mutex
	o       Options
	start   time.Time
	last    float64
	spool   *trace.Writer
	live    map[string]bool // pods recorded and not deleted
	pods    int
	stopped string
	full    chan struct{}
	// nodes seen created since the start, to when; delays measured.
	created map[string]time.Time
	delays  map[string][]float64
	ns      map[string]bool
	// waiting holds the pods pending at the start until the running ones
	// are written.
	waiting []*trace.Event
}

func (r *recorder) now() time.Time {
	if r.o.Now != nil {
		return r.o.Now()
	}
	return time.Now()
}

func (r *recorder) write(e *trace.Event, initial bool) {
	if r.stopped != "" {
		return
	}
	switch {
	case initial && !e.Running:
		// A trace starts with the running pods; the pending ones of the
		// start follow them.
		r.waiting = append(r.waiting, e)
	case initial:
		r.put(e)
	default:
		r.flushWaiting()
		e.At = max(r.last, r.now().Sub(r.start).Seconds())
		r.put(e)
	}
}

// flushWaiting writes the pods found pending at the start, once the
// running ones are written.
func (r *recorder) flushWaiting() {
	w := r.waiting
	r.waiting = nil
	for _, e := range w {
		r.put(e)
	}
}

func (r *recorder) put(e *trace.Event) {
	if r.stopped != "" {
		return
	}
	r.last = e.At
	if err := r.spool.Write(e); err != nil {
		r.stopped = "writing failed: " + err.Error()
		close(r.full)
		return
	}
	if r.spool.Events() >= r.o.MaxEvents {
		r.stopped = fmt.Sprintf("reached --max-events %d", r.o.MaxEvents)
		close(r.full)
	}
}

func (r *recorder) podAdded(obj any, initial bool) {
	p, ok := obj.(*corev1.Pod)
	if !ok || !trace.Recordable(p) || podutil.IsTerminal(p) || (len(r.ns) > 0 && !r.ns[p.Namespace]) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	key := p.Namespace + "/" + p.Name
	if r.live[key] {
		return
	}
	r.live[key] = true
	r.pods++
	// A pod bound when the recording began was running: the simulator
	// starts with it placed.
	r.write(&trace.Event{Op: trace.OpCreate, Pod: trace.FromPod(p), Running: initial && p.Spec.NodeName != ""}, initial)
}

func (r *recorder) podGone(ns, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := ns + "/" + name
	if !r.live[key] {
		return
	}
	delete(r.live, key)
	r.write(&trace.Event{Op: trace.OpDelete, Namespace: ns, Name: name}, false)
}

func (r *recorder) podUpdated(_, obj any) {
	if p, ok := obj.(*corev1.Pod); ok && podutil.IsTerminal(p) {
		r.podGone(p.Namespace, p.Name) // it holds no room once it completed
	}
}

func (r *recorder) podDeleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if p, ok := obj.(*corev1.Pod); ok {
		r.podGone(p.Namespace, p.Name)
	}
}

// nodeSeen times the nodes berth launches from their creation (seen
// during the recording) to their first Ready.
func (r *recorder) nodeSeen(obj any, initial bool) {
	n, ok := obj.(*corev1.Node)
	if !ok || n.Annotations[v1alpha1.AnnotationLaunchedBy] == "" || n.Labels[v1alpha1.LabelNodeGroup] == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	at, seen := r.created[n.Name]
	switch {
	case initial:
		return // created before the recording: its boot was not seen
	case !seen && !nodeutil.Ready(n):
		r.created[n.Name] = r.now()
	case seen && !at.IsZero() && nodeutil.Ready(n):
		g := n.Labels[v1alpha1.LabelNodeGroup]
		if len(r.delays[g]) < maxDelaysPerGroup {
			r.delays[g] = append(r.delays[g], roundMillis(r.now().Sub(at).Seconds()))
		}
		r.created[n.Name] = time.Time{} // timed once
	}
}

// maxDelaysPerGroup bounds the launch times kept.
const maxDelaysPerGroup = 1000

func roundMillis(s float64) float64 { return float64(int64(s*1000+0.5)) / 1000 }

// Record runs a recording until its duration, its event cap or ctx ends,
// then writes o.Out (and o.ClusterOut).
func Record(ctx context.Context, cfg *rest.Config, o Options, log io.Writer) (Stats, error) {
	if o.Out == "" {
		return Stats{}, errors.New("--out is required")
	}
	if o.MaxEvents <= 0 {
		o.MaxEvents = DefaultMaxEvents
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return Stats{}, err
	}
	if o.ClusterOut != "" {
		if err := writeCluster(ctx, cfg, o.ClusterOut); err != nil {
			return Stats{}, err
		}
	}
	spoolFile, err := os.CreateTemp(filepath.Dir(o.Out), ".berth-record-*")
	if err != nil {
		return Stats{}, err
	}
	defer func() { _ = os.Remove(spoolFile.Name()) }()
	defer func() { _ = spoolFile.Close() }()
	spool, err := trace.NewWriter(spoolFile, trace.Header{})
	if err != nil {
		return Stats{}, err
	}
	r := &recorder{o: o, live: map[string]bool{}, full: make(chan struct{}), created: map[string]time.Time{},
		delays: map[string][]float64{}, spool: spool, ns: map[string]bool{}}
	for _, ns := range o.Namespaces {
		r.ns[ns] = true
	}
	r.start = r.now()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	factory := informers.NewSharedInformerFactory(cs, 0)
	podInf := factory.Core().V1().Pods().Informer()
	nodeInf := factory.Core().V1().Nodes().Informer()
	_ = podInf.SetTransform(prepare)
	_ = nodeInf.SetTransform(prepare)
	pods, err := podInf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: r.podAdded, UpdateFunc: r.podUpdated, DeleteFunc: r.podDeleted})
	if err != nil {
		return Stats{}, err
	}
	nodes, err := nodeInf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    r.nodeSeen,
		UpdateFunc: func(_, obj any) { r.nodeSeen(obj, false) },
	})
	if err != nil {
		return Stats{}, err
	}
	factory.Start(ctx.Done())
	// The handlers' own sync: every pod of the first list was handed to
	// podAdded (the informer's alone may be ahead of its handlers).
	if !cache.WaitForCacheSync(ctx.Done(), pods.HasSynced, nodes.HasSynced) {
		return Stats{}, fmt.Errorf("listing pods and nodes: %w", context.Cause(ctx))
	}
	r.mu.Lock()
	r.flushWaiting()
	r.mu.Unlock()
	_, _ = fmt.Fprintf(log, "recording %d pods running or pending; stop with Ctrl-C\n", r.pods)
	var timeout <-chan time.Time
	if o.Duration > 0 {
		t := time.NewTimer(o.Duration)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-ctx.Done():
		r.stop("interrupted")
	case <-timeout:
		r.stop("--duration " + o.Duration.String() + " passed")
	case <-r.full:
	}
	cancel()
	factory.Shutdown()

	r.mu.Lock()
	defer r.mu.Unlock()
	end := r.now().Sub(r.start).Seconds()
	if r.stopped != "" && r.spool.Events() >= r.o.MaxEvents {
		end = r.last
	}
	if err := r.spool.Write(&trace.Event{At: max(end, r.last), Op: trace.OpEnd}); err != nil {
		return Stats{}, err
	}
	if err := r.spool.Flush(); err != nil {
		return Stats{}, err
	}
	st := Stats{Events: r.spool.Events(), Pods: r.pods, Duration: time.Duration(end * float64(time.Second)), Stopped: r.stopped}
	for _, d := range r.delays {
		st.Launches += len(d)
	}
	h := trace.Header{Start: r.start.UTC(), Source: "berth record", LaunchDelays: r.delays}
	return st, finish(o.Out, h, spoolFile)
}

func (r *recorder) stop(why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped == "" {
		r.flushWaiting() // pods pending at the start are not lost
		r.stopped = why
	}
}

// finish writes the header, then the spooled events after the spool's
// own header line.
func finish(path string, h trace.Header, spool *os.File) error {
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return err
	}
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	w, err := trace.NewWriter(out, h)
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		br := bufio.NewReader(spool)
		if _, err = br.ReadBytes('\n'); err == nil { // the spool's placeholder header
			_, err = io.Copy(out, br)
		}
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// prepare is the informers' transform: it drops the managed fields and
// bounds the quantities of a pod or node as the controller's cache does,
// so that the trace holds what berth plans with (a request of 1e3000000
// cpu is written as the bound, not as a number apimachinery's parser may
// not return on).
func prepare(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	quantity.BoundObject(obj)
	return obj, nil
}

func metaType(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

// clean drops what the API server set (status, UID, versions, managed
// fields): the file is an input, as if written by hand.
func clean[T interface {
	client.Object
	runtime.Object
}](o T) runtime.Object {
	o.SetUID("")
	o.SetResourceVersion("")
	o.SetGeneration(0)
	o.SetManagedFields(nil)
	o.SetCreationTimestamp(metav1.Time{})
	o.SetFinalizers(nil)
	switch x := any(o).(type) {
	case *v1alpha1.NodeGroup:
		x.Status = v1alpha1.NodeGroupStatus{}
	case *v1alpha1.Headroom:
		x.Status = v1alpha1.HeadroomStatus{}
	case *appsv1.DaemonSet:
		x.Status = appsv1.DaemonSetStatus{}
	}
	return o
}

// writeCluster writes the NodeGroups, Headrooms and DaemonSets as YAML
// documents.
func writeCluster(ctx context.Context, cfg *rest.Config, path string) error {
	raw, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	c := clusterread.Bounded(raw) // the DaemonSets' pod templates
	groups := &v1alpha1.NodeGroupList{}
	headrooms := &v1alpha1.HeadroomList{}
	daemonSets := &appsv1.DaemonSetList{}
	for _, l := range []client.ObjectList{groups, headrooms, daemonSets} {
		if err := c.List(ctx, l); err != nil {
			return fmt.Errorf("reading the cluster: %w", err)
		}
	}
	var objs []runtime.Object
	for i := range groups.Items {
		g := &groups.Items[i]
		g.TypeMeta = metaType(v1alpha1.GroupVersion.String(), "NodeGroup")
		objs = append(objs, clean(g))
	}
	for i := range headrooms.Items {
		h := &headrooms.Items[i]
		h.TypeMeta = metaType(v1alpha1.GroupVersion.String(), "Headroom")
		objs = append(objs, clean(h))
	}
	for i := range daemonSets.Items {
		d := &daemonSets.Items[i]
		d.TypeMeta = metaType("apps/v1", "DaemonSet")
		objs = append(objs, clean(d))
	}
	var out []byte
	for _, o := range objs {
		b, err := yaml.Marshal(o)
		if err != nil {
			return err
		}
		out = append(append(out, "---\n"...), b...)
	}
	return os.WriteFile(path, out, 0o644) //nolint:gosec // a report the user asked for
}
