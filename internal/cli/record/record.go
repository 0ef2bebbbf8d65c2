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
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/berth-dev/berth/internal/cli/clusterflags"
	"github.com/berth-dev/berth/internal/quantity"
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
	// Skipped are the pods left out of the trace (namespace/name): their
	// line would pass trace.MaxLine.
	Skipped []string
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
			if o.MaxEvents < 1 { // the flag's default is DefaultMaxEvents: this one was given
				return fmt.Errorf("--max-events must be at least 1, not %d", o.MaxEvents)
			}
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
			if n := len(st.Skipped); n > 0 {
				_, _ = fmt.Fprintf(cmd.ErrOrStderr(), "warning: %d pods left out, their spec past what a trace line holds (%d bytes): %s\n",
					n, trace.MaxLine, strings.Join(st.Skipped[:min(n, 10)], ", "))
			}
			return nil
		},
	}
	f := cmd.Flags()
	cluster.Bind(f)
	f.StringVar(&o.Out, "out", "", "trace file to write")
	f.StringVar(&o.ClusterOut, "cluster-out", "", "also write the cluster's NodeGroups, Headrooms and DaemonSets here")
	f.DurationVar(&o.Duration, "duration", 0, "stop after this long, at most 2160h (default: on Ctrl-C, or after 2160h)")
	f.IntVar(&o.MaxEvents, "max-events", DefaultMaxEvents, "stop after this many events")
	f.StringSliceVarP(&o.Namespaces, "namespace", "n", nil, "record only these namespaces (default: all)")
	_ = cmd.MarkFlagRequired("out")
	return cmd
}

// Record runs a recording until its duration, its event cap or ctx ends,
// then writes o.Out (and o.ClusterOut).
func Record(ctx context.Context, cfg *rest.Config, o Options, log io.Writer) (Stats, error) {
	if o.Out == "" {
		return Stats{}, errors.New("--out is required")
	}
	if o.MaxEvents <= 0 {
		o.MaxEvents = DefaultMaxEvents
	}
	if o.Duration < 0 || o.Duration > trace.MaxSpan {
		return Stats{}, fmt.Errorf("--duration must be at most %s (what a trace holds), not %s", trace.MaxSpan, o.Duration)
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
	limit, why := o.Duration, "--duration "+o.Duration.String()+" passed"
	if limit <= 0 {
		limit, why = trace.MaxSpan, "the longest span a trace holds ("+trace.MaxSpan.String()+") passed"
	}
	// From the start the events count from, which was before the
	// caches synced: a trace holds at most MaxSpan past it.
	t := time.NewTimer(max(0, limit-r.now().Sub(r.start)))
	defer t.Stop()
	select {
	case <-ctx.Done():
		r.stop("interrupted")
	case <-t.C:
		r.stop(why)
	case <-r.full:
	}
	cancel()
	factory.Shutdown()

	r.mu.Lock()
	defer r.mu.Unlock()
	end := min(r.now().Sub(r.start).Seconds(), trace.MaxSpan.Seconds())
	if r.stopped != "" && r.spool.Events() >= r.o.MaxEvents {
		end = r.last
	}
	if err := r.spool.Write(&trace.Event{At: max(end, r.last), Op: trace.OpEnd}); err != nil {
		return Stats{}, err
	}
	if err := r.spool.Flush(); err != nil {
		return Stats{}, err
	}
	st := Stats{Events: r.spool.Events(), Pods: r.pods, Duration: time.Duration(end * float64(time.Second)), Stopped: r.stopped, Skipped: r.skipped}
	for _, d := range r.delays {
		st.Launches += len(d)
	}
	h := trace.Header{Start: r.start.UTC(), Source: "berth record", LaunchDelays: r.delays}
	return st, finish(o.Out, h, spoolFile)
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
