// Package standby keeps the standby tier of Headrooms (spec.standby):
// nodes berth launches for a Headroom's standby units and suspends once
// they are Ready, so that they cost their stopped price until the
// provisioner resumes one instead of launching a new node. It launches
// what is missing, suspends what booted, deletes what is surplus (only
// suspended nodes it launched, that run no pod but DaemonSets'), and
// publishes each Headroom's account for its status.
package standby

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cbv1beta1 "github.com/berth-dev/berth/api/capacitybuffer/v1beta1"
	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/cloudprovider"
	"github.com/berth-dev/berth/internal/clusterread"
	hr "github.com/berth-dev/berth/internal/headroom"
	"github.com/berth-dev/berth/internal/nodeutil"
	"github.com/berth-dev/berth/internal/planner/lifecycle"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/simulator/daemonset"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
	"github.com/berth-dev/berth/internal/state"
)

// Name is the controller's name.
const Name = "standby"

// Bounds on what one reconcile of a Headroom does.
const (
	// maxLaunches is how many standby nodes one reconcile launches.
	maxLaunches = 10
	// resync looks again while nodes boot (to suspend them) and after a
	// change, so that a burst of changes settles within seconds.
	resync = 5 * time.Second
	// settled looks again at an owner whose standby nodes are all
	// suspended: a node group's change may have made them drifted, time
	// expired.
	settled = time.Minute
)

// Event reasons on the Headroom.
const (
	ReasonLaunched     = "StandbyLaunched"
	ReasonSuspended    = "StandbySuspended"
	ReasonRemoved      = "StandbyRemoved"
	ReasonLaunchFailed = "StandbyLaunchFailed"
	ReasonCannotKeep   = "StandbyNotKept"
	ReasonReleased     = "StandbyReleased"
)

// Reconciler keeps the standby nodes of Headrooms and standby
// CapacityBuffers.
type Reconciler struct {
	Client client.Client
	// APIReader reads pods fresh before a node is suspended or deleted.
	APIReader client.Reader
	Cloud     cloudprovider.CloudProvider
	Offerings *state.Offerings
	Standby   *state.Standby
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
	// Buffers: the CapacityBuffer CRD is installed (the controller
	// watches buffers and keeps those with the standby strategy).
	Buffers bool
	// Limits are the cluster-wide limits the provisioner plans within
	// (--max-nodes-total, --cluster-max-*): standby nodes stay within
	// them too.
	Limits scaleup.Limits
}

// +kubebuilder:rbac:groups=berth.dev,resources=headrooms;nodegroups,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;create;delete;patch
// +kubebuilder:rbac:groups="",resources=nodes/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=pods;podtemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=daemonsets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=limitranges,verbs=get;list;watch
// +kubebuilder:rbac:groups=node.k8s.io,resources=runtimeclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=autoscaling.x-k8s.io,resources=capacitybuffers,verbs=get;list;watch

// Register adds the controller: it reconciles a Headroom or a
// CapacityBuffer (when its CRD is installed) when it changes and when one
// of its standby nodes does (also after the owner is gone, to remove
// them).
func (r *Reconciler) Register(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).Named(Name).
		For(&v1alpha1.Headroom{}).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(ownerOf)).
		// A group being deleted or leaving a scope (its labels) sends its
		// standby nodes away.
		Watches(&v1alpha1.NodeGroup{}, handler.EnqueueRequestsFromMapFunc(r.ownersIn),
			builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{})))
	if r.Buffers {
		b = b.Watches(&cbv1beta1.CapacityBuffer{}, &handler.EnqueueRequestForObject{})
	}
	return b.Complete(r)
}

// standbyFor is the value of the berth.dev/standby-for annotation of an
// owner's standby nodes: a Headroom's name (its key has no namespace),
// or a CapacityBuffer's namespace/name.
func standbyFor(key types.NamespacedName) string {
	if key.Namespace == "" {
		return key.Name
	}
	return key.String()
}

// ownerOf maps a standby node to the owner it keeps units for (the
// inverse of standbyFor).
func ownerOf(_ context.Context, o client.Object) []reconcile.Request {
	v := o.GetAnnotations()[v1alpha1.AnnotationStandbyFor]
	if v == "" {
		return nil
	}
	key := types.NamespacedName{Name: v}
	if ns, name, ok := strings.Cut(v, "/"); ok {
		key = types.NamespacedName{Namespace: ns, Name: name}
	}
	return []reconcile.Request{{NamespacedName: key}}
}

