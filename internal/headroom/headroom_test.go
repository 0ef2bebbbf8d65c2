package headroom_test

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cbv1beta1 "github.com/berth-dev/berth/api/capacitybuffer/v1beta1"
	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/headroom"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

func rl(cpu, mem string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
}

func units(n int32, cpu, mem string) *v1alpha1.HeadroomUnits {
	return &v1alpha1.HeadroomUnits{Count: n, UnitShape: v1alpha1.UnitShape{Resources: rl(cpu, mem)}}
}

// cluster: node g1 in group "general", node x1 outside berth; running pods.
func cluster(pods ...*corev1.Pod) headroom.Inputs {
	return headroom.Inputs{
		Now:        time.Date(2026, 11, 23, 9, 30, 0, 0, time.UTC), // a Monday
		NodeGroups: []*v1alpha1.NodeGroup{b.NodeGroup("general"), b.NodeGroup("gpu", b.TemplateTaint("gpu", "true", corev1.TaintEffectNoSchedule))},
		Nodes:      []*corev1.Node{b.Node("g1", "16", "64Gi", b.NodeLabels(v1alpha1.LabelNodeGroup, "general")), b.Node("x1", "16", "64Gi")},
		Pods:       pods,
	}
}

func running(name, node, cpu, mem string, opts ...b.PodOption) *corev1.Pod {
	return b.Pod(name, append([]b.PodOption{b.NodeName(node), b.CPU(cpu), b.Memory(mem), b.Phase(corev1.PodRunning)}, opts...)...)
}

func hr(spec v1alpha1.HeadroomSpec) *v1alpha1.Headroom {
	return &v1alpha1.Headroom{ObjectMeta: metav1.ObjectMeta{Name: "h"}, Spec: spec}
}

