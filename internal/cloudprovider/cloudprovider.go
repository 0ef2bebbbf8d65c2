// Package cloudprovider is the interface between berth and whatever
// creates machines. Every method takes a context first and returns typed
// errors that callers test with the Is... helpers.
package cloudprovider

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// Offering identifies how a node is bought.
type Offering struct {
	InstanceType string
	Zone         string
	CapacityType v1alpha1.CapacityType
}

// OfferingOf is the offering a node group's offering key names (the key
// the planners plan with and status records).
func OfferingOf(k v1alpha1.OfferingKey) Offering {
	return Offering{InstanceType: k.InstanceType, Zone: k.Zone, CapacityType: v1alpha1.CapacityType(k.CapacityType)}
}

func (o Offering) String() string {
	return fmt.Sprintf("%s/%s/%s", o.InstanceType, o.Zone, o.CapacityType)
}

// CreateRequest asks for one node of a node group.
type CreateRequest struct {
	NodeGroup *v1alpha1.NodeGroup
	Offering  Offering
	// StandbyFor, when set, launches a standby node for the named
	// Headroom: it registers with the berth.dev/standby taint and label
	// (no pod lands on it) and the berth.dev/standby-for annotation, to be
	// suspended once Ready. Only a Suspender is asked for one.
	StandbyFor string
	// Replaces names the nodes this launch replaces, which berth drains
	// and removes once it is Ready: the scale-down planner counted the
	// group without them, and so does the maxSize check, unless the group
	// would then pass maxSize by more than one node.
	Replaces []string
}

// Instance is a machine the provider created, and the node it registers.
type Instance struct {
	NodeName   string
	ProviderID string
	NodeGroup  string
	Offering   Offering
	CreatedAt  time.Time
	// GivenUp is set by PendingLister.Pending on an instance that will not
	// get a Node (no infrastructure within its timeout): it is no longer a
	// launching node, and the next launch reports the failure.
	GivenUp bool
	// NotLaunched is set by Get on an instance of the group's
	// infrastructure that berth did not launch (a Cluster API Machine a
	// rollout, a hand-raised replica count or a remediation made): its
	// node is the group's, but a failed boot of it is not berth's launch
	// to time out.
	NotLaunched bool
}

// CloudProvider creates and deletes nodes of node groups.
type CloudProvider interface {
	// Name identifies the provider (e.g. "kwok").
	Name() string
	// Create launches one node. It returns an InsufficientCapacityError when
	// the offering cannot be bought right now, and a MaxSizeError, having
	// launched nothing, when the group already has maxSize nodes, counting
	// launches of every caller in the process that a cache may not show
	// yet: the provisioner and the standby tier launch into the same
	// groups, each from its own view, and together must not pass the limit.
	Create(ctx context.Context, req CreateRequest) (*Instance, error)
	// Delete removes the node with the given name. NotFoundError if it is
	// already gone.
	Delete(ctx context.Context, nodeName string) error
	// Get returns the instance behind a node. NotFoundError if none.
	Get(ctx context.Context, nodeName string) (*Instance, error)
	// List returns the instances of a node group.
	List(ctx context.Context, nodeGroup string) ([]*Instance, error)
}

// InsufficientCapacityError means an offering cannot be launched now; the
// caller should try another one.
type InsufficientCapacityError struct {
	Offering Offering
	Message  string
}

func (e *InsufficientCapacityError) Error() string {
	return fmt.Sprintf("insufficient capacity for %s: %s", e.Offering, e.Message)
}

// NotFoundError means the instance or node does not exist.
type NotFoundError struct{ Name string }

func (e *NotFoundError) Error() string { return fmt.Sprintf("instance %q not found", e.Name) }

// IsInsufficientCapacity reports whether err is (or wraps) an
// InsufficientCapacityError.
func IsInsufficientCapacity(err error) bool {
	var e *InsufficientCapacityError
	return errors.As(err, &e)
}

