package snapshot_test

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/simulator/predicates"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// probes are pods whose filter results on every node describe the state
// the counters hold: spread, affinity, anti-affinity and the symmetric rule.
func probes() []*corev1.Pod {
	return []*corev1.Pod{
		b.Pod("plain", b.CPU("1")),
		b.Pod("zone-spread", b.Labels("app", "web"), b.Spread(v1alpha1.LabelZone, 1, "app", "web")),
		b.Pod("host-spread", b.Labels("app", "web"), b.Spread(v1alpha1.LabelHostname, 1, "app", "web")),
		b.Pod("host-spread-honoring-taints", b.Labels("app", "web"), honoringTaints(b.Spread(v1alpha1.LabelHostname, 1, "app", "web"))),
		b.Pod("zone-spread-honoring-taints", b.Labels("app", "web"), honoringTaints(b.Spread(v1alpha1.LabelZone, 1, "app", "web"))),
		b.Pod("affine", b.PodAffinity(b.AffinityTerm(v1alpha1.LabelZone, "app", "db"))),
		b.Pod("anti", b.PodAntiAffinity(b.AffinityTerm(v1alpha1.LabelHostname, "app", "web"))),
		b.Pod("web-probe", b.Labels("app", "web")),
		b.Pod("gpu-probe", b.PodClaimTemplate("gpu", "one-gpu")),
		b.Pod("two-gpu-probe", b.PodClaimTemplate("gpu", "two-gpus")),
		b.Pod("shared-probe", b.PodClaim("gpu", "shared")),
	}
}

// honoringTaints makes the spread constraints opt add honor node taints.
func honoringTaints(opt b.PodOption) b.PodOption {
	honor := corev1.NodeInclusionPolicyHonor
	return func(p *corev1.Pod) {
		opt(p)
		for i := range p.Spec.TopologySpreadConstraints {
			p.Spec.TopologySpreadConstraints[i].NodeTaintsPolicy = &honor
		}
	}
}

const gpuDriver = "gpu.example.com"

// draInput are the DRA objects of the random snapshots: every node has
// two gpus; pods take one or two from templates, or share one claim.
func draInput(nodes ...string) snapshot.DRA {
	dra := snapshot.DRA{
		DeviceClasses: []*resourcev1.DeviceClass{b.DeviceClass("gpu", gpuDriver)},
		ClaimTemplates: []*resourcev1.ResourceClaimTemplate{
			b.ClaimTemplate("one-gpu", b.DeviceRequest("g", "gpu", 1)), b.ClaimTemplate("two-gpus", b.DeviceRequest("g", "gpu", 2))},
		Claims: []*resourcev1.ResourceClaim{b.Claim("shared", b.DeviceRequest("g", "gpu", 1))},
	}
	for _, n := range nodes {
		dra.Slices = append(dra.Slices, b.Slice(n, gpuDriver, "gpu", 2, nil))
	}
	return dra
}

// placeable are the pods the random operations add.
func placeable(r *rand.Rand, i int) *corev1.Pod {
	name := fmt.Sprintf("p%d", i)
	switch r.Intn(7) {
	case 4:
		return b.Pod(name, b.PodClaimTemplate("gpu", "one-gpu"))
	case 5:
		return b.Pod(name, b.PodClaimTemplate("gpu", "two-gpus"))
	case 6:
		return b.Pod(name, b.PodClaim("gpu", "shared"))
	case 0:
		return b.Pod(name, b.Labels("app", "web"), b.CPU("500m"))
	case 1:
		return b.Pod(name, b.Labels("app", "db"), b.CPU("250m"), b.HostPort(int32(8000+r.Intn(3)), corev1.ProtocolTCP))
	case 2:
		return b.Pod(name, b.Labels("app", "api"), b.PodAntiAffinity(b.AffinityTerm(v1alpha1.LabelZone, "app", "web")))
	default:
		return b.Pod(name, b.Labels("app", "web"), b.Spread(v1alpha1.LabelZone, 1, "app", "web"))
	}
}

