package tenant

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
)

func TestValidateName(t *testing.T) {
	tests := []struct{ name, input, wantErr string }{
		{"a DNS label is accepted", "premium-1", ""},
		{"56 characters are accepted", strings.Repeat("a", 56), ""},
		{"57 characters are too long for the namespace", strings.Repeat("a", 57), "at most 56, so that its namespace tenant-<name>"},
		{"upper case is rejected", "Premium", "is not a DNS label"},
		{"a dot is rejected", "a.b", "is not a DNS label"},
		{"a trailing dash is rejected", "a-", "is not a DNS label"},
		{"empty is rejected", "", "is not a DNS label"},
		{"a leading digit is rejected (its Service is named after it)", "2024-acme", "must start with a letter"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateName(tc.input)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("ValidateName(%q) = %v, want %q", tc.input, err, tc.wantErr)
			}
		})
	}
}

func TestParseSets(t *testing.T) {
	tests := []struct {
		name    string
		sets    []string
		want    v1alpha1.ConfigValues
		wantErr string
	}{
		{name: "no flags give no overrides"},
		{name: "values may contain '='", sets: []string{"PLAN=gold", "URL=http://x/?a=b"}, want: v1alpha1.ConfigValues{"PLAN": "gold", "URL": "http://x/?a=b"}},
		{name: "an empty value is a value", sets: []string{"EMPTY="}, want: v1alpha1.ConfigValues{"EMPTY": ""}},
		{name: "a flag without '=' is rejected", sets: []string{"PLAN"}, wantErr: `--set "PLAN": want KEY=VALUE`},
		{name: "a key with a slash is rejected", sets: []string{"a/b=c"}, wantErr: "the key is no ConfigMap key"},
		{name: "an empty key is rejected", sets: []string{"=c"}, wantErr: "the key is no ConfigMap key"},
		{name: "a key starting with '..' is rejected", sets: []string{"..a=1"}, wantErr: "must not start with '..'"},
		{name: "the key '.' is rejected", sets: []string{".=1"}, wantErr: "must not be '.'"},
		{name: "a key given twice is rejected", sets: []string{"A=1", "A=2"}, wantErr: "--set A given twice"},
		{name: "a value over 4096 characters is rejected", sets: []string{"A=" + strings.Repeat("x", 4097)}, wantErr: "at most 4096"},
		{name: "all errors are reported together", sets: []string{"x", "y"}, wantErr: `--set "y"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSets(tc.sets)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestPrintTenantsShowsTheColumnsKubectlUsersExpect(t *testing.T) {
	now := time.Now()
	tenants := []v1alpha1.Tenant{
		{ObjectMeta: metav1.ObjectMeta{Name: "standard-1", CreationTimestamp: metav1.NewTime(now.Add(-90 * time.Second))},
			Spec: v1alpha1.TenantSpec{Type: "standard"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "premium-1", CreationTimestamp: metav1.NewTime(now.Add(-3 * time.Minute))},
			Spec:   v1alpha1.TenantSpec{Type: "premium"},
			Status: v1alpha1.TenantStatus{Phase: v1alpha1.TenantRunning, NodeName: "large-abc", NodeGroup: "large"}},
	}
	var out bytes.Buffer
	PrintTenants(&out, tenants, now)
	want := `NAME         TYPE       PHASE     NODE        NODE GROUP   AGE
premium-1    premium    Running   large-abc   large        3m
standard-1   standard   <none>    <none>      <none>       90s
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// sequence is a client.Reader whose Get returns one tenant after another
// (the last one forever), as a cluster would while a tenant progresses.
type sequence struct {
	client.Reader
	tenants []*v1alpha1.Tenant
	i       int
}

func (s *sequence) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	t := s.tenants[min(s.i, len(s.tenants)-1)]
	s.i++
	if t == nil {
		return apierrors.NewNotFound(schema.GroupResource{Group: "berth.dev", Resource: "tenants"}, key.Name)
	}
	t.DeepCopyInto(obj.(*v1alpha1.Tenant))
	return nil
}

func status(phase v1alpha1.TenantPhase, reason, msg string) *v1alpha1.Tenant {
	t := &v1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "premium-4"}, Status: v1alpha1.TenantStatus{Phase: phase,
		Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: msg}}}}
	if phase == v1alpha1.TenantRunning {
		t.Status.NodeName, t.Status.NodeGroup = "large-x", "large"
	}
	return t
}

// TestWaitRunningPrintsEachChangeOnce: --wait prints a line per change of
// phase or reason (not per poll) and the node when the tenant runs.
func TestWaitRunningPrintsEachChangeOnce(t *testing.T) {
	pending := status(v1alpha1.TenantPending, v1alpha1.ReasonWaitingForScheduler, "pod p waits for the scheduler")
	launching := status(v1alpha1.TenantProvisioning, v1alpha1.ReasonLaunchingNode, "pod p: Launching node large-x (node group large) for this pod")
	r := &sequence{tenants: []*v1alpha1.Tenant{pending, pending, launching, launching, status(v1alpha1.TenantRunning, v1alpha1.ReasonPodReady, "")}}
	var out bytes.Buffer
	if err := WaitRunning(context.Background(), r, "premium-4", &out, time.Millisecond, time.Minute); err != nil {
		t.Fatal(err)
	}
	want := `premium-4: Pending (WaitingForScheduler): pod p waits for the scheduler
premium-4: Provisioning (LaunchingNode): pod p: Launching node large-x (node group large) for this pod
tenant premium-4 runs on node large-x (node group large)
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestWaitRunningTimesOutWithTheLastReason: a tenant that cannot run makes
// --wait fail after the timeout, saying why (the group's maximum).
func TestWaitRunningTimesOutWithTheLastReason(t *testing.T) {
	stuck := status(v1alpha1.TenantPending, v1alpha1.ReasonNoNodeCanBeLaunched, "pod p: No node can be launched for this pod: 0/3 node groups fit: large: node group at maxSize 3")
	var out bytes.Buffer
	err := WaitRunning(context.Background(), &sequence{tenants: []*v1alpha1.Tenant{stuck}}, "premium-4", &out, time.Millisecond, 50*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "timed out after 50ms") || !strings.Contains(err.Error(), "large: node group at maxSize 3") {
		t.Errorf("error %v: want a timeout with the last reason", err)
	}
	if strings.Count(out.String(), "\n") != 1 {
		t.Errorf("printed %q: want the one status line once", out.String())
	}
}

// TestWaitRunningStopsWhenTheTenantFailsOrGoes: no point waiting out the
// timeout for a tenant that failed or was deleted.
func TestWaitRunningStopsWhenTheTenantFailsOrGoes(t *testing.T) {
	for _, tc := range []struct {
		name string
		t    *v1alpha1.Tenant
		want string
	}{
		{"failed", status(v1alpha1.TenantFailed, v1alpha1.ReasonTypeNotFound, `tenant type "gold" does not exist`), `failed: premium-4: Failed (TypeNotFound): tenant type "gold" does not exist`},
		{"deleted", nil, "was deleted while waiting"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := WaitRunning(context.Background(), &sequence{tenants: []*v1alpha1.Tenant{tc.t}}, "premium-4", &bytes.Buffer{}, time.Millisecond, time.Minute)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}
