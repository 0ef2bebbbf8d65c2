package webhook

import (
	"context"
	"encoding/json"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/companion"
)

// PodDefaulter adds berth's companion scheduling gate to the pods a
// CompanionProfile selects, when they are created. It never refuses a pod:
// anything it cannot decide lets the pod through unchanged (and the
// webhook's failure policy is Ignore, so the API server admits pods when
// berth is down).
type PodDefaulter struct {
	Reader  client.Reader
	Decoder admission.Decoder
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
	if companion.Gated(pod) || pod.Spec.NodeName != "" {
		return admission.Allowed("")
	}
	profile, err := d.selecting(ctx, pod)
	if err != nil {
		log.FromContext(ctx).V(1).Info("companion webhook let a pod through unchanged", "namespace", pod.Namespace, "error", err.Error())
		return admission.Allowed("")
	}
	if profile == "" {
		return admission.Allowed("")
	}
	pod.Spec.SchedulingGates = append(pod.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: v1alpha1.SchedulingGateCompanion})
	raw, err := json.Marshal(pod)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, raw)
}

// selecting returns the name of the first profile (by name) that selects
// the pod, or "".
func (d *PodDefaulter) selecting(ctx context.Context, pod *corev1.Pod) (string, error) {
	profiles := &v1alpha1.CompanionProfileList{}
	if err := d.Reader.List(ctx, profiles); err != nil {
		return "", err
	}
	p, err := companion.Selecting(ctx, profiles.Items, pod, Lookup{Reader: d.Reader})
	if p == nil || err != nil {
		return "", err
	}
	return p.Name, nil
}
