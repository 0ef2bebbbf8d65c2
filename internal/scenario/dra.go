package scenario

import (
	resourcev1 "k8s.io/api/resource/v1"
)

// defaultDRA applies the API server's defaults to the device requests of
// claims and templates read from a file (allocationMode ExactCount, count
// 1), so that a hand-written claim means what it means in a cluster.
func (s *Scenario) defaultDRA() {
	for _, c := range s.DRA.Claims {
		defaultDeviceClaim(&c.Spec.Devices)
	}
	for _, t := range s.DRA.ClaimTemplates {
		defaultDeviceClaim(&t.Spec.Spec.Devices)
	}
}

func defaultDeviceClaim(d *resourcev1.DeviceClaim) {
	for i := range d.Requests {
		r := &d.Requests[i]
		if r.Exactly != nil {
			defaultCount(&r.Exactly.AllocationMode, &r.Exactly.Count)
		}
		for j := range r.FirstAvailable {
			sub := &r.FirstAvailable[j]
			defaultCount(&sub.AllocationMode, &sub.Count)
		}
	}
}

func defaultCount(mode *resourcev1.DeviceAllocationMode, count *int64) {
	if *mode == "" {
		*mode = resourcev1.DeviceAllocationModeExactCount
	}
	if *mode == resourcev1.DeviceAllocationModeExactCount && *count == 0 {
		*count = 1
	}
}
