// Package snapshot is the simulator's view of a cluster: nodes (existing,
// launching, planned this round, and node group templates), the pods placed
// on them, and incremental indexes that let the filters answer "does this
// pod fit that node" in time independent of the number of pods.
//
// Changes can be tried and undone: Fork starts recording, Revert undoes
// everything since the matching Fork, Commit keeps it.
//
// Files, in reading order:
//   - snapshot.go: Input and New; Snapshot, Classify, AddNode, and what
//     each node group accounts for (Group, Total).
//   - node.go: Node, Option (one way to launch a planned node), Flex (the
//     options a planned node may still become) and Pod.
//   - resources.go: Resources, the request and capacity vector; Fits and
//     Shortfalls.
//   - class.go: Class, what the filters see of a pod, derived once per
//     class: requests, node affinity, tolerations, host ports, pod
//     (anti-)affinity terms, spread constraints.
//   - fingerprint.go: the hash that makes pods with equal scheduling
//     fields share a Class.
//   - companion.go: a workload's companion requests and share keys
//     (Class.RequestsOn), charged on nodes.
//   - volumes.go: a pod's bound PersistentVolumeClaims to the node
//     affinity of their volumes.
//   - pods.go: AddPod (which narrows a planned node's options) and
//     RemovePod.
//   - journal.go: Fork, Revert, Commit, WithFork, and the undo record of
//     each change.
//   - base.go: Base, a controller's model of the cluster kept from round
//     to round, brought up to date with what changed (Snapshot);
//     base_read.go: what it read of each node and of the rest of the
//     input, to tell what changed; base_release.go: Release, which
//     reverts a round's changes and drops what it registered.
//   - templates.go: node group templates, DisableTemplate, Cordon and
//     Retire.
//   - limits.go: node group and cluster limits (LimitRoom) and Cheapest.
//   - counters.go: Counter, pods per topology domain for spread, affinity
//     and anti-affinity, updated by AddPod and RemovePod.
//   - register.go: Prepare, which registers a class's counters on first
//     use.
//   - dra.go: dynamic resource allocation, delegated to package
//     dynamicresources (which owns the claims, the structured allocator
//     and the devices the plan holds per node and option); the journal
//     tells it of every pod placed and taken off, so Revert undoes device
//     allocations with the pods.
//
// Complexity (P pods of a class's matching counters, K counters, T templates):
//   - New: O(pods + nodes).
//   - AddNode: O(spread counters).
//   - AddPod / RemovePod: O(counters the pod's class is counted in) plus,
//     on a planned node with undecided options, O(options).
//   - Fork, Commit: O(1). Revert: O(changes since the Fork).
//   - Base.Snapshot: O(nodes + pods) pointer and version checks, plus
//     what New costs for each node and pod that changed; Base.Release:
//     O(changes the round made + nodes + classes).
//   - Classify: O(pod spec size) to fingerprint; O(K) when the class is new.
//   - Registering a counter (first use of a spread/affinity constraint):
//     O(nodes + placed pods + T).
//   - A pod with ResourceClaims (DRA): CheckDevices and AddPod run the
//     structured allocator once per option of the node tried, on that
//     node's slices only (skipped when too few devices are free); the
//     devices a placement takes are held per node and option and released
//     by RemovePod and Revert in O(devices).
//
// The package is pure: no clients, no clocks.
package snapshot
