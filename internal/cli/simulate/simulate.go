// Package simulate implements `berth simulate`: a trace of a cluster's
// pods replayed through berth's planners on a virtual clock (internal/sim)
// under one or more policies, and `berth trace generate`, which writes
// synthetic traces.
package simulate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cli/limitflags"
	hr "github.com/berth-dev/berth/internal/headroom"
	"github.com/berth-dev/berth/internal/scenario"
	"github.com/berth-dev/berth/internal/sim"
	"github.com/berth-dev/berth/internal/trace"
)

// Policy keywords that need no file.
const (
	// PolicyCurrent is the cluster file as it is.
	PolicyCurrent = "current"
	// PolicyNoHeadroom is the cluster file without its Headrooms.
	PolicyNoHeadroom = "no-headroom"
)

type options struct {
	trace, cluster, output, out string
	learnFrom                   string
	policies                    []string
	launchDelays                []string
	batchIdle, batchMax, resync time.Duration
	scaleDownInterval           time.Duration
	seed                        uint64
	verbose                     bool
	limits                      limitflags.ClusterLimits
}

// NewCommand returns `berth simulate`.
func NewCommand() *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "simulate --trace FILE --cluster FILE [--policy FILE|current|no-headroom]... [-o table|json|html]",
		Short: "Replay a trace of pods through berth's planners and compare what policies cost and how long pods wait",
		Long: `berth simulate replays a trace (berth record, or berth trace generate) on a
virtual clock through the same scale-up and scale-down planners, headroom
resolution and scheduling filters the controller runs, with a model of
kube-scheduler binding pods (least-allocated), nodes booting for their
group's launch delay, drains by eviction and headroom placeholders
preempted by real pods. A day runs in seconds to a minute.

--cluster is a YAML of NodeGroups, Headrooms and DaemonSets (as berth plan
reads it; berth record writes one). Each --policy is a YAML of NodeGroups
and Headrooms that replace the cluster's objects of the same kind and name
(new names are added), or the keyword current (the cluster as is, the
default) or no-headroom (the cluster without its Headrooms). The policies
run side by side and are reported as columns: cost, node-hours by
instance and capacity type, headroom's share of the cost, the wait for
capacity of the pods that waited (p50/p95/p99/max), launches, removals,
drains, replacements. -o html writes a self-contained page with charts.

A Headroom with a target (spec.target) learns the demand as the
controller does; --learn-from runs each policy on another trace first so
that it starts with that history, as a controller that has been running.

Launch delays: the trace's recorded launch-to-Ready times of a group
(drawn at random, --seed), else the group's kwok launchDelay, else 60s;
--launch-delay 90s sets every group's, --launch-delay GROUP=90s one's.`,
		Example: `  berth trace generate --family ci --seed 1 > ci.jsonl
  berth simulate --trace ci.jsonl --cluster cluster.yaml --policy no-headroom --policy current -o html --out report.html`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.trace, "trace", "", "trace to replay (JSON lines, see docs/simulate.md)")
	f.StringVar(&o.cluster, "cluster", "", "YAML of the cluster's NodeGroups, Headrooms and DaemonSets")
	f.StringVar(&o.learnFrom, "learn-from", "", "another trace (an earlier day, say) each policy is first run on: Headrooms with a target start the simulation with the demand history learned there instead of learning from nothing")
	f.StringArrayVar(&o.policies, "policy", nil, "a policy: YAML of NodeGroups and Headrooms replacing the cluster's, or current or no-headroom (repeat to compare; default current)")
	f.StringVarP(&o.output, "output", "o", "table", "output format: table, json or html")
	f.StringVar(&o.out, "out", "", "write the report to this file instead of standard output")
	f.StringArrayVar(&o.launchDelays, "launch-delay", nil, "boot time of nodes: DURATION for every group or GROUP=DURATION (repeatable)")
	f.DurationVar(&o.batchIdle, "batch-idle-duration", sim.DefaultBatchIdle, "as the controller's flag: a provisioning round starts this long after the last pod that found no node")
	f.DurationVar(&o.batchMax, "batch-max-duration", sim.DefaultBatchMax, "as the controller's flag: at most this long after the first")
	f.DurationVar(&o.resync, "resync-period", sim.DefaultResync, "as the controller's flag: a provisioning round at least this often")
	f.DurationVar(&o.scaleDownInterval, "scale-down-interval", sim.DefaultScaleDownInterval, "as the controller's flag: how often scale-down plans")
	f.Uint64Var(&o.seed, "seed", 1, "seed of the launch delays drawn from recorded times")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "log every launch, binding, preemption, drain and removal to standard error")
	o.limits.Bind(f)
	_ = cmd.MarkFlagRequired("trace")
	_ = cmd.MarkFlagRequired("cluster")
	return cmd
}

