package v1alpha1_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// TestTenantValidation: the API server rejects a tenant whose name cannot
// name its namespace, oversized configuration and a change of type, with
// a message a kubectl user can act on; the defaults of a type are filled
// in.
func TestTenantValidation(t *testing.T) {
	ctx := context.Background()
	tt := &v1alpha1.TenantType{ObjectMeta: metav1.ObjectMeta{Name: "val-type"}, Spec: v1alpha1.TenantTypeSpec{
		NodeGroup: "medium", Template: v1alpha1.TenantTemplate{Image: "registry.k8s.io/pause:3.10"},
		Service: &v1alpha1.TenantService{Ports: []v1alpha1.TenantServicePort{{Port: 80}}}}}
	if err := env.Client.Create(ctx, tt); err != nil {
		t.Fatal(err)
	}
	if !tt.Spec.Dedicated() || tt.Spec.DedicatedNode == nil || tt.Spec.Service.Type != "ClusterIP" {
		t.Errorf("defaults not applied: dedicatedNode %v, service type %q", tt.Spec.DedicatedNode, tt.Spec.Service.Type)
	}
	many := v1alpha1.ConfigValues{}
	for i := range 65 {
		many[strings.Repeat("k", i+1)] = "v"
	}
	tests := []struct {
		name    string
		tenant  string
		config  v1alpha1.ConfigValues
		wantErr string
	}{
		{name: "a DNS label is accepted", tenant: "standard-1"},
		{name: "an upper-case name is rejected", tenant: "Standard-1", wantErr: "must be a DNS label"},
		{name: "a dotted name is rejected", tenant: "a.b", wantErr: "must be a DNS label"},
		{name: "a name starting with a digit is rejected", tenant: "2024-acme", wantErr: "starts with a letter"},
		{name: "a name too long for its namespace is rejected", tenant: strings.Repeat("a", 57), wantErr: "at most 56 characters"},
		{name: "65 config keys are rejected", tenant: "many-keys", config: many, wantErr: "spec.config"},
		{name: "a config key with a slash is rejected", tenant: "bad-key", config: v1alpha1.ConfigValues{"a/b": "x"}, wantErr: "config keys must be"},
		{name: "a config key starting with '..' is rejected", tenant: "dots-key", config: v1alpha1.ConfigValues{"..a": "x"}, wantErr: "config keys must be ConfigMap keys"},
		{name: "a huge config value is rejected", tenant: "big-value", config: v1alpha1.ConfigValues{"a": v1alpha1.ConfigValue(strings.Repeat("x", 4097))}, wantErr: "spec.config.a"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := env.Client.Create(ctx, &v1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: tc.tenant},
				Spec: v1alpha1.TenantSpec{Type: "val-type", Config: tc.config}})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("rejected: %v", err)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("accepted, want an error with %q", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("error %q does not say %q", err, tc.wantErr)
			}
		})
	}
	long := &v1alpha1.TenantType{ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("t", 64)}, Spec: tt.Spec}
	if err := env.Client.Create(ctx, long); err == nil || !strings.Contains(err.Error(), "name must be at most 63 characters") {
		t.Errorf("a TenantType named by 64 characters: %v, want a refusal (its name is a label value)", err)
	}
	ten := &v1alpha1.Tenant{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "standard-1"}, ten); err != nil {
		t.Fatal(err)
	}
	ten.Spec.Type = "other"
	if err := env.Client.Update(ctx, ten); err == nil || !strings.Contains(err.Error(), "type is immutable") {
		t.Errorf("changing the type: %v, want 'type is immutable'", err)
	}
}
