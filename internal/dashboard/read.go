package dashboard

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// ListTimeout bounds each list of Read: a cache's list waits for its
// informer to sync, which one the API server refuses (a right the user
// lacks) never does.
var ListTimeout = 10 * time.Second

// Read reads the cluster. A list that fails (an API the cluster does not
// serve, a right the user lacks) or takes longer than ListTimeout is left
// empty and named in problems, so the rest of the page still shows.
func Read(ctx context.Context, c client.Reader, now time.Time) (Input, []string) {
	in := Input{Now: now}
	ngs := &v1alpha1.NodeGroupList{}
	nodes := &corev1.NodeList{}
	pods := &corev1.PodList{}
	hrs := &v1alpha1.HeadroomList{}
	evs := &eventsv1.EventList{}
	var problems []string
	for _, l := range []struct {
		what string
		list client.ObjectList
	}{{"node groups", ngs}, {"nodes", nodes}, {"pods", pods}, {"headrooms", hrs}, {"events", evs}} {
		// Read only: a cache's objects are not copied (every pod's spec on
		// a large cluster, each refresh).
		lctx, cancel := context.WithTimeout(ctx, ListTimeout)
		err := c.List(lctx, l.list, client.UnsafeDisableDeepCopy)
		cancel()
		if err != nil {
			problems = append(problems, fmt.Sprintf("listing %s: %v", l.what, err))
		}
	}
	in.NodeGroups, in.Nodes, in.Pods, in.Headrooms, in.Events = ngs.Items, nodes.Items, pods.Items, hrs.Items, evs.Items
	return in, problems
}
