package dynamicresources

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1alpha2 "k8s.io/api/scheduling/v1alpha2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/utils/ptr"
)

// PodClaim is one of a pod's ResourceClaims as the DRA filter sees it.
type PodClaim struct {
	// Name is the claim's name in pod.spec.resourceClaims.
	Name string
	// Claim is the ResourceClaim: the existing object, or for a claim that
	// the resource claim controller has not created yet, one built from
	// the template (what the controller will create).
	Claim *resourcev1.ResourceClaim
	// PerPod is true for a claim every pod gets of its own (from a
	// template, not shared with a PodGroup): each placed pod allocates
	// its own devices. Otherwise the claim is shared and Key names it.
	PerPod bool
	Key    ClaimKey
	// PodGroup is the group the claim is reserved for ("" when it is
	// reserved for pods): its pods take one reservation together.
	PodGroup string
	// Allocated is true when the claim is allocated in the cluster;
	// AvailableOn is then its allocation's node selector (nil: any node).
	Allocated   bool
	AvailableOn *nodeaffinity.NodeSelector
	// Reservations is len(status.reservedFor); Reserved is true when the
	// pod (or its group) is already among them.
	Reservations int
	Reserved     bool
}

// ClaimKey identifies a shared claim: an existing ResourceClaim, or the
// claim a PodGroup will get from its template (PodGroup set).
type ClaimKey struct {
	Namespace string
	Name      string
	// PodGroup is set for a group claim that is not created yet; Name is
	// then the claim's name within the group.
	PodGroup string
}

func (k ClaimKey) String() string {
	if k.PodGroup != "" {
		return fmt.Sprintf("%s/%s (claim %s of podgroup %s)", k.Namespace, k.PodGroup, k.Name, k.PodGroup)
	}
	return k.Namespace + "/" + k.Name
}

// Request is what the pods of one class ask of devices: their claims
// (Resolve), or why they wait for a claim (Wait; Claims is then empty).
// Class identifies the class: the model caches answers by it and hands it
// back to the snapshot's host function.
type Request struct {
	Class  int
	Claims []PodClaim
	Wait   string
}

// ClaimID identifies, for the snapshot's class fingerprint, what a pod's
// claim reference means: pods whose claims are made per pod from one
// template are alike; pods sharing a claim are alike only with the same
// claim.
func (m *Model[N, O]) ClaimID(pod *corev1.Pod, ref *corev1.PodResourceClaim) string {
	if g, gname := m.podGroup(pod); g != nil && groupClaim(g, ref) != nil {
		return "group:" + gname + "/" + ref.Name
	}
	if ref.ResourceClaimName != nil {
		return "claim:" + *ref.ResourceClaimName
	}
	name, _, err := resourceclaim.Name(pod, ref)
	if err != nil || name == nil {
		return "template:" + ptr.Deref(ref.ResourceClaimTemplateName, "")
	}
	if c := m.claims[types.NamespacedName{Namespace: pod.Namespace, Name: *name}]; c != nil && c.Status.Allocation == nil {
		return "template:" + ptr.Deref(ref.ResourceClaimTemplateName, "")
	}
	return "claim:" + *name
}

// groupClaim returns the PodGroup's claim that a pod's claim reference
// matches exactly (name, claim name, template name), or nil.
func groupClaim(g *schedulingv1alpha2.PodGroup, ref *corev1.PodResourceClaim) *schedulingv1alpha2.PodGroupResourceClaim {
	for i := range g.Spec.ResourceClaims {
		gc := &g.Spec.ResourceClaims[i]
		if gc.Name == ref.Name && ptr.Equal(gc.ResourceClaimName, ref.ResourceClaimName) &&
			ptr.Equal(gc.ResourceClaimTemplateName, ref.ResourceClaimTemplateName) {
			return gc
		}
	}
	return nil
}

