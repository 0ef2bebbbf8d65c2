// Package cloudprovider is the interface between berth and whatever
// creates machines. Every method takes a context first and returns typed
// errors that callers test with the Is... helpers.
package cloudprovider

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// Offering identifies how a node is bought.
type Offering struct {
	InstanceType string
	Zone         string
	CapacityType v1alpha1.CapacityType
}

func (o Offering) String() string {
	return fmt.Sprintf("%s/%s/%s", o.InstanceType, o.Zone, o.CapacityType)
}

// CreateRequest asks for one node of a node group.
type CreateRequest struct {
	NodeGroup *v1alpha1.NodeGroup
	Offering  Offering
}

// Instance is a machine the provider created, and the node it registers.
type Instance struct {
	NodeName   string
	ProviderID string
	NodeGroup  string
	Offering   Offering
	CreatedAt  time.Time
}

// CloudProvider creates and deletes nodes of node groups.
type CloudProvider interface {
	// Name identifies the provider (e.g. "kwok").
	Name() string
	// Create launches one node. It returns an InsufficientCapacityError when
	// the offering cannot be bought right now.
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

// IsNotFound reports whether err is (or wraps) a NotFoundError.
func IsNotFound(err error) bool {
	var e *NotFoundError
	return errors.As(err, &e)
}