// observe renders everything a caller can see of the snapshot.
func observe(t *testing.T, s *snapshot.Snapshot, classes []*snapshot.Class) string {
	t.Helper()
	var sb strings.Builder
	for _, n := range s.Nodes {
		fmt.Fprintf(&sb, "%s pods=%d count=%d cpu=%d ports=%d flex=%v cap=%d", n.Name, len(n.Pods), n.PodCount(), n.Requested.MilliCPU, len(n.HostPorts),
			n.Flex != nil && len(n.Flex.Options) > 0, n.Capacity.MilliCPU)
		if n.Flex != nil {
			fmt.Fprintf(&sb, " options=%d", len(n.Flex.Options))
			if n.Current != nil {
				fmt.Fprintf(&sb, " current=%s", n.Current.InstanceType)
			}
		}
		sb.WriteString("\n")
		// The planner walks a node's pods in order: Revert restores it.
		for _, p := range n.Pods {
			fmt.Fprintf(&sb, "  %s", p.Name)
		}
		sb.WriteString("\n")
		for _, c := range classes {
			st := predicates.Run(predicates.Default(), s, c, n)
			fmt.Fprintf(&sb, "  %s: %d %s\n", c.Example.Name, st.Code, st.Reason)
		}
	}
	for _, tn := range s.Templates() {
		for _, c := range classes {
			st := predicates.Run(predicates.Default(), s, c, tn)
			fmt.Fprintf(&sb, "template %s available=%v %s: %d %s\n", tn.Name, s.TemplateAvailable(tn), c.Example.Name, st.Code, st.Reason)
		}
	}
	g := s.Group("g")
	total := s.Total()
	fmt.Fprintf(&sb, "group nodes=%d cpu=%d total cpu=%d\n", g.Nodes, g.Capacity.MilliCPU, total.MilliCPU)
	shared := snapshot.ClaimKey{Namespace: "default", Name: "shared"}
	if on := s.ClaimNode(shared); on != nil {
		fmt.Fprintf(&sb, "shared claim on %s, %d users\n", on.Name, s.ClaimUsers(shared))
	}
	return sb.String()
}

func option(name string, cpu string) *snapshot.Option {
	n := b.Node("option", cpu, "8Gi", b.NodeLabels(v1alpha1.LabelInstanceType, name))
	price := 1.0
	if name == "big" {
		price = 4
	}
	return &snapshot.Option{InstanceType: name, Price: price, Allocatable: snapshot.FromList(n.Status.Allocatable), AllowedPods: 110, Node: n,
		Slices: []*resourcev1.ResourceSlice{b.Slice("option", gpuDriver, "gpu", len(name), nil)}}
}

func template(zone string) *snapshot.Node {
	n := b.Node("template-"+zone, "0", "0", b.NodeLabels(v1alpha1.LabelZone, zone))
	return &snapshot.Node{Node: n, NodeGroup: "g", Flex: &snapshot.Flex{Options: []*snapshot.Option{option("small", "1"), option("big", "8")}}}
}

// TestRevertRestoresEverything applies random changes after a Fork and
// checks that Revert brings back exactly the observable state, for many
// seeds, with nested forks.
func TestRevertRestoresEverything(t *testing.T) {
	for seed := int64(1); seed <= 30; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			r := rand.New(rand.NewSource(seed))
			in := snapshot.Input{DRA: draInput("n0", "n1", "n2")}
			for i, z := range []string{"zone-a", "zone-a", "zone-b"} {
				in.Nodes = append(in.Nodes, snapshot.NodeInput{Node: b.Node(fmt.Sprintf("n%d", i), "4", "8Gi", b.NodeLabels(v1alpha1.LabelZone, z)), NodeGroup: "g"})
			}
			in.Pods = []*corev1.Pod{b.Pod("existing", b.NodeName("n0"), b.Labels("app", "web"), b.CPU("1")),
				b.Pod("existing-2", b.NodeName("n0"), b.CPU("100m")), b.Pod("existing-3", b.NodeName("n0"), b.CPU("100m"))}
			s, err := snapshot.New(in)
			if err != nil {
				t.Fatal(err)
			}
			s.SetTemplates([]*snapshot.Node{template("zone-a"), template("zone-c")})
			s.SetClusterLimits(corev1.ResourceList{corev1.ResourceCPU: b.Node("x", "40", "1Gi").Status.Capacity[corev1.ResourceCPU]})
			var classes []*snapshot.Class
			for _, p := range probes() {
				c, err := s.Classify(p)
				if err != nil {
					t.Fatal(err)
				}
				s.Prepare(c)
				classes = append(classes, c)
			}
			before := observe(t, s, classes)

			s.Fork()
			mutate(t, r, s, 0)
			if observe(t, s, classes) == before {
				t.Fatal("the random changes changed nothing; the test would prove nothing")
			}
			s.Fork()
			mutate(t, r, s, 100)
			middle := ""
			if r.Intn(2) == 0 {
				s.Commit()
				middle = "committed"
			} else {
				s.Revert()
				middle = "reverted"
			}
			s.Revert()
			if diff := cmp.Diff(before, observe(t, s, classes)); diff != "" {
				t.Errorf("state after Revert (inner fork %s) differs (-before +after):\n%s", middle, diff)
			}
		})
	}
}