// ownersIn maps a node group to the owners of its standby nodes (the
// cache's).
func (r *Reconciler) ownersIn(ctx context.Context, o client.Object) []reconcile.Request {
	list := &corev1.NodeList{}
	if err := r.Client.List(ctx, list, client.MatchingLabels{v1alpha1.TaintStandby: "true", v1alpha1.LabelNodeGroup: o.GetName()}); err != nil {
		log.FromContext(ctx).Error(err, "listing the standby nodes of a node group", "nodeGroup", o.GetName())
		return nil
	}
	seen := map[reconcile.Request]bool{}
	var out []reconcile.Request
	for i := range list.Items {
		for _, req := range ownerOf(ctx, &list.Items[i]) {
			if !seen[req] {
				seen[req] = true
				out = append(out, req)
			}
		}
	}
	return out
}

// describe names the owner as events say it: its kind and name.
func (o owner) describe() string {
	if o.key.Namespace != "" {
		return "CapacityBuffer " + o.key.String()
	}
	return "Headroom " + o.key.Name
}

// owner is what keeps standby units: a Headroom with spec.standby, or a
// CapacityBuffer with the standby strategy that was translated.
type owner struct {
	key   types.NamespacedName
	state state.Key
	// obj is the object events go to; nil when it is gone or keeps no
	// standby units any more.
	obj     client.Object
	desired int32
	shape   corev1.ResourceList
	// dss are the cluster's DaemonSets: a standby node holds the units
	// that fit beside the DaemonSet pods that run on it once resumed.
	dss []daemonset.Pod
	// fits says whether standby nodes of an offering may hold its units.
	scope func(all []*v1alpha1.NodeGroup) ([]*v1alpha1.NodeGroup, error)
	fits  func(g *v1alpha1.NodeGroup, it *v1alpha1.InstanceType, o *v1alpha1.Offering) bool
}

// unitsOn is how many of the owner's units a standby node holds.
func (o owner) unitsOn(n *corev1.Node) int32 { return hr.NodeUnits(n, o.dss, o.shape) }

// inScope says which node groups may keep the owner's standby units now:
// those in its scope that are not being deleted. On an error reading the
// scope every group is (nothing is removed for it; launch reports it).
func (o owner) inScope(groups map[string]*v1alpha1.NodeGroup) func(g *v1alpha1.NodeGroup) bool {
	if o.scope == nil {
		return func(*v1alpha1.NodeGroup) bool { return true }
	}
	scope, err := o.scope(sortedGroups(groups))
	if err != nil {
		return func(*v1alpha1.NodeGroup) bool { return true }
	}
	in := make(map[string]bool, len(scope))
	for _, g := range scope {
		in[g.Name] = true
	}
	return func(g *v1alpha1.NodeGroup) bool { return in[g.Name] && g.DeletionTimestamp == nil }
}

// sortedGroups lists the node groups by name.
func sortedGroups(groups map[string]*v1alpha1.NodeGroup) []*v1alpha1.NodeGroup {
	all := make([]*v1alpha1.NodeGroup, 0, len(groups))
	for _, g := range groups {
		all = append(all, g)
	}
	slices.SortFunc(all, func(a, b *v1alpha1.NodeGroup) int { return strings.Compare(a.Name, b.Name) })
	return all
}

