package v1alpha1

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// NodeLabels returns the labels of a node launched for this group from an
// instance type and offering: the template labels plus the well-known ones,
// with the deprecated beta names the kubelet and the cloud node controller
// still set beside them. The planner's templates and the cloud providers
// both use it, so that what berth plans for is what it launches. The
// hostname label is added by whoever names the node.
//
// The operating system is the template's kubernetes.io/os (a group of
// Windows nodes says windows there), linux when it does not say: the
// kubelet registers the label from the machine, and an instance type has
// no field for it. The architecture is the instance type's.
func (ng *NodeGroup) NodeLabels(it *InstanceType, o *Offering) map[string]string {
	l := make(map[string]string, len(ng.Spec.Template.Labels)+11)
	for k, v := range ng.Spec.Template.Labels {
		l[k] = string(v)
	}
	l[LabelNodeGroup] = ng.Name
	if l[LabelOS] == "" {
		l[LabelOS] = "linux"
	}
	l[LabelZone] = o.Zone
	l[LabelInstanceType] = it.Name
	l[LabelCapacityType] = string(o.CapacityType)
	arch := it.Architecture
	if arch == "" {
		arch = "amd64"
	}
	l[LabelArch] = arch
	l[LabelOSBeta], l[LabelArchBeta] = l[LabelOS], arch
	l[LabelZoneBeta], l[LabelInstanceTypeBeta] = o.Zone, it.Name
	return l
}

// ExtendedResources returns the extended resources of the instance type's
// capacity (names with a domain, such as nvidia.com/gpu, above zero), nil
// when it has none: what a node of the type advertises once its device
// plugins run.
func (it *InstanceType) ExtendedResources() corev1.ResourceList {
	var ext corev1.ResourceList
	for name, q := range it.Capacity {
		if strings.Contains(string(name), "/") && q.Sign() > 0 {
			if ext == nil {
				ext = corev1.ResourceList{}
			}
			ext[name] = q
		}
	}
	return ext
}