// MaxSizeError means a launch was refused because the node group already
// has maxSize nodes (or launches on their way to being nodes). It is not
// the offering's fault: the caller plans again once its view shows the
// nodes.
type MaxSizeError struct {
	NodeGroup string
	MaxSize   int32
	// Nodes is how many the group has, launches in flight counted.
	Nodes int32
}

func (e *MaxSizeError) Error() string {
	return fmt.Sprintf("node group %s has %d nodes (launches in flight counted), its maxSize is %d: not launching another", e.NodeGroup, e.Nodes, e.MaxSize)
}

// IsMaxSize reports whether err is (or wraps) a MaxSizeError.
func IsMaxSize(err error) bool {
	var e *MaxSizeError
	return errors.As(err, &e)
}

// IsNotFound reports whether err is (or wraps) a NotFoundError.
func IsNotFound(err error) bool {
	var e *NotFoundError
	return errors.As(err, &e)
}

// ErrNotEnabled is wrapped by the error of an action on a group whose
// provider this controller does not run (a Cluster API group without
// --clusterapi): nothing of that group can be seen or changed.
var ErrNotEnabled = errors.New("the node group's provider is not enabled")

// NodeGroupRefresher is implemented by providers that learn part of a node
// group's shape from the infrastructure (Cluster API reads size bounds and
// scale-from-zero capacity from annotations on its objects).
type NodeGroupRefresher interface {
	// RefreshNodeGroup updates ng, a copy the caller plans with, from what
	// the provider knows. An error leaves ng as the spec says.
	RefreshNodeGroup(ctx context.Context, ng *v1alpha1.NodeGroup) error
}

// Refresh lets the provider, if it is a NodeGroupRefresher, update each
// group (copies read from a cache) before planning. It returns the groups
// it could not refresh with why, so the caller can report them; those
// groups keep their spec.
func Refresh(ctx context.Context, cp CloudProvider, groups []*v1alpha1.NodeGroup) map[string]error {
	r, ok := cp.(NodeGroupRefresher)
	if !ok {
		return nil
	}
	var failed map[string]error
	for _, ng := range groups {
		before := ng.DeepCopy()
		ng.PinLaunchHash() // the nodes were hashed from the stored spec
		if err := r.RefreshNodeGroup(ctx, ng); err != nil {
			*ng = *before
			if failed == nil {
				failed = map[string]error{}
			}
			failed[ng.Name] = err
		}
	}
	return failed
}

// PendingLister is implemented by providers whose launches take a while to
// show as a Node (a Cluster API Machine registers its Node when its
// machine has booted, minutes later). The provisioner counts the pending
// instances as launching nodes in every round, so that a slow boot is
// never launched again.
type PendingLister interface {
	// Pending returns the group's instances that have no Node yet, named
	// by NodeName; those not expected to get one any more are GivenUp.
	Pending(ctx context.Context, ng *v1alpha1.NodeGroup) ([]*Instance, error)
}

// UnadoptedLister is implemented by providers whose machines register
// their Node after a launch (a Cluster API Machine): a group deleted with
// deletionPolicy Drain waits for the nodes of the machines berth
// launched for it, to drain and remove them too.
type UnadoptedLister interface {
	// Unadopted names the group's live machines that berth launched for
	// it (before its deletion, if it is being deleted) and whose Node does
	// not carry the group's owner mark yet: those still booting, and those
	// whose Node is not adopted yet. A machine made more than maxWait ago,
	// or given up, is not named. Nothing is named while a group not being
	// deleted scales the same machines.
	Unadopted(ctx context.Context, ng *v1alpha1.NodeGroup, maxWait time.Duration) ([]string, error)
}

// Pending asks the provider, if it is a PendingLister, for each group's
// pending instances. Groups it could not ask are returned with why.
func Pending(ctx context.Context, cp CloudProvider, groups []*v1alpha1.NodeGroup) (map[string][]*Instance, map[string]error) {
	l, ok := cp.(PendingLister)
	if !ok {
		return nil, nil
	}
	out, failed := map[string][]*Instance{}, map[string]error{}
	for _, ng := range groups {
		insts, err := l.Pending(ctx, ng)
		if err != nil {
			failed[ng.Name] = err
			continue
		}
		if len(insts) > 0 {
			out[ng.Name] = insts
		}
	}
	return out, failed
}