func TestResolve(t *testing.T) {
	ten := make([]*corev1.Pod, 0, 12)
	for i := range 10 {
		ten = append(ten, running("w"+string(rune('a'+i)), "g1", "1", "1Gi"))
	}
	ten = append(ten, running("other", "x1", "4", "4Gi"))
	ten = append(ten, running("agent", "g1", "2", "2Gi", b.OwnedBy("DaemonSet", "agent")))
	window := func(cron string, d time.Duration, n int32) v1alpha1.HeadroomSchedule {
		return v1alpha1.HeadroomSchedule{Name: "peak", Cron: cron, Duration: metav1.Duration{Duration: d}, Units: v1alpha1.ScheduleUnits{Count: n}}
	}
	tests := []struct {
		name      string
		spec      v1alpha1.HeadroomSpec
		in        headroom.Inputs
		wantCount int32
		wantCPU   string
		wantSched string
		wantErr   string
	}{
		{name: "manual units are kept as given",
			spec: v1alpha1.HeadroomSpec{Units: units(4, "1", "1Gi")}, in: cluster(), wantCount: 4, wantCPU: "1"},
		{name: "automatic 20% of ten 1-cpu pods in scope is two units of the most common shape",
			spec: v1alpha1.HeadroomSpec{Scope: v1alpha1.HeadroomScope{NodeGroups: []string{"general"}}, Automatic: &v1alpha1.AutomaticHeadroom{Percentage: 20}},
			in:   cluster(ten...), wantCount: 2, wantCPU: "1"},
		{name: "automatic rounds up and counts DaemonSet pods and pods outside the scope out",
			spec: v1alpha1.HeadroomSpec{Scope: v1alpha1.HeadroomScope{NodeGroups: []string{"general"}}, Automatic: &v1alpha1.AutomaticHeadroom{Percentage: 25}},
			in:   cluster(ten...), wantCount: 3, wantCPU: "1"}, // 2.5 cpu -> 3 units
		{name: "automatic cluster-wide includes every node",
			spec: v1alpha1.HeadroomSpec{Automatic: &v1alpha1.AutomaticHeadroom{Percentage: 50, Unit: &v1alpha1.UnitShape{Resources: rl("2", "1Gi")}}},
			in:   cluster(ten...), wantCount: 7, wantCPU: "2"}, // 14 cpu, 14Gi at 50%: cpu needs 4 units of 2, memory 7 units of 1Gi: the larger
		{name: "sum adds manual and automatic",
			spec: v1alpha1.HeadroomSpec{Units: units(3, "1", "1Gi"), Scope: v1alpha1.HeadroomScope{NodeGroups: []string{"general"}}, Automatic: &v1alpha1.AutomaticHeadroom{Percentage: 20}},
			in:   cluster(ten...), wantCount: 5, wantCPU: "1"},
		{name: "max keeps the larger",
			spec: v1alpha1.HeadroomSpec{Units: units(3, "1", "1Gi"), Combine: v1alpha1.CombineMax, Scope: v1alpha1.HeadroomScope{NodeGroups: []string{"general"}}, Automatic: &v1alpha1.AutomaticHeadroom{Percentage: 20}},
			in:   cluster(ten...), wantCount: 3, wantCPU: "1"},
		{name: "an active schedule replaces the manual count",
			spec: v1alpha1.HeadroomSpec{Units: units(1, "1", "1Gi"), Schedules: []v1alpha1.HeadroomSchedule{window("0 8 * * 1-5", 2*time.Hour, 6)}},
			in:   cluster(), wantCount: 6, wantCPU: "1", wantSched: "peak"},
		{name: "a schedule outside its window changes nothing",
			spec: v1alpha1.HeadroomSpec{Units: units(1, "1", "1Gi"), Schedules: []v1alpha1.HeadroomSchedule{window("0 8 * * 1-5", time.Hour, 6)}},
			in:   cluster(), wantCount: 1, wantCPU: "1"},
		{name: "a weekend schedule is not active on Monday",
			spec: v1alpha1.HeadroomSpec{Units: units(1, "1", "1Gi"), Schedules: []v1alpha1.HeadroomSchedule{window("0 0 * * 6", 48*time.Hour, 6)}},
			in:   cluster(), wantCount: 1, wantCPU: "1"},
		{name: "an invalid cron is an error naming the schedule",
			spec: v1alpha1.HeadroomSpec{Units: units(1, "1", "1Gi"), Schedules: []v1alpha1.HeadroomSchedule{window("61 * * * *", time.Hour, 6)}},
			in:   cluster(), wantErr: "spec.schedules[peak].cron"},
		{name: "a negative unit is an error naming the field",
			spec: v1alpha1.HeadroomSpec{Units: units(3, "-1", "1Gi")},
			in:   cluster(), wantErr: "spec.units.resources.cpu is -1: quantities must not be negative"},
		{name: "a negative per-node reserve is an error naming the field",
			spec: v1alpha1.HeadroomSpec{PerNode: &v1alpha1.PerNodeReserve{Resources: rl("1", "-1Gi")}},
			in:   cluster(), wantErr: "spec.perNode.resources.memory is -1Gi"},
		{name: "a scope naming a missing node group is an error",
			spec: v1alpha1.HeadroomSpec{Units: units(1, "1", "1Gi"), Scope: v1alpha1.HeadroomScope{NodeGroups: []string{"nope"}}},
			in:   cluster(), wantErr: `node group "nope" does not exist`},
		{name: "a selector scope selects groups by label",
			spec: v1alpha1.HeadroomSpec{Units: units(1, "1", "1Gi"), Scope: v1alpha1.HeadroomScope{NodeGroupSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "x"}}}},
			in:   cluster(), wantErr: "selects no node group"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := headroom.Resolve(hr(tt.spec), tt.in)
			if tt.wantErr != "" {
				if err == nil || !contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cpu := got.Shape.Resources[corev1.ResourceCPU]
			if got.Count != tt.wantCount || cpu.String() != tt.wantCPU || got.ActiveSchedule != tt.wantSched {
				t.Errorf("got %d units of %s cpu (schedule %q), want %d of %s (%q)", got.Count, cpu.String(), got.ActiveSchedule, tt.wantCount, tt.wantCPU, tt.wantSched)
			}
		})
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// TestVirtualPodsStayInScope: a node-group-scoped unit selects the group and
// tolerates its taints, so it can only fit there.
func TestVirtualPodsStayInScope(t *testing.T) {
	in := cluster()
	h := hr(v1alpha1.HeadroomSpec{Units: units(2, "1", "1Gi"), Scope: v1alpha1.HeadroomScope{NodeGroups: []string{"gpu"}}})
	r, err := headroom.Resolve(h, in)
	if err != nil {
		t.Fatal(err)
	}
	pods := headroom.VirtualPods(h, r)
	if len(pods) != 2 {
		t.Fatalf("%d pods", len(pods))
	}
	p := pods[0]
	terms := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 || terms[0].MatchExpressions[0].Key != v1alpha1.LabelNodeGroup || terms[0].MatchExpressions[0].Values[0] != "gpu" {
		t.Errorf("affinity %+v", terms)
	}
	if len(p.Spec.Tolerations) != 1 || p.Spec.Tolerations[0].Key != "gpu" {
		t.Errorf("tolerations %+v, want the gpu group's taint", p.Spec.Tolerations)
	}
	if *p.Spec.Priority != v1alpha1.PriorityHeadroom || p.Annotations[v1alpha1.AnnotationVirtual] != "true" {
		t.Errorf("priority %d annotations %v", *p.Spec.Priority, p.Annotations)
	}
}

