package kwok

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
)

// launchedTTL is how long a node this provider created and a cached list
// has not shown yet is counted in its group: far longer than a cache
// lags, short enough that a node deleted before the cache saw it is not
// counted for long.
const launchedTTL = 2 * time.Minute

// sizes is the maxSize gate of Create. The launchers of one process (the
// provisioner's workers, the standby controller) each plan from their own
// view of a group; every Create counts, under one lock, the group's nodes
// (the client's list, which may be a cache), the nodes this provider
// created that the list does not show yet, and the creates still on
// their way, and refuses at maxSize before it creates anything.
type sizes struct {
	mu     sync.Mutex
	clock  clock.PassiveClock
	groups map[string]*groupLaunches
}

// groupLaunches are a group's creates not yet in a list.
type groupLaunches struct {
	// creating counts creates admitted and not yet returned.
	creating int32
	// created are nodes created, by name, with when.
	created map[string]time.Time
}

func newSizes(c clock.PassiveClock) *sizes {
	return &sizes{clock: c, groups: map[string]*groupLaunches{}}
}

// admit lists the group's nodes and, below maxSize, admits one create:
// the caller then calls done once, with the created node's name as soon
// as it exists, or "" when the create failed. At maxSize it returns a
// MaxSizeError. Nodes named in replaces are not counted (a replacement
// launched before the nodes it replaces leave, which the scale-down
// planner counted as gone) unless the group would then have more than
// maxSize+1 nodes. The list is read under the lock: lists taken
// in lock order never show less of a cache than an earlier one, so a
// node forgotten from created because a list showed it is in every later
// list.
func (s *sizes) admit(ctx context.Context, c client.Reader, ng *v1alpha1.NodeGroup, replaces []string) (done func(name string), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := &corev1.NodeList{}
	// Read only (names and deletion marks): no copy of a cache's nodes.
	if err := c.List(ctx, list, client.MatchingLabels{v1alpha1.LabelNodeGroup: ng.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing the nodes of node group %s: %w", ng.Name, err)
	}
	g := s.groups[ng.Name]
	if g == nil {
		g = &groupLaunches{created: map[string]time.Time{}}
		s.groups[ng.Name] = g
	}
	nodes, replaced := int32(0), int32(0)
	for i := range list.Items {
		n := &list.Items[i]
		delete(g.created, n.Name) // the list shows it: counted below
		switch {
		case n.DeletionTimestamp != nil:
		case slices.Contains(replaces, n.Name):
			replaced++
		default:
			nodes++
		}
	}
	for name, at := range g.created {
		if s.clock.Since(at) > launchedTTL {
			delete(g.created, name)
		}
	}
	nodes += int32(len(g.created)) + g.creating
	// A replacement may pass maxSize by one while the nodes it replaces
	// leave, not more: a group already past it (a replacement given up
	// kept its node) takes no other.
	if nodes >= ng.Spec.MaxSize || nodes+replaced > ng.Spec.MaxSize {
		return nil, &cloudprovider.MaxSizeError{NodeGroup: ng.Name, MaxSize: ng.Spec.MaxSize, Nodes: nodes + replaced}
	}
	g.creating++
	var once sync.Once
	return func(name string) {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			g.creating--
			if name != "" {
				g.created[name] = s.clock.Now()
			}
		})
	}, nil
}
