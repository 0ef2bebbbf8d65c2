package policy_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/controller/nodeadoption"
	b "github.com/berth-dev/berth/internal/testing/builders"
	"github.com/berth-dev/berth/internal/testing/fakes"
)

const controlPlaneLabel = "node-role.kubernetes.io/control-plane"

// adopter finds every node a Machine of group's.
type adopter struct{ group *v1alpha1.NodeGroup }

func (a adopter) Adopt(context.Context, *corev1.Node) (*v1alpha1.NodeGroup, error) {
	return a.group, nil
}

func mergePatch(s string) client.Patch { return client.RawPatch(types.MergePatchType, []byte(s)) }

func nodeRef(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// TestBerthChangesOnlyItsNodes: berth's account changes and deletes only
// the nodes it marked, never a control-plane node (even one it marked),
// and adopts a node of a Cluster API Machine only by adding labels and
// its own annotations; nobody else may write the mark, through the node or
// its status.
func TestBerthChangesOnlyItsNodes(t *testing.T) {
	berth := installed(t)
	ctx := context.Background()
	taint := mergePatch(`{"spec":{"taints":[{"key":"` + v1alpha1.TaintDisrupted + `","effect":"NoSchedule"}]}}`)
	relabel := mergePatch(`{"metadata":{"labels":{"team":"other"}}}`)

	create(t, env.Client, b.Node("not-berths", "1", "1Gi", b.NodeLabels("team", "a")))
	create(t, berth, kwokNode("berths-own"), kwokNode("berths-control-plane"))
	// An admin makes a node berth launched a control-plane node.
	if err := env.Client.Patch(ctx, nodeRef("berths-control-plane"), mergePatch(`{"metadata":{"labels":{"`+controlPlaneLabel+`":""}}}`)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, node, policy string
		write              func(ctx context.Context, n *corev1.Node) error
	}{
		{"berth relabels a node it did not launch", "not-berths", nodePolicy, func(ctx context.Context, n *corev1.Node) error { return berth.Patch(ctx, n, relabel) }},
		{"berth deletes a node it did not launch", "not-berths", nodePolicy, func(ctx context.Context, n *corev1.Node) error { return berth.Delete(ctx, n) }},
		{"berth taints a control-plane node it marked", "berths-control-plane", nodePolicy, func(ctx context.Context, n *corev1.Node) error { return berth.Patch(ctx, n, taint) }},
		{"berth deletes a control-plane node it marked", "berths-control-plane", nodePolicy, func(ctx context.Context, n *corev1.Node) error { return berth.Delete(ctx, n) }},
		{"the admin adds the owner mark", "not-berths", markPolicy, func(ctx context.Context, n *corev1.Node) error {
			return env.Client.Patch(ctx, n, mergePatch(`{"metadata":{"annotations":{"`+v1alpha1.AnnotationLaunchedBy+`":"uid-1"}}}`))
		}},
		{"the admin adds the owner mark through the node's status", "not-berths", markPolicy, func(ctx context.Context, n *corev1.Node) error {
			return env.Client.Status().Patch(ctx, n, mergePatch(`{"metadata":{"annotations":{"`+v1alpha1.AnnotationLaunchedBy+`":"uid-1"}}}`))
		}},
	} {
		if err := c.write(ctx, nodeRef(c.node)); !deniedBy(err, c.policy) {
			t.Errorf("%s: %v, want refused by %s", c.name, err, c.policy)
		}
	}
	if err := berth.Patch(ctx, nodeRef("berths-own"), taint); err != nil {
		t.Errorf("berth tainting a node it launched: %v", err)
	}
	if err := berth.Delete(ctx, nodeRef("berths-own")); err != nil {
		t.Errorf("berth deleting a node it launched: %v", err)
	}
}

// TestClusterAPIAdoptionAddsOnly: nodeadoption, as berth's account,
// adopts a worker node of a Cluster API Machine (labels and berth's own
// annotations added, nothing else); the Machine annotation is not enough
// for anything else (changing its labels or taints) nor for adopting a
// control-plane node.
func TestClusterAPIAdoptionAddsOnly(t *testing.T) {
	berth := installed(t)
	ctx := context.Background()
	machine := func(name string) b.NodeOption {
		return func(n *corev1.Node) {
			n.Spec.ProviderID = "capi://" + name
			if n.Annotations == nil {
				n.Annotations = map[string]string{}
			}
			n.Annotations[nodeadoption.AnnotationMachine] = name
		}
	}
	create(t, env.Client,
		b.Node("capi-worker", "1", "1Gi", machine("worker"), b.NodeLabels("team", "a"), b.NodeTaint("dedicated", "a", corev1.TaintEffectNoSchedule)),
		b.Node("capi-control-plane", "1", "1Gi", machine("control-plane"), b.NodeLabels(controlPlaneLabel, "")))
	for _, c := range []struct{ name, patch string }{
		{"changes a label", `{"metadata":{"labels":{"team":"other"}}}`},
		{"removes a taint", `{"spec":{"taints":null}}`},
		{"adds an annotation that is not berth's", `{"metadata":{"annotations":{"example.com/x":"y"}}}`},
		{"marks and cordons it", `{"metadata":{"annotations":{"` + v1alpha1.AnnotationLaunchedBy + `":"uid-capi"}},"spec":{"unschedulable":true}}`},
	} {
		if err := berth.Patch(ctx, nodeRef("capi-worker"), mergePatch(c.patch)); !deniedBy(err, nodePolicy) {
			t.Errorf("berth %s (a Cluster API node): %v, want refused by %s", c.name, err, nodePolicy)
		}
	}

	group := &v1alpha1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "capi", UID: "uid-capi"}}
	r := &nodeadoption.Reconciler{Client: berth, Adopter: adopter{group}, Recorder: &fakes.Recorder{}}
	adopt := func(name string) error {
		_, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
		return err
	}
	if err := adopt("capi-worker"); err != nil {
		t.Fatalf("adopting a worker node of a Machine: %v", err)
	}
	n := &corev1.Node{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "capi-worker"}, n); err != nil {
		t.Fatal(err)
	}
	if n.Labels[v1alpha1.LabelNodeGroup] != group.Name || n.Annotations[v1alpha1.AnnotationLaunchedBy] != string(group.UID) || n.Labels["team"] != "a" {
		t.Errorf("adopted node: labels %v, annotations %v", n.Labels, n.Annotations)
	}
	if err := adopt("capi-control-plane"); !deniedBy(err, nodePolicy) {
		t.Errorf("adopting a control-plane node of a Machine: %v, want refused by %s", err, nodePolicy)
	}
}