// Suspender is implemented by providers that can suspend a machine and
// resume it later (the standby tier): a suspended machine keeps its disk
// and identity, costs its offering's stopped price, and turns Ready again
// faster than a new launch once resumed.
type Suspender interface {
	// Suspend stops the machine of a Ready standby node. Its Node stays,
	// NotReady, with the berth.dev/suspended-at annotation.
	Suspend(ctx context.Context, nodeName string) error
	// Resume starts the machine of a suspended standby node and makes it an
	// ordinary node of its group: the standby taint, label and annotations
	// go, berth.dev/resumed-at is set (the planner counts the node as
	// booting from then), and the node turns Ready after the group's
	// resume delay.
	Resume(ctx context.Context, nodeName string) error
}

// SuspendCapable is implemented by providers that route to others (one
// per node group) and so can suspend the machines of some groups only.
type SuspendCapable interface {
	CanSuspend(ng *v1alpha1.NodeGroup) bool
}

// CanSuspend reports whether cp can suspend machines of the group.
func CanSuspend(cp CloudProvider, ng *v1alpha1.NodeGroup) bool {
	if c, ok := cp.(SuspendCapable); ok {
		return c.CanSuspend(ng)
	}
	_, ok := cp.(Suspender)
	return ok
}

// RemovalCanceler is implemented by providers whose removal of a node
// takes steps that can be undone until the last one (Cluster API: mark
// the Machine, then lower the replicas). berth cancels a removal it gave
// up, and every round the removals the provider still holds that berth no
// longer drains, so that no mark outlives its drain and later removes a
// node that was never simulated.
type RemovalCanceler interface {
	// CancelRemoval undoes what Delete did so far for the node; nothing
	// when Delete did nothing. A RemovalCommittedError when it cannot be
	// undone any more: the node goes whatever berth does.
	CancelRemoval(ctx context.Context, nodeName string) error
	// Removing names the nodes of the group whose removal berth asked the
	// provider for, that the provider has not started deleting.
	Removing(ctx context.Context, ng *v1alpha1.NodeGroup) ([]string, error)
}

// RemovalCommittedError means a removal went too far to be undone.
type RemovalCommittedError struct {
	Name    string
	Message string
}

func (e *RemovalCommittedError) Error() string {
	return fmt.Sprintf("the removal of %s cannot be undone: %s", e.Name, e.Message)
}

// IsRemovalCommitted reports whether err is (or wraps) a
// RemovalCommittedError.
func IsRemovalCommitted(err error) bool {
	var e *RemovalCommittedError
	return errors.As(err, &e)
}

// RemovalWaitingError means the provider cannot remove the node yet but
// will once something of its own settles (a Cluster API MachineSet still
// making a Machine its replicas ask for): a drained node waits for it
// rather than being given up at the drain timeout.
type RemovalWaitingError struct{ Message string }

func (e *RemovalWaitingError) Error() string { return e.Message }

// IsRemovalWaiting reports whether err is (or wraps) a
// RemovalWaitingError.
func IsRemovalWaiting(err error) bool {
	var e *RemovalWaitingError
	return errors.As(err, &e)
}

// Interruption is a notice that the cloud takes a node back.
type Interruption struct {
	NodeName string
	// Deadline is when the node goes.
	Deadline time.Time
	Message  string
}

// InterruptionLister is implemented by providers that learn of
// interruptions themselves (a cloud's event queue) rather than through a
// termination handler's taint. berth writes each notice on the node as
// the berth.dev/interruption taint and deadline annotation, so that every
// interruption, whatever its source, takes the one disruption path.
type InterruptionLister interface {
	Interruptions(ctx context.Context, ng *v1alpha1.NodeGroup) ([]Interruption, error)
}

// IsTransient reports whether err is a failure of the API call, not of
// the offering: a conflict, a timeout, throttling or a server error from
// the API server the provider talks to. Such a launch is retried at once
// rather than its offering avoided.
func IsTransient(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsUnexpectedServerError(err)
}
