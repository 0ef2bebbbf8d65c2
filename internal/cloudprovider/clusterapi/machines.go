package clusterapi

import (
	"context"
	"encoding/base64"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
)

// Labels Cluster API puts on every Machine, naming the object it belongs to.
var machineOwnerLabels = map[v1alpha1.ClusterAPIKind]string{
	v1alpha1.ClusterAPIMachineDeployment: "cluster.x-k8s.io/deployment-name",
	v1alpha1.ClusterAPIMachineSet:        "cluster.x-k8s.io/set-name",
	v1alpha1.ClusterAPIMachinePool:       "cluster.x-k8s.io/pool-name",
}

// ownerLabelValue is the value of the owner label (machineOwnerLabels)
// Cluster API puts on the Machines of the object named name: the name
// itself, but a MachineSet's or MachinePool's name that is not a valid
// label value (longer than 63 characters) is replaced by its hash,
// "hash_<FNV-1a 32 of the name, unpadded URL base64>_z", as Cluster
// API's labels/format.MustFormatValue writes it. A MachineDeployment's
// name is written as it is (admission keeps it to 63 characters).
func ownerLabelValue(kind v1alpha1.ClusterAPIKind, name string) string {
	if kind == v1alpha1.ClusterAPIMachineDeployment || len(validation.IsValidLabelValue(name)) == 0 {
		return name
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(name)) // a hash.Hash never fails to write
	return "hash_" + base64.RawURLEncoding.EncodeToString(h.Sum(nil)) + "_z"
}

// ref is a node group's Cluster API object, defaults applied.
type ref struct {
	gv        schema.GroupVersion
	kind      v1alpha1.ClusterAPIKind
	namespace string
	name      string
	timeout   time.Duration
}

// DefaultMachineTimeout is how long a Machine may go without a provider ID
// when the node group does not say.
const DefaultMachineTimeout = 10 * time.Minute

func refOf(ng *v1alpha1.NodeGroup) (ref, error) {
	p := ng.Spec.Provider.ClusterAPI
	if p == nil {
		return ref{}, fmt.Errorf("node group %s has no clusterAPI provider", ng.Name)
	}
	r := ref{kind: p.Kind, namespace: p.Namespace, name: p.Name, timeout: DefaultMachineTimeout}
	if r.kind == "" {
		r.kind = v1alpha1.ClusterAPIMachineDeployment
	}
	apiVersion := p.APIVersion
	if apiVersion == "" {
		apiVersion = "cluster.x-k8s.io/v1beta2"
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return ref{}, fmt.Errorf("node group %s: apiVersion %q: %w", ng.Name, apiVersion, err)
	}
	r.gv = gv
	if p.MachineTimeout != nil && p.MachineTimeout.Duration > 0 {
		r.timeout = p.MachineTimeout.Duration
	}
	return r, nil
}

func (r ref) String() string { return fmt.Sprintf("%s %s/%s", r.kind, r.namespace, r.name) }

// object is an empty unstructured object of the scalable kind, named.
func (r ref) object() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(r.gv.WithKind(string(r.kind)))
	u.SetNamespace(r.namespace)
	u.SetName(r.name)
	return u
}

// machine is what berth reads of a Cluster API Machine.
type machine struct {
	Name       string
	Namespace  string
	ProviderID string
	NodeName   string
	Created    time.Time
	Deleting   bool
	// Failure is why the infrastructure provider failed the Machine for
	// good (phase Failed, failureReason, failureMessage; "" when it did
	// not).
	Failure string
	// MachineSet is the MachineSet the Machine belongs to, if any.
	MachineSet  string
	Annotations map[string]string
	obj         *unstructured.Unstructured
}

// markedForDeletion reports whether the Machine carries delete-machine.
func (m machine) markedForDeletion() bool {
	_, ok := m.Annotations[AnnotationDeleteMachine]
	return ok
}

// markedByBerth reports whether berth put delete-machine on the Machine.
func (m machine) markedByBerth() bool {
	return m.markedForDeletion() && m.Annotations[v1alpha1.AnnotationDeleteRequestedBy] != ""
}

func machineFrom(u *unstructured.Unstructured) machine {
	m := machine{Name: u.GetName(), Namespace: u.GetNamespace(), Created: u.GetCreationTimestamp().Time,
		Deleting: u.GetDeletionTimestamp() != nil, Annotations: u.GetAnnotations(), obj: u,
		MachineSet: u.GetLabels()[machineOwnerLabels[v1alpha1.ClusterAPIMachineSet]]}
	for _, o := range u.GetOwnerReferences() {
		if o.Kind == string(v1alpha1.ClusterAPIMachineSet) && o.Controller != nil && *o.Controller {
			m.MachineSet = o.Name // its name, where the label may hold a hash of it
		}
	}
	m.ProviderID, _, _ = unstructured.NestedString(u.Object, "spec", "providerID")
	m.NodeName, _, _ = unstructured.NestedString(u.Object, "status", "nodeRef", "name")
	m.Failure = failureOf(u)
	return m
}

// failureOf says why a Machine failed for good: v1beta1's
// status.failureReason and failureMessage (under
// status.deprecated.v1beta1 in v1beta2), or phase Failed; "" when it has
// not failed.
func failureOf(u *unstructured.Unstructured) string {
	for _, at := range [][]string{{"status"}, {"status", "deprecated", "v1beta1"}} {
		reason, _, _ := unstructured.NestedString(u.Object, append(slices.Clone(at), "failureReason")...)
		msg, _, _ := unstructured.NestedString(u.Object, append(slices.Clone(at), "failureMessage")...)
		if reason != "" || msg != "" {
			return strings.TrimSpace(strings.Join([]string{reason, msg}, " "))
		}
	}
	if phase, _, _ := unstructured.NestedString(u.Object, "status", "phase"); phase == "Failed" {
		return "phase Failed"
	}
	return ""
}

// machines lists the Machines of the object, oldest first.
func (p *Provider) machines(ctx context.Context, r ref) ([]machine, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(r.gv.WithKind("MachineList"))
	if err := p.mgmt.List(ctx, list, client.InNamespace(r.namespace), client.MatchingLabels{machineOwnerLabels[r.kind]: ownerLabelValue(r.kind, r.name)}); err != nil {
		return nil, fmt.Errorf("listing machines of %s: %w", r, err)
	}
	out := make([]machine, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, machineFrom(&list.Items[i]))
	}
	return out, nil
}

// machineForProviderID returns the Machine whose provider ID is the node's.
func machineForProviderID(ms []machine, providerID string) (machine, bool) {
	if providerID == "" {
		return machine{}, false
	}
	want := cloudprovider.NormalizeProviderID(providerID)
	for _, m := range ms {
		if m.ProviderID != "" && cloudprovider.NormalizeProviderID(m.ProviderID) == want {
			return m, true
		}
	}
	return machine{}, false
}

// stuck returns the Machines without a Node that will not get one: those
// without a provider ID for longer than the timeout (their infrastructure
// did not come), and those their infrastructure provider failed
// (Cluster Autoscaler's provider gives those up at once too).
func stuck(ms []machine, now time.Time, timeout time.Duration) []machine {
	var out []machine
	for _, m := range ms {
		if givenUp(m, now, timeout) {
			out = append(out, m)
		}
	}
	return out
}

// givenUp reports whether a live Machine without a Node will not get one.
func givenUp(m machine, now time.Time, timeout time.Duration) bool {
	if m.Deleting || m.NodeName != "" {
		return false
	}
	return m.Failure != "" || m.ProviderID == "" && now.Sub(m.Created) > timeout
}
