// Package scenario reads a cluster from a multi-document YAML of ordinary
// Kubernetes objects (Nodes, Pods, DaemonSets, PodDisruptionBudgets,
// Namespaces, claims, volumes, List kinds — `kubectl get ... -o yaml` output
// works as is) plus berth NodeGroups, for `berth plan`, tests and
// benchmarks.
package scenario

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1alpha2 "k8s.io/api/scheduling/v1alpha2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/clusterread"
	"github.com/berth-dev/berth/internal/headroom"
	"github.com/berth-dev/berth/internal/planner/scaledown"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/podutil"
	"github.com/berth-dev/berth/internal/quantity"
	"github.com/berth-dev/berth/internal/simulator/daemonset"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// Scenario is the objects of a cluster.
type Scenario struct {
	NodeGroups []*v1alpha1.NodeGroup
	Headrooms  []*v1alpha1.Headroom
	Nodes      []*corev1.Node
	Pods       []*corev1.Pod
	DaemonSets []*appsv1.DaemonSet
	PDBs       []*policyv1.PodDisruptionBudget
	Namespaces []*corev1.Namespace
	Claims     []*corev1.PersistentVolumeClaim
	Volumes    []*corev1.PersistentVolume
	// LimitRanges give the pods of their namespace container defaults;
	// the planner reads them for DaemonSets without a pod
	// (daemonset.AsRun).
	LimitRanges []*corev1.LimitRange
	// RuntimeClasses give the pods that name them an overhead and a node
	// selector; the planner reads them for DaemonSets without a pod, as
	// LimitRanges.
	RuntimeClasses []*nodev1.RuntimeClass
	// DRA are the resource.k8s.io/v1 objects (DeviceClasses,
	// ResourceClaims, ResourceClaimTemplates, ResourceSlices) and the
	// scheduling.k8s.io/v1alpha2 PodGroups.
	DRA snapshot.DRA
	// Workloads are scheduling.k8s.io/v1alpha2 Workloads; read so that a
	// dump of a cluster loads, their PodGroups carry what the planner uses.
	Workloads []*schedulingv1alpha2.Workload
	// Ignored counts documents of kinds that carry nothing the planner
	// needs (Deployments, Services, ...), by kind.
	Ignored map[string]int
	// UnknownFields name the documents (at most maxUnknownFields) with a
	// field their type does not have, read past: a misspelt field, or
	// one of a newer Kubernetes.
	UnknownFields []string
	// unknown is the unknown field of the document being added.
	unknown error
}

// ignoredKinds are Kubernetes kinds a snapshot may contain that the planner
// does not read: their pods carry what matters.
var ignoredKinds = map[string]bool{
	"apps/v1/Deployment": true, "apps/v1/ReplicaSet": true, "apps/v1/StatefulSet": true,
	"batch/v1/Job": true, "batch/v1/CronJob": true, "v1/Service": true, "v1/ConfigMap": true,
	"v1/Secret": true, "v1/ServiceAccount": true, "v1/Event": true, "v1/Endpoints": true,
	"discovery.k8s.io/v1/EndpointSlice": true, "scheduling.k8s.io/v1/PriorityClass": true,
	"v1/ReplicationController": true, "coordination.k8s.io/v1/Lease": true,
}

type header struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Items []jsonRaw `json:"items"`
}

type jsonRaw []byte

func (r *jsonRaw) UnmarshalJSON(b []byte) error { *r = append((*r)[:0], b...); return nil }

// MaxInputBytes bounds what Load reads: a dump of a 20,000-pod cluster is
// about 100 MiB.
const MaxInputBytes = 512 << 20

// Load reads every document of r. Errors name the document (by position,
// counting from 1, and by kind/name where known). NodeGroups and Headrooms
// get the API server's defaults and validation, from berth's CRDs.
func Load(r io.Reader) (*Scenario, error) {
	s := &Scenario{Ignored: map[string]int{}}
	limited := &io.LimitedReader{R: r, N: MaxInputBytes + 1}
	reader := yaml.NewYAMLReader(bufio.NewReader(limited))
	for doc := 1; ; doc++ {
		raw, err := reader.Read()
		if limited.N <= 0 {
			return nil, fmt.Errorf("input is larger than %d MiB", MaxInputBytes>>20)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		if len(bytes.TrimSpace(stripComments(raw))) == 0 {
			continue
		}
		js, err := sigsyaml.YAMLToJSON(raw)
		if err != nil {
			return nil, fmt.Errorf("document %d: malformed YAML: %w", doc, err)
		}
		if h := quantity.HugeExponent(js); h != "" {
			// apimachinery's parser does not return on some of these, and
			// comparisons with the others write out every digit. A
			// quantity with no digits before its exponent ("e999999999",
			// zero) is not found here, as such a string may be a name;
			// decode bounds it as the controller's cache does.
			return nil, fmt.Errorf("document %d: the number %s has an exponent of more than %d digits; berth does not read it", doc, h, quantity.MaxExponentDigits)
		}
		if err := s.add(js, fmt.Sprintf("document %d", doc), false); err != nil {
			return nil, err
		}
	}
	s.defaultDRA()
	return s, nil
}

func stripComments(b []byte) []byte {
	var out []byte
	for _, line := range strings.Split(string(b), "\n") {
		if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "#") || t == "---" {
			continue
		}
		out = append(out, line...)
		out = append(out, '\n')
	}
	return out
}

