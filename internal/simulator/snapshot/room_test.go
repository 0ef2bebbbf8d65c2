package snapshot_test

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/internal/simulator/snapshot"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestRoomFromNeverPassesANodeWithRoom changes a snapshot of a few blocks
// of nodes at random (pods placed and taken off, forks reverted and kept,
// nodes added, nodes taken out of the middle by a base brought up to
// date) and checks after every change, for requests of every size, that
// RoomFrom passes over no node where a pod with those requests would
// fit: a scan that trusts it finds the nodes a full scan finds.
func TestRoomFromNeverPassesANodeWithRoom(t *testing.T) {
	for seed := int64(1); seed <= 20; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			r := rand.New(rand.NewSource(seed))
			var nodes []*corev1.Node
			for i := range 3*snapshot.RoomBlock + 10 {
				nodes = append(nodes, roomNode(r, i))
			}
			base := snapshot.NewBase()
			in := snapshot.Input{}
			for _, n := range nodes {
				in.Nodes = append(in.Nodes, snapshot.NodeInput{Node: n})
			}
			s, err := base.Snapshot(in)
			if err != nil {
				t.Fatal(err)
			}
			var placed []*snapshot.Pod
			forks, next := 0, 0
			// Fill the nodes, so that a block's room is a few pods'.
			for _, n := range s.Nodes {
				for {
					p := b.Pod(fmt.Sprintf("p%d", next), b.CPU("500m"), b.Memory("1Gi"))
					next++
					c, err := s.Classify(p)
					if err != nil {
						t.Fatal(err)
					}
					if !fits(n, &c.Base) || r.Intn(12) == 0 {
						break
					}
					pod := &snapshot.Pod{Pod: p, Class: c}
					s.AddPod(pod, n)
					placed = append(placed, pod)
				}
			}
			for step := range 400 {
				switch op := r.Intn(10); {
				case op < 4: // a pod onto a node with room for it
					p := b.Pod(fmt.Sprintf("p%d", next), b.CPU(fmt.Sprintf("%dm", 100*(1+r.Intn(20)))), b.Memory(fmt.Sprintf("%dMi", 256*(1+r.Intn(16)))))
					next++
					c, err := s.Classify(p)
					if err != nil {
						t.Fatal(err)
					}
					n := s.Nodes[r.Intn(len(s.Nodes))]
					if fits(n, &c.Base) {
						pod := &snapshot.Pod{Pod: p, Class: c}
						s.AddPod(pod, n)
						placed = append(placed, pod)
					}
				case op < 6 && len(placed) > 0: // a pod taken off
					i := r.Intn(len(placed))
					if placed[i].Node != nil {
						s.RemovePod(placed[i])
					}
					placed = slices.Delete(placed, i, i+1)
				case op == 6:
					s.Fork()
					forks++
				case op == 7 && forks > 0:
					s.Revert()
					forks--
					placed = slices.DeleteFunc(placed, func(p *snapshot.Pod) bool { return p.Node == nil })
				case op == 8 && forks > 0:
					s.Commit()
					forks--
				default: // a node more, existing or planned
					n := b.Node(fmt.Sprintf("extra-%d", next), "8", "32Gi")
					n.UID = types.UID(n.Name)
					next++
					s.AddNode(&snapshot.Node{Node: n, Allocatable: snapshot.FromList(n.Status.Allocatable), AllowedPods: int(n.Status.Allocatable.Pods().Value()),
						Planned: r.Intn(3) == 0})
				}
				checkRooms(t, s, fmt.Sprintf("step %d", step))
			}
			// Take nodes out of the middle of the node list: a new round of
			// the base without them (and without the round's changes).
			for forks > 0 {
				s.Revert()
				forks--
			}
			base.Release(s)
			in.Nodes = slices.DeleteFunc(in.Nodes, func(snapshot.NodeInput) bool { return r.Intn(8) == 0 })
			if s, err = base.Snapshot(in); err != nil {
				t.Fatal(err)
			}
			if base.Syncs != 1 {
				t.Fatalf("the base was built anew (%d syncs): the removal path is not exercised", base.Syncs)
			}
			checkRooms(t, s, "after nodes were taken out")
		})
	}
}

// roomNode is node i: one of a few sizes, partly used by a pod bound to
// it beforehand.
func roomNode(r *rand.Rand, i int) *corev1.Node {
	sizes := [][2]string{{"2", "8Gi"}, {"4", "16Gi"}, {"16", "64Gi"}}
	sz := sizes[r.Intn(len(sizes))]
	n := b.Node(fmt.Sprintf("n%03d", i), sz[0], sz[1], b.NodeLabels("zone", []string{"a", "b", "c"}[r.Intn(3)]))
	n.UID, n.ResourceVersion = types.UID(n.Name), "1"
	return n
}

func fits(n *snapshot.Node, req *snapshot.Resources) bool {
	return n.PodCount() < n.AllowedPods && snapshot.Fits(req, &n.Requested, &n.Allocatable)
}

