// Package kwok is the cloud provider for development, tests and demos: a
// "machine" is a Node object annotated for KWOK, whose fake kubelet turns it
// Ready after the node group's launch delay and runs the pods bound to it.
package kwok

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
)

// Name of the provider.
const Name = "kwok"

// Provider creates KWOK nodes through the API server.
type Provider struct {
	client client.Client
	// reader reads a node to delete past the cache (WithAPIReader; nil:
	// client): a node created a moment ago is deleted, not taken for gone.
	reader client.Reader
	clock  clock.PassiveClock
	sizes  *sizes
}

var (
	_ cloudprovider.CloudProvider = (*Provider)(nil)
	_ cloudprovider.Suspender     = (*Provider)(nil)
)

// New returns a KWOK provider.
func New(c client.Client, clk clock.PassiveClock) *Provider {
	return &Provider{client: c, clock: clk, sizes: newSizes(clk)}
}

// WithAPIReader has Delete read the node it deletes with r (the API
// server, past the cache) and returns p.
func (p *Provider) WithAPIReader(r client.Reader) *Provider {
	p.reader = r
	return p
}

// Name returns "kwok".
func (p *Provider) Name() string { return Name }

// Create makes a Node for one instance of the offering. The node carries
// the group's template labels and taints, the well-known labels, the
// instance type's capacity as capacity and allocatable, a provider ID, the
// KWOK annotation and the time KWOK should turn it Ready. At the group's
// maxSize it creates nothing (sizes).
func (p *Provider) Create(ctx context.Context, req cloudprovider.CreateRequest) (*cloudprovider.Instance, error) {
	ng, off := req.NodeGroup, req.Offering
	if ng.Spec.Provider.KWOK == nil {
		return nil, fmt.Errorf("node group %s has no kwok provider", ng.Name)
	}
	for _, sel := range ng.Spec.Provider.KWOK.FailOfferings {
		if sel.Matches(off.InstanceType, off.Zone, off.CapacityType) {
			return nil, &cloudprovider.InsufficientCapacityError{Offering: off, Message: "kwok failure injection (spec.provider.kwok.failOfferings)"}
		}
	}
	name := ng.Name + "-" + randomSuffix()
	node := cloudprovider.NodeFor(ng, off, name)
	if node == nil {
		return nil, fmt.Errorf("node group %s has no offering %s", ng.Name, off)
	}
	delay := time.Duration(0)
	if d := ng.Spec.Provider.KWOK.LaunchDelay; d != nil {
		delay = d.Duration
	}
	if ng.UID == "" {
		// Without the owner mark berth could never delete the node again.
		return nil, fmt.Errorf("node group %s has no UID (not read from the API server)", ng.Name)
	}
	done, err := p.sizes.admit(ctx, p.client, ng, req.Replaces)
	if err != nil {
		return nil, err
	}
	defer done("") // a create that failed (once done, a no-op)
	node.Annotations[v1alpha1.AnnotationKWOKNode] = v1alpha1.AnnotationKWOKNodeValue
	node.Annotations[v1alpha1.AnnotationReadyAt] = p.clock.Now().Add(delay).UTC().Format(time.RFC3339Nano)
	node.Spec.ProviderID = v1alpha1.ProviderIDPrefixKWOK + name
	if req.StandbyFor != "" {
		node.Labels[v1alpha1.TaintStandby] = "true"
		node.Annotations[v1alpha1.AnnotationStandbyFor] = req.StandbyFor
		node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: v1alpha1.TaintStandby, Value: "true", Effect: corev1.TaintEffectNoSchedule})
	}
	// Register NotReady, as a kubelet does while the machine boots. A node
	// without any condition would lose the not-ready taint the API server
	// adds at creation (the node lifecycle controller derives taints from
	// conditions), and pods would be bound to it before it is Ready.
	node.Status.Conditions = []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady",
		Message: "machine is booting", LastHeartbeatTime: metav1.NewTime(p.clock.Now()), LastTransitionTime: metav1.NewTime(p.clock.Now()),
	}}
	if err := p.client.Create(ctx, node); err != nil {
		return nil, fmt.Errorf("creating node %s: %w", name, err)
	}
	done(name) // counted as created from now, not as on its way
	if err := p.publishSlices(ctx, ng, off, node); err != nil {
		return nil, err
	}
	return instance(node), nil
}

// publishSlices creates the ResourceSlices of the node's instance type, as
// the DRA drivers on a real machine of the type would, owned by the Node
// so that the garbage collector deletes them with it. The real scheduler
// then allocates devices on them.
func (p *Provider) publishSlices(ctx context.Context, ng *v1alpha1.NodeGroup, off cloudprovider.Offering, node *corev1.Node) error {
	it, _ := ng.FindOffering(off.InstanceType, off.Zone, off.CapacityType)
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}
	for _, sl := range it.ResourceSlices(node.Name) {
		sl.OwnerReferences = []metav1.OwnerReference{owner}
		if err := p.client.Create(ctx, sl); err != nil {
			return fmt.Errorf("publishing resourceslice %s of node %s: %w", sl.Name, node.Name, err)
		}
	}
	return nil
}

