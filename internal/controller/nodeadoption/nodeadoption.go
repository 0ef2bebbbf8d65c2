// Package nodeadoption labels the nodes of Cluster API machines as nodes of
// the NodeGroup that scales their MachineDeployment, MachineSet or
// MachinePool. A KWOK node gets berth's labels and owner mark when berth
// creates it; a Cluster API machine's node is created by its kubelet, so
// berth adds them when the node registers. From then on the planner,
// NodeGroup status, scale-down and the launch timeout treat it like any
// node berth launched.
//
// It adopts a node only when the management cluster shows a Machine of the
// group's object with the node's provider ID, and it never changes a label
// the node already has (a cloud's zone or instance type stays).
package nodeadoption

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	clientretry "k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/nodeutil"
)

// Name is the controller's name.
const Name = "nodeadoption"

// ReasonAdopted is the event reason on an adopted node.
const ReasonAdopted = "Adopted"

// AnnotationMachine is the annotation Cluster API writes on a node naming
// its Machine; a node with it but no matching Machine yet is looked at
// again shortly (the Machine's provider ID may lag).
const AnnotationMachine = "cluster.x-k8s.io/machine"

// retry is how soon a young Cluster API node that matched no Machine is
// looked at again, for at most retryFor after it registered.
const (
	retry    = 10 * time.Second
	retryFor = 5 * time.Minute
)

// Adopter finds the node group whose machines include a node.
type Adopter interface {
	Adopt(ctx context.Context, node *corev1.Node) (*v1alpha1.NodeGroup, error)
}

// Reconciler labels the nodes of clusterAPI node groups.
type Reconciler struct {
	Client   client.Client
	Adopter  Adopter
	Recorder events.EventRecorder
	// Clock (nil: the real clock).
	Clock clock.PassiveClock
}

// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=berth.dev,resources=nodegroups,verbs=get;list;watch
// The Cluster API provider's rights, for a management cluster that is the
// cluster berth runs in (grant the same in a separate management cluster):
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinedeployments;machinesets;machinepools,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinedeployments/scale;machinesets/scale;machinepools/scale,verbs=get;update
// The infrastructure machine templates' status (scale from zero), of the
// infrastructure providers of kubernetes-sigs and the CNCF's landscape
// (grant get on another provider's templates the same way):
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=awsmachinetemplates;azuremachinetemplates;gcpmachinetemplates;vspheremachinetemplates;openstackmachinetemplates;dockermachinetemplates;devmachinetemplates;hcloudmachinetemplates;metal3machinetemplates;nutanixmachinetemplates;kubevirtmachinetemplates;ibmpowervsmachinetemplates;ibmvpcmachinetemplates;oscmachinetemplates;cloudstackmachinetemplates;proxmoxmachinetemplates;linodemachinetemplates,verbs=get

// Register adds the controller to the manager.
func (r *Reconciler) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named(Name).For(&corev1.Node{}).Complete(r)
}

// Reconcile adopts one node. The node is read again and the labels
// patched again when the node changed since it was read (a kubelet
// heartbeat, say): the patch is guarded by the node's resourceVersion.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var res reconcile.Result
	err := clientretry.RetryOnConflict(clientretry.DefaultRetry, func() error {
		var err error
		res, err = r.adopt(ctx, req)
		return err
	})
	return res, err
}

func (r *Reconciler) adopt(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := r.Client.Get(ctx, req.NamespacedName, node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if node.DeletionTimestamp != nil || node.Spec.ProviderID == "" || node.Labels[v1alpha1.LabelNodeGroup] != "" {
		return reconcile.Result{}, nil
	}
	ng, err := r.Adopter.Adopt(ctx, node)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("finding the machine of node %s: %w", node.Name, err)
	}
	if ng == nil {
		// A new node of a Cluster API Machine may be seen before its
		// Machine's provider ID: look again for a while, not forever (nodes
		// of objects no NodeGroup scales, control plane nodes, stay so).
		if _, capi := node.Annotations[AnnotationMachine]; capi && time.Since(node.CreationTimestamp.Time) < retryFor {
			return reconcile.Result{RequeueAfter: retry}, nil
		}
		return reconcile.Result{}, nil
	}
	patch := client.MergeFromWithOptions(node.DeepCopy(), client.MergeFromWithOptimisticLock{})
	labels := Labels(ng)
	// A deprecated label the node lacks takes the value of the GA label
	// it has (what the cloud says it is), not the group's offering's.
	for beta, ga := range betaLabels {
		if v, ok := node.Labels[ga]; ok {
			labels[beta] = v
		}
	}
	for k, v := range labels {
		if _, ok := node.Labels[k]; !ok {
			if node.Labels == nil {
				node.Labels = map[string]string{}
			}
			node.Labels[k] = v
		}
	}
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	node.Annotations[v1alpha1.AnnotationLaunchedBy] = string(ng.UID)
	node.Annotations[v1alpha1.AnnotationAdoptedAt] = r.now().UTC().Format(time.RFC3339)
	node.Annotations[v1alpha1.AnnotationLaunchHash] = ng.LaunchHash()
	if nodeutil.Ready(node) {
		// Ready now: its launch is over, whatever happens to it later.
		node.Labels[v1alpha1.LabelInitialized] = "true"
	}
	if err := r.Client.Patch(ctx, node, patch); err != nil {
		if apierrors.IsConflict(err) {
			return reconcile.Result{}, err // RetryOnConflict reads it again
		}
		return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("labelling node %s as a node of %s: %w", node.Name, ng.Name, err))
	}
	log.FromContext(ctx).Info("adopted Cluster API node", "node", node.Name, "nodeGroup", ng.Name)
	r.Recorder.Eventf(node, nil, corev1.EventTypeNormal, ReasonAdopted, "Adopt",
		"Node of a Machine of node group %s's Cluster API object: labelled as a node of the group", ng.Name)
	return reconcile.Result{}, nil
}

// betaLabels are the deprecated labels of NodeLabels and their GA names.
var betaLabels = map[string]string{v1alpha1.LabelZoneBeta: v1alpha1.LabelZone, v1alpha1.LabelInstanceTypeBeta: v1alpha1.LabelInstanceType,
	v1alpha1.LabelOSBeta: v1alpha1.LabelOS, v1alpha1.LabelArchBeta: v1alpha1.LabelArch}

// Labels are the labels an adopted node gets (unless it has them): those
// berth gives every node of the group, for its one offering.
func Labels(ng *v1alpha1.NodeGroup) map[string]string {
	if len(ng.Spec.InstanceTypes) == 0 || len(ng.Spec.InstanceTypes[0].Offerings) == 0 {
		return map[string]string{v1alpha1.LabelNodeGroup: ng.Name}
	}
	it := &ng.Spec.InstanceTypes[0]
	return ng.NodeLabels(it, &it.Offerings[0])
}

func (r *Reconciler) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}
