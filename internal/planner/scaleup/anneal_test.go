package scaleup_test

import (
	"cmp"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/planner/scaleup"
	"github.com/berth-dev/berth/internal/testing/workload"
)

// TestLargePlanIsNearWhatASearchFinds plans 1,000 pods of Karpenter's mix
// (BenchmarkPlan's workload and seed) and then lets a simulated annealing
// search move and swap the plan's pods between its nodes for millions of
// steps, each node launched as the cheapest type that holds its pods. The
// search keeps the rules the planner's own moves keep (a pod that a
// zone-wide spread or affinity counts, or that carries one, stays in its
// zone; hostname anti-affinity and spread are checked both ways on the
// node a pod joins), so what it finds is a plan berth could have made with
// the same nodes in the same zones. The plan must cost at most 2 % more
// than the cheapest the search finds (it finds 1.5 % below, by emptying
// the large nodes of each zone into that zone's small ones, which fill's
// moves do not reach: docs/limitations.md); without the fill passes it
// costs 3.6 % more. It also says how far the bound is from any packing
// of these nodes: the search's best, over the bound, is logged.
func TestLargePlanIsNearWhatASearchFinds(t *testing.T) {
	ng := workload.NodeGroup(400)
	pods := workload.Pods(1000, 42)
	plan, err := scaleup.Run(scaleup.Input{NodeGroups: []*v1alpha1.NodeGroup{ng}, Pending: pods, Limits: scaleup.Limits{Resources: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("10000000"), corev1.ResourceMemory: resource.MustParse("10000000Gi")}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Unschedulable) > 0 {
		t.Fatalf("%d pods unschedulable", len(plan.Unschedulable))
	}
	s := newSearch(t, ng, pods, plan)
	steps := 20_000_000
	if testing.Short() {
		steps = 4_000_000
	}
	planned, found := s.price(), s.anneal(rand.New(rand.NewPCG(1, 0)), steps)
	lb := workload.LowerBound(ng, pods)
	t.Logf("plan %.2f/h (%.4f of the bound), the search's best %.2f/h (%.4f of the bound, %.2f %% below the plan)",
		planned, planned/lb, found, found/lb, 100*(1-found/planned))
	if planned > found*1.02 {
		t.Errorf("the plan costs %.2f/h, %.2f %% more than the %.2f/h a search over its own nodes finds", planned, 100*(planned/found-1), found)
	}
}

// searchPod is a pod as the search sees it.
type searchPod struct {
	cpu, mem  int64
	zoneBound bool
	// Masks over the hostname selectors: the pod's labels match them; it
	// may not share a node with a pod they match; it spreads over them
	// (maxSkew 1, each selector matching fewer pods than there are nodes,
	// so some node always has none and the skew is the node's count).
	member, anti, spread uint64
}

// searchNode is a planned node: its zone, pods, their sums and the
// count of pods matching each hostname selector.
type searchNode struct {
	zone             string
	pods             []int
	cpu, mem         int64
	count            [64]int
	antiOf, spreadOf uint64 // union of its pods' anti and spread masks
}

type search struct {
	pods  []searchPod
	nodes []*searchNode
	// The catalogue's types by price; a node costs the first that holds
	// its pods (every type holds more of each resource than the one before).
	types []searchType
	step  float64 // a median type's price step, the scale of the annealing
}

type searchType struct {
	cpu, mem, pods int64
	price          float64
}

func newSearch(t *testing.T, ng *v1alpha1.NodeGroup, pods []*corev1.Pod, plan *scaleup.Plan) *search {
	t.Helper()
	s := &search{}
	for _, it := range ng.Spec.InstanceTypes {
		price, err := it.Offerings[0].Price()
		if err != nil {
			t.Fatal(err)
		}
		s.types = append(s.types, searchType{it.Capacity.Cpu().MilliValue(), it.Capacity.Memory().Value(), it.Capacity.Pods().Value(), price})
	}
	slices.SortFunc(s.types, func(a, b searchType) int { return cmp.Compare(a.price, b.price) })
	var steps []float64
	for i := 1; i < len(s.types); i++ {
		a, b := s.types[i-1], s.types[i]
		if b.cpu < a.cpu || b.mem < a.mem || b.pods < a.pods {
			t.Fatal("the search needs types that grow with their price")
		}
		steps = append(steps, b.price-a.price)
	}
	slices.Sort(steps)
	s.step = steps[len(steps)/2]

	// The selectors of hostname-wide terms, and the pods that zone-wide
	// terms count.
	var selectors []labels.Selector
	index := map[string]uint64{}
	bit := func(sel *metav1.LabelSelector) uint64 {
		key := metav1.FormatLabelSelector(sel)
		if b, ok := index[key]; ok {
			return b
		}
		if len(selectors) == 64 {
			t.Fatal("more than 64 hostname selectors")
		}
		ls, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			t.Fatal(err)
		}
		index[key] = 1 << len(selectors)
		selectors = append(selectors, ls)
		return index[key]
	}
	var zoneSelectors []labels.Selector
	byName := map[string]int{}
	for i, p := range pods {
		byName[p.Name] = i
		sp := searchPod{cpu: p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue(), mem: p.Spec.Containers[0].Resources.Requests.Memory().Value()}
		for _, c := range p.Spec.TopologySpreadConstraints {
			switch {
			case c.TopologyKey == corev1.LabelHostname && c.MaxSkew == 1 && c.WhenUnsatisfiable == corev1.DoNotSchedule:
				sp.spread |= bit(c.LabelSelector)
			case c.TopologyKey == corev1.LabelTopologyZone:
				sp.zoneBound = true
				zoneSelectors = append(zoneSelectors, mustSelector(t, c.LabelSelector))
			default:
				t.Fatalf("pod %s: a spread the search does not know", p.Name)
			}
		}
		if a := p.Spec.Affinity; a != nil {
			if a.PodAffinity != nil {
				for _, term := range a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
					if term.TopologyKey != corev1.LabelTopologyZone {
						t.Fatalf("pod %s: an affinity the search does not know", p.Name)
					}
					sp.zoneBound = true
					zoneSelectors = append(zoneSelectors, mustSelector(t, term.LabelSelector))
				}
			}
			if a.PodAntiAffinity != nil {
				for _, term := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
					if term.TopologyKey != corev1.LabelHostname {
						t.Fatalf("pod %s: an anti-affinity the search does not know", p.Name)
					}
					sp.anti |= bit(term.LabelSelector)
				}
			}
		}
		s.pods = append(s.pods, sp)
	}
	members := make([]int, len(selectors))
	for i, p := range pods {
		for j, sel := range selectors {
			if sel.Matches(labels.Set(p.Labels)) {
				s.pods[i].member |= 1 << j
				members[j]++
			}
		}
		for _, sel := range zoneSelectors {
			if sel.Matches(labels.Set(p.Labels)) {
				s.pods[i].zoneBound = true
			}
		}
	}
	for _, nn := range plan.NewNodes {
		n := &searchNode{zone: nn.Zone}
		for _, ref := range nn.Pods {
			n.add(s.pods, byName[ref.Name])
		}
		s.nodes = append(s.nodes, n)
	}
	var spreads uint64
	for _, p := range s.pods {
		spreads |= p.spread
	}
	for j, m := range members {
		if spreads>>j&1 == 1 && m >= len(s.nodes) {
			t.Fatalf("selector %s matches %d pods, not fewer than the %d nodes", selectors[j], m, len(s.nodes))
		}
	}
	return s
}