// kwokNode is a node as berth's KWOK provider creates it: marked as KWOK's
// and berth's, with a kwok:// provider ID.
func kwokNode(name string, opts ...b.NodeOption) *corev1.Node {
	n := b.Node(name, "1", "1Gi", append([]b.NodeOption{b.NodeAnnotation(v1alpha1.AnnotationLaunchedBy, "uid-1"),
		b.NodeAnnotation(v1alpha1.AnnotationKWOKNode, v1alpha1.AnnotationKWOKNodeValue)}, opts...)...)
	n.Spec.ProviderID = v1alpha1.ProviderIDPrefixKWOK + name
	return n
}

// TestBerthCreatesOnlyKWOKNodes: berth's account creates the nodes of its
// KWOK provider and no other: not one without KWOK's mark or provider ID
// (the Node of a real machine about to register, which the kubelet would
// reuse with berth's mark), not one without berth's mark, not a
// control-plane node. Anyone else's creations are not its concern.
func TestBerthCreatesOnlyKWOKNodes(t *testing.T) {
	berth := installed(t)
	ctx := context.Background()
	noKWOK := b.Node("created-not-kwok", "1", "1Gi", b.NodeAnnotation(v1alpha1.AnnotationLaunchedBy, "uid-1"))
	noKWOK.Spec.ProviderID = "aws:///eu-west-1a/i-0123"
	unmarked := kwokNode("created-unmarked")
	delete(unmarked.Annotations, v1alpha1.AnnotationLaunchedBy)
	for name, n := range map[string]*corev1.Node{
		"a node that is not KWOK's":        noKWOK,
		"a KWOK node without berth's mark": unmarked,
		"a control-plane node":             kwokNode("created-control-plane", b.NodeLabels(controlPlaneLabel, "")),
	} {
		if err := berth.Create(ctx, n, client.DryRunAll); !deniedBy(err, createPolicy) {
			t.Errorf("berth creating %s: %v, want refused by %s", name, err, createPolicy)
		}
	}
	if err := berth.Create(ctx, kwokNode("created-kwok"), client.DryRunAll); err != nil {
		t.Errorf("berth creating a KWOK node it launches: %v", err)
	}
}