// Reconcile brings one owner's standby nodes to the units it asks for.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	o, err := r.owner(ctx, req.NamespacedName)
	if err != nil {
		return reconcile.Result{}, err
	}
	groups, nodes, dss, err := r.read(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	o.dss = dss
	acct := count(standbyFor(o.key), groups, o.inScope(groups), nodes, o.unitsOn, r.Clock.Now())
	for _, n := range acct.removing {
		// Marked: no resume can take it any more.
		if err := r.Cloud.Delete(ctx, n.Name); err != nil && !cloudprovider.IsNotFound(err) {
			return reconcile.Result{}, fmt.Errorf("deleting standby node %s marked for removal: %w", n.Name, err)
		}
	}
	// A suspended node a pod was bound to is resumed, whatever else
	// becomes of the owner's nodes.
	acct.suspended, err = r.resumeBusy(ctx, acct.suspended, &acct)
	if err != nil {
		return reconcile.Result{}, err
	}
	if acct.stale, err = r.resumeBusy(ctx, acct.stale, nil); err != nil {
		return reconcile.Result{}, err
	}
	if o.obj == nil {
		// Gone, or no standby any more: every standby node of it goes, the
		// booting ones too, one per reconcile.
		r.Standby.Delete(o.state)
		orphans := append(append(slices.Clone(acct.suspended), acct.booting...), acct.stale...)
		requeue := time.Duration(0)
		if len(orphans) > 1 {
			requeue = resync
		}
		_, err := r.removeSurplus(ctx, false, orphans, 0, 0, o.unitsOn, fmt.Sprintf("%s is gone or keeps no standby units", o.describe()))
		return reconcile.Result{RequeueAfter: requeue}, err
	}
	if err := r.suspendBooted(ctx, &acct); err != nil {
		return reconcile.Result{}, err
	}
	staleRemoved := false
	if len(acct.stale) > 0 {
		if staleRemoved, err = r.removeSurplus(ctx, false, acct.stale, 0, 0, o.unitsOn,
			fmt.Sprintf("it no longer matches its node group (drifted, expired, or out of %s's scope); a new one replaces it", o.describe())); err != nil {
			return reconcile.Result{}, err
		}
	}
	st := v1alpha1.StandbyStatus{DesiredUnits: o.desired, Units: acct.units, Nodes: int32(len(acct.suspended)), Booting: int32(len(acct.booting)),
		CostPerHour: strconv.FormatFloat(costPerHour(acct, groups), 'f', 4, 64)}
	requeue := time.Duration(0)
	switch {
	case acct.units < o.desired:
		st.Message = r.launch(ctx, o, groups, nodes, o.desired-acct.units)
		requeue = resync
	case acct.units > o.desired:
		if _, err := r.removeSurplus(ctx, true, acct.suspended, acct.units, o.desired, o.unitsOn,
			fmt.Sprintf("%s keeps %d standby units without it", o.describe(), o.desired)); err != nil {
			return reconcile.Result{}, err
		}
		st.Message = fmt.Sprintf("%d units on %d suspended nodes and %d booting; keeping %d", acct.units, len(acct.suspended), len(acct.booting), o.desired)
		requeue = resync
	default:
		st.Message = fmt.Sprintf("%d units on %d suspended nodes and %d booting", acct.units, len(acct.suspended), len(acct.booting))
	}
	// Stale nodes that cannot go now (a pod runs on one) are looked at
	// again when settled, not every few seconds.
	if len(acct.booting) > 0 || len(acct.removing) > 0 || staleRemoved {
		requeue = resync
	}
	if requeue == 0 {
		requeue = settled
	}
	r.Standby.Set(o.state, st)
	return reconcile.Result{RequeueAfter: requeue}, nil
}

// owner reads the Headroom (a key without a namespace) or CapacityBuffer
// the request names.
func (r *Reconciler) owner(ctx context.Context, key types.NamespacedName) (owner, error) {
	if key.Namespace == "" {
		o := owner{key: key, state: state.HeadroomKey(key.Name)}
		h := &v1alpha1.Headroom{}
		if err := r.Client.Get(ctx, key, h); client.IgnoreNotFound(err) != nil {
			return o, err
		} else if err != nil || h.DeletionTimestamp != nil || h.Spec.Standby == nil {
			return o, nil
		}
		o.obj, o.desired, o.shape = h, wanted(h), hr.TargetShape(h)
		o.scope = func(all []*v1alpha1.NodeGroup) ([]*v1alpha1.NodeGroup, error) {
			scope, err := hr.ScopeGroups(h, all)
			return hr.GroupsOrAll(scope, all), err
		}
		return o, nil
	}
	return r.buffer(ctx, key)
}

// wanted is how many standby units the Headroom asks for: with a target,
// what the headroom controller resolved last (its status; after a spec
// edit, until it resolves the new generation, the last resolved count
// stays: falling back to spec.standby.count meanwhile would delete, then
// launch again, the nodes the target keeps), else spec.standby.count.
func wanted(h *v1alpha1.Headroom) int32 {
	if h.Spec.Target != nil && h.Status.Standby != nil {
		return h.Status.Standby.DesiredUnits
	}
	return h.Spec.Standby.Count
}

