package webhook_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/scheme"
	"github.com/berth-dev/berth/internal/webhook"
)

// TestTheGatePatchChangesNothingElse: a pod a CompanionProfile selects
// carries fields this build's API types do not know (a newer API
// server's). The webhook's patch adds the companion gate and nothing
// else: a patch worked out from the pod decoded and encoded again removed
// those fields.
func TestTheGatePatchChangesNothingElse(t *testing.T) {
	profile := &v1alpha1.CompanionProfile{ObjectMeta: metav1.ObjectMeta{Name: "fuse"}, Spec: v1alpha1.CompanionProfileSpec{
		Workloads: v1alpha1.CompanionWorkloads{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "fuse"}}},
		Companion: v1alpha1.CompanionShape{Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}},
		Recognize: v1alpha1.CompanionRecognition{Namespace: "mounts", Selector: metav1.LabelSelector{MatchLabels: map[string]string{"role": "mount"}}},
	}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(profile).Build()
	d := &webhook.PodDefaulter{Reader: c, Decoder: admission.NewDecoder(scheme.New())}
	for _, tc := range []struct {
		name string
		raw  string
		want jsonpatch.JsonPatchOperation
	}{
		{"a pod without gates", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"w","namespace":"team","labels":{"app":"fuse"}},` +
			`"spec":{"futureField":true,"containers":[{"name":"c","image":"i","futureContainerField":1}]}}`,
			jsonpatch.JsonPatchOperation{Operation: "add", Path: "/spec/schedulingGates",
				Value: []any{map[string]any{"name": v1alpha1.SchedulingGateCompanion}}}},
		{"a pod with a gate of its own", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"w","namespace":"team","labels":{"app":"fuse"}},` +
			`"spec":{"futureField":true,"schedulingGates":[{"name":"example.com/other"}],"containers":[{"name":"c","image":"i"}]}}`,
			jsonpatch.JsonPatchOperation{Operation: "add", Path: "/spec/schedulingGates/-",
				Value: map[string]any{"name": v1alpha1.SchedulingGateCompanion}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := d.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Operation: admissionv1.Create, Namespace: "team", Object: runtime.RawExtension{Raw: []byte(tc.raw)}}})
			if !res.Allowed {
				t.Fatalf("refused: %+v", res.Result)
			}
			// Compare as JSON values, as the API server reads them.
			got := roundTrip(t, res.Patches)
			if diff := cmp.Diff([]jsonpatch.JsonPatchOperation{roundTrip(t, []jsonpatch.JsonPatchOperation{tc.want})[0]}, got); diff != "" {
				t.Errorf("patch (-want +got):\n%s", diff)
			}
		})
	}
}

func roundTrip(t *testing.T, ops []jsonpatch.JsonPatchOperation) []jsonpatch.JsonPatchOperation {
	t.Helper()
	out := make([]jsonpatch.JsonPatchOperation, len(ops))
	for i, op := range ops {
		raw, err := op.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		out[i] = jsonpatch.JsonPatchOperation{Operation: m["op"].(string), Path: m["path"].(string), Value: m["value"]}
	}
	return out
}