// policy is one configuration to simulate.
type policy struct {
	name       string
	nodeGroups []*v1alpha1.NodeGroup
	headrooms  []*v1alpha1.Headroom
}

func (o *options) run(ctx context.Context, stdout, stderr io.Writer) error {
	switch o.output {
	case "table", "json", "html":
	default:
		return fmt.Errorf("--output must be table, json or html, not %q", o.output)
	}
	if o.trace == "-" {
		return errors.New("--trace must be a file: each policy reads it from the start")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"--batch-idle-duration", o.batchIdle}, {"--batch-max-duration", o.batchMax}, {"--resync-period", o.resync}, {"--scale-down-interval", o.scaleDownInterval}} {
		// A round every nanosecond of a day's trace would never end.
		if d.v < minInterval {
			return fmt.Errorf("%s must be at least %s, not %s", d.name, minInterval, d.v)
		}
	}
	limits, err := o.limits.Limits()
	if err != nil {
		return err
	}
	cluster, err := loadFile(o.cluster)
	if err != nil {
		return err
	}
	if len(cluster.NodeGroups) == 0 {
		return fmt.Errorf("%s: no NodeGroup: nothing could launch a node", o.cluster)
	}
	if n, p, b := len(cluster.Nodes), len(cluster.Pods), len(cluster.PDBs); n+p+b > 0 {
		_, _ = fmt.Fprintf(stderr, "note: %s has %d Nodes, %d Pods and %d PodDisruptionBudgets; the simulation starts from the trace's pods and launches its own nodes, so they are not used\n",
			o.cluster, n, p, b)
	}
	policies, err := o.loadPolicies(cluster)
	if err != nil {
		return err
	}
	header, err := readHeader(o.trace)
	if err != nil {
		return err
	}
	var groups []*v1alpha1.NodeGroup // of the cluster and of every policy
	for _, p := range policies {
		groups = append(groups, p.nodeGroups...)
	}
	delays, err := parseLaunchDelays(o.launchDelays, header.LaunchDelays, groups)
	if err != nil {
		return err
	}
	results := make([]*sim.Result, len(policies))
	errs := make([]error, len(policies))
	var logMu sync.Mutex
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, p := range policies {
		cfg := sim.Config{Name: p.name, NodeGroups: p.nodeGroups, Headrooms: p.headrooms, DaemonSets: cluster.DaemonSets,
			LaunchDelay: delays, BatchIdle: o.batchIdle, BatchMax: o.batchMax, Resync: o.resync,
			ScaleDownInterval: o.scaleDownInterval, Limits: limits, Seed: o.seed}
		if o.verbose {
			cfg.Log = func(at time.Duration, format string, args ...any) {
				logMu.Lock()
				defer logMu.Unlock()
				_, _ = fmt.Fprintf(stderr, "%-12s %10s  %s\n", p.name, at.Round(time.Millisecond), fmt.Sprintf(format, args...))
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if o.learnFrom != "" {
				learned := cfg
				learned.Log, learned.OnBound = nil, nil
				res, err := runOne(ctx, o.learnFrom, learned)
				if err != nil {
					errs[i] = fmt.Errorf("learning: %w", err)
					return
				}
				cfg.Histories, cfg.BurstHistories, cfg.Shapes = res.Histories, res.BurstHistories, res.Shapes
			}
			results[i], errs[i] = runOne(ctx, o.trace, cfg)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("policy %s: %w", policies[i].name, err)
		}
	}
	report := &sim.Report{Trace: o.trace, Start: header.Start, Source: header.Source, Results: results}
	w := stdout
	if o.out != "" {
		f, err := os.Create(o.out)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		w = f
	}
	switch o.output {
	case "json":
		err = report.WriteJSON(w)
	case "html":
		err = report.WriteHTML(w)
	default:
		err = report.WriteTable(w)
	}
	if err == nil && o.out != "" {
		_, _ = fmt.Fprintf(stderr, "wrote %s\n", o.out)
	}
	return err
}

// minInterval bounds the intervals of the simulated controllers from below.
const minInterval = 100 * time.Millisecond