func mustSelector(t *testing.T, sel *metav1.LabelSelector) labels.Selector {
	t.Helper()
	ls, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

func (n *searchNode) add(pods []searchPod, i int) {
	p := &pods[i]
	n.pods = append(n.pods, i)
	n.cpu, n.mem = n.cpu+p.cpu, n.mem+p.mem
	n.antiOf, n.spreadOf = n.antiOf|p.anti, n.spreadOf|p.spread
	for m := p.member; m != 0; m &= m - 1 {
		n.count[bits.TrailingZeros64(m)]++
	}
}

func (n *searchNode) remove(pods []searchPod, k int) {
	i := n.pods[k]
	p := &pods[i]
	n.pods = slices.Delete(n.pods, k, k+1)
	n.cpu, n.mem = n.cpu-p.cpu, n.mem-p.mem
	n.antiOf, n.spreadOf = 0, 0
	for _, j := range n.pods {
		n.antiOf, n.spreadOf = n.antiOf|pods[j].anti, n.spreadOf|pods[j].spread
	}
	for m := p.member; m != 0; m &= m - 1 {
		n.count[bits.TrailingZeros64(m)]--
	}
}

// admits reports whether p may join n, placed after n's pods: none of
// n's pods matches p's anti-affinity nor p theirs; p's spread sees n's
// count of matching pods (and p itself) at most 1; and no pod of n that
// spreads over a selector p matches sees more than 1 with p there.
func (n *searchNode) admits(p *searchPod) bool {
	for m := p.anti; m != 0; m &= m - 1 {
		if n.count[bits.TrailingZeros64(m)] > 0 {
			return false
		}
	}
	if p.member&n.antiOf != 0 {
		return false
	}
	for m := p.spread; m != 0; m &= m - 1 {
		j := bits.TrailingZeros64(m)
		if n.count[j]+int(p.member>>j&1) > 1 {
			return false
		}
	}
	for m := p.member & n.spreadOf; m != 0; m &= m - 1 {
		if n.count[bits.TrailingZeros64(m)] > 0 {
			return false
		}
	}
	return true
}

// cost is the price of the cheapest type holding cpu, mem and pods,
// and how much of a step its room is (the smaller of cpu and memory):
// the annealing favours nodes with room gathered in a few of them.
func (s *search) cost(cpu, mem int64, pods int) (price, room float64) {
	i, _ := slices.BinarySearchFunc(s.types, 0, func(t searchType, _ int) int {
		if t.cpu >= cpu && t.mem >= mem && t.pods >= int64(pods) {
			return 1
		}
		return -1
	})
	if i == len(s.types) {
		return math.Inf(1), 0
	}
	ty := s.types[i]
	prevCPU, prevMem := int64(0), int64(0)
	if i > 0 {
		prevCPU, prevMem = s.types[i-1].cpu, s.types[i-1].mem
	}
	room = min(float64(ty.cpu-cpu)/float64(ty.cpu-prevCPU), float64(ty.mem-mem)/float64(ty.mem-prevMem))
	return ty.price, room
}

func (s *search) score(cpu, mem int64, pods int) float64 {
	price, room := s.cost(cpu, mem, pods)
	return price - 0.3*s.step*room*room
}

func (s *search) price() float64 {
	total := 0.0
	for _, n := range s.nodes {
		p, _ := s.cost(n.cpu, n.mem, len(n.pods))
		total += p
	}
	return total
}

// anneal moves a random pod to a random node, or swaps two, accepting a
// change that costs more with the annealing's falling probability; it
// returns the cheapest price seen.
func (s *search) anneal(r *rand.Rand, steps int) float64 {
	best, hot, cold := s.price(), 0.3*s.step, 0.01*s.step
	for k := range steps {
		temp := hot * math.Pow(cold/hot, float64(k)/float64(steps))
		a, b := s.nodes[r.IntN(len(s.nodes))], s.nodes[r.IntN(len(s.nodes))]
		if a == b || len(a.pods) < 2 {
			continue
		}
		ka := r.IntN(len(a.pods))
		x := &s.pods[a.pods[ka]]
		if x.zoneBound && a.zone != b.zone {
			continue
		}
		old := s.score(a.cpu, a.mem, len(a.pods)) + s.score(b.cpu, b.mem, len(b.pods))
		if r.IntN(2) == 0 { // move x to b
			if !b.admits(x) {
				continue
			}
			d := s.score(a.cpu-x.cpu, a.mem-x.mem, len(a.pods)-1) + s.score(b.cpu+x.cpu, b.mem+x.mem, len(b.pods)+1) - old
			if d > 0 && r.Float64() >= math.Exp(-d/temp) {
				continue
			}
			i := a.pods[ka]
			a.remove(s.pods, ka)
			b.add(s.pods, i)
		} else { // swap x with a pod y of b
			kb := r.IntN(len(b.pods))
			y := &s.pods[b.pods[kb]]
			if y.zoneBound && a.zone != b.zone {
				continue
			}
			d := s.score(a.cpu-x.cpu+y.cpu, a.mem-x.mem+y.mem, len(a.pods)) + s.score(b.cpu-y.cpu+x.cpu, b.mem-y.mem+x.mem, len(b.pods)) - old
			if d > 0 && r.Float64() >= math.Exp(-d/temp) {
				continue
			}
			i, j := a.pods[ka], b.pods[kb]
			a.remove(s.pods, ka)
			b.remove(s.pods, kb)
			if !b.admits(x) || !a.admits(y) {
				a.add(s.pods, i)
				b.add(s.pods, j)
				continue
			}
			a.add(s.pods, j)
			b.add(s.pods, i)
		}
		if k%(1<<16) == 0 {
			best = min(best, s.price())
		}
	}
	return min(best, s.price())
}