// read returns the node groups by name, the standby nodes and the
// DaemonSets' pods.
func (r *Reconciler) read(ctx context.Context) (map[string]*v1alpha1.NodeGroup, []*corev1.Node, []daemonset.Pod, error) {
	ngs := &v1alpha1.NodeGroupList{}
	if err := r.Client.List(ctx, ngs); err != nil {
		return nil, nil, nil, fmt.Errorf("listing node groups: %w", err)
	}
	groups := make(map[string]*v1alpha1.NodeGroup, len(ngs.Items))
	for i := range ngs.Items {
		groups[ngs.Items[i].Name] = &ngs.Items[i]
	}
	dsList := &appsv1.DaemonSetList{}
	if err := r.Client.List(ctx, dsList); err != nil {
		return nil, nil, nil, fmt.Errorf("listing daemon sets: %w", err)
	}
	dss := make([]*appsv1.DaemonSet, len(dsList.Items))
	for i := range dsList.Items {
		dss[i] = &dsList.Items[i]
	}
	dss, err := clusterread.DaemonSetsAsRun(ctx, r.Client, dss) // as their pods run
	if err != nil {
		return nil, nil, nil, err
	}
	// The standby nodes from the API server: the cache may not show a node
	// launched or deleted a moment ago, and the counts below launch and
	// delete by them.
	fresh := &corev1.NodeList{}
	if err := r.APIReader.List(ctx, fresh, client.MatchingLabels{v1alpha1.TaintStandby: "true"}); err != nil {
		return nil, nil, nil, fmt.Errorf("listing standby nodes: %w", err)
	}
	nodes := make([]*corev1.Node, len(fresh.Items))
	for i := range fresh.Items {
		nodes[i] = &fresh.Items[i]
	}
	return groups, nodes, daemonset.Pods(dss), nil
}

// size counts a group's nodes that are not being deleted (the cache's).
func (r *Reconciler) size(ctx context.Context, group string) (int32, error) {
	list := &corev1.NodeList{}
	if err := r.Client.List(ctx, list, client.MatchingLabels{v1alpha1.LabelNodeGroup: group}); err != nil {
		return 0, fmt.Errorf("listing the nodes of node group %s: %w", group, err)
	}
	n := int32(0)
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp == nil {
			n++
		}
	}
	return n, nil
}

// account is what an owner's standby nodes hold now.
type account struct {
	suspended, booting []*corev1.Node
	// booted are booting nodes that are Ready and marked initialized (so
	// that the launch timeout never takes a suspended node for a failed
	// launch): to be suspended.
	booted []*corev1.Node
	// stale are suspended nodes that drifted, expired, or whose group
	// left the owner's scope or is being deleted: deleted (and launched
	// again where the owner's units belong) while idle.
	stale []*corev1.Node
	// removing are nodes marked for removal whose delete has not gone
	// through (an error, a restart): deleted again.
	removing []*corev1.Node
	units    int32
	// counted are the units each node adds to units.
	counted map[string]int32
}