// add decodes one object (or the items of a List; nested is true for the
// items).
func (s *Scenario) add(js []byte, where string, nested bool) error {
	var h header
	if err := sigsyaml.Unmarshal(js, &h); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if h.Kind == "" || h.APIVersion == "" {
		return fmt.Errorf("%s: apiVersion and kind are required", where)
	}
	gvk := h.APIVersion + "/" + h.Kind
	if strings.HasSuffix(h.Kind, "List") && h.APIVersion == "v1" {
		if nested {
			// The API server never nests Lists; nesting made every level
			// parse its items again (quadratic time and memory).
			return fmt.Errorf("%s: a List inside a List is not supported", where)
		}
		for i, item := range h.Items {
			if err := s.add(item, fmt.Sprintf("%s, item %d", where, i+1), true); err != nil {
				return err
			}
		}
		return nil
	}
	where = fmt.Sprintf("%s (%s %q)", where, h.Kind, h.Metadata.Name)
	if h.Metadata.Name == "" {
		return fmt.Errorf("%s: metadata.name is required", where)
	}
	v, err := validatorFor(gvk)
	if err != nil {
		return err
	}
	if v != nil {
		if js, err = v.defaultAndValidate(js); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
	}
	switch gvk {
	case "v1/Node":
		err = decode(s, js, &s.Nodes)
		if err == nil {
			n := s.Nodes[len(s.Nodes)-1]
			err = errors.Join(quantity.Negative("status.capacity", n.Status.Capacity), quantity.Negative("status.allocatable", n.Status.Allocatable))
		}
	case "v1/Pod":
		err = decode(s, js, &s.Pods)
		if err == nil && s.Pods[len(s.Pods)-1].Namespace == "" {
			s.Pods[len(s.Pods)-1].Namespace = "default"
		}
		if err == nil {
			err = quantity.NegativeRequests(&s.Pods[len(s.Pods)-1].Spec)
			podutil.ApplyDefaults(&s.Pods[len(s.Pods)-1].Spec)
		}
	case "apps/v1/DaemonSet":
		err = decode(s, js, &s.DaemonSets)
		if err == nil {
			if err = quantity.NegativeRequests(&s.DaemonSets[len(s.DaemonSets)-1].Spec.Template.Spec); err != nil {
				err = fmt.Errorf("spec.template.%w", err)
			}
		}
	case "policy/v1/PodDisruptionBudget":
		err = decode(s, js, &s.PDBs)
	case "v1/Namespace":
		err = decode(s, js, &s.Namespaces)
	case "v1/PersistentVolumeClaim":
		err = decode(s, js, &s.Claims)
	case "v1/PersistentVolume":
		err = decode(s, js, &s.Volumes)
	case "node.k8s.io/v1/RuntimeClass":
		err = decode(s, js, &s.RuntimeClasses)
		if err == nil && s.RuntimeClasses[len(s.RuntimeClasses)-1].Overhead != nil {
			err = quantity.Negative("overhead.podFixed", s.RuntimeClasses[len(s.RuntimeClasses)-1].Overhead.PodFixed)
		}
	case "v1/LimitRange":
		err = decodeInNamespace(s, js, &s.LimitRanges)
		if err == nil {
			err = limitRangeValid(s.LimitRanges[len(s.LimitRanges)-1].Spec.Limits)
		}
	case "resource.k8s.io/v1/DeviceClass":
		err = decode(s, js, &s.DRA.DeviceClasses)
	case "resource.k8s.io/v1/ResourceSlice":
		err = decode(s, js, &s.DRA.Slices)
	case "resource.k8s.io/v1/ResourceClaim":
		err = decodeInNamespace(s, js, &s.DRA.Claims)
	case "resource.k8s.io/v1/ResourceClaimTemplate":
		err = decodeInNamespace(s, js, &s.DRA.ClaimTemplates)
	case "scheduling.k8s.io/v1alpha2/PodGroup":
		err = decodeInNamespace(s, js, &s.DRA.PodGroups)
	case "scheduling.k8s.io/v1alpha2/Workload":
		err = decode(s, js, &s.Workloads)
	case v1alpha1.GroupVersion.String() + "/Headroom":
		err = decodeStrict(js, &s.Headrooms)
	case v1alpha1.GroupVersion.String() + "/NodeGroup":
		err = decodeStrict(js, &s.NodeGroups)
	default:
		if ignoredKinds[gvk] {
			s.Ignored[h.Kind]++
			return nil
		}
		return fmt.Errorf("%s: unknown kind %s (supported: Node, Pod, DaemonSet, PodDisruptionBudget, Namespace, PersistentVolumeClaim, PersistentVolume, LimitRange, RuntimeClass, "+
			"resource.k8s.io/v1 DeviceClass, ResourceClaim, ResourceClaimTemplate and ResourceSlice, scheduling.k8s.io/v1alpha2 Workload and PodGroup, "+
			"berth.dev/v1alpha1 NodeGroup and Headroom, and List of them)", where, gvk)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if s.unknown != nil {
		if len(s.UnknownFields) < maxUnknownFields {
			s.UnknownFields = append(s.UnknownFields, fmt.Sprintf("%s: %s", where, unknownField(s.unknown)))
		}
		s.unknown = nil
	}
	return nil
}

// maxUnknownFields bounds how many documents with unknown fields are named.
const maxUnknownFields = 20

// unknownField is the part of a strict decoding error that names the
// field ("unknown field \"nodeSelecter\"").
func unknownField(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "unknown field"); i >= 0 {
		return msg[i:]
	}
	return msg
}

