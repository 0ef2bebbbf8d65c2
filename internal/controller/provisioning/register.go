package provisioning

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/clusterread"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/podutil"
)

// +kubebuilder:rbac:groups="",resources=pods;nodes;namespaces;persistentvolumeclaims;persistentvolumes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=create;delete
// +kubebuilder:rbac:groups="",resources=pods/status,verbs=patch
// +kubebuilder:rbac:groups=apps,resources=daemonsets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=limitranges,verbs=get;list;watch
// +kubebuilder:rbac:groups=node.k8s.io,resources=runtimeclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=resource.k8s.io,resources=deviceclasses;resourceclaims;resourceclaimtemplates;resourceslices,verbs=get;list;watch
// +kubebuilder:rbac:groups=resource.k8s.io,resources=resourceslices,verbs=create
// +kubebuilder:rbac:groups=scheduling.k8s.io,resources=podgroups;workloads,verbs=get;list;watch
// +kubebuilder:rbac:groups=berth.dev,resources=nodegroups,verbs=get;list;watch
// +kubebuilder:rbac:groups=berth.dev,resources=headrooms,verbs=get;list;watch
// +kubebuilder:rbac:groups=autoscaling.x-k8s.io,resources=capacitybuffers,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=podtemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Register adds the provisioner to the manager. It runs on the elected
// leader only; new pending pods, added or deleted nodes and node group
// changes trigger rounds.
func (p *Provisioner) Register(mgr manager.Manager) error {
	p.informers = mgr.GetCache() // rounds read pods and nodes from its stores
	pods := toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) { p.triggerIfPending(o) },
		UpdateFunc: func(old, o any) {
			op, ok1 := old.(*corev1.Pod)
			np, ok2 := o.(*corev1.Pod)
			if !ok1 || !ok2 {
				return
			}
			p.onPodUpdate(op, np)
			// A pod bound without waiting may have taken headroom.
			if op.Spec.NodeName == "" && np.Spec.NodeName != "" {
				p.Trigger()
			}
			p.triggerIfPending(o)
		},
		// A pod gone frees capacity (headroom may be back).
		DeleteFunc: func(any) { p.Trigger() },
	}
	// The pod events trigger rounds after the index has the pod.
	changes, err := clusterread.WatchPods(context.Background(), p.informers, pods)
	if err != nil {
		return err
	}
	p.podChanges = changes
	handlers := []struct {
		obj client.Object
		h   toolscache.ResourceEventHandlerFuncs
	}{
		{&corev1.Node{}, toolscache.ResourceEventHandlerFuncs{
			AddFunc: func(any) { p.Trigger() },
			// A node turning schedulable starts the grace of the pods
			// berth nominated to it.
			UpdateFunc: func(old, o any) {
				on, ok1 := old.(*corev1.Node)
				nn, ok2 := o.(*corev1.Node)
				if ok1 && ok2 && !nodeutil.Schedulable(on) && nodeutil.Schedulable(nn) {
					p.Trigger()
				}
			},
			DeleteFunc: func(any) { p.Trigger() },
		}},
		{&v1alpha1.Headroom{}, toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { p.Trigger() },
			UpdateFunc: func(any, any) { p.Trigger() },
			DeleteFunc: func(any) { p.Trigger() },
		}},
		{&v1alpha1.NodeGroup{}, toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { p.Trigger() },
			UpdateFunc: func(any, any) { p.Trigger() },
			DeleteFunc: func(any) { p.Trigger() },
		}},
	}
	if changes == nil { // no store to index from: the pod events trigger on their own
		handlers = append(handlers, struct {
			obj client.Object
			h   toolscache.ResourceEventHandlerFuncs
		}{&corev1.Pod{}, pods})
	}
	for _, h := range handlers {
		// The cache has not started yet: getting an informer does not
		// block, and the informer runs with the manager.
		inf, err := mgr.GetCache().GetInformer(context.Background(), h.obj)
		if err != nil {
			return fmt.Errorf("getting informer for %T: %w", h.obj, err)
		}
		if _, err := inf.AddEventHandler(h.h); err != nil {
			return fmt.Errorf("watching %T: %w", h.obj, err)
		}
	}
	return mgr.Add(p)
}

func (p *Provisioner) triggerIfPending(o any) {
	if pod, ok := o.(*corev1.Pod); ok && podutil.IsProvisionable(pod) {
		p.Trigger()
	}
}

// NeedLeaderElection returns true: only the leader launches nodes.
func (p *Provisioner) NeedLeaderElection() bool { return true }
