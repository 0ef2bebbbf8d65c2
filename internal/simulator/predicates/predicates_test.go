package predicates_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/simulator/predicates"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// scenario is a cluster, a pod to place and the node to try.
type scenario struct {
	name       string
	nodes      []*corev1.Node
	placed     []*corev1.Pod // pods bound to nodes (spec.nodeName set)
	namespaces []*corev1.Namespace
	claims     []*corev1.PersistentVolumeClaim
	volumes    []*corev1.PersistentVolume
	pod        *corev1.Pod
	node       string
	want       predicates.Code
	wantReason string
}

func run(t *testing.T, tests []scenario) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := snapshot.Input{Pods: tt.placed, Namespaces: tt.namespaces, Claims: tt.claims, Volumes: tt.volumes}
			for _, n := range tt.nodes {
				in.Nodes = append(in.Nodes, snapshot.NodeInput{Node: n})
			}
			s, err := snapshot.New(in)
			if err != nil {
				t.Fatal(err)
			}
			c, err := s.Classify(tt.pod)
			if err != nil {
				t.Fatal(err)
			}
			s.Prepare(c)
			n := s.Node(tt.node)
			if n == nil {
				t.Fatalf("no node %q", tt.node)
			}
			got := predicates.Run(predicates.Default(), s, c, n)
			if got.Code != tt.want || (tt.wantReason != "" && got.Reason != tt.wantReason) {
				t.Errorf("got %v %q (%s), want %v %q", got.Code, got.Reason, got.Message(), tt.want, tt.wantReason)
			}
			// Run passes over the filters a class cannot fail: calling
			// every filter gives the same answer.
			direct := predicates.OK
			for _, f := range predicates.Default() {
				if st := f.Filter(s, c, n); st.Failed() {
					direct = st
					break
				}
			}
			if direct.Code != got.Code || direct.Reason != got.Reason {
				t.Errorf("Run says %v %q, every filter called says %v %q", got.Code, got.Reason, direct.Code, direct.Reason)
			}
		})
	}
}

const (
	ok           = predicates.Success
	unresolvable = predicates.Unresolvable
	waiting      = predicates.Unschedulable
)

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func TestResources(t *testing.T) {
	node := b.Node("n1", "4", "8Gi")
	run(t, []scenario{
		{name: "a pod that fits the free cpu and memory passes",
			nodes: []*corev1.Node{node}, node: "n1",
			placed: []*corev1.Pod{b.Pod("a", b.NodeName("n1"), b.CPU("3"))},
			pod:    b.Pod("p", b.CPU("1"), b.Memory("8Gi")), want: ok},
		{name: "a pod needing more cpu than is free fails with Insufficient cpu",
			nodes: []*corev1.Node{node}, node: "n1",
			placed: []*corev1.Pod{b.Pod("a", b.NodeName("n1"), b.CPU("3"))},
			pod:    b.Pod("p", b.CPU("1500m")), want: unresolvable, wantReason: "Insufficient cpu"},
		{name: "a pod without requests fits a full node",
			nodes: []*corev1.Node{node}, node: "n1",
			placed: []*corev1.Pod{b.Pod("a", b.NodeName("n1"), b.CPU("4"))},
			pod:    b.Pod("p"), want: ok},
		{name: "the pod count limit applies to pods without requests",
			nodes: []*corev1.Node{b.Node("n1", "4", "8Gi", b.NodeAllocatable(corev1.ResourcePods, "1"))}, node: "n1",
			placed: []*corev1.Pod{b.Pod("a", b.NodeName("n1"))},
			pod:    b.Pod("p"), want: unresolvable, wantReason: predicates.ReasonTooManyPods},
		{name: "an extended resource the node lacks fails",
			nodes: []*corev1.Node{node}, node: "n1",
			pod: b.Pod("p", b.Request("nvidia.com/gpu", "1")), want: unresolvable, wantReason: "Insufficient nvidia.com/gpu"},
		{name: "an extended resource the node has passes",
			nodes: []*corev1.Node{b.Node("n1", "4", "8Gi", b.NodeAllocatable("nvidia.com/gpu", "2"))}, node: "n1",
			pod: b.Pod("p", b.Request("nvidia.com/gpu", "2")), want: ok},
		{name: "a regular init container counts by the max rule, not added to the containers",
			nodes: []*corev1.Node{node}, node: "n1",
			// containers 3, init 4: max(3, 4) = 4 fits 4 cpu.
			pod: b.Pod("p", b.CPU("3"), b.InitContainer("init", rl("cpu", "4"))), want: ok},
		{name: "a sidecar init container adds to the containers",
			nodes: []*corev1.Node{node}, node: "n1",
			// containers 3 + sidecar 1.5 = 4.5 > 4.
			pod: b.Pod("p", b.CPU("3"), b.SidecarContainer("proxy", rl("cpu", "1500m"))), want: unresolvable, wantReason: "Insufficient cpu"},
		{name: "an init container after a sidecar needs its own request plus the sidecar's",
			nodes: []*corev1.Node{node}, node: "n1",
			// sidecar 1 then init 3.5: 1 + 3.5 = 4.5 > max(containers 1 + sidecar 1).
			pod:  b.Pod("p", b.CPU("1"), b.SidecarContainer("proxy", rl("cpu", "1")), b.InitContainer("init", rl("cpu", "3500m"))),
			want: unresolvable, wantReason: "Insufficient cpu"},
		{name: "pod overhead is added to the requests",
			nodes: []*corev1.Node{node}, node: "n1",
			pod: b.Pod("p", b.CPU("3800m"), b.Overhead(rl("cpu", "250m"))), want: unresolvable, wantReason: "Insufficient cpu"},
		{name: "pods that finished do not use resources",
			nodes: []*corev1.Node{node}, node: "n1",
			placed: []*corev1.Pod{b.Pod("done", b.NodeName("n1"), b.CPU("4"), b.Phase(corev1.PodSucceeded))},
			pod:    b.Pod("p", b.CPU("4")), want: ok},
	})
}