func TestBufferReplicas(t *testing.T) {
	chunk := corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: rl("500m", "1Gi")}}}}
	i32 := func(v int32) *int32 { return &v }
	limits := func(cpu string) *cbv1beta1.ResourceList {
		return &cbv1beta1.ResourceList{"cpu": resource.MustParse(cpu)}
	}
	tests := []struct {
		name       string
		spec       cbv1beta1.CapacityBufferSpec
		scalable   *int32
		want       int32
		wantCapped bool
		wantErr    string
	}{
		{name: "replicas alone", spec: cbv1beta1.CapacityBufferSpec{Replicas: i32(3)}, want: 3},
		{name: "50% of 4 replicas is 2", spec: cbv1beta1.CapacityBufferSpec{Percentage: i32(50)}, scalable: i32(4), want: 2},
		{name: "50% of 3 replicas rounds up to 2", spec: cbv1beta1.CapacityBufferSpec{Percentage: i32(50)}, scalable: i32(3), want: 2},
		{name: "a percentage of zero replicas is zero (rounded up, as Cluster Autoscaler's replicasFromPercentage)", spec: cbv1beta1.CapacityBufferSpec{Percentage: i32(10)}, scalable: i32(0), want: 0},
		{name: "a percentage of one replica rounds up to 1", spec: cbv1beta1.CapacityBufferSpec{Percentage: i32(10)}, scalable: i32(1), want: 1},
		{name: "replicas and percentage take the larger", spec: cbv1beta1.CapacityBufferSpec{Replicas: i32(5), Percentage: i32(20)}, scalable: i32(10), want: 5},
		{name: "limits cap the count", spec: cbv1beta1.CapacityBufferSpec{Replicas: i32(10), Limits: limits("2")}, want: 4},
		{name: "limits alone give as many chunks as fit", spec: cbv1beta1.CapacityBufferSpec{Limits: limits("1700m")}, want: 3},
		{name: "percentage without a scalable object is an error", spec: cbv1beta1.CapacityBufferSpec{Percentage: i32(10)}, wantErr: "needs spec.scalableRef"},
		{name: "percentage without a scalable object is of nothing beside replicas (as Cluster Autoscaler reads it)",
			spec: cbv1beta1.CapacityBufferSpec{Replicas: i32(3), Percentage: i32(50)}, want: 3},
		// The upstream API has no maxima: counts a namespace can write must
		// neither wrap around nor make berth allocate millions of pods.
		{name: "a huge percentage of huge replicas is cut to the maximum, not wrapped",
			spec: cbv1beta1.CapacityBufferSpec{Percentage: i32(math.MaxInt32)}, scalable: i32(math.MaxInt32), want: headroom.MaxUnits, wantCapped: true},
		{name: "huge replicas are cut to the maximum",
			spec: cbv1beta1.CapacityBufferSpec{Replicas: i32(math.MaxInt32)}, want: headroom.MaxUnits, wantCapped: true},
		{name: "huge limits of a tiny chunk are cut to the maximum",
			spec: cbv1beta1.CapacityBufferSpec{Limits: limits("1000000000")}, want: headroom.MaxUnits, wantCapped: true},
		{name: "limits of more chunks than a float64 holds are cut to the maximum, not read as none",
			spec: cbv1beta1.CapacityBufferSpec{Limits: limits("1e400")}, want: headroom.MaxUnits, wantCapped: true},
		{name: "negative limits are an error", spec: cbv1beta1.CapacityBufferSpec{Limits: limits("-2")}, wantErr: "spec.limits.cpu must not be negative"},
		{name: "negative replicas are an error", spec: cbv1beta1.CapacityBufferSpec{Replicas: i32(-1)}, wantErr: "spec.replicas must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, capped, err := headroom.BufferReplicas(&tt.spec, tt.scalable, chunk)
			if tt.wantErr != "" {
				if err == nil || !contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want || capped != tt.wantCapped {
				t.Errorf("got %d (capped %v), %v; want %d (capped %v)", got, capped, err, tt.want, tt.wantCapped)
			}
		})
	}
}

