package scaleup_test

import (
	"math"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/quantity"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// FuzzPricesAndQuantities plans a pod against a node group whose price and
// capacity, and the pod's requests, come from the fuzzer (as `berth plan`
// reads them from a file): the planner returns a plan or an error, never
// panics, and never prices a node as NaN, infinite or negative.
func FuzzPricesAndQuantities(f *testing.F) {
	f.Add("0.096", "4", "16Gi", "500m", "1Gi")
	f.Add("NaN", "4", "16Gi", "1", "1Gi")
	f.Add("1e400", "1e18", "9223372036854775807", "1e18", "1")
	f.Add("0", "0", "0", "0", "0")
	f.Add("0.1", "4", "16Gi", "e999999999", "1Gi")
	f.Fuzz(func(t *testing.T, price, cpu, mem, reqCPU, reqMem string) {
		qs := []resource.Quantity{}
		for i, s := range []string{cpu, mem, reqCPU, reqMem} {
			var q resource.Quantity
			var err error
			if i < 2 {
				// A capacity: the CRD's pattern and Cluster API's
				// annotations refuse long exponents, as quantity.Parse.
				q, err = quantity.Parse(s)
			} else {
				// A request: the loader refuses the numbers apimachinery
				// does not return on, then bounds the rest, as the
				// controller's cache does.
				if quantity.HugeExponent([]byte(`"`+s+`"`)) != "" {
					return
				}
				if q, err = resource.ParseQuantity(s); err == nil {
					q = quantity.Bound([]corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}[i-2], q)
				}
			}
			if err != nil || q.Sign() < 0 {
				return // the API server and the loader reject these first
			}
			qs = append(qs, q)
		}
		ng := b.NodeGroup("fuzz", b.InstanceType("t", "1", "1Gi", v1alpha1.Offering{Zone: "z", CapacityType: v1alpha1.CapacityTypeOnDemand, PricePerHour: price}))
		ng.Spec.InstanceTypes[0].Capacity = corev1.ResourceList{corev1.ResourceCPU: qs[0], corev1.ResourceMemory: qs[1]}
		pod := b.Pod("p", b.Namespace("default"))
		pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: qs[2], corev1.ResourceMemory: qs[3]}
		plan, err := scaleup.Run(scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Pending: []*corev1.Pod{pod}})
		if err != nil {
			return
		}
		if p := plan.PricePerHour; math.IsNaN(p) || math.IsInf(p, 0) || p < 0 {
			t.Fatalf("plan price %v from pricePerHour %q", p, price)
		}
	})
}