// Delete removes the node, only a KWOK node (its provider ID kwok://):
// a Node of a real machine (a group whose provider was another) is
// refused, not deleted while its machine runs. The deletion is
// conditioned on the UID read, so a Node made again under the name in
// between is not the one deleted.
func (p *Provider) Delete(ctx context.Context, nodeName string) error {
	reader := p.reader
	if reader == nil {
		reader = p.client
	}
	node := &corev1.Node{}
	err := reader.Get(ctx, client.ObjectKey{Name: nodeName}, node)
	if apierrors.IsNotFound(err) {
		return &cloudprovider.NotFoundError{Name: nodeName}
	}
	if err != nil {
		return fmt.Errorf("reading node %s: %w", nodeName, err)
	}
	if !strings.HasPrefix(node.Spec.ProviderID, v1alpha1.ProviderIDPrefixKWOK) {
		return fmt.Errorf("node %s is not a KWOK node (provider ID %q): the kwok provider deletes only the nodes it made", nodeName, node.Spec.ProviderID)
	}
	err = p.client.Delete(ctx, node, client.Preconditions{UID: &node.UID})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return &cloudprovider.NotFoundError{Name: nodeName}
	}
	if err != nil {
		return fmt.Errorf("deleting node %s: %w", nodeName, err)
	}
	return nil
}

// Get returns the instance behind a KWOK node.
func (p *Provider) Get(ctx context.Context, nodeName string) (*cloudprovider.Instance, error) {
	node := &corev1.Node{}
	err := p.client.Get(ctx, client.ObjectKey{Name: nodeName}, node)
	if apierrors.IsNotFound(err) || (err == nil && !strings.HasPrefix(node.Spec.ProviderID, v1alpha1.ProviderIDPrefixKWOK)) {
		return nil, &cloudprovider.NotFoundError{Name: nodeName}
	}
	if err != nil {
		return nil, fmt.Errorf("reading node %s: %w", nodeName, err)
	}
	return instance(node), nil
}

// List returns the KWOK instances of a node group.
func (p *Provider) List(ctx context.Context, nodeGroup string) ([]*cloudprovider.Instance, error) {
	nodes := &corev1.NodeList{}
	if err := p.client.List(ctx, nodes, client.MatchingLabels{v1alpha1.LabelNodeGroup: nodeGroup}); err != nil {
		return nil, fmt.Errorf("listing nodes of %s: %w", nodeGroup, err)
	}
	var out []*cloudprovider.Instance
	for i := range nodes.Items {
		if strings.HasPrefix(nodes.Items[i].Spec.ProviderID, v1alpha1.ProviderIDPrefixKWOK) {
			out = append(out, instance(&nodes.Items[i]))
		}
	}
	return out, nil
}

func instance(n *corev1.Node) *cloudprovider.Instance {
	return &cloudprovider.Instance{
		NodeName:   n.Name,
		ProviderID: n.Spec.ProviderID,
		NodeGroup:  n.Labels[v1alpha1.LabelNodeGroup],
		Offering: cloudprovider.Offering{
			InstanceType: n.Labels[v1alpha1.LabelInstanceType],
			Zone:         n.Labels[v1alpha1.LabelZone],
			CapacityType: v1alpha1.CapacityType(n.Labels[v1alpha1.LabelCapacityType]),
		},
		CreatedAt: n.CreationTimestamp.Time,
	}
}

// randomSuffix returns 5 lowercase letters and digits, as generated names
// of Kubernetes objects have.
func randomSuffix() string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// Interrupt gives a node of a KWOK group an interruption notice, as a
// cloud's termination handler would: the berth.dev/interruption taint and
// the deadline (now + in). `berth dev interrupt` calls it, so that the
// demo and tests show interruptions.
func (p *Provider) Interrupt(ctx context.Context, nodeName string, in time.Duration) (time.Time, error) {
	node := &corev1.Node{}
	if err := p.client.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil {
		return time.Time{}, fmt.Errorf("reading node %s: %w", nodeName, err)
	}
	if node.Annotations[v1alpha1.AnnotationKWOKNode] != v1alpha1.AnnotationKWOKNodeValue {
		return time.Time{}, fmt.Errorf("node %s is not a KWOK node: only the cloud can interrupt it", nodeName)
	}
	deadline := p.clock.Now().Add(in).UTC().Truncate(time.Second)
	patch := client.MergeFrom(node.DeepCopy())
	has := false
	for _, t := range node.Spec.Taints {
		has = has || t.Key == v1alpha1.TaintInterruption
	}
	if !has {
		node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: v1alpha1.TaintInterruption, Value: "spot-interruption", Effect: corev1.TaintEffectNoSchedule})
	}
	node.Annotations[v1alpha1.AnnotationInterruptionDeadline] = deadline.Format(time.RFC3339)
	if err := p.client.Patch(ctx, node, patch); err != nil {
		return time.Time{}, fmt.Errorf("giving node %s an interruption notice: %w", nodeName, err)
	}
	return deadline, nil
}
