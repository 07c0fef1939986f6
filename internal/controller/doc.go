// Package controller is the placement driver, Apache Helix's role in the
// Espresso paper: it decides where every partition's replicas live and
// which one should lead, and writes those decisions to etcd, where the
// nodes carry them out.
//
// # One active controller
//
// Run runs in every node. The nodes campaign in an etcd election
// (go.etcd.io/etcd/client/v3/concurrency) under {prefix}/controller; the
// winner is the active controller until its session lease ends: when its
// process dies, another node wins within the lease's TTL (2 s by default).
// Every write of the active controller is fenced by its election key, so a
// deposed controller that has not noticed yet writes nothing. Active names
// the current winner.
//
// # The loop
//
// The active controller watches the nodes (their leases are the failure
// detector), the databases (the catalog), the placements, and what the
// partitions' leaders report of their Raft configurations
// ({prefix}/groups/{node}, see membership.GroupReport). On every change
// (coalesced for 50 ms) and at least every 5 s it runs one planning
// round:
//
//  1. judge every node with placement.StateOf: alive, down (dead for less
//     than Options.DeadNodeDelay: keeps its replicas, leads nothing) or
//     gone (its replicas are recreated elsewhere). The delay runs from when
//     a controller first found the node dead, recorded in etcd
//     ({prefix}/deaths/{id}, deleted by the node's registration when it is
//     back, whether a controller is active then or not), so a
//     controller that takes over continues it rather than starting it
//     again: controllers moving more often than the delay would otherwise
//     never replace a dead node's replicas;
//  2. build the current placement from the group reports (the last report
//     of a partition whose leader just died; the written placement while a
//     group has never reported), with the replicas the written placement
//     adds and the group does not list yet counted as learners: adds in
//     flight count against MaxMoves;
//  3. placement.Compute, then apply its result to the written placements:
//     Plan.Create places a new database whole; AddReplica adds a node to a
//     partition's replicas, RemoveReplica takes one out, TransferLeader sets
//     the preferred leader;
//  4. write every database whose placement changed, all in one etcd
//     transaction (split only past etcd's per-transaction limits), each key
//     compared with the revision this controller last saw, so one round is
//     one write whatever the number of partitions it changes.
//
// Steps 1 to 3 decide without I/O (Judge, Current, placement.Compute,
// Apply), so internal/controlsim runs the same decisions over simulated
// time.
//
// The nodes do the rest (internal/node): the leader of each partition adds
// a learner, streams it a snapshot, promotes it once caught up, removes the
// replicas no longer placed (a voter only once the placed voters reach the
// replication factor), and transfers leadership to the preferred leader.
// As their reports change the controller plans again, so the throttled
// moves progress round by round until the placement meets the target.
package controller