// decodeInNamespace is decode for a namespaced object: one that names
// no namespace is put in "default", as kubectl apply does.
func decodeInNamespace[T any](s *Scenario, js []byte, into *[]*T) error {
	if err := decode(s, js, into); err != nil {
		return err
	}
	if o, ok := any((*into)[len(*into)-1]).(metav1.Object); ok && o.GetNamespace() == "" {
		o.SetNamespace("default")
	}
	return nil
}

// decode reads one object and bounds its quantities as the controller's
// cache bounds what it reads (quantity.BoundObject), so that the plan
// reads the same numbers. A field the object's type does not have (a
// misspelt nodeSelecter, planned as if it were not there, or a field of a
// newer Kubernetes than this berth's) is read past and named in
// s.UnknownFields (add), so that the user sees what was not read.
func decode[T any](s *Scenario, js []byte, into *[]*T) error {
	obj := new(T)
	if err := sigsyaml.UnmarshalStrict(js, obj); err != nil {
		if !strings.Contains(err.Error(), "unknown field") {
			return err
		}
		s.unknown = err
		obj = new(T)
		if err := sigsyaml.Unmarshal(js, obj); err != nil {
			return err
		}
	}
	quantity.BoundObject(obj)
	*into = append(*into, obj)
	return nil
}

func decodeStrict[T any](js []byte, into *[]*T) error {
	obj := new(T)
	if err := sigsyaml.UnmarshalStrict(js, obj); err != nil {
		return err
	}
	*into = append(*into, obj)
	return nil
}

// Input turns the scenario into a scale-up planner input: pods bound to a
// node are placed, pods waiting for a node are pending, and the units of
// Headrooms without placeholders are pending too (resolved at now), as the
// controller plans them.
func (s *Scenario) Input(now time.Time) (scaleup.Input, error) {
	in := scaleup.Input{
		NodeGroups: s.NodeGroups, Nodes: s.Nodes, DaemonSets: s.DaemonSets,
		Namespaces: s.Namespaces, Claims: s.Claims, Volumes: s.Volumes, DRA: s.DRA,
		Now: now, LaunchGrace: scaleup.DefaultLaunchGrace,
	}
	burst := podutil.NewBurst(s.Pods)
	nodes := make(map[string]bool, len(s.Nodes))
	for _, n := range s.Nodes {
		nodes[n.Name] = true
	}
	for _, p := range s.Pods {
		switch {
		case p.Spec.NodeName != "":
			in.Pods = append(in.Pods, p)
		case podutil.IsUnbound(p) && nodes[p.Status.NominatedNodeName]:
			// Nominated (by preemption, or by berth): it holds room there,
			// as the controller plans it.
			in.Held = append(in.Held, podutil.HeldOn(p, p.Status.NominatedNodeName))
		case awaitsNode(burst, p):
			in.Pending = append(in.Pending, p)
		}
	}
	in.DaemonSets = s.daemonSets()
	hin := headroom.Inputs{Now: now, NodeGroups: s.NodeGroups, Nodes: s.Nodes, Pods: in.Pods, DaemonSets: daemonset.Pods(in.DaemonSets)}
	units, err := s.virtualUnits(hin)
	in.Pending = append(in.Pending, units...)
	return in, err
}

