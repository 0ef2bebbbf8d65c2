package v1alpha1_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/berth-dev/berth/internal/testing/builders"
)

// TestQuantitiesWithHugeExponentsAreRejected: without bounds the API server
// stores a NodeGroup whose capacity is "1e2147483648" (apimachinery's
// parser in berth's informer then never returns) or "1e30000000" (every
// comparison writes out its digits). berth's CRDs refuse exponents of more
// than three digits and JSON numbers beyond int64, naming the field, and
// still take every ordinary way of writing a quantity.
func TestQuantitiesWithHugeExponentsAreRejected(t *testing.T) {
	tests := []struct {
		name, cpu string // cpu is JSON: a string in quotes or a number
		wantErr   string
	}{
		{"an exponent beyond int32", `"1e2147483648"`, "spec.instanceTypes[0].capacity.cpu"},
		{"an exponent of eight digits", `"1e30000000"`, "spec.instanceTypes[0].capacity.cpu"},
		{"a negative exponent of four digits", `"1e-1000"`, "spec.instanceTypes[0].capacity.cpu"},
		{"a JSON number with an exponent beyond int32", `1e2147483648`, "cannot unmarshal number"},
		{"a JSON number beyond int64", `92233720368547758080`, "spec.instanceTypes[0].capacity.cpu"},
		{"an exponent of three digits", `"1e999"`, ""},
		{"a decimal exponent", `"1.5e3"`, ""},
		{"a suffix", `"1500m"`, ""},
		{"an exa suffix", `"1E"`, ""},
		{"an integer", `16`, ""},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ng := builders.NodeGroup("quantity-" + string(rune('a'+i)))
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ng)
			if err != nil {
				t.Fatal(err)
			}
			its := m["spec"].(map[string]any)["instanceTypes"].([]any)
			its[0].(map[string]any)["capacity"].(map[string]any)["cpu"] = json.RawMessage(tt.cpu)
			u := &unstructured.Unstructured{Object: m}
			u.SetGroupVersionKind(ng.GroupVersionKind())
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err = env.Client.Create(ctx, u)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("rejected: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error %v, want a rejection naming %s", err, tt.wantErr)
			}
		})
	}
}
