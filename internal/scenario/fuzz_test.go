package scenario_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/scenario"
)

// FuzzLoadAndPlan feeds arbitrary bytes to the loader and, when they load,
// to the planner: bad input must be an error, never a panic. The golden
// scenarios are the seed corpus.
func FuzzLoadAndPlan(f *testing.F) {
	files, _ := filepath.Glob("../../test/scenarios/*.yaml")
	for _, name := range files {
		if data, err := os.ReadFile(name); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte("apiVersion: v1\nkind: List\nitems: [{}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		sc, err := scenario.Load(bytes.NewReader(data))
		if err != nil {
			return
		}
		in, err := sc.Input(time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC))
		if err != nil {
			return
		}
		_, _ = scaleup.Run(in)
	})
}
