package sim

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/tracetest"
	"github.com/berth-dev/berth/internal/trace"
)

// generated writes a synthetic trace into memory.
func generated(tb testing.TB, p trace.Params) []byte {
	tb.Helper()
	h, events, err := trace.Generate(p)
	if err != nil {
		tb.Fatal(err)
	}
	return tracetest.Bytes(tb, h, events...)
}

// benchGroups are a general-purpose group with three sizes, spot and
// on-demand in two zones.
func benchGroups() []*v1alpha1.NodeGroup {
	return []*v1alpha1.NodeGroup{b.NodeGroup("general", b.Size(0, 1000),
		b.InstanceType("m-4", "4", "16Gi", b.OnDemand("zone-a", "0.20"), b.OnDemand("zone-b", "0.20"), b.Spot("zone-a", "0.08")),
		b.InstanceType("m-8", "8", "32Gi", b.OnDemand("zone-a", "0.40"), b.OnDemand("zone-b", "0.40"), b.Spot("zone-b", "0.15")),
		b.InstanceType("m-16", "16", "64Gi", b.OnDemand("zone-a", "0.80"), b.OnDemand("zone-b", "0.80")),
		b.LaunchDelay(metav1.Duration{Duration: 90 * time.Second}))}
}

func BenchmarkSimulateDay(b *testing.B) {
	for _, scale := range []float64{1, 10} {
		data := generated(b, trace.Params{Family: trace.FamilyMix, Seed: 1, Scale: scale})
		b.Run("mix-scale="+strconv.FormatFloat(scale, 'g', -1, 64), func(b *testing.B) {
			var events int
			for b.Loop() {
				r, err := trace.NewReader(bytes.NewReader(data))
				if err != nil {
					b.Fatal(err)
				}
				res, err := Run(Config{Name: "bench", NodeGroups: benchGroups()}, r)
				if err != nil {
					b.Fatal(err)
				}
				events = res.Pods
			}
			b.ReportMetric(float64(events), "pods")
		})
	}
}
