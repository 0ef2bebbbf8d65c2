package dev

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/internal/cloudprovider/kwok"
	"github.com/berth-dev/berth/internal/scheme"
)

func (o *options) interruptCommand() *cobra.Command {
	var in time.Duration
	cmd := &cobra.Command{
		Use:   "interrupt NODE",
		Short: "Give a KWOK node a spot interruption notice, as a cloud's termination handler would",
		Long: `Taints the node berth.dev/interruption and writes its deadline (now + --in)
in the annotation berth.dev/interruption-deadline. berth replaces the node at
once (avoiding its offering for a while), drains it within the notice and
removes it before the deadline. Watch it with:
  kubectl get nodes -w
  kubectl describe node NODE   (events and the BerthDisruption condition)`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if in <= 0 {
				return fmt.Errorf("--in must be positive, not %s", in)
			}
			c, err := o.running()
			if err != nil {
				return err
			}
			cfg, err := c.RESTConfig()
			if err != nil {
				return err
			}
			cl, err := client.New(cfg, client.Options{Scheme: scheme.New()})
			if err != nil {
				return err
			}
			deadline, err := kwok.New(cl, clock.RealClock{}).Interrupt(cmd.Context(), args[0], in)
			if err != nil {
				return err
			}
			_, _ = fmt.Fprintf(cmd.OutOrStdout(), "node %s: interruption notice, it goes at %s\n", args[0], deadline.Format(time.RFC3339))
			return nil
		},
	}
	cmd.Flags().DurationVar(&in, "in", 2*time.Minute, "time until the node goes")
	return cmd
}