func mutate(t *testing.T, r *rand.Rand, s *snapshot.Snapshot, base int) {
	t.Helper()
	// Any pod may be taken off, those placed before the fork too.
	var placed []*snapshot.Pod
	for _, n := range s.Nodes {
		placed = append(placed, n.Pods...)
	}
	for i := 0; i < 12; i++ {
		switch op := r.Intn(10); {
		case op < 2:
			z := []string{"zone-a", "zone-c"}[r.Intn(2)]
			name := fmt.Sprintf("new-%d-%d", base, i)
			n := template(z)
			n.Node = b.Node(name, "0", "0", b.NodeLabels(v1alpha1.LabelZone, z))
			n.Planned = true
			s.AddNode(n)
		case op < 3 && len(s.Templates()) > 0:
			if t := s.Templates()[r.Intn(len(s.Templates()))]; s.TemplateAvailable(t) {
				s.DisableTemplate(t)
			} else {
				s.EnableTemplate(t)
			}
		case op < 5 && len(placed) > 0:
			k := r.Intn(len(placed))
			s.RemovePod(placed[k])
			placed = append(placed[:k], placed[k+1:]...)
		case op == 5 && r.Intn(2) == 0:
			// A drain's taint on an existing node (twice on one: the
			// second does nothing).
			n := s.Nodes[r.Intn(len(s.Nodes))]
			if n.Planned {
				continue
			}
			s.Taint(n, corev1.Taint{Key: v1alpha1.TaintDisrupted, Effect: corev1.TaintEffectNoSchedule})
		case op < 6:
			// A pod that needs the big option narrows a planned node to
			// it; once the pod is gone, Widen gives back the small one.
			n := s.Nodes[r.Intn(len(s.Nodes))]
			if !n.Planned {
				continue
			}
			c, err := s.Classify(b.Pod(fmt.Sprintf("large-%d-%d", base, i), b.CPU("1500m")))
			if err != nil {
				t.Fatal(err)
			}
			if predicates.Run(predicates.Default(), s, c, n).Failed() {
				continue
			}
			p := &snapshot.Pod{Pod: c.Example, Class: c}
			s.AddPod(p, n)
			s.RemovePod(p)
			s.Widen(n, []*snapshot.Option{option("small", "1"), option("big", "8")})
		default:
			pod := placeable(r, base+i)
			c, err := s.Classify(pod)
			if err != nil {
				t.Fatal(err)
			}
			s.Prepare(c)
			n := s.Nodes[r.Intn(len(s.Nodes))]
			if predicates.Run(predicates.Default(), s, c, n).Failed() {
				continue
			}
			p := &snapshot.Pod{Pod: pod, Class: c}
			s.AddPod(p, n)
			placed = append(placed, p)
		}
	}
}

