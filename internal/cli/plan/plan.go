// Package plan implements `berth plan`: the scale-up planner run offline on
// a YAML snapshot of a cluster.
package plan

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/internal/cli/limitflags"
	"github.com/berth-dev/berth/internal/planner/scaledown"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/scenario"
)

type options struct {
	file      string
	output    string
	scaleDown bool
	limits    limitflags.ClusterLimits
}

// NewCommand returns `berth plan`.
func NewCommand() *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "plan -f FILE [-o table|json]",
		Short: "Show the nodes berth would launch for a YAML snapshot of a cluster",
		Long: `berth plan reads a multi-document YAML of Kubernetes objects (Nodes, Pods,
DaemonSets, PodDisruptionBudgets, Namespaces, PersistentVolumeClaims,
PersistentVolumes, and List kinds, so that
  kubectl get nodes,pods,daemonsets -A -o yaml
output works as is) plus berth NodeGroups and Headrooms, and prints the plan the controller
would execute: pods that fit existing nodes, new nodes with their node group,
instance type, zone, capacity type, price and pods, and the pods that fit
nowhere with the reason per node group. Pods without spec.nodeName (and
without scheduling gates) are the pending pods. Use -f - for standard input.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVarP(&o.file, "filename", "f", "", "YAML snapshot to plan for (- for standard input)")
	cmd.Flags().StringVarP(&o.output, "output", "o", "table", "output format: table or json")
	cmd.Flags().BoolVar(&o.scaleDown, "scale-down", false, "show the scale-down side instead: which of berth's nodes would be removed, and why the others stay")
	o.limits.Bind(cmd.Flags())
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

func (o *options) run(stdin io.Reader, stdout, stderr io.Writer) error {
	if o.output != "table" && o.output != "json" {
		return fmt.Errorf("--output must be table or json, not %q", o.output)
	}
	limits, err := o.limits.Limits()
	if err != nil {
		return err
	}
	in := stdin
	if o.file != "-" {
		f, err := os.Open(o.file)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		in = f
	}
	sc, err := scenario.Load(in)
	if err != nil {
		return fmt.Errorf("%s: %w", o.file, err)
	}
	if len(sc.Ignored) > 0 {
		kinds := make([]string, 0, len(sc.Ignored))
		for k, n := range sc.Ignored {
			kinds = append(kinds, fmt.Sprintf("%d %s", n, k))
		}
		sort.Strings(kinds)
		_, _ = fmt.Fprintf(stderr, "note: ignored %s (the planner reads their pods)\n", strings.Join(kinds, ", "))
	}
	for _, u := range sc.UnknownFields {
		_, _ = fmt.Fprintf(stderr, "warning: %s, not read (misspelt, or of a newer Kubernetes than this berth)\n", u)
	}
	if o.scaleDown {
		return o.planScaleDown(sc, limits, stdout)
	}
	input, err := sc.Input(time.Now())
	if err != nil {
		return err
	}
	input.Limits = limits
	p, err := scaleup.Run(input)
	if err != nil {
		return err
	}
	if o.output == "json" {
		return writeJSON(stdout, p)
	}
	return printTable(stdout, p)
}

func printTable(w io.Writer, p *scaleup.Plan) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintf(tw, "NEW NODES: %d, %.4f per hour\n", len(p.NewNodes), p.PricePerHour)
	if len(p.NewNodes) > 0 {
		_, _ = fmt.Fprintln(tw, "NAME\tNODEGROUP\tINSTANCE TYPE\tZONE\tCAPACITY\tPRICE/H\tREASON\tPODS")
		for _, n := range p.NewNodes {
			pods := make([]string, 0, len(n.Pods))
			for _, pod := range n.Pods {
				pods = append(pods, pod.String())
			}
			_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.4f\t%s\t%s\n", n.Name, n.NodeGroup, n.InstanceType, n.Zone,
				n.CapacityType, n.PricePerHour, n.Reason, summarize(pods))
		}
	}
	_ = tw.Flush()
	if len(p.ExistingNodePlacements) > 0 {
		_, _ = fmt.Fprintf(w, "\nPODS ON EXISTING NODES: %d\n", len(p.ExistingNodePlacements))
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		_, _ = fmt.Fprintln(tw, "POD\tNODE")
		for _, pl := range p.ExistingNodePlacements {
			_, _ = fmt.Fprintf(tw, "%s\t%s\n", pl.Pod, pl.Node)
		}
		_ = tw.Flush()
	}
	if len(p.Unschedulable) > 0 {
		_, _ = fmt.Fprintf(w, "\nUNSCHEDULABLE: %d\n", len(p.Unschedulable))
		for _, u := range p.Unschedulable {
			_, _ = fmt.Fprintf(w, "%s: %s\n", u.Pod, u.Message)
		}
	}
	return nil
}

// summarize shortens long pod lists for the table.
func summarize(pods []string) string {
	const show = 4
	if len(pods) <= show {
		return strings.Join(pods, ",")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(pods[:show], ","), len(pods)-show)
}

// planScaleDown prints the scale-down plan: the same planner as the
// controller's, on the snapshot. It says what would be removed if every
// node had been removable for its group's consolidateAfter, and which
// groups of the plan have their disruption window closed now.
func (o *options) planScaleDown(sc *scenario.Scenario, limits scaleup.Limits, stdout io.Writer) error {
	in, err := sc.ScaleDownInput(time.Now())
	if err != nil {
		return err
	}
	in.Limits = limits
	p, err := scaledown.Run(in)
	if err != nil {
		return err
	}
	if o.output == "json" {
		return writeJSON(stdout, p)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintf(tw, "REMOVABLE NODES: %d\n", len(p.Remove))
	if len(p.Remove) > 0 {
		_, _ = fmt.Fprintln(tw, "NODE\tNODEGROUP\tUTILIZATION\tPODS TO MOVE")
		for _, r := range p.Remove {
			moves := make([]string, 0, len(r.Evict))
			for _, m := range r.Evict {
				moves = append(moves, m.Pod.String()+" -> "+m.To)
			}
			_, _ = fmt.Fprintf(tw, "%s\t%s\t%.0f%%\t%s\n", r.Node, r.NodeGroup, 100*r.Utilization, strings.Join(moves, ", "))
		}
	}
	if len(p.Replace) > 0 {
		_, _ = fmt.Fprintf(tw, "\nREPLACED BY A CHEAPER NODE: %d\n", len(p.Replace))
		_, _ = fmt.Fprintln(tw, "NODES\tNEW NODE\tNODEGROUP\tINSTANCE TYPE\tZONE\tCAPACITY\t$/H BEFORE\t$/H AFTER")
		for _, r := range p.Replace {
			_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%.4f\t%.4f\n", strings.Join(r.Nodes, ","), r.New.Name, r.New.NodeGroup,
				r.New.InstanceType, r.New.Zone, r.New.CapacityType, r.OldPrice, r.NewPrice)
		}
	}
	if len(p.Disruptions) > 0 {
		_, _ = fmt.Fprintf(tw, "\nDISRUPTED (INTERRUPTION, DRIFT, EXPIRY, REPAIR): %d\n", len(p.Disruptions))
		_, _ = fmt.Fprintln(tw, "NODE\tNODEGROUP\tREASON\tLAUNCH FIRST\tMESSAGE")
		for _, d := range p.Disruptions {
			launch := make([]string, 0, len(d.Launch))
			for _, l := range d.Launch {
				launch = append(launch, l.NodeGroup+"/"+l.InstanceType+"/"+l.Zone)
			}
			_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", d.Node, d.NodeGroup, d.Reason, strings.Join(launch, ","), d.Message)
		}
	}
	// A node replaced by a cheaper one is not removable by itself (its
	// pods need the new node): it is listed once, with its replacement.
	replaced := map[string]bool{}
	for _, r := range p.Replace {
		for _, n := range r.Nodes {
			replaced[n] = true
		}
	}
	stay := slices.DeleteFunc(slices.Clone(p.Blocked), func(b scaledown.Blocked) bool { return replaced[b.Node] })
	if len(stay) > 0 {
		_, _ = fmt.Fprintf(tw, "\nNODES THAT STAY: %d\n", len(stay))
		_, _ = fmt.Fprintln(tw, "NODE\tNODEGROUP\tREASON\tMESSAGE")
		for _, b := range stay {
			_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", b.Node, b.NodeGroup, b.Reason, b.Message)
		}
	}
	if closed := closedWindows(sc.NodeGroups, sc.Nodes, p, in.Now); len(closed) > 0 {
		_, _ = fmt.Fprintf(tw, "\nDISRUPTION WINDOWS CLOSED NOW: %d\n", len(closed))
		for _, c := range closed {
			_, _ = fmt.Fprintln(tw, c)
		}
	}
	return tw.Flush()
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