// TestHeadroomCountsAreBounded: counts that overflow int32 (manual plus
// automatic units of a tiny shape over a large workload) are cut to
// MaxUnits and reported, never wrapped to a negative count or turned into
// billions of pods.
func TestHeadroomCountsAreBounded(t *testing.T) {
	gib := make([]*corev1.Pod, 0, 4)
	for i := range 4 {
		gib = append(gib, running("w"+string(rune('a'+i)), "g1", "100m", "256Mi"))
	}
	tiny := &v1alpha1.HeadroomUnits{Count: 10, UnitShape: v1alpha1.UnitShape{Resources: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1")}}}
	for _, combine := range []v1alpha1.HeadroomCombine{v1alpha1.CombineSum, v1alpha1.CombineMax} {
		t.Run(string(combine), func(t *testing.T) {
			h := hr(v1alpha1.HeadroomSpec{Units: tiny, Combine: combine, Automatic: &v1alpha1.AutomaticHeadroom{Percentage: 200}})
			got, err := headroom.Resolve(h, cluster(gib...))
			if err != nil {
				t.Fatal(err)
			}
			if got.Count != headroom.MaxUnits || !got.Capped || got.Wanted < 2e9 {
				t.Fatalf("count %d capped %v wanted %g; want %d, capped, over 2e9 wanted", got.Count, got.Capped, got.Wanted, headroom.MaxUnits)
			}
			if n := len(headroom.VirtualPods(h, got)); n != int(headroom.MaxUnits) {
				t.Errorf("%d virtual pods, want %d", n, headroom.MaxUnits)
			}
		})
	}
	// A count read back from status is bounded again.
	h := hr(v1alpha1.HeadroomSpec{Units: tiny})
	if n := len(headroom.VirtualPods(h, headroom.Resolved{Count: math.MaxInt32, Shape: tiny.UnitShape})); n != int(headroom.MaxUnits) {
		t.Errorf("%d virtual pods from a count of MaxInt32, want %d", n, headroom.MaxUnits)
	}
}

// TestScheduleThatNeverFires: February 30th never comes. Such a window is
// never active (it used to be always active), and the problem is reported.
func TestScheduleThatNeverFires(t *testing.T) {
	h := hr(v1alpha1.HeadroomSpec{Units: units(1, "1", "1Gi"), Schedules: []v1alpha1.HeadroomSchedule{
		{Name: "feb30", Cron: "0 0 30 2 *", Duration: metav1.Duration{Duration: time.Hour}, Units: v1alpha1.ScheduleUnits{Count: 5}},
	}})
	got, err := headroom.Resolve(h, cluster())
	if err != nil {
		t.Fatal(err)
	}
	if got.Count != 1 || got.ActiveSchedule != "" {
		t.Errorf("count %d, active schedule %q; want 1 and none", got.Count, got.ActiveSchedule)
	}
	if len(got.Problems) != 1 || !contains(got.Problems[0], "spec.schedules[feb30].cron") || !contains(got.Problems[0], "never fires") {
		t.Errorf("problems %q, want one naming the schedule and saying it never fires", got.Problems)
	}
}

func priorityQuota(hard corev1.ResourceList, op corev1.ScopeSelectorOperator, classes ...string) corev1.ResourceQuota {
	return corev1.ResourceQuota{Spec: corev1.ResourceQuotaSpec{Hard: hard, ScopeSelector: &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{{
		ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: op, Values: classes}}}}, Status: corev1.ResourceQuotaStatus{Hard: hard}}
}

// TestQuotaChunksAcrossBuffers: a namespace's buffers share its quota;
// ten buffers do not buy ten times the quota.
func TestQuotaChunksAcrossBuffers(t *testing.T) {
	chunk := corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: rl("1", "1Gi")}}}}
	q := corev1.ResourceQuota{Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"requests.cpu": resource.MustParse("10")}},
		Status: corev1.ResourceQuotaStatus{Hard: corev1.ResourceList{"requests.cpu": resource.MustParse("10")}}}
	others := []headroom.Chunks{{Spec: chunk, Count: 4}, {Spec: chunk, Count: 3}}
	if got := headroom.QuotaChunks([]corev1.ResourceQuota{q}, chunk, others); got != 3 {
		t.Errorf("with 7 of 10 cpu kept by two other buffers: %g chunks, want 3", got)
	}
	bestEffort := corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}
	scoped := q
	scoped.Spec.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeNotBestEffort}
	scoped.Status.Hard = corev1.ResourceList{"pods": resource.MustParse("5")}
	if got := headroom.QuotaChunks([]corev1.ResourceQuota{scoped}, chunk, []headroom.Chunks{{Spec: bestEffort, Count: 100}, {Spec: chunk, Count: 2}}); got != 3 {
		t.Errorf("a quota on pods with requests counts only the others it would count: %g chunks, want 3", got)
	}
}