// TestWidenLaunchesANodeThatLostPodsSmallerUntilReverted: a planned node
// narrowed to its big option by a pod that then left is launched as the
// small one once widened, its group's capacity follows, and a Revert
// brings back the big option exactly.
func TestWidenLaunchesANodeThatLostPodsSmallerUntilReverted(t *testing.T) {
	s, err := snapshot.New(snapshot.Input{})
	if err != nil {
		t.Fatal(err)
	}
	n := template("zone-a")
	n.Node = b.Node("new-1", "0", "0", b.NodeLabels(v1alpha1.LabelZone, "zone-a"))
	n.Planned = true
	s.AddNode(n)
	var pods []*snapshot.Pod
	for _, cpu := range []string{"200m", "1500m"} {
		pod := b.Pod("p-"+cpu, b.CPU(cpu))
		c, err := s.Classify(pod)
		if err != nil {
			t.Fatal(err)
		}
		p := &snapshot.Pod{Pod: pod, Class: c}
		s.AddPod(p, n)
		pods = append(pods, p)
	}
	s.RemovePod(pods[1])
	if n.Current.InstanceType != "big" {
		t.Fatalf("after the large pod left: %s, want the node still big (options only narrow)", n.Current.InstanceType)
	}
	before := observe(t, s, nil)
	s.Fork()
	if !s.Widen(n, []*snapshot.Option{option("small", "1"), option("big", "8")}) || n.Current.InstanceType != "small" ||
		s.Group("g").Capacity.MilliCPU != 1000 {
		t.Errorf("widened: current %s, group cpu %d; want small, 1000", n.Current.InstanceType, s.Group("g").Capacity.MilliCPU)
	}
	s.Revert()
	if diff := cmp.Diff(before, observe(t, s, nil)); diff != "" {
		t.Errorf("after Revert (-before +after):\n%s", diff)
	}
}

// TestCommitKeepsChanges: changes under a committed fork stay.
func TestCommitKeepsChanges(t *testing.T) {
	s, err := snapshot.New(snapshot.Input{Nodes: []snapshot.NodeInput{{Node: b.Node("n0", "4", "8Gi")}}})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := s.Classify(b.Pod("p", b.CPU("1")))
	s.Fork()
	s.AddPod(&snapshot.Pod{Pod: c.Example, Class: c}, s.Nodes[0])
	s.Commit()
	if got := s.Nodes[0].Requested.MilliCPU; got != 1000 {
		t.Errorf("requested cpu after commit = %d, want 1000", got)
	}
}

// TestWithForkKeepsOnlyWhatTheTrialKeeps: a trial that keeps its changes
// commits them; one that does not, returns an error, or panics leaves the
// snapshot as it was, and no fork open (a later Commit at depth zero would
// otherwise keep nothing of an outer trial).
func TestWithForkKeepsOnlyWhatTheTrialKeeps(t *testing.T) {
	s, err := snapshot.New(snapshot.Input{Nodes: []snapshot.NodeInput{{Node: b.Node("n0", "4", "8Gi")}}})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := s.Classify(b.Pod("p", b.CPU("1")))
	add := func() { s.AddPod(&snapshot.Pod{Pod: c.Example, Class: c}, s.Nodes[0]) }
	cpu := func() int64 { return s.Nodes[0].Requested.MilliCPU }

	_ = s.WithFork(func() (bool, error) { add(); return false, nil })
	if cpu() != 0 {
		t.Errorf("after a trial that keeps nothing: %dm requested, want 0", cpu())
	}
	if err := s.WithFork(func() (bool, error) { add(); return true, fmt.Errorf("no") }); err == nil || cpu() != 0 {
		t.Errorf("after a failing trial: err %v, %dm requested, want the error and 0", err, cpu())
	}
	func() {
		defer func() { _ = recover() }()
		_ = s.WithFork(func() (bool, error) { add(); panic("boom") })
	}()
	if cpu() != 0 {
		t.Errorf("after a panicking trial: %dm requested, want 0", cpu())
	}
	_ = s.WithFork(func() (bool, error) { add(); return true, nil })
	if cpu() != 1000 {
		t.Errorf("after a trial that keeps its change: %dm requested, want 1000", cpu())
	}
	// No fork is left open: a change now is not journaled, and a Revert
	// would panic on an empty mark stack.
	func() {
		defer func() {
			if recover() == nil {
				t.Error("a fork was left open by WithFork")
			}
		}()
		s.Revert()
	}()
}

