package sim

import (
	"cmp"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/simulator/predicates"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// scheduler is the model of kube-scheduler: a pod binds to the node the
// filters allow with the most room left (LeastAllocated, kube-scheduler's
// default scoring), its nominated node first; a pod that fits nowhere
// preempts headroom placeholders of lower priority. Pods that failed are
// tried again when the cluster changes (a node turned Ready, a pod left),
// as the scheduler's unschedulable queue is.
type scheduler struct {
	e       *Engine
	snap    *snapshot.Snapshot
	placed  map[string]*snapshot.Pod
	filters []predicates.Filter
	queued  bool
	all     bool
	fresh   []*pod
	// placeholders are the bound placeholder pods.
	placeholders map[*pod]bool
}

func newScheduler(e *Engine) *scheduler {
	s := &scheduler{e: e, filters: predicates.Default(), placeholders: map[*pod]bool{}}
	s.rebuild()
	return s
}

// rebuild makes the scheduler's snapshot anew from the Ready nodes and the
// bound pods (after a node is removed: the snapshot only grows).
func (s *scheduler) rebuild() {
	in := snapshot.Input{}
	var bound []*corev1.Pod
	for _, n := range s.e.nodes {
		if n.ready {
			in.Nodes = append(in.Nodes, snapshot.NodeInput{Node: n.obj, NodeGroup: n.group})
		}
	}
	slices.SortFunc(in.Nodes, func(a, b snapshot.NodeInput) int { return cmp.Compare(a.Node.Name, b.Node.Name) })
	for _, p := range s.e.pods {
		if p.isBound() {
			bound = append(bound, p.obj)
		}
	}
	in.Pods = bound
	snap, err := snapshot.New(in)
	if err != nil {
		s.e.fail(err)
		return
	}
	s.snap = snap
	s.placed = map[string]*snapshot.Pod{}
	for _, n := range snap.Nodes {
		if s.e.nodes[n.Name].draining {
			snap.Cordon(n)
		}
		for _, sp := range n.Pods {
			s.placed[sp.Namespace+"/"+sp.Name] = sp
		}
	}
}

// addNode makes a node that turned Ready a home for pods.
func (s *scheduler) addNode(n *node) {
	s.snap.AddNode(&snapshot.Node{Node: n.obj, Taints: n.obj.Spec.Taints, Allocatable: snapshot.FromList(n.obj.Status.Allocatable),
		AllowedPods: int(n.obj.Status.Allocatable.Pods().Value()), NodeGroup: n.group, Capacity: snapshot.FromList(n.obj.Status.Capacity)})
	s.kickAll()
}

// cordon keeps pods off a node being drained.
func (s *scheduler) cordon(name string) {
	if n := s.snap.Node(name); n != nil {
		s.snap.Cordon(n)
	}
}

func (s *scheduler) unbind(p *pod) {
	if sp := s.placed[p.key()]; sp != nil {
		s.snap.RemovePod(sp)
		delete(s.placed, p.key())
	}
	delete(s.placeholders, p)
}

// kick tries the newest pending pods soon; kickAll all of them.
func (s *scheduler) kick() {
	s.fresh = append(s.fresh, s.e.pending[len(s.e.pending)-1])
	s.queue()
}

func (s *scheduler) kickAll() {
	s.all = true
	s.queue()
}

func (s *scheduler) queue() {
	if !s.queued {
		s.queued = true
		s.e.schedule(s.e.now, evSchedule, "")
	}
}

// pass tries the queued pods, highest priority first, oldest first.
func (s *scheduler) pass() {
	s.queued = false
	try := s.fresh
	if s.all {
		try = slices.Clone(s.e.pending)
	}
	s.fresh, s.all = nil, false
	slices.SortStableFunc(try, func(a, b *pod) int {
		return cmp.Or(cmp.Compare(priority(b.obj), priority(a.obj)), a.created.Compare(b.created))
	})
	for _, p := range try {
		if p.isBound() || s.e.pods[p.key()] != p {
			continue
		}
		if !s.place(p) && !s.preempt(p) {
			if !p.tried {
				p.tried, p.needed = true, true
				s.e.needCapacity()
			}
		}
	}
}

// place binds the pod to the best node the filters allow, or reports that
// none does.
func (s *scheduler) place(p *pod) bool {
	c, err := s.snap.Classify(p.obj)
	if err != nil {
		return false
	}
	s.snap.Prepare(c)
	if p.nominated != "" {
		if n := s.snap.Node(p.nominated); n != nil && s.fits(c, n) {
			s.bind(p, c, n)
			return true
		}
	}
	var best *snapshot.Node
	bestScore := -1.0
	for _, n := range s.snap.Nodes {
		if !s.fits(c, n) {
			continue
		}
		if sc := leastAllocated(c, n); sc > bestScore {
			best, bestScore = n, sc
		}
	}
	if best == nil {
		return false
	}
	s.bind(p, c, best)
	return true
}

func (s *scheduler) fits(c *snapshot.Class, n *snapshot.Node) bool {
	if n.Unschedulable || len(n.Pods) >= n.AllowedPods || !snapshot.Fits(&c.Requests, &n.Requested, &n.Allocatable) {
		return false
	}
	return !predicates.Run(s.filters, s.snap, c, n).Failed()
}

func (s *scheduler) bind(p *pod, c *snapshot.Class, n *snapshot.Node) {
	sp := &snapshot.Pod{Pod: p.obj, Class: c}
	s.snap.AddPod(sp, n)
	s.placed[p.key()] = sp
	if p.placeholder != "" {
		s.placeholders[p] = true
	}
	p.obj.Spec.NodeName = n.Name
	p.obj.Status.Phase = corev1.PodRunning
	p.bound = s.e.now
	p.nominated = ""
	s.e.logf("bind %s to %s after %s", p.key(), n.Name, s.e.now.Sub(p.created))
	s.e.dropPending(p)
	s.e.metrics.bound(p, s.e.now)
	if node := s.e.nodes[n.Name]; node != nil {
		s.e.learner.bound(p, node.group)
	}
	if f := s.e.cfg.OnBound; f != nil && p.placeholder == "" && !p.running {
		f(p.key(), p.created.Sub(s.e.start), s.e.now.Sub(s.e.start))
	}
	s.e.dirty = true
	if p.placeholder == "" && len(s.e.cfg.Headrooms) > 0 && !p.tried {
		s.e.needCapacity() // a pod bound at once may have taken headroom: the controller's trigger
	}
}

// leastAllocated is kube-scheduler's default score: the share of cpu and
// memory left free after the pod, averaged.
func leastAllocated(c *snapshot.Class, n *snapshot.Node) float64 {
	free := func(req, used, alloc int64) float64 {
		if alloc <= 0 {
			return 0
		}
		return float64(alloc-used-req) / float64(alloc)
	}
	return (free(c.Requests.MilliCPU, n.Requested.MilliCPU, n.Allocatable.MilliCPU) +
		free(c.Requests.Memory, n.Requested.Memory, n.Allocatable.Memory)) / 2
}

// preempt frees room for a pod by deleting headroom placeholders of lower
// priority on the node where the fewest must go (the placeholders'
// Deployment recreates them, pending), and binds the pod there. As
// kube-scheduler's preemption, it picks only a node where the pod passes
// every filter once the victims are gone (tried on a fork of the
// snapshot): room a pod cannot use (its node selector, a taint, a
// spread) is never freed. Before, the placeholders were deleted first
// and the filters read after: the placeholders came back and were
// preempted again, for ever, at the same instant.
func (s *scheduler) preempt(p *pod) bool {
	if p.placeholder != "" || len(s.placeholders) == 0 {
		return false
	}
	c, err := s.snap.Classify(p.obj)
	if err != nil {
		return false
	}
	// Candidates are the nodes with placeholders of lower priority.
	byNode := map[string][]*snapshot.Pod{}
	for q := range s.placeholders {
		if priority(q.obj) < priority(p.obj) {
			if sp := s.placed[q.key()]; sp != nil {
				byNode[q.obj.Spec.NodeName] = append(byNode[q.obj.Spec.NodeName], sp)
			}
		}
	}
	var best *snapshot.Node
	var bestVictims []*snapshot.Pod
	for _, name := range slices.Sorted(maps.Keys(byNode)) {
		n := s.snap.Node(name)
		victims := byNode[name]
		if n == nil || n.Unschedulable || (best != nil && len(victims) >= len(bestVictims)) {
			continue
		}
		slices.SortFunc(victims, func(a, b *snapshot.Pod) int { return cmp.Compare(a.Name, b.Name) })
		need := 0
		free := n.Requested.Clone() // the node's own map of extended resources stays as it is
		for _, v := range victims {
			if snapshot.Fits(&c.Requests, &free, &n.Allocatable) {
				break
			}
			free.Sub(&v.Class.Requests)
			need++
		}
		if snapshot.Fits(&c.Requests, &free, &n.Allocatable) && s.fitsWithout(c, n, victims[:need]) {
			best, bestVictims = n, victims[:need]
		}
	}
	if best == nil {
		return false
	}
	for _, v := range bestVictims {
		if q := s.e.pods[v.Namespace+"/"+v.Name]; q != nil {
			s.e.logf("preempt %s on %s for %s", q.key(), best.Name, p.key())
			s.e.preempted(q)
		}
	}
	if !s.fits(c, best) {
		return false
	}
	s.bind(p, c, best)
	return true
}

// fitsWithout reports whether a pod of class c passes every filter on n
// once victims are off it, leaving the snapshot as it was.
func (s *scheduler) fitsWithout(c *snapshot.Class, n *snapshot.Node, victims []*snapshot.Pod) bool {
	s.snap.Fork()
	defer s.snap.Revert()
	for _, v := range victims {
		s.snap.RemovePod(v)
	}
	return s.fits(c, n)
}
