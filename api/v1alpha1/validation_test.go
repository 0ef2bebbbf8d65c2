package v1alpha1_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// TestNodeGroupValidation creates NodeGroups on the real API server and
// checks that each invalid one is rejected with a message that names the
// offending field, as a user running kubectl apply would see it.
func TestNodeGroupValidation(t *testing.T) {
	tests := []struct {
		name string
		ng   *v1alpha1.NodeGroup
		// wantErr holds substrings of the error; empty means accepted.
		wantErr []string
	}{
		{
			name: "a minimal kwok group is accepted",
			ng:   builders.NodeGroup("valid"),
		},
		{
			name: "a group with spot and on-demand offerings, taints and limits is accepted",
			ng: builders.NodeGroup("valid-full",
				builders.Size(1, 5),
				builders.TemplateTaint("size", "large", corev1.TaintEffectNoSchedule),
				builders.TemplateLabel("size", "large"),
				builders.InstanceType("large-4", "4", "16Gi", builders.Spot("zone-a", "0.05"), builders.OnDemand("zone-a", "0.2")),
				builders.GroupLimits(corev1.ResourceList{corev1.ResourceCPU: resourceMust("100")}),
			),
		},
		{
			name: "a group of Windows nodes, saying so by the operating system label, is accepted",
			ng:   builders.NodeGroup("valid-windows", builders.TemplateLabel("kubernetes.io/os", "windows")),
		},
		{
			name: "an instance type with the devices of a DRA driver is accepted",
			ng: builders.NodeGroup("valid-devices",
				builders.InstanceType("gpu-2", "8", "32Gi", builders.OnDemand("zone-a", "2")),
				builders.Devices("gpu.example.com", "gpu", 2, map[string]string{"model": "a100"})),
		},
		{
			name: "two devices of one driver with the same name are rejected naming the duplicate",
			ng: func() *v1alpha1.NodeGroup {
				ng := builders.NodeGroup("dup-devices",
					builders.InstanceType("gpu-2", "8", "32Gi", builders.OnDemand("zone-a", "2")),
					builders.Devices("gpu.example.com", "gpu", 2, nil))
				ng.Spec.InstanceTypes[0].Devices[0].Devices[1].Name = "gpu-0"
				return ng
			}(),
			wantErr: []string{"spec.instanceTypes[0].devices[0].devices[1]", "Duplicate value"},
		},
		{
			name: "a driver name with capitals is rejected naming driver",
			ng: builders.NodeGroup("bad-driver",
				builders.InstanceType("gpu-2", "8", "32Gi", builders.OnDemand("zone-a", "2")),
				builders.Devices("GPU.example.com", "gpu", 1, nil)),
			wantErr: []string{"spec.instanceTypes[0].devices[0].driver"},
		},
		{
			name:    "min size above max size is rejected naming minSize",
			ng:      builders.NodeGroup("min-above-max", builders.Size(5, 2)),
			wantErr: []string{"spec.minSize", "minSize must be less than or equal to maxSize"},
		},
		{
			name: "a group without instance types is rejected naming instanceTypes",
			ng: func() *v1alpha1.NodeGroup {
				ng := builders.NodeGroup("no-types")
				ng.Spec.InstanceTypes = []v1alpha1.InstanceType{}
				return ng
			}(),
			wantErr: []string{"spec.instanceTypes", "should have at least 1 items"},
		},
		{
			name: "two instance types with the same name are rejected naming the duplicate",
			ng: builders.NodeGroup("dup-types",
				builders.InstanceType("m-2", "2", "4Gi", builders.OnDemand("zone-a", "0.1")),
				builders.InstanceType("m-2", "4", "8Gi", builders.OnDemand("zone-a", "0.2")),
			),
			wantErr: []string{"spec.instanceTypes[1]", "Duplicate value"},
		},
		{
			name:    "a negative price is rejected naming pricePerHour",
			ng:      builders.NodeGroup("negative-price", builders.InstanceType("m-2", "2", "4Gi", builders.OnDemand("zone-a", "-0.1"))),
			wantErr: []string{"spec.instanceTypes[0].offerings[0].pricePerHour", "non-negative decimal"},
		},
		{
			name: "a malformed stopped price is rejected naming stoppedPricePerHour",
			ng: builders.NodeGroup("bad-stopped-price", builders.InstanceType("m-2", "2", "4Gi",
				v1alpha1.Offering{Zone: "zone-a", CapacityType: v1alpha1.CapacityTypeOnDemand, PricePerHour: "0.1", StoppedPricePerHour: "a tenth"})),
			wantErr: []string{"spec.instanceTypes[0].offerings[0].stoppedPricePerHour", "non-negative decimal"},
		},
		{
			name:    "an unknown taint effect is rejected naming the effect",
			ng:      builders.NodeGroup("bad-effect", builders.TemplateTaint("size", "large", "NoWay")),
			wantErr: []string{"spec.template.taints[0].effect", `Unsupported value: "NoWay"`},
		},
		{
			name: "an unknown capacity type is rejected naming capacityType",
			ng: builders.NodeGroup("bad-capacity-type", builders.InstanceType("m-2", "2", "4Gi",
				v1alpha1.Offering{Zone: "zone-a", CapacityType: "reserved", PricePerHour: "0.1"})),
			wantErr: []string{"spec.instanceTypes[0].offerings[0].capacityType", `Unsupported value: "reserved"`},
		},
		{
			name: "an instance type without memory capacity is rejected naming capacity",
			ng: func() *v1alpha1.NodeGroup {
				ng := builders.NodeGroup("no-memory")
				delete(ng.Spec.InstanceTypes[0].Capacity, corev1.ResourceMemory)
				return ng
			}(),
			wantErr: []string{"spec.instanceTypes[0].capacity", "capacity must include cpu and memory"},
		},
		{
			name: "a group without a provider is rejected naming provider",
			ng: func() *v1alpha1.NodeGroup {
				ng := builders.NodeGroup("no-provider")
				ng.Spec.Provider.KWOK = nil
				return ng
			}(),
			wantErr: []string{"spec.provider", "exactly one provider must be set"},
		},
		{
			name: "a disruption budget that is neither a count nor a percentage is rejected naming budget",
			ng: func() *v1alpha1.NodeGroup {
				ng := builders.NodeGroup("bad-budget")
				v := intstr.FromString("ten")
				ng.Spec.Disruption.Budget = &v
				return ng
			}(),
			wantErr: []string{"spec.disruption.budget", "count or a percentage"},
		},
		{
			name: "a disruption window with a malformed cron is rejected naming the cron",
			ng: func() *v1alpha1.NodeGroup {
				ng := builders.NodeGroup("bad-window")
				ng.Spec.Disruption.Window = &v1alpha1.DisruptionWindow{Cron: "at night"}
				return ng
			}(),
			wantErr: []string{"spec.disruption.window.cron", "5-field expression"},
		},
		{
			name: "a disruption policy, budget and window are accepted",
			ng: func() *v1alpha1.NodeGroup {
				ng := builders.NodeGroup("good-disruption")
				v := intstr.FromString("25%")
				ng.Spec.Disruption = v1alpha1.Disruption{ConsolidationPolicy: v1alpha1.ConsolidationWhenEmpty, Budget: &v,
					Window: &v1alpha1.DisruptionWindow{Cron: "0 22 * * 1-5", Duration: metav1.Duration{Duration: 8 * time.Hour}}}
				return ng
			}(),
		},
		{
			name: "a disruption window of 0s (or none given) is rejected: it would never open",
			ng: func() *v1alpha1.NodeGroup {
				ng := builders.NodeGroup("zero-window")
				ng.Spec.Disruption.Window = &v1alpha1.DisruptionWindow{Cron: "0 22 * * 1-5"}
				return ng
			}(),
			wantErr: []string{"spec.disruption.window.duration", "a window of 0s never opens"},
		},
		{
			name: "a scheduled budget of 0s is rejected: it would never apply",
			ng: withDisruption("zero-budget-window", func(d *v1alpha1.Disruption) {
				d.Budgets = []v1alpha1.DisruptionBudget{{Nodes: intstr.FromInt32(0), Schedule: "@daily", Duration: &metav1.Duration{}}}
			}),
			wantErr: []string{"spec.disruption.budgets[0].duration", "a budget of 0s never applies"},
		},
		// Every name that becomes a label value or key on a node is checked
		// at admission: otherwise every launch of the group fails.
		{
			name:    "a name of 58 characters is rejected: the node names would not fit the hostname label",
			ng:      builders.NodeGroup(strings.Repeat("n", 58)),
			wantErr: []string{"name must be at most 57 characters"},
		},
		{
			name: "a name of 57 characters is accepted",
			ng:   builders.NodeGroup(strings.Repeat("n", 57)),
		},
		{
			name:    "a template label value with a space is rejected naming labels",
			ng:      builders.NodeGroup("bad-label-value", builders.TemplateLabel("team", "a b")),
			wantErr: []string{"spec.template.labels.team", "should match"},
		},
		{
			name:    "a template label value of 64 characters is rejected",
			ng:      builders.NodeGroup("long-label-value", builders.TemplateLabel("team", strings.Repeat("a", 64))),
			wantErr: []string{"spec.template.labels.team", "may not be more than 63"},
		},
		{
			name:    "a template label key with two slashes is rejected naming labels",
			ng:      builders.NodeGroup("bad-label-key", builders.TemplateLabel("a/b/c", "x")),
			wantErr: []string{"spec.template.labels", "label keys must be qualified names"},
		},
		{
			name:    "a template label that berth sets itself is rejected",
			ng:      builders.NodeGroup("reserved-label", builders.TemplateLabel("berth.dev/nodegroup", "other")),
			wantErr: []string{"spec.template.labels", "must not set a label berth sets"},
		},
		{
			name:    "a template label of the architecture is rejected pointing at the instance type's field",
			ng:      builders.NodeGroup("arch-label", builders.TemplateLabel("kubernetes.io/arch", "arm64")),
			wantErr: []string{"spec.template.labels", "must not set kubernetes.io/arch (set instanceTypes[].architecture)"},
		},
		{
			name:    "a template label of a deprecated beta name is rejected",
			ng:      builders.NodeGroup("beta-label", builders.TemplateLabel("beta.kubernetes.io/os", "windows")),
			wantErr: []string{"spec.template.labels", "nor a deprecated beta label"},
		},
		{
			name: "a taint and a startup taint of the same key and effect are rejected (every node of the group would be)",
			ng: func() *v1alpha1.NodeGroup {
				ng := builders.NodeGroup("dup-taint", builders.TemplateTaint("dedicated", "gpu", corev1.TaintEffectNoSchedule))
				ng.Spec.Template.StartupTaints = []v1alpha1.NodeTaint{{Key: "dedicated", Effect: v1alpha1.TaintEffect(corev1.TaintEffectNoSchedule)}}
				return ng
			}(),
			wantErr: []string{"spec.template", "must not repeat a key and effect"},
		},
		{
			name: "a taint and a startup taint of one key with two effects are accepted",
			ng: func() *v1alpha1.NodeGroup {
				ng := builders.NodeGroup("two-effects", builders.TemplateTaint("dedicated", "gpu", corev1.TaintEffectNoSchedule))
				ng.Spec.Template.StartupTaints = []v1alpha1.NodeTaint{{Key: "dedicated", Effect: v1alpha1.TaintEffect(corev1.TaintEffectNoExecute)}}
				return ng
			}(),
		},
		{
			name:    "a taint key that is not a qualified name is rejected naming the key",
			ng:      builders.NodeGroup("bad-taint-key", builders.TemplateTaint("a b", "x", corev1.TaintEffectNoSchedule)),
			wantErr: []string{"spec.template.taints[0].key", "qualified name"},
		},
		{
			name:    "a taint value that is not a label value is rejected naming the value",
			ng:      builders.NodeGroup("bad-taint-value", builders.TemplateTaint("size", "-large", corev1.TaintEffectNoSchedule)),
			wantErr: []string{"spec.template.taints[0].value", "should match"},
		},
		{
			name:    "an instance type name with a slash is rejected naming the name",
			ng:      builders.NodeGroup("bad-type-name", builders.InstanceType("m5/large", "2", "4Gi", builders.OnDemand("zone-a", "0.1"))),
			wantErr: []string{"spec.instanceTypes[0].name", "should match"},
		},
		{
			name:    "a zone with a space is rejected naming the zone",
			ng:      builders.NodeGroup("bad-zone", builders.InstanceType("m-2", "2", "4Gi", builders.OnDemand("zone a", "0.1"))),
			wantErr: []string{"spec.instanceTypes[0].offerings[0].zone", "should match"},
		},
		{
			name: "a clusterAPI group naming a MachineDeployment is accepted",
			ng:   capiGroup("capi-valid"),
		},
		{
			name: "a group with both kwok and clusterAPI is rejected naming provider",
			ng: func() *v1alpha1.NodeGroup {
				ng := capiGroup("capi-both")
				ng.Spec.Provider.KWOK = &v1alpha1.KWOKProvider{}
				return ng
			}(),
			wantErr: []string{"spec.provider", "exactly one provider must be set"},
		},
		{
			name: "a clusterAPI group with two instance types is rejected naming instanceTypes",
			ng: func() *v1alpha1.NodeGroup {
				ng := capiGroup("capi-two-types")
				builders.InstanceType("other", "4", "8Gi", builders.OnDemand("zone-a", "0.2"))(ng)
				return ng
			}(),
			wantErr: []string{"spec.instanceTypes", "exactly one instance type with one offering"},
		},
		{
			name: "a clusterAPI group of an unknown kind is rejected naming kind",
			ng: func() *v1alpha1.NodeGroup {
				ng := capiGroup("capi-kind")
				ng.Spec.Provider.ClusterAPI.Kind = "Deployment"
				return ng
			}(),
			wantErr: []string{"spec.provider.clusterAPI.kind", "Unsupported value"},
		},
		{
			name: "a clusterAPI group naming a MachineDeployment of more than 63 characters is rejected naming the label",
			ng: func() *v1alpha1.NodeGroup {
				ng := capiGroup("capi-long-md")
				ng.Spec.Provider.ClusterAPI.Name = strings.Repeat("m", 64)
				return ng
			}(),
			wantErr: []string{"spec.provider.clusterAPI", "a MachineDeployment's name is at most 63 characters"},
		},
		{
			name: "a clusterAPI group naming a MachineSet of more than 63 characters is accepted (Cluster API labels its Machines with a hash)",
			ng: func() *v1alpha1.NodeGroup {
				ng := capiGroup("capi-long-ms")
				ng.Spec.Provider.ClusterAPI.Kind = v1alpha1.ClusterAPIMachineSet
				ng.Spec.Provider.ClusterAPI.Name = strings.Repeat("s", 200)
				return ng
			}(),
		},
		{
			name: "lifecycle settings are accepted: budgets by reason with a window, expiry, interruption signals, repair",
			ng: withDisruption("valid-lifecycle", func(d *v1alpha1.Disruption) {
				d.Budgets = []v1alpha1.DisruptionBudget{{Nodes: intstr.FromString("20%"), Reasons: []v1alpha1.DisruptionReason{v1alpha1.ReasonDrifted}},
					{Nodes: intstr.FromInt32(0), Schedule: "0 8 * * 1-5", Duration: &metav1.Duration{Duration: 10 * time.Hour}}}
				d.ExpireAfter = &metav1.Duration{Duration: 720 * time.Hour}
				d.Interruption = &v1alpha1.Interruption{Taints: []string{"example.com/going"}, Rebalance: true}
				d.Repair = &v1alpha1.Repair{Conditions: []v1alpha1.RepairCondition{{Type: "Ready", Status: "Unknown", Toleration: metav1.Duration{Duration: time.Minute}}}}
			}),
		},
		{
			name: "a budget above 100 % is rejected naming nodes",
			ng: withDisruption("budget-pct", func(d *v1alpha1.Disruption) {
				d.Budgets = []v1alpha1.DisruptionBudget{{Nodes: intstr.FromString("150%")}}
			}),
			wantErr: []string{"spec.disruption.budgets[0].nodes"},
		},
		{
			name: "a negative budget is rejected",
			ng: withDisruption("budget-neg", func(d *v1alpha1.Disruption) {
				d.Budgets = []v1alpha1.DisruptionBudget{{Nodes: intstr.FromInt32(-1)}}
			}),
			wantErr: []string{"nodes must not be negative"},
		},
		{
			name: "a schedule without a duration is rejected",
			ng: withDisruption("budget-window", func(d *v1alpha1.Disruption) {
				d.Budgets = []v1alpha1.DisruptionBudget{{Nodes: intstr.FromInt32(0), Schedule: "@daily"}}
			}),
			wantErr: []string{"set schedule and duration together"},
		},
		{
			name: "an unknown disruption reason is rejected",
			ng: withDisruption("budget-reason", func(d *v1alpha1.Disruption) {
				d.Budgets = []v1alpha1.DisruptionBudget{{Nodes: intstr.FromInt32(1), Reasons: []v1alpha1.DisruptionReason{"Bored"}}}
			}),
			wantErr: []string{"spec.disruption.budgets[0].reasons[0]", "Unsupported value"},
		},
		{
			name: "a repair condition status other than True, False or Unknown is rejected",
			ng: withDisruption("repair-status", func(d *v1alpha1.Disruption) {
				d.Repair = &v1alpha1.Repair{Conditions: []v1alpha1.RepairCondition{{Type: "Ready", Status: "Maybe"}}}
			}),
			wantErr: []string{"spec.disruption.repair.conditions[0].status"},
		},
		{
			name: "an unknown deletion policy is rejected",
			ng: func() *v1alpha1.NodeGroup {
				ng := builders.NodeGroup("deletion-policy")
				ng.Spec.DeletionPolicy = "Keep"
				return ng
			}(),
			wantErr: []string{"spec.deletionPolicy", "Unsupported value"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := env.Client.Create(context.Background(), tt.ng)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("valid NodeGroup rejected: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("invalid NodeGroup accepted; want an error containing %q", tt.wantErr)
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want an Invalid error, got %v", err)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err.Error(), want)
				}
			}
		})
	}
}