// TestClassesFollowRequestValues: pods share a class when their requests
// are equal in value, whatever their spelling, and never when a value
// differs, however little.
func TestClassesFollowRequestValues(t *testing.T) {
	s, err := snapshot.New(snapshot.Input{})
	if err != nil {
		t.Fatal(err)
	}
	class := func(cpu, mem string) *snapshot.Class {
		c, err := s.Classify(b.Pod("p", b.CPU(cpu), b.Memory(mem)))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	same := [][2][2]string{
		{{"100m", "1Gi"}, {"0.1", "1073741824"}},
		{{"1", "1G"}, {"1000m", "1000M"}},
	}
	for _, p := range same {
		if a, b := class(p[0][0], p[0][1]), class(p[1][0], p[1][1]); a != b {
			t.Errorf("%v and %v: different classes, want one", p[0], p[1])
		}
	}
	differ := [][2][2]string{
		{{"100m", "1Gi"}, {"101m", "1Gi"}},
		{{"100m", "1Gi"}, {"100m", "1G"}},
		{{"100m", "1Gi"}, {"100m", "1073741825"}},
		{{"1", "1Gi"}, {"10", "1Gi"}},
	}
	for _, p := range differ {
		if a, b := class(p[0][0], p[0][1]), class(p[1][0], p[1][1]); a == b {
			t.Errorf("%v and %v: one class, want two", p[0], p[1])
		}
	}
}

// Pods whose classes differ in their requests alone may trade places in a
// plan (binpack's balance): they share Constraints. Anything else a filter
// or a selector reads tells them apart.
func TestConstraintsLeaveOutRequestsAlone(t *testing.T) {
	s, err := snapshot.New(snapshot.Input{})
	if err != nil {
		t.Fatal(err)
	}
	constraints := func(p *corev1.Pod) uint64 {
		c, err := s.Classify(p)
		if err != nil {
			t.Fatal(err)
		}
		return s.Constraints(c)
	}
	base := []b.PodOption{b.Labels("app", "web"), b.Spread(corev1.LabelTopologyZone, 1, "app", "web")}
	with := func(opts ...b.PodOption) *corev1.Pod {
		return b.Pod("p", append(append([]b.PodOption{}, base...), opts...)...)
	}
	want := constraints(with(b.CPU("100m"), b.Memory("4Gi")))
	if got := constraints(with(b.CPU("1500m"), b.Memory("100Mi"))); got != want {
		t.Error("pods that differ in their requests alone have different constraints")
	}
	small := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}
	limits := func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Limits = small }
	podLevel := func(p *corev1.Pod) { p.Spec.Resources = &corev1.ResourceRequirements{Requests: small} }
	noInitRequests := with(b.CPU("100m"), b.Memory("4Gi"), b.InitContainer("init", corev1.ResourceList{}))
	for _, c := range []struct {
		name      string
		pod, like *corev1.Pod
	}{
		{"overhead", with(b.CPU("100m"), b.Memory("4Gi"), b.Overhead(small)), nil},
		{"limits", with(b.CPU("100m"), b.Memory("4Gi"), limits), nil},
		{"pod-level resources", with(b.CPU("100m"), b.Memory("4Gi"), podLevel), nil},
		{"an init container's requests", with(b.CPU("100m"), b.Memory("4Gi"), b.InitContainer("init", small)), noInitRequests},
	} {
		like := want
		if c.like != nil {
			like = constraints(c.like)
		}
		if constraints(c.pod) != like {
			t.Errorf("pods that differ in %s alone (requests, to the scheduler) have different constraints", c.name)
		}
	}
	pvc := func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-0"}}})
	}
	terminating := func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} }
	for name, p := range map[string]*corev1.Pod{
		"another label":       with(b.CPU("100m"), b.Memory("4Gi"), b.Labels("tier", "front")),
		"another namespace":   with(b.CPU("100m"), b.Memory("4Gi"), b.Namespace("other")),
		"a toleration":        with(b.CPU("100m"), b.Memory("4Gi"), b.Tolerate("dedicated", "web", corev1.TaintEffectNoSchedule)),
		"a node selector":     with(b.CPU("100m"), b.Memory("4Gi"), b.NodeSelector("pool", "web")),
		"a host port":         with(b.CPU("100m"), b.Memory("4Gi"), b.HostPort(8080, corev1.ProtocolTCP)),
		"a priority":          with(b.CPU("100m"), b.Memory("4Gi"), b.Priority(10)),
		"no spread":           b.Pod("p", b.Labels("app", "web"), b.CPU("100m"), b.Memory("4Gi")),
		"an anti-affinity":    with(b.CPU("100m"), b.Memory("4Gi"), b.PodAntiAffinity(b.AffinityTerm(corev1.LabelHostname, "app", "web"))),
		"a claim of a volume": with(b.CPU("100m"), b.Memory("4Gi"), pvc),
		"a node name":         with(b.CPU("100m"), b.Memory("4Gi"), b.NodeName("n1")),
		"a deletion":          with(b.CPU("100m"), b.Memory("4Gi"), terminating),
		"a sidecar":           with(b.CPU("100m"), b.Memory("4Gi"), b.SidecarContainer("proxy", corev1.ResourceList{})),
	} {
		if constraints(p) == want {
			t.Errorf("%s: the same constraints as the pod without it", name)
		}
	}
}

