// Package clusterread is the one reader of the cluster for berth's
// planners: what the provisioning round, the scale-down round and the
// companion rules read from the informer cache, read the same way for all
// of them (Read: node groups, nodes, pods, budgets, DaemonSets, storage,
// devices, workload controllers; Units: headroom units and buffer chunks,
// capped before any is made; Lookup: what a CompanionProfile's selectors
// consult). Controllers read here, never through each other or through the
// webhook, so that two planners never disagree on what the cluster is.
package clusterread