// checkRooms asks RoomFrom at every block for requests from nothing to
// more than any node has, and fails on a node it passed over that has
// the room.
func checkRooms(t *testing.T, s *snapshot.Snapshot, when string) {
	t.Helper()
	for i := 0; i+snapshot.RoomBlock <= len(s.Nodes); i += snapshot.RoomBlock {
		var want []int32 // none when a planned node (no shape) is in the block
		for _, n := range s.Nodes[i : i+snapshot.RoomBlock] {
			if n.Planned {
				want = nil
				break
			}
			if !slices.Contains(want, n.Shape) {
				want = append(want, n.Shape)
			}
		}
		got := slices.Clone(s.BlockShapes(i))
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: BlockShapes(%d) = %v, the nodes' shapes are %v", when, i, got, want)
		}
	}
	// Requests of every size, and exactly each node's free room.
	var reqs []snapshot.Resources
	for _, cpu := range []int64{0, 100, 500, 1000, 2000, 4000, 8000, 16000, 32000} {
		for _, mem := range []int64{0, 1 << 30, 8 << 30, 32 << 30} {
			reqs = append(reqs, snapshot.Resources{MilliCPU: cpu, Memory: mem})
		}
	}
	for _, n := range s.Nodes {
		reqs = append(reqs, snapshot.Resources{MilliCPU: n.Allocatable.MilliCPU - n.Requested.MilliCPU, Memory: n.Allocatable.Memory - n.Requested.Memory})
	}
	for k := range reqs {
		{
			req, cpu, mem := &reqs[k], reqs[k].MilliCPU, reqs[k].Memory
			for i := 0; i < len(s.Nodes); i += snapshot.RoomBlock {
				j := s.RoomFrom(i, req)
				if j < i || j > len(s.Nodes) {
					t.Fatalf("%s: RoomFrom(%d) = %d, outside [%d, %d]", when, i, j, i, len(s.Nodes))
				}
				for _, n := range s.Nodes[i:j] {
					if fits(n, req) {
						t.Fatalf("%s: RoomFrom(%d, cpu %dm, memory %d) = %d passes over node %s, which has room (requested %+v of %+v)",
							when, i, cpu, mem, j, n.Name, n.Requested, n.Allocatable)
					}
				}
			}
		}
	}
}

// TestRoomFromFollowsTheNodeList: a block ruled out (every node full)
// is not trusted once the node list changes under it. Taking a node out
// of the middle (a base brought up to date) moves an empty node into the
// block; reverting the nodes added in a fork and adding others puts other
// nodes in their places.
func TestRoomFromFollowsTheNodeList(t *testing.T) {
	req := &snapshot.Resources{MilliCPU: 1000}
	full := func(i int) *corev1.Node {
		n := b.Node(fmt.Sprintf("n%03d", i), "1", "4Gi")
		n.UID, n.ResourceVersion = types.UID(n.Name), "1"
		return n
	}
	var in snapshot.Input
	var pods []*corev1.Pod
	for i := range snapshot.RoomBlock {
		n := full(i)
		in.Nodes = append(in.Nodes, snapshot.NodeInput{Node: n})
		p := b.Pod(fmt.Sprintf("p%d", i), b.CPU("1"), b.NodeName(n.Name))
		p.ResourceVersion = "1"
		pods = append(pods, p)
	}
	empty := b.Node("empty", "4", "16Gi")
	empty.UID, empty.ResourceVersion = "empty", "1"
	in.Nodes = append(in.Nodes, snapshot.NodeInput{Node: empty})
	in.Pods = pods
	base := snapshot.NewBase()
	s, err := base.Snapshot(in)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.RoomFrom(0, req); got != snapshot.RoomBlock {
		t.Fatalf("RoomFrom(0) = %d on a full first block, want %d", got, snapshot.RoomBlock)
	}

	// Full nodes added in a fork make a second full block; reverted, and
	// empty nodes added in their places.
	s.Fork()
	for i := range 2*snapshot.RoomBlock - 1 {
		n := full(100 + i)
		p := b.Pod(fmt.Sprintf("q%d", i), b.CPU("1"))
		c, err := s.Classify(p)
		if err != nil {
			t.Fatal(err)
		}
		sn := &snapshot.Node{Node: n, Allocatable: snapshot.FromList(n.Status.Allocatable), AllowedPods: 110}
		s.AddNode(sn)
		s.AddPod(&snapshot.Pod{Pod: p, Class: c}, sn)
	}
	// Nodes 65 to 191 are full: RoomFrom passes over the third block.
	if got := s.RoomFrom(2*snapshot.RoomBlock, req); got != 3*snapshot.RoomBlock {
		t.Fatalf("RoomFrom(%d) = %d on a full block", 2*snapshot.RoomBlock, got)
	}
	s.Revert()
	for i := range 2*snapshot.RoomBlock - 1 {
		n := b.Node(fmt.Sprintf("new-%d", i), "4", "16Gi")
		s.AddNode(&snapshot.Node{Node: n, Allocatable: snapshot.FromList(n.Status.Allocatable), AllowedPods: 110})
	}
	// Two cpus: the reverted nodes (one cpu each) never had them.
	req = &snapshot.Resources{MilliCPU: 2000}
	if got := s.RoomFrom(2*snapshot.RoomBlock, req); got != 2*snapshot.RoomBlock {
		t.Fatalf("after a revert: RoomFrom(%d) = %d, passing over the empty nodes added after it", 2*snapshot.RoomBlock, got)
	}
	base.Release(s)

	// The next round has node 10 gone: the empty node is the last of the
	// first block.
	in.Nodes = slices.Delete(in.Nodes, 10, 11)
	if s, err = base.Snapshot(in); err != nil {
		t.Fatal(err)
	}
	if base.Syncs != 1 {
		t.Fatalf("the base was built anew: the removal path is not exercised")
	}
	if got := s.RoomFrom(0, req); got != 0 { // two cpus: only the empty node has them
		t.Fatalf("after node 10 went: RoomFrom(0) = %d, passing over the empty node (now at %d)", got, snapshot.RoomBlock-1)
	}
}