// TestRevertPutsBackTheCompanionWhereItWas: two pending pods share the
// companion key web (500m of companion, charged once per node, to the
// first that lands). Removing both in a fork and reverting must leave the
// companion on the pod that carried it: removing that pod afterwards
// frees 1500m, the other 1000m. The undo of the removals, in reverse
// order, charged the companion to the other pod.
func TestRevertPutsBackTheCompanionWhereItWas(t *testing.T) {
	s, err := snapshot.New(snapshot.Input{Nodes: []snapshot.NodeInput{{Node: b.Node("n0", "4", "8Gi")}}})
	if err != nil {
		t.Fatal(err)
	}
	n := s.Nodes[0]
	var pods []*snapshot.Pod
	for _, name := range []string{"p1", "p2"} {
		c, err := s.Classify(b.Pod(name, b.CPU("1"), b.Labels(v1alpha1.LabelCompanionShareKey, "web"),
			b.Annotation(v1alpha1.AnnotationCompanionRequests, `{"cpu":"500m"}`)))
		if err != nil {
			t.Fatal(err)
		}
		p := &snapshot.Pod{Pod: c.Example, Class: c}
		s.AddPod(p, n)
		pods = append(pods, p)
	}
	if got := n.Requested.MilliCPU; got != 2500 {
		t.Fatalf("two pods and one companion: %dm requested, want 2500m", got)
	}
	s.Fork()
	s.RemovePod(pods[0])
	s.RemovePod(pods[1])
	s.Revert()
	s.RemovePod(pods[0])
	if got := n.Requested.MilliCPU; got != 1000 {
		t.Errorf("after the revert, p1 (which carried the companion) removed: %dm requested, want 1000m", got)
	}
}

// TestWidenKeepsToTheOfferingsAVolumeAccepts: a planned node launched as
// big holds a pod whose bound volume's node affinity names the big
// instance type (a volume of that type's local disks). Widen may not
// move the node to the cheaper small option: the pod could not attach
// its volume there. A pod without the volume lets it (the control).
func TestWidenKeepsToTheOfferingsAVolumeAccepts(t *testing.T) {
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv"}, Spec: corev1.PersistentVolumeSpec{
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: v1alpha1.LabelInstanceType, Operator: corev1.NodeSelectorOpIn, Values: []string{"big"}}}}}}}}}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "default"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv"},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
	for _, tt := range []struct {
		name   string
		volume bool
		want   string
	}{{"the pod's volume names big", true, "big"}, {"no volume", false, "small"}} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := snapshot.New(snapshot.Input{Claims: []*corev1.PersistentVolumeClaim{pvc}, Volumes: []*corev1.PersistentVolume{pv},
				OptionKeys: []string{v1alpha1.LabelInstanceType}})
			if err != nil {
				t.Fatal(err)
			}
			n := template("zone-a")
			n.Node = b.Node("new-1", "0", "0", b.NodeLabels(v1alpha1.LabelZone, "zone-a"))
			n.Planned = true
			s.AddNode(n)
			opts := []b.PodOption{b.CPU("200m")}
			if tt.volume {
				opts = append(opts, func(p *corev1.Pod) {
					p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}}}
				})
			}
			big := b.Pod("big", b.CPU("1500m"))
			for _, pod := range []*corev1.Pod{b.Pod("p", opts...), big} {
				c, err := s.Classify(pod)
				if err != nil {
					t.Fatal(err)
				}
				s.AddPod(&snapshot.Pod{Pod: pod, Class: c}, n)
			}
			s.RemovePod(n.Pods[1]) // the large pod leaves: small would hold the rest
			if n.Current.InstanceType != "big" {
				t.Fatalf("after the large pod left: %s, want big", n.Current.InstanceType)
			}
			s.Widen(n, []*snapshot.Option{option("small", "1"), option("big", "8")})
			if n.Current.InstanceType != tt.want {
				t.Errorf("widened to %s, want %s", n.Current.InstanceType, tt.want)
			}
		})
	}
}
