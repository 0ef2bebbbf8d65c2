package clusterapi

import (
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// m builds a Machine for tests: name, provider ID and options.
func m(name, providerID string, opts ...func(*machine)) machine {
	out := machine{Name: name, Namespace: "default", ProviderID: providerID, Annotations: map[string]string{}}
	for _, o := range opts {
		o(&out)
	}
	return out
}

func deleting(x *machine) { x.Deleting = true }
func berthMarked(x *machine) {
	x.Annotations[AnnotationDeleteMachine] = "now"
	x.Annotations[v1alpha1.AnnotationDeleteRequestedBy] = "uid"
}
func othersMarked(x *machine) { x.Annotations[AnnotationDeleteMachine] = "yes" }

func TestMachineForProviderID(t *testing.T) {
	ms := []machine{m("a", "aws:///us-east-1a/i-0a"), m("b", "kwok-capi://b"), m("c", "")}
	tests := []struct {
		name       string
		providerID string
		want       string
	}{
		{"a node maps to the machine with its provider ID", "kwok-capi://b", "b"},
		{"slashes after the scheme do not matter", "aws://us-east-1a/i-0a", "a"},
		{"a node without a provider ID maps to no machine, not to one without either", "", ""},
		{"a provider ID that only shares the instance ID does not match", "gce://us-east-1a/i-0a", ""},
		{"a provider ID of no machine maps to none", "kwok-capi://zz", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := machineForProviderID(ms, tt.providerID)
			if tt.want == "" {
				if ok {
					t.Fatalf("got machine %s, want none", got.Name)
				}
				return
			}
			if !ok || got.Name != tt.want {
				t.Fatalf("got %q (found %v), want %q", got.Name, ok, tt.want)
			}
		})
	}
}

