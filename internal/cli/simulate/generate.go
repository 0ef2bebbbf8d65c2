package simulate

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/internal/trace"
)

// NewTraceCommand returns `berth trace` with `generate`.
func NewTraceCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "trace",
		Short: "Write traces for berth simulate",
	}
	cmd.AddCommand(generateCommand())
	return cmd
}

func generateCommand() *cobra.Command {
	var (
		p   trace.Params
		out string
		at  string
	)
	cmd := &cobra.Command{
		Use:   "generate --family diurnal|ci|batch|mix [--seed N] [--duration 24h] [--scale 1] [--out FILE]",
		Short: "Write a seeded synthetic trace",
		Long: `berth trace generate writes a synthetic trace in berth's format (JSON
lines, docs/simulate.md). The same family, seed, duration, scale and start
give the same trace. Families:

  diurnal  a Deployment (namespace web, 500m cpu and 1Gi a pod) whose
           replicas follow a day: 10 at 6:00, 60 at 18:00 (times --scale),
           changed every minute in HPA-like steps of a tenth of the peak;
           the replicas of the start are running when the trace begins
  ci       bursts of 5 to 40 jobs (times --scale; 1 cpu and 2Gi, 2 to 20
           minutes each), 6 bursts an hour from 8:00 to 18:00 and 1 an
           hour otherwise, arriving at random
  batch    a wave of 40 pods (times --scale; 2 cpu and 4Gi, 12 to 25
           minutes each) at every full hour
  mix      the three together, in namespaces web, ci and batch`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if at != "" {
				t, err := time.Parse(time.RFC3339, at)
				if err != nil {
					return fmt.Errorf("--start %q: want RFC 3339, such as 2026-01-05T00:00:00Z", at)
				}
				if err := trace.CheckStart(t); err != nil {
					return fmt.Errorf("--start: %w", err)
				}
				p.Start = t
			}
			if p.Duration < time.Second || p.Duration > 31*24*time.Hour {
				return fmt.Errorf("--duration must be between 1s and 744h, not %s", p.Duration)
			}
			if !(p.Scale > 0 && p.Scale <= 1000) { // NaN too
				return fmt.Errorf("--scale must be above 0 and at most 1000, not %g", p.Scale)
			}
			h, events, err := trace.Generate(p)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if out != "" {
				f, err := os.Create(out)
				if err != nil {
					return err
				}
				defer func() { _ = f.Close() }()
				w = f
			}
			tw, err := trace.NewWriter(w, h)
			if err != nil {
				return err
			}
			for _, e := range events {
				if err := tw.Write(e); err != nil {
					return err
				}
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if out != "" {
				_, _ = fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s: %d events over %s\n", out, tw.Events(), p.Duration)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&p.Family, "family", "", "family of the trace: "+strings.Join(trace.Families, ", "))
	f.Uint64Var(&p.Seed, "seed", 1, "seed of the random choices")
	f.DurationVar(&p.Duration, "duration", 24*time.Hour, "length of the trace")
	f.Float64Var(&p.Scale, "scale", 1, "multiplies every pod count")
	f.StringVar(&at, "start", "", "start of the trace, RFC 3339 (default 2026-01-05T00:00:00Z, a Monday)")
	f.StringVar(&out, "out", "", "write to this file instead of standard output")
	_ = cmd.MarkFlagRequired("family")
	return cmd
}
