package dynamicresources

import (
	"fmt"
	"math"
	"slices"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"
)

// Units is how many pods of r the devices of option o hold, allocated one
// pod after the other as the scheduler does (the claims the class shares
// once): +Inf for a class without claims of its own per pod, 0 when not
// even one pod gets its devices. The planner weighs the price of an option
// by it, as it does by cpu and memory. Cached per option and class; at
// most one allocator run per device of the option.
func (m *Model[N, O]) Units(r Request, o O) float64 {
	var perPod, shared []*resourcev1.ResourceClaim
	for i := range r.Claims {
		pc := &r.Claims[i]
		switch {
		case pc.PerPod:
			perPod = append(perPod, pc.Claim)
		case !pc.Allocated:
			shared = append(shared, pc.Claim)
		}
	}
	if len(perPod) == 0 {
		return math.Inf(1)
	}
	key := optionClaims[O]{o, m.claimsKey(classClaims{class: r.Class, units: true}, shared, perPod)}
	if v, ok := m.unitCache[key]; ok {
		return v
	}
	node, own := o.Devices()
	devices := deviceCount(own)
	pool := m.withShared(own)
	held := m.realAllocated(own)
	units := 0
	for claims := slices.Concat(shared, perPod); units < devices; claims = perPod {
		res, err := m.allocate(node, pool, held, claims)
		if res == nil || err != nil {
			break
		}
		for i := range res {
			held.Insert(deviceIDs(&res[i])...)
		}
		units++
	}
	m.unitCache[key] = float64(units)
	return float64(units)
}

// minDevices is a lower bound of the devices claims take: the counts of
// their exact-count requests without admin access.
func minDevices(claims []*resourcev1.ResourceClaim) int {
	n := 0
	for _, c := range claims {
		for _, r := range c.Spec.Devices.Requests {
			if e := r.Exactly; e != nil && e.AllocationMode == resourcev1.DeviceAllocationModeExactCount && !ptr.Deref(e.AdminAccess, false) {
				n += int(e.Count)
			}
		}
	}
	return n
}

func deviceCount(pool []*resourcev1.ResourceSlice) int {
	n := 0
	for _, sl := range pool {
		n += len(sl.Spec.Devices)
	}
	return n
}

// describeClaims says what the claims ask for, for messages: "claim gpu:
// request gpus: 2 of class gpu.example.com where
// device.attributes["gpu.example.com"].model == "a100"".
func describeClaims(claims []*resourcev1.ResourceClaim) string {
	parts := make([]string, 0, len(claims))
	for _, c := range claims {
		for _, r := range c.Spec.Devices.Requests {
			if r.Exactly == nil {
				parts = append(parts, fmt.Sprintf("request %s: one of %d alternatives", r.Name, len(r.FirstAvailable)))
				continue
			}
			e := r.Exactly
			what := fmt.Sprintf("%d device(s)", max(e.Count, 1))
			if e.AllocationMode == resourcev1.DeviceAllocationModeAll {
				what = "all devices"
			}
			msg := fmt.Sprintf("request %s: %s of class %s", r.Name, what, e.DeviceClassName)
			var cels []string
			for _, sel := range e.Selectors {
				if sel.CEL != nil {
					cels = append(cels, sel.CEL.Expression)
				}
			}
			if len(cels) > 0 {
				msg += " matching " + strings.Join(cels, " && ")
			}
			parts = append(parts, msg)
		}
	}
	return strings.Join(parts, "; ")
}