func resourceMust(s string) resource.Quantity { return resource.MustParse(s) }

// withDisruption is a valid group with its disruption settings changed.
func withDisruption(name string, change func(*v1alpha1.Disruption)) *v1alpha1.NodeGroup {
	ng := builders.NodeGroup(name)
	change(&ng.Spec.Disruption)
	return ng
}

// capiGroup is a valid clusterAPI node group.
func capiGroup(name string) *v1alpha1.NodeGroup {
	ng := builders.NodeGroup(name)
	ng.Spec.Provider = v1alpha1.Provider{ClusterAPI: &v1alpha1.ClusterAPIProvider{Namespace: "default", Name: "md-0"}}
	return ng
}

// TestClusterAPIObjectCannotBeChanged: a group's nodes are the machines of
// its object; pointing it elsewhere, or switching its provider, would
// orphan them, so it is rejected.
func TestClusterAPIObjectCannotBeChanged(t *testing.T) {
	ctx := context.Background()
	ng := capiGroup("capi-immutable")
	if err := env.Client.Create(ctx, ng); err != nil {
		t.Fatal(err)
	}
	ng.Spec.Provider.ClusterAPI.Name = "md-1"
	err := env.Client.Update(ctx, ng)
	if err == nil || !strings.Contains(err.Error(), "cannot be changed") {
		t.Fatalf("Update = %v, want a rejection saying the object cannot be changed", err)
	}
	// Nor can the provider: the kwok provider would remove the group's
	// nodes (the Nodes of running machines) as its own.
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ng), ng); err != nil {
		t.Fatal(err)
	}
	toKWOK := ng.DeepCopy()
	toKWOK.Spec.Provider = v1alpha1.Provider{KWOK: &v1alpha1.KWOKProvider{}}
	if err := env.Client.Update(ctx, toKWOK); err == nil || !strings.Contains(err.Error(), "provider cannot be changed") {
		t.Fatalf("Update to kwok = %v, want a rejection saying the provider cannot be changed", err)
	}
	// What is not the object may change: how long a Machine may go
	// without infrastructure.
	ng.Spec.Provider.ClusterAPI.MachineTimeout = &metav1.Duration{Duration: 20 * time.Minute}
	if err := env.Client.Update(ctx, ng); err != nil {
		t.Fatalf("changing machineTimeout: %v, want it accepted", err)
	}
	kw := builders.NodeGroup("kwok-stays")
	if err := env.Client.Create(ctx, kw); err != nil {
		t.Fatal(err)
	}
	kw.Spec.Provider = v1alpha1.Provider{ClusterAPI: &v1alpha1.ClusterAPIProvider{Namespace: "default", Name: "md-0"}}
	if err := env.Client.Update(ctx, kw); err == nil || !strings.Contains(err.Error(), "provider cannot be changed") {
		t.Fatalf("Update of a kwok group to clusterAPI = %v, want a rejection saying the provider cannot be changed", err)
	}
}