func TestNodeSelectionAndTaints(t *testing.T) {
	labelled := b.Node("n1", "4", "8Gi", b.NodeLabels("size", "large", "disk", "ssd", "cores", "16"))
	tainted := b.Node("n1", "4", "8Gi", b.NodeTaint("size", "large", corev1.TaintEffectNoSchedule))
	run(t, []scenario{
		{name: "nodeName of another node fails", nodes: []*corev1.Node{labelled}, node: "n1",
			pod: b.Pod("p", b.NodeName("n2")), want: unresolvable, wantReason: predicates.ReasonNodeName},
		{name: "a cordoned node fails", nodes: []*corev1.Node{b.Node("n1", "4", "8Gi", b.Cordoned())}, node: "n1",
			pod: b.Pod("p"), want: unresolvable, wantReason: predicates.ReasonUnschedulable},
		{name: "a cordoned node passes a pod tolerating the unschedulable taint", nodes: []*corev1.Node{b.Node("n1", "4", "8Gi", b.Cordoned())}, node: "n1",
			pod: b.Pod("p", b.Tolerate(corev1.TaintNodeUnschedulable, "", corev1.TaintEffectNoSchedule)), want: ok},
		{name: "an untolerated NoSchedule taint fails", nodes: []*corev1.Node{tainted}, node: "n1",
			pod: b.Pod("p"), want: unresolvable, wantReason: predicates.ReasonTaint},
		{name: "a NoExecute taint fails too", nodes: []*corev1.Node{b.Node("n1", "4", "8Gi", b.NodeTaint("x", "", corev1.TaintEffectNoExecute))}, node: "n1",
			pod: b.Pod("p"), want: unresolvable, wantReason: predicates.ReasonTaint},
		{name: "a PreferNoSchedule taint does not block", nodes: []*corev1.Node{b.Node("n1", "4", "8Gi", b.NodeTaint("x", "y", corev1.TaintEffectPreferNoSchedule))}, node: "n1",
			pod: b.Pod("p"), want: ok},
		{name: "a matching toleration passes", nodes: []*corev1.Node{tainted}, node: "n1",
			pod: b.Pod("p", b.Tolerate("size", "large", corev1.TaintEffectNoSchedule)), want: ok},
		{name: "a toleration of another value fails", nodes: []*corev1.Node{tainted}, node: "n1",
			pod: b.Pod("p", b.Tolerate("size", "medium", corev1.TaintEffectNoSchedule)), want: unresolvable},
		{name: "an Exists toleration without effect tolerates all effects", nodes: []*corev1.Node{tainted}, node: "n1",
			pod: b.Pod("p", b.Tolerate("size", "", "")), want: ok},
		{name: "nodeSelector matching passes", nodes: []*corev1.Node{labelled}, node: "n1",
			pod: b.Pod("p", b.NodeSelector("size", "large")), want: ok},
		{name: "nodeSelector not matching fails", nodes: []*corev1.Node{labelled}, node: "n1",
			pod: b.Pod("p", b.NodeSelector("size", "medium")), want: unresolvable, wantReason: predicates.ReasonNodeAffinity},
		{name: "In matches one of its values", nodes: []*corev1.Node{labelled}, node: "n1",
			pod: b.Pod("p", b.RequireNodeAffinity(b.Term(b.Expr("size", corev1.NodeSelectorOpIn, "medium", "large")))), want: ok},
		{name: "NotIn fails when the label has a listed value", nodes: []*corev1.Node{labelled}, node: "n1",
			pod: b.Pod("p", b.RequireNodeAffinity(b.Term(b.Expr("size", corev1.NodeSelectorOpNotIn, "large")))), want: unresolvable},
		{name: "NotIn passes when the label is absent", nodes: []*corev1.Node{labelled}, node: "n1",
			pod: b.Pod("p", b.RequireNodeAffinity(b.Term(b.Expr("gpu", corev1.NodeSelectorOpNotIn, "a100")))), want: ok},
		{name: "DoesNotExist fails when the label exists", nodes: []*corev1.Node{labelled}, node: "n1",
			pod: b.Pod("p", b.RequireNodeAffinity(b.Term(b.Expr("disk", corev1.NodeSelectorOpDoesNotExist)))), want: unresolvable},
		{name: "DoesNotExist passes when the label is absent", nodes: []*corev1.Node{labelled}, node: "n1",
			pod: b.Pod("p", b.RequireNodeAffinity(b.Term(b.Expr("gpu", corev1.NodeSelectorOpDoesNotExist)))), want: ok},
		{name: "Exists passes when the label exists", nodes: []*corev1.Node{labelled}, node: "n1",
			pod: b.Pod("p", b.RequireNodeAffinity(b.Term(b.Expr("disk", corev1.NodeSelectorOpExists)))), want: ok},
		{name: "Gt compares integers", nodes: []*corev1.Node{labelled}, node: "n1",
			pod: b.Pod("p", b.RequireNodeAffinity(b.Term(b.Expr("cores", corev1.NodeSelectorOpGt, "8")))), want: ok},
		{name: "Lt compares integers", nodes: []*corev1.Node{labelled}, node: "n1",
			pod: b.Pod("p", b.RequireNodeAffinity(b.Term(b.Expr("cores", corev1.NodeSelectorOpLt, "8")))), want: unresolvable},
		{name: "expressions of one term are ANDed", nodes: []*corev1.Node{labelled}, node: "n1",
			pod: b.Pod("p", b.RequireNodeAffinity(b.Term(b.Expr("size", corev1.NodeSelectorOpIn, "large"), b.Expr("disk", corev1.NodeSelectorOpDoesNotExist)))), want: unresolvable},
		{name: "terms are ORed", nodes: []*corev1.Node{labelled}, node: "n1",
			pod: b.Pod("p", b.RequireNodeAffinity(b.Term(b.Expr("size", corev1.NodeSelectorOpIn, "small"))), b.RequireNodeAffinity(b.Term(b.Expr("disk", corev1.NodeSelectorOpExists)))), want: ok},
		{name: "matchFields on metadata.name selects the node by name", nodes: []*corev1.Node{labelled}, node: "n1",
			pod:  b.Pod("p", b.RequireNodeAffinity(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{b.Expr("metadata.name", corev1.NodeSelectorOpIn, "n2")}})),
			want: unresolvable},
		{name: "nodeSelector and node affinity must both match", nodes: []*corev1.Node{labelled}, node: "n1",
			pod:  b.Pod("p", b.NodeSelector("size", "large"), b.RequireNodeAffinity(b.Term(b.Expr("disk", corev1.NodeSelectorOpIn, "hdd")))),
			want: unresolvable},
	})
}

