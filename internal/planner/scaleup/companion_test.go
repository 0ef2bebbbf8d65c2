package scaleup_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestCompanionBurstPlansFitTheirNodes plans bursts of gated workloads
// whose companions are shared per volume (the shape of the end-to-end
// burst test) and checks every planned node: its instance type holds its
// workloads plus one companion per volume among them. Planned nodes that
// their pods filled exactly once lost every instance type, and the
// controller's round panicked on them (from 60 such workloads on). It
// also checks that workloads of one volume meet on the same nodes.
func TestCompanionBurstPlansFitTheirNodes(t *testing.T) {
	ng := b.NodeGroup("fuse", b.Size(0, 100),
		b.InstanceType("f-2", "2", "8Gi", b.OnDemand("zone-a", "0.10")),
		b.InstanceType("f-4", "4", "16Gi", b.OnDemand("zone-a", "0.18")))
	cpuOf := map[string]int64{"f-2": 2000, "f-4": 4000}
	for _, n := range []int{6, 40, 60, 61, 200} {
		t.Run(fmt.Sprintf("%d workloads on 20 volumes", n), func(t *testing.T) {
			var pods []*corev1.Pod
			byName := map[string]*corev1.Pod{}
			for i := range n {
				p := b.Pod(fmt.Sprintf("w-%d", i), b.Namespace("default"), b.CPU("500m"), b.Memory("256Mi"),
					// The companion controller labels each workload with its
					// UID too, so every workload is a class of its own.
					b.Labels(v1alpha1.LabelCompanionShareKey, fmt.Sprintf("vol-%d", i%20), v1alpha1.LabelCompanionFor, fmt.Sprintf("uid-%d", i)),
					b.Annotation(v1alpha1.AnnotationCompanionRequests, `{"cpu":"500m","memory":"64Mi"}`))
				p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: v1alpha1.SchedulingGateCompanion}}
				pods = append(pods, p)
				byName[p.Name] = p
			}
			plan, err := scaleup.Run(scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Pending: pods})
			if err != nil {
				t.Fatal(err)
			}
			placed := 0
			for _, nn := range plan.NewNodes {
				keys := map[string]bool{}
				var cpu int64
				for _, ref := range nn.Pods {
					p := byName[ref.Name]
					cpu += p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()
					keys[p.Labels[v1alpha1.LabelCompanionShareKey]] = true
				}
				cpu += int64(len(keys)) * 500 // one 500m companion per volume
				if limit, ok := cpuOf[nn.InstanceType]; !ok || cpu > limit {
					t.Errorf("node %s (%q) holds %d workloads of %d volumes: %dm with companions", nn.Name, nn.InstanceType, len(nn.Pods), len(keys), cpu)
				}
				placed += len(nn.Pods)
			}
			if placed+len(plan.Unschedulable) != n || len(plan.Unschedulable) > 0 {
				t.Errorf("%d workloads placed, %d unschedulable, of %d", placed, len(plan.Unschedulable), n)
			}
			// 200 workloads: 100 cpu, and at least one 500m companion per
			// volume, 110 cpu on 4-cpu nodes: at least 28. Workloads of a
			// volume taken together fill an f-4 with seven and their
			// companion: 20 such nodes and 10 for the rest, 30. Taken in
			// name order (volumes interleaved) they paid a companion each:
			// 50 nodes.
			if n == 200 && len(plan.NewNodes) > 30 {
				t.Errorf("%d new nodes (%.2f/h) for 200 workloads on 20 volumes, want at most 30", len(plan.NewNodes), plan.PricePerHour)
			}
		})
	}
}