// TestDurationsThatDoNotParseAreRefused (Karpenter's NodePool CEL tests:
// invalid units, negative durations): a duration field written as a
// Karpenter habit ("Never"), with a unit Go does not read ("1d"), or
// negative is refused by the API server naming the field. The API server
// stored them (the fields were plain strings), and then no NodeGroup of
// the cluster could be listed: each failed to decode.
func TestDurationsThatDoNotParseAreRefused(t *testing.T) {
	for _, tc := range []struct {
		path  []string
		value string
		want  string
	}{
		{[]string{"spec", "disruption", "expireAfter"}, "Never", "expireAfter must be a duration"},
		{[]string{"spec", "disruption", "consolidateAfter"}, "1d", "consolidateAfter must be a duration"},
		{[]string{"spec", "disruption", "drainTimeout"}, "-5m", "drainTimeout must be a positive duration"},
		{[]string{"spec", "disruption", "drainTimeout"}, "0s", "drainTimeout must be a positive duration"},
		{[]string{"spec", "provider", "kwok", "launchDelay"}, "30 minutes", "launchDelay must be a duration"},
	} {
		t.Run(strings.Join(tc.path[1:], ".")+"="+tc.value, func(t *testing.T) {
			ng := builders.NodeGroup("dur-" + strings.ToLower(strings.NewReplacer(" ", "", "-", "m").Replace(tc.value)) + "-" + tc.path[len(tc.path)-1][:4])
			obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ng)
			if err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{Object: obj}
			u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("NodeGroup"))
			if err := unstructured.SetNestedField(u.Object, tc.value, tc.path...); err != nil {
				t.Fatal(err)
			}
			err = env.Client.Create(context.Background(), u)
			if err == nil {
				_ = env.Client.Delete(context.Background(), u)
				t.Fatalf("%s: %q accepted", strings.Join(tc.path, "."), tc.value)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %q refused with %v, want a message containing %q", strings.Join(tc.path, "."), tc.value, err, tc.want)
			}
		})
	}
	// A count written as a string is a budget too (Karpenter writes them so).
	ng := builders.NodeGroup("dur-budget-count")
	two := intstr.FromString("2")
	ng.Spec.Disruption.Budget = &two
	if err := env.Client.Create(context.Background(), ng); err != nil {
		t.Errorf("budget \"2\" refused: %v", err)
	}
	_ = env.Client.Delete(context.Background(), ng)
}