// TestQuotaChunks: a namespace's ResourceQuota bounds its buffers.
func TestQuotaChunks(t *testing.T) {
	chunk := corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
		Requests: rl("500m", "1Gi"), Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}}}}}
	quota := func(hard, used corev1.ResourceList, scopes ...corev1.ResourceQuotaScope) corev1.ResourceQuota {
		return corev1.ResourceQuota{Spec: corev1.ResourceQuotaSpec{Hard: hard, Scopes: scopes}, Status: corev1.ResourceQuotaStatus{Hard: hard, Used: used}}
	}
	list := func(kv ...string) corev1.ResourceList {
		out := corev1.ResourceList{}
		for i := 0; i+1 < len(kv); i += 2 {
			out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return out
	}
	tests := []struct {
		name   string
		quotas []corev1.ResourceQuota
		want   float64
	}{
		{name: "no quota, no bound", want: math.Inf(1)},
		{name: "requests.cpu left over", quotas: []corev1.ResourceQuota{quota(list("requests.cpu", "4"), list("requests.cpu", "2500m"))}, want: 3},
		{name: "the tightest resource wins", quotas: []corev1.ResourceQuota{quota(list("cpu", "10", "requests.memory", "5Gi", "pods", "20"), list("requests.memory", "1Gi"))}, want: 4},
		{name: "limits count against limits", quotas: []corev1.ResourceQuota{quota(list("limits.memory", "7Gi"), nil)}, want: 3},
		{name: "pod count", quotas: []corev1.ResourceQuota{quota(list("count/pods", "5"), list("count/pods", "3"))}, want: 2},
		{name: "a quota used up leaves none, not a negative count", quotas: []corev1.ResourceQuota{quota(list("requests.cpu", "1"), list("requests.cpu", "3"))}, want: 0},
		{name: "a quota scoped to best-effort pods does not bound a chunk with requests", quotas: []corev1.ResourceQuota{quota(list("pods", "0"), nil, corev1.ResourceQuotaScopeBestEffort)}, want: math.Inf(1)},
		{name: "a quota scoped to pods with requests bounds it", quotas: []corev1.ResourceQuota{quota(list("pods", "2"), nil, corev1.ResourceQuotaScopeNotBestEffort)}, want: 2},
		{name: "a quota scoped to terminating pods does not bound it", quotas: []corev1.ResourceQuota{quota(list("pods", "0"), nil, corev1.ResourceQuotaScopeTerminating)}, want: math.Inf(1)},
		{name: "a quota of another priority class does not bound it", quotas: []corev1.ResourceQuota{priorityQuota(list("pods", "0"), corev1.ScopeSelectorOpIn, "critical")}, want: math.Inf(1)},
		{name: "a quota of every class but another bounds it", quotas: []corev1.ResourceQuota{priorityQuota(list("pods", "1"), corev1.ScopeSelectorOpNotIn, "critical")}, want: 1},
		{name: "resources the chunk does not use do not bound it", quotas: []corev1.ResourceQuota{quota(list("requests.nvidia.com/gpu", "0"), nil)}, want: math.Inf(1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := headroom.QuotaChunks(tt.quotas, chunk, nil); got != tt.want {
				t.Errorf("got %g chunks, want %g", got, tt.want)
			}
		})
	}
}