// count sorts the owner's standby nodes that berth launched and adds up
// their units; inScope says which groups may keep them. It changes
// nothing.
func count(name string, groups map[string]*v1alpha1.NodeGroup, inScope func(*v1alpha1.NodeGroup) bool, nodes []*corev1.Node,
	unitsOn func(*corev1.Node) int32, now time.Time) account {
	var acct account
	for _, n := range nodes {
		g := groups[n.Labels[v1alpha1.LabelNodeGroup]]
		if n.DeletionTimestamp != nil || !nodeutil.Standby(n) || n.Annotations[v1alpha1.AnnotationStandbyFor] != name ||
			g == nil || n.Annotations[v1alpha1.AnnotationLaunchedBy] != string(g.UID) {
			continue // not berth's
		}
		if n.Annotations[v1alpha1.AnnotationStandbyRemoving] != "" {
			acct.removing = append(acct.removing, n) // decided: its delete is retried
			continue
		}
		if g.DeletionTimestamp != nil && g.Spec.DeletionPolicy == v1alpha1.DeletionOrphan {
			continue // left to the user with its group
		}
		idle := nodeutil.Suspended(n) && !nodeutil.Ready(n)
		units := int32(0)
		if inScope(g) {
			// One of a group that left holds none: it is suspended, then
			// removed.
			units = unitsOn(n)
		}
		// A suspended node that holds no unit (out of scope, or the
		// DaemonSets that would run on it grew) is replaced too.
		if idle && (units == 0 || lifecycle.Drifted(g, n) != nil || lifecycle.Expired(g, n, now) != nil) {
			acct.stale = append(acct.stale, n) // replaced while idle, not once a burst lands on it
			continue
		}
		acct.units += units
		if units > 0 {
			if acct.counted == nil {
				acct.counted = map[string]int32{}
			}
			acct.counted[n.Name] = units
		}
		if nodeutil.Suspended(n) && !nodeutil.Ready(n) {
			acct.suspended = append(acct.suspended, n)
			continue
		}
		acct.booting = append(acct.booting, n)
		if nodeutil.Ready(n) && n.Labels[v1alpha1.LabelInitialized] == "true" {
			acct.booted = append(acct.booted, n) // also one whose suspension was cut short
		}
	}
	return acct
}

// costPerHour is what the nodes cost an hour: suspended ones at their
// offering's stopped price, booting ones at its running price.
func costPerHour(acct account, groups map[string]*v1alpha1.NodeGroup) float64 {
	total := 0.0
	for i, list := range [][]*corev1.Node{acct.suspended, acct.booting} {
		for _, n := range list {
			g := groups[n.Labels[v1alpha1.LabelNodeGroup]]
			_, off := g.FindOffering(n.Labels[v1alpha1.LabelInstanceType], n.Labels[v1alpha1.LabelZone], v1alpha1.CapacityType(n.Labels[v1alpha1.LabelCapacityType]))
			if off == nil {
				continue
			}
			price, _ := off.Price()
			if i == 0 {
				price, _ = off.StoppedPrice()
			}
			total += price
		}
	}
	return total
}

// launch launches standby nodes for the missing units, bounded by
// maxLaunches, the group's maxSize and the cluster's limits (standby are
// the standby nodes read from the API server), and says what it did.
func (r *Reconciler) launch(ctx context.Context, o owner, groups map[string]*v1alpha1.NodeGroup, standby []*corev1.Node, missing int32) string {
	scope, err := o.scope(sortedGroups(groups))
	if err != nil {
		return r.cannot(o, err.Error())
	}
	scope = slices.DeleteFunc(slices.Clone(scope), func(g *v1alpha1.NodeGroup) bool {
		return g.DeletionTimestamp != nil || !cloudprovider.CanSuspend(r.Cloud, g)
	})
	if len(scope) == 0 {
		return r.cannot(o, "no node group in scope has a provider that can suspend machines (kwok can)")
	}
	size := map[string]int32{}
	for _, g := range scope {
		n, err := r.size(ctx, g.Name)
		if err != nil {
			return err.Error()
		}
		size[g.Name] = n
	}
	scope = slices.DeleteFunc(scope, func(g *v1alpha1.NodeGroup) bool { return size[g.Name] >= g.Spec.MaxSize })
	if len(scope) == 0 {
		return r.cannot(o, "every node group in scope that can suspend machines is at its maxSize")
	}
	var unavailable []v1alpha1.OfferingKey
	if r.Offerings != nil {
		unavailable = r.Offerings.Unavailable()
	}
	c, ok := hr.CheapestPerUnit(scope, o.shape, o.dss, unavailable, o.fits)
	if !ok {
		return r.cannot(o, "no available offering of the node groups in scope holds one unit")
	}
	want := int32(math.Ceil(float64(missing) / float64(c.PerNode)))
	launch := min(want, maxLaunches, max(0, c.Group.Spec.MaxSize-size[c.Group.Name]))
	it, _ := c.Group.FindOffering(c.Key.InstanceType, c.Key.Zone, v1alpha1.CapacityType(c.Key.CapacityType))
	room, why, err := r.clusterRoom(ctx, it, standby)
	if err != nil {
		return err.Error()
	}
	if room <= 0 {
		return r.cannot(o, why)
	}
	launch = min(launch, room)
	off := cloudprovider.OfferingOf(c.Key)
	for range launch {
		inst, err := r.Cloud.Create(ctx, cloudprovider.CreateRequest{NodeGroup: c.Group, Offering: off, StandbyFor: standbyFor(o.key)})
		if cloudprovider.IsMaxSize(err) {
			// The provisioner filled the group since the count above.
			return r.cannot(o, fmt.Sprintf("node group %s reached its maxSize (%d) while standby nodes were launched", c.Group.Name, c.Group.Spec.MaxSize))
		}
		if err != nil {
			if !cloudprovider.IsTransient(err) && r.Offerings != nil {
				r.Offerings.MarkUnavailable(c.Key, state.LaunchReason(cloudprovider.IsInsufficientCapacity(err)), err.Error())
			}
			r.Recorder.Eventf(o.obj, nil, corev1.EventTypeWarning, ReasonLaunchFailed, "Launch", "Launching a standby node (%s) failed: %v", off, err)
			return fmt.Sprintf("launching a standby node of %s failed: %v", off, err)
		}
		r.Recorder.Eventf(o.obj, nil, corev1.EventTypeNormal, ReasonLaunched, "Launch",
			"Launched standby node %s (%s, %d units, %.4f/h stopped) for %d missing units", inst.NodeName, off, c.PerNode, c.Stopped, missing)
	}
	return fmt.Sprintf("%d units missing; launched %d standby nodes of %s/%s (%d units each), to be suspended once Ready",
		missing, launch, c.Group.Name, off, c.PerNode)
}

