package chart

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-dev/berth/internal/cli/controller"
)

func newControllerCommand() *cobra.Command { return controller.NewCommand() }

func allFlags(cmd *cobra.Command) []*pflag.Flag {
	var out []*pflag.Flag
	cmd.Flags().VisitAll(func(f *pflag.Flag) { out = append(out, f) })
	return out
}

func resourceMiB(n int) resource.Quantity { return resource.MustParse(fmt.Sprintf("%dMi", n)) }
