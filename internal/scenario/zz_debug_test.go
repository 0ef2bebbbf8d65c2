package scenario_test

import (
	"os"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/scenario"
)

func TestZZDebug(t *testing.T) {
	f, _ := os.Open("/tmp/h5/dra/existing-one-device-two-pods-gpugroup.yaml")
	s, err := scenario.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	in, _ := s.Input(time.Now())
	p, err := scaleup.Run(in)
	t.Log(p.ExistingNodePlacements, err)
}