// clusterRoom is how many more nodes of instance type it the cluster-wide
// limits let in, and which limit holds them when none: the cluster's
// Nodes as the cache shows them, and of standby (the standby nodes the
// reconcile read from the API server) those the cache does not show yet
// (launched a moment ago), each as
// the provisioner counts a Node (every node but a virtual kubelet's of no
// group, those being deleted included); other launches whose Node has
// not registered yet, which the provisioner also counts, are not.
func (r *Reconciler) clusterRoom(ctx context.Context, it *v1alpha1.InstanceType, standby []*corev1.Node) (int32, string, error) {
	nodes := &corev1.NodeList{}
	if err := r.Client.List(ctx, nodes, client.UnsafeDisableDeepCopy); err != nil {
		return 0, "", fmt.Errorf("listing nodes: %w", err)
	}
	count := int64(0)
	used := corev1.ResourceList{}
	add := func(n *corev1.Node) {
		if !snapshot.InClusterTotal(n, n.Labels[v1alpha1.LabelNodeGroup]) {
			return
		}
		count++
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			q := used[name]
			q.Add(n.Status.Capacity[name])
			used[name] = q
		}
	}
	cached := make(map[string]bool, len(nodes.Items))
	for i := range nodes.Items {
		cached[nodes.Items[i].Name] = true
		add(&nodes.Items[i])
	}
	for _, n := range standby {
		if !cached[n.Name] {
			add(n)
		}
	}
	room, why := int64(math.MaxInt32), ""
	if total := int64(r.Limits.Nodes.Total); total > 0 && total-count < room {
		room, why = total-count, fmt.Sprintf("the cluster is at its cap of %d nodes (--max-nodes-total)", total)
	}
	limits := r.Limits.Resources
	if limits == nil {
		limits = scaleup.DefaultClusterLimits
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		lim, ok := limits[name]
		var each resource.Quantity
		if it != nil {
			each = it.Capacity[name]
		}
		if !ok || each.Sign() <= 0 {
			continue
		}
		left := lim.DeepCopy()
		left.Sub(used[name])
		if n := int64(math.Floor(left.AsApproximateFloat64() / each.AsApproximateFloat64())); n < room {
			room, why = n, fmt.Sprintf("another node of this type would take the cluster past its %s limit of %s (--cluster-max-%s)", name, lim.String(), name)
		}
	}
	return int32(max(room, 0)), why, nil
}

// cannot reports why the standby units cannot be kept.
func (r *Reconciler) cannot(o owner, why string) string {
	if st, ok := r.Standby.Get(o.state); !ok || st.Message != why {
		r.Recorder.Eventf(o.obj, nil, corev1.EventTypeWarning, ReasonCannotKeep, "Launch", "Cannot keep standby units: %s", why)
	}
	return why
}
