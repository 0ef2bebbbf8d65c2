package quantity

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestHugeExponentFindsStandaloneNumbersOnly(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"a quantity with a ten-digit exponent", `"1e2147483648"`, "1e2147483648"},
		{"a JSON number with a long exponent", `{"cpu":1E30000000,"x":1}`, "1E30000000"},
		{"a negative exponent counts too", `"2.5e-12345"`, "2.5e-12345"},
		{"a CEL quantity literal", `device.capacity["mem"].compareTo(quantity("1e30000000")) >= 0`, "1e30000000"},
		{"an exponent of three digits is read", `"1e999"`, ""},
		{"leading zeros do not count", `"1e000999"`, ""},
		{"an exa suffix is not an exponent", `"12E"`, ""},
		{"a digest that looks like a number inside is not one", `"sha256:1e45670abc"`, ""},
		{"a number inside a word is not one", `"node1e12345"`, ""},
		{"a UID is not one", `"uid":"123e4567-e89b-12d3-a456-426614174000"`, ""},
		{"an image tag is not one", `"image":"app:3e45678"`, ""},
		{"a label value of a number is one", `"labels":{"n":"1e30000000"}`, "1e30000000"},
		{"a signed number in a YAML flow list is one", `[ -1e30000000 ]`, "-1e30000000"},
		{"an ordinary pod", `{"requests":{"cpu":"500m","memory":"1Gi"}}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := HugeExponent([]byte(tt.in)); got != tt.want {
				t.Errorf("HugeExponent(%s) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseRefusesWhatApimachineryCannotParseInTime(t *testing.T) {
	for _, s := range []string{"1e2147483648", "922E372036854775807", "1e30000000", strings.Repeat("9", 65),
		// No digits before the exponent: zero, whose millicores took
		// seconds to read.
		"e999999999", "e0003000000000000", "+e1000", ".E1000"} {
		if _, err := Parse(s); err == nil {
			t.Errorf("Parse(%.30q) gave no error", s)
		}
	}
	q, err := Parse("1.5Gi")
	if err != nil || q.Value() != 3<<29 {
		t.Errorf("Parse(1.5Gi) = %v, %v; want 1.5Gi", q.String(), err)
	}
	for _, s := range []string{"1e999", "e999", "1e000999", "1Ei", "1E"} {
		if _, err := Parse(s); err != nil {
			t.Errorf("Parse(%q): %v", s, err)
		}
	}
	if _, err := Parse("1.5Gx"); err == nil {
		t.Error("Parse(1.5Gx) gave no error")
	}
}

// TestBoundKeepsWhatTheSchedulerReads checks that a bounded quantity is
// cheap (InRange) and that kube-scheduler's reading of it (MilliValue for
// cpu, Value for the rest) is unchanged, so that plans do not change.
func TestBoundKeepsWhatTheSchedulerReads(t *testing.T) {
	tests := []struct {
		name     corev1.ResourceName
		in       string
		replaced bool
	}{
		{corev1.ResourceCPU, "500m", false},
		{corev1.ResourceCPU, "1e16", false}, // read as kube-scheduler reads it, sums included
		{corev1.ResourceCPU, "1e996", false},
		{corev1.ResourceCPU, "1e998", true}, // 1,002 digits in millicores
		{corev1.ResourceCPU, "1e3000000", true},
		{corev1.ResourceMemory, "64Ei", false},
		{corev1.ResourceMemory, "123456789012345678901234567890", false},
		{corev1.ResourceMemory, "1e999", false},
		{corev1.ResourceMemory, "1e1001", true},
		{corev1.ResourceMemory, "-1e30000", true},
		{corev1.ResourceMemory, "0e30000", true},
		{"example.com/gpu", "1e30000000", true},
		{"example.com/gpu", "8", false},
	}
	for _, tt := range tests {
		t.Run(string(tt.name)+"="+tt.in, func(t *testing.T) {
			q := resource.MustParse(tt.in)
			got := Bound(tt.name, q)
			if !InRange(tt.name, got) {
				t.Fatalf("Bound(%s) = %s is not in range", tt.in, got.String())
			}
			if replaced := !InRange(tt.name, q); replaced != tt.replaced {
				t.Errorf("InRange(%s) = %v, want %v", tt.in, !replaced, !tt.replaced)
			}
			if got.MilliValue() != q.MilliValue() && tt.name == corev1.ResourceCPU {
				t.Errorf("MilliValue: bounded %d, was %d", got.MilliValue(), q.MilliValue())
			}
			if got.Value() != q.Value() && tt.name != corev1.ResourceCPU {
				t.Errorf("Value: bounded %d, was %d", got.Value(), q.Value())
			}
		})
	}
}

func TestBoundPodReachesEveryQuantityTheSchedulerReads(t *testing.T) {
	huge := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1e3000000"), corev1.ResourceMemory: resource.MustParse("1e30000000")}
	p := &corev1.Pod{Spec: corev1.PodSpec{
		Overhead:       huge.DeepCopy(),
		Resources:      &corev1.ResourceRequirements{Requests: huge.DeepCopy(), Limits: huge.DeepCopy()},
		InitContainers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: huge.DeepCopy(), Limits: huge.DeepCopy()}}},
		Containers:     []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: huge.DeepCopy(), Limits: huge.DeepCopy()}}},
	}}
	if n := BoundPod(p); n != 14 {
		t.Errorf("BoundPod replaced %d quantities, want 14", n)
	}
	if n := BoundPod(p); n != 0 {
		t.Errorf("a second BoundPod replaced %d quantities, want 0", n)
	}
	n := &corev1.Node{Status: corev1.NodeStatus{Capacity: huge.DeepCopy(), Allocatable: huge.DeepCopy()}}
	if got := BoundNode(n); got != 4 {
		t.Errorf("BoundNode replaced %d quantities, want 4", got)
	}
}