// virtualUnits are the units of the Headrooms without placeholders
// (placeholders are pods of their own in a real cluster), resolved with
// hin, at most clusterread.DefaultMaxUnits of them together, shared as the
// controller shares them.
func (s *Scenario) virtualUnits(hin headroom.Inputs) ([]*corev1.Pod, error) {
	var sets []clusterread.Set
	for _, h := range s.Headrooms {
		if h.Spec.Placeholders {
			continue
		}
		r, err := headroom.Resolve(h, hin)
		if err != nil {
			return nil, fmt.Errorf("headroom %s: %w", h.Name, err)
		}
		sets = append(sets, clusterread.ResolvedSet(h, r))
	}
	units, _ := clusterread.MakeUnits(sets, clusterread.DefaultMaxUnits)
	return clusterread.UnitPods(units), nil
}

// awaitsNode is the controller's rule (podutil.Burst: the scheduler found
// no node for the pod, or has not tried it and found none for another pod
// of its controller; not a DaemonSet pod), so that `berth plan` on a dump
// of a cluster plans the pods the controller would. A pod written by hand
// carries no status; it is planned as if the scheduler had found no node
// for it.
func awaitsNode(burst podutil.Burst, p *corev1.Pod) bool {
	return burst.AwaitsNode(p) || (podutil.HasNoStatus(p) && podutil.IsUnbound(p) && !podutil.IsDaemonSetPod(p))
}

// ScaleDownInput turns the scenario into a scale-down planner input: the
// bound pods, the PodDisruptionBudgets, the DaemonSets (the overhead of a
// replacement node, as the controller plans it), and the units of Headrooms without
// placeholders (resolved at now), which must keep a home.
func (s *Scenario) ScaleDownInput(now time.Time) (scaledown.Input, error) {
	in := scaledown.Input{NodeGroups: s.NodeGroups, Nodes: s.Nodes, PDBs: s.PDBs, DaemonSets: s.daemonSets(),
		Namespaces: s.Namespaces, Claims: s.Claims, Volumes: s.Volumes, DRA: s.DRA,
		Now: now, LaunchGrace: scaleup.DefaultLaunchGrace}
	burst := podutil.NewBurst(s.Pods)
	in.AddPods(s.Pods, func(p *corev1.Pod) bool { return awaitsNode(burst, p) })
	hin := headroom.Inputs{Now: now, NodeGroups: s.NodeGroups, Nodes: s.Nodes, Pods: in.Pods,
		DaemonSets: daemonset.Pods(in.DaemonSets)}
	units, err := s.virtualUnits(hin)
	in.Virtual = append(in.Virtual, units...)
	return in, err
}

// daemonSets are the scenario's DaemonSets and the per-node reserves
// (reserveDaemonSets), as their pods in the scenario run
// (daemonset.AsRun), as the controller reads them.
func (s *Scenario) daemonSets() []*appsv1.DaemonSet {
	return daemonset.AsRun(append(slices.Clone(s.DaemonSets), s.reserveDaemonSets()...), daemonset.NewestOf(s.Pods),
		daemonset.Admission{LimitRanges: s.LimitRanges, RuntimeClasses: s.RuntimeClasses})
}

// reserveDaemonSets are the per-node reserve DaemonSets of the Headrooms
// with spec.perNode, as the controller runs them: a dump of a cluster has
// them, a hand-written scenario need not; a reserve is overhead of every
// new node it selects, like any DaemonSet. Those the scenario has already
// are not added twice.
func (s *Scenario) reserveDaemonSets() []*appsv1.DaemonSet {
	have := map[types.NamespacedName]bool{}
	for _, ds := range s.DaemonSets {
		have[types.NamespacedName{Namespace: ds.Namespace, Name: ds.Name}] = true
	}
	var out []*appsv1.DaemonSet
	for _, h := range s.Headrooms {
		if h.Spec.PerNode == nil {
			continue
		}
		ds := headroom.NodeReserveDaemonSet(h)
		if !have[types.NamespacedName{Namespace: ds.Namespace, Name: ds.Name}] {
			out = append(out, ds)
		}
	}
	return out
}

// limitRangeValid refuses a LimitRange item with a negative quantity, as
// the API server does.
func limitRangeValid(items []corev1.LimitRangeItem) error {
	var errs []error
	for i, it := range items {
		for _, f := range []struct {
			name string
			rl   corev1.ResourceList
		}{{"default", it.Default}, {"defaultRequest", it.DefaultRequest}, {"max", it.Max}, {"min", it.Min},
			{"maxLimitRequestRatio", it.MaxLimitRequestRatio}} {
			errs = append(errs, quantity.Negative(fmt.Sprintf("spec.limits[%d].%s", i, f.name), f.rl))
		}
	}
	return errors.Join(errs...)
}
