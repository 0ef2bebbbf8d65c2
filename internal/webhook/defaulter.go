package webhook

import (
	"context"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/clusterread"
	"github.com/berth-dev/berth/internal/companion"
)

// PodDefaulter adds berth's companion scheduling gate to the pods a
// CompanionProfile selects, when they are created, and the hand-over gate
// to companions pinned to a node where berth holds room for them. It never
// refuses a pod: anything it cannot decide lets the pod through unchanged
// (and the webhook's failure policy is Ignore, so the API server admits
// pods when berth is down).
type PodDefaulter struct {
	Reader client.Reader
	// APIReader reads placeholders from the API server, past the cache:
	// one created a moment ago must not be missed (nil: Reader).
	APIReader client.Reader
	Decoder   admission.Decoder
}

var _ admission.Handler = &PodDefaulter{}

// Handle implements admission.Handler.
func (d *PodDefaulter) Handle(ctx context.Context, req admission.Request) admission.Response {
	pod := &corev1.Pod{}
	if err := d.Decoder.Decode(req, pod); err != nil {
		return admission.Allowed("not a pod berth can read")
	}
	if pod.Namespace == "" {
		pod.Namespace = req.Namespace
	}
	if companion.Gated(pod) || companion.HandoverGated(pod) || pod.Spec.NodeName != "" {
		return admission.Allowed("")
	}
	gate, err := d.gateFor(ctx, pod)
	if err != nil {
		log.FromContext(ctx).V(1).Info("companion webhook let a pod through unchanged", "namespace", pod.Namespace, "error", err.Error())
		return admission.Allowed("")
	}
	if gate == "" {
		return admission.Allowed("")
	}
	return admission.Patched("", gatePatch(pod, gate))
}

// gatePatch adds the gate to the pod's scheduling gates, and changes
// nothing else: a patch computed from the pod decoded and encoded again
// would remove every field this build's API types do not know (a field
// a newer API server added).
func gatePatch(pod *corev1.Pod, gate string) jsonpatch.JsonPatchOperation {
	g := corev1.PodSchedulingGate{Name: gate}
	if len(pod.Spec.SchedulingGates) == 0 {
		return jsonpatch.JsonPatchOperation{Operation: "add", Path: "/spec/schedulingGates", Value: []corev1.PodSchedulingGate{g}}
	}
	return jsonpatch.JsonPatchOperation{Operation: "add", Path: "/spec/schedulingGates/-", Value: g}
}

// gateFor returns the gate the pod gets: the companion gate when a
// profile selects it as a workload, the hand-over gate when a profile
// recognises it as a companion pinned to a node where a placeholder of
// that profile holds room, else "".
func (d *PodDefaulter) gateFor(ctx context.Context, pod *corev1.Pod) (string, error) {
	profiles := &v1alpha1.CompanionProfileList{}
	if err := d.Reader.List(ctx, profiles); err != nil {
		return "", err
	}
	if len(profiles.Items) == 0 {
		return "", nil
	}
	p, err := companion.Selecting(ctx, profiles.Items, pod, clusterread.Lookup{Reader: d.Reader, Fresh: d.APIReader})
	if err != nil {
		return "", err
	}
	if p != nil {
		return v1alpha1.SchedulingGateCompanion, nil
	}
	node := companion.PinnedNode(pod)
	var recognizing []string
	for i := range profiles.Items {
		if companion.Recognizes(&profiles.Items[i], pod) {
			recognizing = append(recognizing, profiles.Items[i].Name)
		}
	}
	if node == "" || len(recognizing) == 0 {
		return "", nil
	}
	// Past the cache: a placeholder created a moment ago must count.
	reader := d.APIReader
	if reader == nil {
		reader = d.Reader
	}
	phs := &corev1.PodList{}
	if err := reader.List(ctx, phs, client.InNamespace(v1alpha1.SystemNamespace), client.MatchingLabels(companion.PlaceholderLabels())); err != nil {
		return "", err
	}
	for i := range phs.Items {
		for _, profile := range recognizing {
			if companion.HoldsRoomOn(&phs.Items[i], node, profile) {
				return v1alpha1.SchedulingGateCompanionHandover, nil
			}
		}
	}
	return "", nil
}