func runOne(ctx context.Context, path string, cfg sim.Config) (*sim.Result, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	r, err := trace.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	res, err := sim.RunContext(ctx, cfg, r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return res, nil
}

func readHeader(path string) (trace.Header, error) {
	f, err := os.Open(path)
	if err != nil {
		return trace.Header{}, err
	}
	defer func() { _ = f.Close() }()
	r, err := trace.NewReader(f)
	if err != nil {
		return trace.Header{}, fmt.Errorf("%s: %w", path, err)
	}
	return r.Header, nil
}

func loadFile(path string) (*scenario.Scenario, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	sc, err := scenario.Load(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return sc, nil
}

// loadPolicies reads each --policy; names must differ.
func (o *options) loadPolicies(cluster *scenario.Scenario) ([]policy, error) {
	specs := o.policies
	if len(specs) == 0 {
		specs = []string{PolicyCurrent}
	}
	seen := map[string]bool{}
	var out []policy
	for _, spec := range specs {
		p := policy{name: spec, nodeGroups: cluster.NodeGroups, headrooms: cluster.Headrooms}
		switch spec {
		case PolicyCurrent:
		case PolicyNoHeadroom:
			p.headrooms = nil
		default:
			over, err := loadFile(spec)
			if err != nil {
				return nil, err
			}
			if len(over.NodeGroups)+len(over.Headrooms) == 0 {
				return nil, fmt.Errorf("policy %s: no NodeGroup or Headroom in it", spec)
			}
			p.name = strings.TrimSuffix(filepath.Base(spec), filepath.Ext(spec))
			p.nodeGroups = override(cluster.NodeGroups, over.NodeGroups, func(g *v1alpha1.NodeGroup) string { return g.Name })
			p.headrooms = override(cluster.Headrooms, over.Headrooms, func(h *v1alpha1.Headroom) string { return h.Namespace + "/" + h.Name })
		}
		// A Headroom the controller could not resolve keeps nothing and
		// says so in its status; here no status is read: it is refused.
		for _, h := range p.headrooms {
			if _, err := hr.ScopeGroups(h, p.nodeGroups); err != nil {
				return nil, fmt.Errorf("policy %s: Headroom %s: %w", p.name, h.Name, err)
			}
		}
		if seen[p.name] {
			return nil, fmt.Errorf("two policies are named %s: name policy files differently", p.name)
		}
		seen[p.name] = true
		out = append(out, p)
	}
	return out, nil
}

// override replaces the objects of base with those of over of the same
// name and appends the others.
func override[T any](base, over []T, name func(T) string) []T {
	idx := map[string]int{}
	out := make([]T, 0, len(base)+len(over))
	for _, x := range base {
		idx[name(x)] = len(out)
		out = append(out, x)
	}
	for _, x := range over {
		if i, ok := idx[name(x)]; ok {
			out[i] = x
			continue
		}
		out = append(out, x)
	}
	return out
}

// parseLaunchDelays makes the launch-delay model: flags first (GROUP=D or
// D for all), then the trace's recorded times drawn at random, then the
// group's own (nil result: the engine's default).
func parseLaunchDelays(flags []string, recorded map[string][]float64, groups []*v1alpha1.NodeGroup) (func(string, *rand.Rand) time.Duration, error) {
	fixed := map[string]time.Duration{}
	all := time.Duration(-1)
	for _, f := range flags {
		group, value, ok := strings.Cut(f, "=")
		if !ok {
			group, value = "", f
		}
		d, err := time.ParseDuration(value)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("--launch-delay %q: want DURATION or GROUP=DURATION with a duration such as 90s", f)
		}
		switch {
		case group == "":
			all = d
		case !slices.ContainsFunc(groups, func(g *v1alpha1.NodeGroup) bool { return g.Name == group }):
			return nil, fmt.Errorf("--launch-delay %q: neither the cluster nor a policy has node group %s", f, group)
		default:
			fixed[group] = d
		}
	}
	if len(fixed) == 0 && all < 0 && len(recorded) == 0 {
		return nil, nil
	}
	return func(group string, rng *rand.Rand) time.Duration {
		if d, ok := fixed[group]; ok {
			return d
		}
		if all >= 0 {
			return all
		}
		if r := recorded[group]; len(r) > 0 {
			return time.Duration(r[rng.IntN(len(r))] * float64(time.Second))
		}
		return -1 // the group's own
	}, nil
}