// NodeTaints are the taints of the template, as a node launched for this
// group carries them (besides startup taints).
func (ng *NodeGroup) NodeTaints() []corev1.Taint {
	taints := make([]corev1.Taint, 0, len(ng.Spec.Template.Taints))
	for _, t := range ng.Spec.Template.Taints {
		taints = append(taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
	}
	return taints
}

// FindOffering returns the instance type and offering with the given keys.
func (ng *NodeGroup) FindOffering(instanceType, zone string, ct CapacityType) (*InstanceType, *Offering) {
	for i := range ng.Spec.InstanceTypes {
		it := &ng.Spec.InstanceTypes[i]
		if it.Name != instanceType {
			continue
		}
		for j := range it.Offerings {
			if o := &it.Offerings[j]; o.Zone == zone && o.CapacityType == ct {
				return it, o
			}
		}
	}
	return nil, nil
}

// Matches reports whether the selector matches an offering; empty fields
// match anything.
func (s OfferingSelector) Matches(instanceType, zone string, ct CapacityType) bool {
	return (s.InstanceType == "" || s.InstanceType == instanceType) &&
		(s.Zone == "" || s.Zone == zone) &&
		(s.CapacityType == "" || s.CapacityType == ct)
}

// Defaults of NodeGroup.spec.disruption.
const (
	DefaultConsolidateAfter = 30 * time.Second
	DefaultDrainTimeout     = 300 * time.Second
	DefaultBudgetPercent    = 10
)

// Policy returns the consolidation policy, WhenEmptyOrUnderutilized when
// unset.
func (d Disruption) Policy() ConsolidationPolicy {
	if d.ConsolidationPolicy == "" {
		return ConsolidationWhenEmptyOrUnderutilized
	}
	return d.ConsolidationPolicy
}

// After returns ConsolidateAfter or its default.
func (d Disruption) After() time.Duration {
	if d.ConsolidateAfter == nil {
		return DefaultConsolidateAfter
	}
	return d.ConsolidateAfter.Duration
}

// DefaultReplaceSavingsPercent is the share a replacement must save.
const DefaultReplaceSavingsPercent = 10

// Savings returns the share (0-1) a replacement must save.
func (d Disruption) Savings() float64 {
	if d.ReplaceSavingsPercent <= 0 {
		return DefaultReplaceSavingsPercent / 100.0
	}
	return float64(d.ReplaceSavingsPercent) / 100
}

// Timeout returns DrainTimeout or its default.
func (d Disruption) Timeout() time.Duration {
	if d.DrainTimeout == nil {
		return DefaultDrainTimeout
	}
	return d.DrainTimeout.Duration
}

// Allowed returns how many of a group of n nodes may be disrupted at once:
// the budget (a count, or a percentage rounded up, so that any percentage
// but 0 lets one node go). 0 and "0%" disrupt nothing; so does a budget
// that cannot be read (the API server's validation refuses those).
func (d Disruption) Allowed(n int) int {
	b := intstr.FromString(strconv.Itoa(DefaultBudgetPercent) + "%")
	if d.Budget != nil {
		b = *d.Budget
	}
	return ScaledBudget(b, n)
}

// ScaledBudget is a budget's count, or its percentage of n rounded up; a
// count written as a string ("1", as Karpenter's budgets are written) is
// a count. 0 for anything else.
func ScaledBudget(b intstr.IntOrString, n int) int {
	if b.Type == intstr.String && !strings.HasSuffix(b.StrVal, "%") {
		v, err := strconv.Atoi(b.StrVal)
		if err != nil || v < 0 {
			return 0
		}
		return v
	}
	v, err := intstr.GetScaledValueFromIntOrPercent(&b, n, true)
	if err != nil || v < 0 {
		return 0
	}
	return v
}

// DefaultPodsPerNode is the pod capacity of an instance type whose
// capacity does not say (the kubelet's default).
const DefaultPodsPerNode = 110

// Price returns the offering's price per hour. It fails on what the API
// server's pattern rejects and on what strconv.ParseFloat accepts but is
// no price: NaN, infinities (also "1e400") and negative numbers.
func (o *Offering) Price() (float64, error) {
	p, err := strconv.ParseFloat(o.PricePerHour, 64)
	if err != nil || p < 0 || math.IsNaN(p) || math.IsInf(p, 0) {
		return 0, fmt.Errorf("invalid pricePerHour %q", o.PricePerHour)
	}
	return p, nil
}

// StoppedPrice returns the price per hour of a suspended standby node of
// the offering: StoppedPricePerHour, else a tenth of the running price.
func (o *Offering) StoppedPrice() (float64, error) {
	if o.StoppedPricePerHour == "" {
		p, err := o.Price()
		return p / 10, err
	}
	p, err := strconv.ParseFloat(o.StoppedPricePerHour, 64)
	if err != nil || p < 0 || math.IsNaN(p) || math.IsInf(p, 0) {
		return 0, fmt.Errorf("invalid stoppedPricePerHour %q", o.StoppedPricePerHour)
	}
	return p, nil
}

// ResumeAfter is how long a suspended KWOK node takes to turn Ready after
// berth resumes it: spec.provider.kwok.resumeDelay, else a third of the
// launch delay.
func (k *KWOKProvider) ResumeAfter() time.Duration {
	switch {
	case k == nil:
		return 0
	case k.ResumeDelay != nil:
		return k.ResumeDelay.Duration
	case k.LaunchDelay != nil:
		return k.LaunchDelay.Duration / 3
	}
	return 0
}

// OfferingKey names one offering of one node group. The planner, the
// memory of failed launches and the launch timeout all key offerings by
// it.
type OfferingKey struct {
	NodeGroup    string `json:"nodeGroup"`
	InstanceType string `json:"instanceType"`
	Zone         string `json:"zone"`
	CapacityType string `json:"capacityType"`
}

// ResourceSlices returns the ResourceSlices a DRA driver publishes for a
// node of this instance type: one pool per driver named after the node,
// generation 1, with the devices in one slice and the shared counters (if
// any) in another, so that resourceSliceCount is 1 or 2 and the pool is
// complete. The planner's device templates and the kwok provider both use
// it, so that what berth plans with is what the scheduler later sees.
func (it *InstanceType) ResourceSlices(nodeName string) []*resourcev1.ResourceSlice {
	out := make([]*resourcev1.ResourceSlice, 0, 2*len(it.Devices))
	for i := range it.Devices {
		d := &it.Devices[i]
		count := int64(1)
		if len(d.SharedCounters) > 0 {
			count = 2
		}
		pool := resourcev1.ResourcePool{Name: nodeName, Generation: 1, ResourceSliceCount: count}
		node := nodeName
		devices := &resourcev1.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: SliceName(nodeName, d.Driver, 0)},
			Spec: resourcev1.ResourceSliceSpec{
				Driver: d.Driver, Pool: pool, NodeName: &node,
				Devices: slices.Clone(d.Devices),
			},
		}
		out = append(out, devices)
		if len(d.SharedCounters) > 0 {
			out = append(out, &resourcev1.ResourceSlice{
				ObjectMeta: metav1.ObjectMeta{Name: SliceName(nodeName, d.Driver, 1)},
				Spec: resourcev1.ResourceSliceSpec{
					Driver: d.Driver, Pool: pool, NodeName: &node,
					SharedCounters: slices.Clone(d.SharedCounters),
				},
			})
		}
	}
	return out
}

