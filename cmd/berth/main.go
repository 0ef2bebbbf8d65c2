// Command berth is the berth autoscaler: controller, local control plane and
// offline planner. All logic lives in internal/cli.
package main

import (
	"os"

	"github.com/berth-dev/berth/internal/cli"
)

func main() {
	os.Exit(cli.Execute())
}
