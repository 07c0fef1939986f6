// Package lifecycle brings the replicas on this node in line with the
// placement, one step per partition at a time: start a replica, restart
// it empty, drop it, or, on the partition's leader, change the Raft
// group's membership one step towards the placement. Next decides the
// step as a pure function of what the node sees (State in, Step out): no
// I/O, no clock, no goroutines, so every decision can be replayed from
// its input and is table-tested. Loop carries the steps out through the
// node (Host).
//
// # The loop
//
// The placement controller (internal/controller) writes where each
// partition's replicas belong; every node then brings the replicas it
// hosts in line, partition by partition. Loop is that thin I/O driver
// around Next: one Reconcile pass does, in order,
//
//	for each orphan: decide, then forget it or delete its data
//	start the placed replicas Next says to start, several at once
//	for each partition placed here, hosted here or not {
//		s := read the partition's State
//		for {
//			step := lifecycle.Next(s)
//			apply step.Mark to the partition's unlisted-since time
//			if step.Kind == lifecycle.ReadStatus {
//				s.Status = the Raft group's status; continue
//			}
//			execute step (start, restart, drop, add a learner, ...)
//			break, or re-read s after a Start and go on
//		}
//	}
//
// Run makes a pass on every change of the placement, the nodes or the
// catalog, every second, and sooner (Step.Soon) while a learner catches
// up. One pass takes at most one step per partition; the next pass, from
// the state the step produced, takes the next one. On a partition's
// leader the membership change runs in a goroutine of its own, one per
// partition and a few per node at once (the rest wait for a later pass).
//
// The node implements Host, the loop's only view of the world: it lists
// the placements of the databases its catalog knows and the replicas on
// disk, hands over its running replicas, starts, restarts empty and drops
// them, and names Raft members for the log. It makes the first pass
// itself before it answers requests, then calls FindOrphans once and Run.
//
// # Membership changes
//
// Only the leader changes its group, one change at a time, in this order:
//
//  1. add a placed replica missing from the group as a learner (its node
//     must be alive);
//  2. promote a learner that has caught up (CaughtUp entries behind);
//  3. remove a replica no longer placed: a learner at once, a voter only
//     once the placed voters alone reach the replication factor, so that
//     it never drops during a move; if the replica to remove is the
//     leader's own, hand leadership to a caught-up placed voter first
//     (the preferred leader if it qualifies), and the new leader removes
//     it;
//  4. hand leadership to the preferred leader once it is a caught-up
//     voter whose node is alive and not leaving.
//
// A replica its leader is rebuilding (a consistency repair) is neither
// added, promoted nor handed leadership: the repair re-adds it.
//
// # Dropping a replica
//
// A replica that is not placed here and does not lead is dropped with its
// data only once its group no longer counts it: while it is a member,
// deleting its state could let it vote with an empty log. Either its own
// configuration no longer lists it, or, for a replica removed while it was
// down or cut off (it never applies its removal), its leader's published
// configuration, in a term at least as recent, has left it out
// continuously for StaleAfter: the report and the placement arrive on
// different watches, and a replica placed here again must not be deleted
// on a report older than the placement. Next keeps that clock through the
// caller: Step.Mark tells when to set and clear the time since which the
// replica has looked unlisted (State.UnlistedSince). The same rule drops
// an orphan: a replica with state on disk that no placement puts here.
package lifecycle