func TestHostPortsAndVolumes(t *testing.T) {
	node := b.Node("n1", "4", "8Gi", b.NodeLabels(v1alpha1.LabelZone, "zone-a"))
	pv := func(zone string) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv1"}, Spec: corev1.PersistentVolumeSpec{
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
				b.Term(b.Expr(v1alpha1.LabelZone, corev1.NodeSelectorOpIn, zone))}}}}}
	}
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "default"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv1"}}
	withClaim := func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}})
	}
	labelledPV := func(key, zones string) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv1", Labels: map[string]string{key: zones}}}
	}
	unzoned := b.Node("n2", "4", "8Gi")
	// A generic ephemeral volume's claim is named <pod>-<volume> and
	// controlled by the pod.
	ephemeralClaim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "p-scratch", Namespace: "default",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "uid-p", Controller: ptr.To(true)}}},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv1"}}
	strangersClaim := ephemeralClaim.DeepCopy()
	strangersClaim.OwnerReferences[0].UID = "uid-of-an-earlier-p"
	withEphemeral := func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}})
	}
	run(t, []scenario{
		{name: "a host port in use fails", nodes: []*corev1.Node{node}, node: "n1",
			placed: []*corev1.Pod{b.Pod("a", b.NodeName("n1"), b.HostPort(8080, corev1.ProtocolTCP))},
			pod:    b.Pod("p", b.HostPort(8080, corev1.ProtocolTCP)), want: unresolvable, wantReason: predicates.ReasonNodePorts},
		{name: "the same port on another protocol passes", nodes: []*corev1.Node{node}, node: "n1",
			placed: []*corev1.Pod{b.Pod("a", b.NodeName("n1"), b.HostPort(8080, corev1.ProtocolTCP))},
			pod:    b.Pod("p", b.HostPort(8080, corev1.ProtocolUDP)), want: ok},
		{name: "a bound volume in the node's zone passes", nodes: []*corev1.Node{node}, node: "n1",
			claims: []*corev1.PersistentVolumeClaim{claim}, volumes: []*corev1.PersistentVolume{pv("zone-a")},
			pod: b.Pod("p", withClaim), want: ok},
		{name: "a bound volume in another zone fails", nodes: []*corev1.Node{node}, node: "n1",
			claims: []*corev1.PersistentVolumeClaim{claim}, volumes: []*corev1.PersistentVolume{pv("zone-b")},
			pod: b.Pod("p", withClaim), want: unresolvable, wantReason: predicates.ReasonVolumeNodeAffinity},
		{name: "a missing claim fails and says so", nodes: []*corev1.Node{node}, node: "n1",
			pod: b.Pod("p", withClaim), want: unresolvable, wantReason: `persistentvolumeclaim "data" not found`},
		{name: "a claim being deleted fails, wherever its volume is", nodes: []*corev1.Node{node}, node: "n1",
			claims: []*corev1.PersistentVolumeClaim{func() *corev1.PersistentVolumeClaim {
				c := claim.DeepCopy()
				c.DeletionTimestamp, c.Finalizers = &metav1.Time{}, []string{"kubernetes.io/pvc-protection"}
				return c
			}()}, volumes: []*corev1.PersistentVolume{pv("zone-a")},
			pod: b.Pod("p", withClaim), want: unresolvable, wantReason: `persistentvolumeclaim "data" is being deleted`},
		{name: "a ReadWriteOncePod claim another pod uses takes the pod nowhere", nodes: []*corev1.Node{node, unzoned}, node: "n2",
			claims: []*corev1.PersistentVolumeClaim{func() *corev1.PersistentVolumeClaim {
				c := claim.DeepCopy()
				c.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod}
				c.Spec.VolumeName = ""
				return c
			}()}, placed: []*corev1.Pod{b.Pod("holder", b.NodeName("n1"), withClaim)},
			pod: b.Pod("p", withClaim), want: waiting, wantReason: predicates.ReasonReadWriteOncePodConflict},
		{name: "a ReadWriteOnce claim another pod uses does not", nodes: []*corev1.Node{node, unzoned}, node: "n2",
			claims: []*corev1.PersistentVolumeClaim{func() *corev1.PersistentVolumeClaim {
				c := claim.DeepCopy()
				c.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
				c.Spec.VolumeName = ""
				return c
			}()}, placed: []*corev1.Pod{b.Pod("holder", b.NodeName("n1"), withClaim)},
			pod: b.Pod("p", withClaim), want: ok},
		{name: "a claim whose volume was lost fails", nodes: []*corev1.Node{node}, node: "n1",
			claims: []*corev1.PersistentVolumeClaim{func() *corev1.PersistentVolumeClaim {
				c := claim.DeepCopy()
				c.Status.Phase = corev1.ClaimLost
				return c
			}()}, volumes: []*corev1.PersistentVolume{pv("zone-a")},
			pod: b.Pod("p", withClaim), want: unresolvable, wantReason: `persistentvolumeclaim "data" bound to non-existent persistentvolume "pv1"`},
		{name: "a generic ephemeral volume's claim bound in another zone fails", nodes: []*corev1.Node{node}, node: "n1",
			claims: []*corev1.PersistentVolumeClaim{ephemeralClaim}, volumes: []*corev1.PersistentVolume{pv("zone-b")},
			pod: b.Pod("p", withEphemeral), want: unresolvable, wantReason: predicates.ReasonVolumeNodeAffinity},
		{name: "a generic ephemeral volume's claim bound in the node's zone passes", nodes: []*corev1.Node{node}, node: "n1",
			claims: []*corev1.PersistentVolumeClaim{ephemeralClaim}, volumes: []*corev1.PersistentVolume{pv("zone-a")},
			pod: b.Pod("p", withEphemeral), want: ok},
		{name: "a generic ephemeral volume whose claim is not made yet passes", nodes: []*corev1.Node{node}, node: "n1",
			pod: b.Pod("p", withEphemeral), want: ok},
		{name: "a generic ephemeral volume's claim bound to a zone-labelled volume passes in another zone (VolumeZone reads the claims a pod names only)",
			nodes: []*corev1.Node{node}, node: "n1",
			claims: []*corev1.PersistentVolumeClaim{ephemeralClaim}, volumes: []*corev1.PersistentVolume{labelledPV(corev1.LabelTopologyZone, "zone-b")},
			pod: b.Pod("p", withEphemeral), want: ok},
		{name: "a claim of the ephemeral volume's name another pod made fails and says so", nodes: []*corev1.Node{node}, node: "n1",
			claims: []*corev1.PersistentVolumeClaim{strangersClaim}, volumes: []*corev1.PersistentVolume{pv("zone-a")},
			pod: b.Pod("p", withEphemeral), want: unresolvable, wantReason: `persistentvolumeclaim "p-scratch" was not created for the pod`},
		{name: "a volume labelled with another zone (in-tree, no node affinity) fails", nodes: []*corev1.Node{node}, node: "n1",
			claims: []*corev1.PersistentVolumeClaim{claim}, volumes: []*corev1.PersistentVolume{labelledPV(corev1.LabelFailureDomainBetaZone, "zone-b__zone-c")},
			pod: b.Pod("p", withClaim), want: unresolvable, wantReason: predicates.ReasonVolumeNodeAffinity},
		{name: "a volume whose beta zone label lists the node's zone passes on the GA label", nodes: []*corev1.Node{node}, node: "n1",
			claims: []*corev1.PersistentVolumeClaim{claim}, volumes: []*corev1.PersistentVolume{labelledPV(corev1.LabelFailureDomainBetaZone, "zone-b__zone-a")},
			pod: b.Pod("p", withClaim), want: ok},
		{name: "a zone label with an empty zone in its list is ignored, as kube-scheduler cannot read it", nodes: []*corev1.Node{node}, node: "n1",
			claims: []*corev1.PersistentVolumeClaim{claim}, volumes: []*corev1.PersistentVolume{labelledPV(corev1.LabelTopologyZone, "zone-b____zone-c")},
			pod: b.Pod("p", withClaim), want: ok},
		{name: "a zone-labelled volume passes on a node without topology labels", nodes: []*corev1.Node{unzoned}, node: "n2",
			claims: []*corev1.PersistentVolumeClaim{claim}, volumes: []*corev1.PersistentVolume{labelledPV(corev1.LabelTopologyZone, "zone-b")},
			pod: b.Pod("p", withClaim), want: ok},
	})
}