// TestChunksAreCountedExactly (Cluster Autoscaler's
// TestCalculateMaxPodsFromLimits divides exactly): a limit or a quota of
// 600m holds three chunks of 200m, 7 cpu ten of 700m; in floating point
// 600m / 200m is 2.999..., and berth kept two.
func TestChunksAreCountedExactly(t *testing.T) {
	for _, tc := range []struct {
		chunk, limit string
		want         int32
	}{{"200m", "600m", 3}, {"700m", "7", 10}, {"300m", "900m", 3}} {
		chunk := corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(tc.chunk)}}}}}
		limits := cbv1beta1.ResourceList{"cpu": resource.MustParse(tc.limit)}
		if got, _, err := headroom.BufferReplicas(&cbv1beta1.CapacityBufferSpec{Limits: &limits}, nil, chunk); err != nil || got != tc.want {
			t.Errorf("limits of %s, chunks of %s: %d chunks (%v), want %d", tc.limit, tc.chunk, got, err, tc.want)
		}
		hard := corev1.ResourceList{"requests.cpu": resource.MustParse(tc.limit)}
		quota := corev1.ResourceQuota{Spec: corev1.ResourceQuotaSpec{Hard: hard}, Status: corev1.ResourceQuotaStatus{Hard: hard}}
		if got := headroom.QuotaChunks([]corev1.ResourceQuota{quota}, chunk, nil); got != float64(tc.want) {
			t.Errorf("a quota of %s, chunks of %s: %g chunks, want %d", tc.limit, tc.chunk, got, tc.want)
		}
	}
}

// TestAnAutomaticShapeDoesNotSwapBetweenTwoAboutAsCommon: an automatic
// headroom without a unit shape takes the most common request shape in
// scope, and keeps the shape its status holds while that shape's pods are
// at least 4/5 as many: five 1-cpu pods and four 2-cpu pods keep a 2-cpu
// unit in use (a new headroom takes 1 cpu), three do not. Before, each
// pod created or deleted between the two could swap the shape and
// replace every placeholder.
func TestAnAutomaticShapeDoesNotSwapBetweenTwoAboutAsCommon(t *testing.T) {
	pods := func(large int) []*corev1.Pod {
		var out []*corev1.Pod
		for i := range 5 {
			out = append(out, running(fmt.Sprintf("small-%d", i), "g1", "1", "1Gi"))
		}
		for i := range large {
			out = append(out, running(fmt.Sprintf("large-%d", i), "g1", "2", "2Gi"))
		}
		return out
	}
	inUse := &v1alpha1.UnitShape{Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("2Gi")}}
	for _, tc := range []struct {
		name   string
		large  int
		status *v1alpha1.UnitShape
		want   string
	}{
		{"a new headroom takes the most common", 4, nil, "1"},
		{"the shape in use stays at 4/5 as many pods", 4, inUse, "2"},
		{"the shape in use gives way under 4/5", 3, inUse, "1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hr(v1alpha1.HeadroomSpec{Scope: v1alpha1.HeadroomScope{NodeGroups: []string{"general"}}, Automatic: &v1alpha1.AutomaticHeadroom{Percentage: 20}})
			h.Status.Unit = tc.status
			r, err := headroom.Resolve(h, cluster(pods(tc.large)...))
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Shape.Resources.Cpu().String(); got != tc.want {
				t.Errorf("unit of %s cpu, want %s", got, tc.want)
			}
		})
	}
}