// Resolve gathers a pod's claims as kube-scheduler's PreFilter does. The
// second result is set when the pod has to wait for a claim (a missing or
// deleted claim, a missing template or PodGroup): the scheduler does not
// schedule such a pod, and berth does not scale up for it.
func (m *Model[N, O]) Resolve(pod *corev1.Pod) ([]PodClaim, string) {
	if len(pod.Spec.ResourceClaims) == 0 {
		return nil, ""
	}
	group, groupName := m.podGroup(pod)
	out := make([]PodClaim, 0, len(pod.Spec.ResourceClaims))
	for i := range pod.Spec.ResourceClaims {
		ref := &pod.Spec.ResourceClaims[i]
		var gc *schedulingv1alpha2.PodGroupResourceClaim
		if group != nil {
			gc = groupClaim(group, ref)
		}
		pc, wait := m.resolveClaim(pod, ref, group, gc)
		if wait != "" {
			return nil, wait
		}
		if pc == nil {
			continue
		}
		if gc != nil {
			pc.PodGroup = groupName
		}
		out = append(out, *pc)
	}
	return out, ""
}

func (m *Model[N, O]) resolveClaim(pod *corev1.Pod, ref *corev1.PodResourceClaim, group *schedulingv1alpha2.PodGroup,
	gc *schedulingv1alpha2.PodGroupResourceClaim) (*PodClaim, string) {
	if ref.ResourceClaimName == nil && ref.ResourceClaimTemplateName == nil {
		return nil, fmt.Sprintf("pod claim %q names neither a claim nor a template", ref.Name)
	}
	name, _, err := resourceclaim.Name(pod, ref)
	if err != nil && gc != nil {
		// The pod's status may not name the group's claim yet; the
		// group's status does once the controller created it.
		name, _, err = resourceclaim.NameFromPodGroup(group, gc)
	}
	if err == nil && name == nil {
		return nil, "" // the controller decided the pod needs no claim
	}
	if err != nil {
		// Made from a template, not created yet: plan with what the
		// controller will create.
		t := m.templates[types.NamespacedName{Namespace: pod.Namespace, Name: *ref.ResourceClaimTemplateName}]
		if t == nil {
			return nil, fmt.Sprintf("resourceclaimtemplate %q not found", *ref.ResourceClaimTemplateName)
		}
		claim := &resourcev1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name + "-" + ref.Name, UID: types.UID("planned-" + pod.Namespace + "-" + pod.Name + "-" + ref.Name)},
			Spec:       t.Spec.Spec,
		}
		if gc != nil {
			claim.Name, claim.UID = group.Name+"-"+ref.Name, types.UID("planned-"+string(group.UID)+"-"+ref.Name)
			return &PodClaim{Name: ref.Name, Claim: claim, Key: ClaimKey{Namespace: pod.Namespace, Name: ref.Name, PodGroup: group.Name}}, ""
		}
		return &PodClaim{Name: ref.Name, Claim: claim, PerPod: true}, ""
	}
	claim := m.claims[types.NamespacedName{Namespace: pod.Namespace, Name: *name}]
	if claim == nil {
		return nil, fmt.Sprintf("waiting for resourceclaim %q to be created", *name)
	}
	if claim.DeletionTimestamp != nil {
		return nil, fmt.Sprintf("resourceclaim %q is being deleted", claim.Name)
	}
	pc := &PodClaim{
		Name: ref.Name, Claim: claim, Key: ClaimKey{Namespace: claim.Namespace, Name: claim.Name},
		Reservations: len(claim.Status.ReservedFor),
		Reserved:     resourceclaim.IsReservedForPod(pod, claim, true),
	}
	// A claim made from a template for this pod alone is per pod.
	pc.PerPod = ref.ResourceClaimTemplateName != nil && gc == nil && claim.Status.Allocation == nil
	if a := claim.Status.Allocation; a != nil {
		pc.Allocated = true
		if a.NodeSelector != nil {
			sel, err := nodeaffinity.NewNodeSelector(a.NodeSelector)
			if err != nil {
				return nil, fmt.Sprintf("resourceclaim %q has an invalid node selector: %v", claim.Name, err)
			}
			pc.AvailableOn = sel
		}
	}
	return pc, ""
}
