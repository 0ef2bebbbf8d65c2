package snapshot

import "slices"

// RoomBlock is how many consecutive nodes of Snapshot.Nodes share one
// bound of free room (see RoomFrom).
const RoomBlock = 64

// roomBound is an upper bound of the free room (allocatable minus
// requested, and pods allowed minus pods) of every node in one block of
// RoomBlock consecutive nodes.
type roomBound struct {
	cpu, memory, ephemeral int64
	pods                   int
	// open: a node of the block is planned or a template; its room
	// follows its options, so the block is never ruled out.
	open bool
	// loose: a pod was placed in the block since the bound was worked
	// out, so the bound may be higher than it has to be.
	loose bool
	// shapes are the shapes (Node.Shape) of the block's nodes, each once.
	shapes []int32
}

// rooms are the bounds of the leading full blocks of Snapshot.Nodes. The
// bounds stay upper bounds under every change of the snapshot: a pod
// placed lowers a node's room (the bound still holds, marked loose), a
// pod taken off raises its block's bound at once (unplace), and a change
// of the node list's order or length below the bounds drops the bounds
// from there (they are worked out again when asked for).
type rooms struct {
	blocks []roomBound
}

// RoomFrom returns the first index at or after i of a node that may have
// room for one more pod requesting req: whole blocks (aligned on
// RoomBlock) where no node has that room are passed over. It never passes
// over a node NodeResourcesFit would let the pod onto, so a scan that
// starts its look at a block from here visits the same fitting nodes in
// the same order. req is the least a pod of the class requests on any
// node (Class.Base); scalar resources are not bounded.
// O(blocks passed over), and RoomBlock per block whose bound is redone.
func (s *Snapshot) RoomFrom(i int, req *Resources) int {
	for i%RoomBlock == 0 && i+RoomBlock <= len(s.Nodes) {
		b := s.roomBlock(i / RoomBlock)
		if b.open || b.pods >= 1 && (req.MilliCPU <= 0 || req.MilliCPU <= b.cpu) &&
			(req.Memory <= 0 || req.Memory <= b.memory) && (req.EphemeralStorage <= 0 || req.EphemeralStorage <= b.ephemeral) {
			return i
		}
		i += RoomBlock
	}
	return i
}

// roomBlock returns block k's bound, worked out when it is missing or
// loose.
func (s *Snapshot) roomBlock(k int) *roomBound {
	r := &s.rooms
	for len(r.blocks) <= k {
		r.blocks = append(r.blocks, roomBound{loose: true})
	}
	b := &r.blocks[k]
	if b.loose {
		*b = roomBound{shapes: b.shapes[:0]}
		for _, n := range s.Nodes[k*RoomBlock : (k+1)*RoomBlock] {
			b.include(n)
			if !slices.Contains(b.shapes, n.Shape) {
				b.shapes = append(b.shapes, n.Shape)
			}
		}
	}
	return b
}

// BlockShapes returns the shapes (Node.Shape) of the nodes of the block
// that starts at i (aligned on RoomBlock), each once; nil when i does not
// start a full block or the block holds a planned node or a template
// (they have no shape). A class that failed a static filter on each of
// them can use no node of the block. The slice must not be modified.
func (s *Snapshot) BlockShapes(i int) []int32 {
	if i%RoomBlock != 0 || i+RoomBlock > len(s.Nodes) {
		return nil
	}
	if b := s.roomBlock(i / RoomBlock); !b.open {
		return b.shapes
	}
	return nil
}

// include widens the bound to hold node n's free room.
func (b *roomBound) include(n *Node) {
	if n.Planned || n.Template || n.Flex != nil {
		b.open = true
		return
	}
	b.cpu = max(b.cpu, n.Allocatable.MilliCPU-n.Requested.MilliCPU)
	b.memory = max(b.memory, n.Allocatable.Memory-n.Requested.Memory)
	b.ephemeral = max(b.ephemeral, n.Allocatable.EphemeralStorage-n.Requested.EphemeralStorage)
	b.pods = max(b.pods, n.AllowedPods-n.podCount)
}

// roomTaken notes a pod placed on n (the bound may be loose now).
func (s *Snapshot) roomTaken(n *Node) {
	if k := int(n.pos) / RoomBlock; k < len(s.rooms.blocks) {
		s.rooms.blocks[k].loose = true
	}
}

// roomFreed notes a pod taken off n: its block's bound holds n's room.
func (s *Snapshot) roomFreed(n *Node) {
	if k := int(n.pos) / RoomBlock; k < len(s.rooms.blocks) && !s.rooms.blocks[k].loose {
		s.rooms.blocks[k].include(n)
	}
}

// roomsFrom drops the bounds of the blocks that hold index i and after:
// the nodes there changed places or went.
func (s *Snapshot) roomsFrom(i int) {
	if k := i / RoomBlock; k < len(s.rooms.blocks) {
		s.rooms.blocks = s.rooms.blocks[:k]
	}
}