func TestReplicasAfterRemoval(t *testing.T) {
	tests := []struct {
		name     string
		ms       []machine
		replicas int64
		want     int64
		wantErr  string
	}{
		{
			name: "one machine marked by berth lowers replicas by one",
			ms:   []machine{m("a", "p://a"), m("b", "p://b"), m("c", "p://c", berthMarked)}, replicas: 3, want: 2,
		},
		{
			name: "repeating after the replicas were lowered lowers nothing more",
			ms:   []machine{m("a", "p://a"), m("b", "p://b"), m("c", "p://c", berthMarked)}, replicas: 2, want: 2,
		},
		{
			name: "once Cluster API deletes the marked machine nothing more is lowered",
			ms:   []machine{m("a", "p://a"), m("b", "p://b"), m("c", "p://c", berthMarked, deleting)}, replicas: 2, want: 2,
		},
		{
			name: "a machine still to be created makes berth wait: lowering now would cancel it and keep the marked one",
			ms:   []machine{m("a", "p://a"), m("b", "p://b", berthMarked)}, replicas: 3,
			wantErr: "waiting for Cluster API: 3 replicas but 2 live Machines",
		},
		{
			name: "a machine being deleted by someone else makes berth wait: Cluster API would count it as the one removed",
			ms:   []machine{m("a", "p://a", deleting), m("b", "p://b", berthMarked), m("c", "p://c")}, replicas: 3,
			wantErr: "waiting for Cluster API: 3 replicas but 2 live Machines",
		},
		{
			name: "replicas already lowered for a marked machine not yet deleted count it once",
			ms:   []machine{m("a", "p://a", berthMarked), m("b", "p://b", berthMarked), m("c", "p://c")}, replicas: 2, want: 1,
		},
		{
			name: "two machines marked lower replicas by two",
			ms:   []machine{m("a", "p://a", berthMarked), m("b", "p://b", berthMarked), m("c", "p://c")}, replicas: 3, want: 1,
		},
		{
			name: "nothing marked lowers nothing",
			ms:   []machine{m("a", "p://a"), m("b", "p://b")}, replicas: 2, want: 2,
		},
		{
			name: "a delete-machine mark berth did not set stops berth from lowering",
			ms:   []machine{m("a", "p://a", othersMarked), m("b", "p://b", berthMarked)}, replicas: 2,
			wantErr: "machine default/a carries cluster.x-k8s.io/delete-machine not set by berth",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := replicasAfterRemoval(tt.ms, tt.replicas)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("replicas = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestStuck(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	old := func(x *machine) { x.Created = now.Add(-11 * time.Minute) }
	young := func(x *machine) { x.Created = now.Add(-time.Minute) }
	ms := []machine{m("no-infra-old", "", old), m("no-infra-young", "", young), m("ready-old", "p://r", old), m("deleting-old", "", old, deleting)}
	got := stuck(ms, now, 10*time.Minute)
	if len(got) != 1 || got[0].Name != "no-infra-old" {
		t.Fatalf("stuck = %v, want only no-infra-old", got)
	}
}

func TestMachineSetsOfLiveMachines(t *testing.T) {
	inSet := func(name string) func(*machine) { return func(x *machine) { x.MachineSet = name } }
	ms := []machine{m("a", "p://a", inSet("new")), m("b", "p://b", inSet("old")), m("c", "p://c", inSet("gone"), deleting), m("d", "p://d", inSet("new"))}
	if got := machineSets(ms); len(got) != 2 || got[0] != "new" || got[1] != "old" {
		t.Fatalf("machine sets = %v, want [new old]: a rollout in progress", got)
	}
}

func TestCanUnmark(t *testing.T) {
	inSet := func(name string) func(*machine) { return func(x *machine) { x.MachineSet = name } }
	tests := []struct {
		name     string
		ms       []machine
		replicas int64
		want     bool
	}{
		{name: "a mark whose replica change failed can go", ms: []machine{m("a", "p://a", berthMarked), m("b", "p://b")}, replicas: 2, want: true},
		{name: "a mark the replicas were lowered for cannot go", ms: []machine{m("a", "p://a", berthMarked), m("b", "p://b")}, replicas: 1},
		{name: "of two marks with one replica removed, one can go",
			ms: []machine{m("a", "p://a", berthMarked), m("b", "p://b", berthMarked), m("c", "p://c")}, replicas: 2, want: true},
		{name: "of two marks with two replicas removed, none can go",
			ms: []machine{m("a", "p://a", berthMarked), m("b", "p://b", berthMarked), m("c", "p://c")}, replicas: 1},
		{name: "a scale-up in flight does not commit a mark", ms: []machine{m("a", "p://a", berthMarked)}, replicas: 2, want: true},
		{name: "during a rollout berth never lowered the replicas",
			ms: []machine{m("a", "p://a", berthMarked, inSet("old")), m("b", "p://b", inSet("new")), m("c", "p://c", inSet("new"))}, replicas: 2, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := canUnmark(tt.ms, tt.replicas, v1alpha1.ClusterAPIMachineDeployment); got != tt.want {
				t.Errorf("canUnmark = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestOwnerLabelValueIsClusterAPIs: the owner label values of a few names
// as Cluster API's labels/format.MustFormatValue (v1.14.2) writes them on
// the Machines of a MachineSet or MachinePool; a MachineDeployment's name
// is written as it is.
func TestOwnerLabelValueIsClusterAPIs(t *testing.T) {
	long := "a-machine-set-whose-name-is-much-longer-than-a-label-value-may-be-0123456789"
	max := "x-0123456789012345678901234567890123456789012345678901234567890"
	for _, tc := range []struct {
		kind       v1alpha1.ClusterAPIKind
		name, want string
	}{
		{v1alpha1.ClusterAPIMachineSet, "workers", "workers"},
		{v1alpha1.ClusterAPIMachineSet, max, max},
		{v1alpha1.ClusterAPIMachineSet, long, "hash_eauoKg_z"},
		{v1alpha1.ClusterAPIMachinePool, long, "hash_eauoKg_z"},
		{v1alpha1.ClusterAPIMachineDeployment, "md-0", "md-0"},
	} {
		if got := ownerLabelValue(tc.kind, tc.name); got != tc.want {
			t.Errorf("ownerLabelValue(%s, %q) = %q, want %q", tc.kind, tc.name, got, tc.want)
		}
	}
}