// SliceName is the name of the i-th ResourceSlice berth publishes for a
// node and driver: stable, so that re-publishing updates instead of
// duplicating, and short enough for an object name.
func SliceName(nodeName, driver string, i int) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(nodeName + "/" + driver))
	name := fmt.Sprintf("%s-%08x-%d", nodeName, h.Sum32(), i)
	if len(name) > 253 {
		name = name[len(name)-253:]
	}
	return name
}

// LaunchHash is a hash of what of the group's spec a node is launched
// with: the template's labels, taints and startup taints (each list as a
// set: taints written in another order are the same taints), and the
// Cluster API object a node comes from. berth writes it on every node it
// launches (AnnotationLaunchHash); a node whose hash the group does not
// match (MatchesLaunchHash) has drifted. Instance types and offerings are
// not in it: a node drifts when its own offering leaves the group, not
// when another changes. A Cluster API group's taints are not in it
// either: they describe what the Machines' bootstrap gives the nodes, and
// berth does not apply them, so a replacement (a Machine of the same
// object) would carry the same taints as the node it replaces; a change
// of the object's bootstrap template is Cluster API's rollout to make.
func (ng *NodeGroup) LaunchHash() string {
	if ng.pinnedHash != "" {
		return ng.pinnedHash
	}
	return ng.launchHash(true, ng.Spec.Provider.ClusterAPI == nil)
}

// MatchesLaunchHash reports whether a node's launch hash is the group's:
// LaunchHash, or the hash of its taints in the order written, which
// berth wrote on the nodes it launched before it hashed them as a set,
// or, for a Cluster API group, the hash with its taints that berth wrote
// before it left them out (none of these has drifted).
func (ng *NodeGroup) MatchesLaunchHash(h string) bool {
	if ng.pinnedHash != "" {
		return h == ng.pinnedHash || h == ng.pinnedSorted || h == ng.pinnedOrdered
	}
	return h == ng.LaunchHash() || h == ng.launchHash(true, true) || h == ng.launchHash(false, true)
}

// launchHash hashes the launch spec, with its taint lists sorted or as
// written, or without them (taints false).
func (ng *NodeGroup) launchHash(sorted, taints bool) string {
	type launched struct {
		Labels        map[string]LabelValue `json:"labels,omitempty"`
		Taints        []NodeTaint           `json:"taints,omitempty"`
		StartupTaints []NodeTaint           `json:"startupTaints,omitempty"`
		ClusterAPI    []string              `json:"clusterAPI,omitempty"`
	}
	l := launched{Labels: ng.Spec.Template.Labels}
	if taints {
		l.Taints, l.StartupTaints = ng.Spec.Template.Taints, ng.Spec.Template.StartupTaints
	}
	if sorted {
		l.Taints, l.StartupTaints = sortedTaints(l.Taints), sortedTaints(l.StartupTaints)
	}
	if c := ng.Spec.Provider.ClusterAPI; c != nil {
		l.ClusterAPI = []string{c.APIVersion, string(c.Kind), c.Namespace, c.Name}
	}
	data, _ := json.Marshal(l) // map keys are sorted: the hash is stable
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// sortedTaints is a sorted copy of ts (nil stays nil).
func sortedTaints(ts []NodeTaint) []NodeTaint {
	if ts == nil {
		return nil
	}
	out := slices.Clone(ts)
	slices.SortFunc(out, func(a, b NodeTaint) int {
		return cmp.Or(strings.Compare(a.Key, b.Key), strings.Compare(string(a.Effect), string(b.Effect)), strings.Compare(a.Value, b.Value))
	})
	return out
}

// PinLaunchHash fixes LaunchHash at the hash of the spec as it is now. A
// provider that lets its own objects describe a group's template (Cluster
// API's capacity annotations) changes a copy the planners use; the nodes
// of the group were hashed from the stored spec (at launch or adoption),
// and must not look drifted because of the copy.
func (ng *NodeGroup) PinLaunchHash() {
	ng.pinnedHash, ng.pinnedSorted, ng.pinnedOrdered = ng.launchHash(true, ng.Spec.Provider.ClusterAPI == nil), ng.launchHash(true, true), ng.launchHash(false, true)
}
