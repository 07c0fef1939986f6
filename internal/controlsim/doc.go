// Package controlsim simulates the control plane over time: a cluster's
// nodes joining, dying, coming back and being drained, whole zones
// failing, and the controller and the partitions' leaders moving replicas
// in response, all in simulated time from one seed. It runs no process,
// no etcd and no goroutine, so a run of a day at a thousand nodes is
// replayed exactly from its seed, as FoundationDB's simulation is.
//
// # What is real and what is modelled
//
// The decisions are the real ones:
//
//   - the controller's planning round: controller.Judge (the dead-node
//     delay), controller.Current (the placement as the groups report it),
//     placement.Compute and controller.Apply (the placements to write);
//   - each partition leader's next membership change: lifecycle.Next
//     (add a learner, promote it, remove a replica, transfer leadership).
//
// The world around them is modelled: etcd is a map of written placements
// and group reports, seen at once; a node's lease expires Timing.LeaseTTL
// after its process dies; a leaderless partition with a live majority
// elects the survivor the replication layer picks (a hash of the
// partition) after Timing.Election; a membership change takes
// Timing.Change or fails after Timing.FailedChange; a learner catches up
// after a snapshot of Timing.Snapshot, which sometimes fails and starts
// over. A node drives at most four changes at once, as lifecycle.Loop
// does. Replicas starting and being dropped on their nodes are not
// modelled: they do not change a Raft group.
//
// # The loop
//
// Run keeps a queue of events ordered by simulated time (ties by the
// order they were scheduled in) and takes them one at a time. Any change
// the controller would see (a group's report, a node's registration or
// intent, a database) schedules a planning round Timing.Settle later, as
// the controller's coalescing does; its own write schedules one more, as
// its watch would. A round due to the dead-node delay runs when the delay
// expires. Periodic re-planning and re-checking are not simulated: with
// nothing missed and nothing changed they decide nothing new, and when
// the queue holds no more than scenario events while the cluster has not
// converged, Run sweeps every partition and plans once more, as those
// periodic passes would.
//
// # What a run reports
//
// The cluster has converged when a round plans no move, none is pending,
// and every partition with a live majority has exactly its placed voters,
// no learner and its preferred leader. At every convergence Run records,
// for each event since the last one, how long the cluster took, the
// replica moves made against the ideal (each partition's voters not in it
// at the previous convergence), and the spread of leaders and replicas
// over the eligible nodes. It records the replica adds in flight over
// time (placed replicas that are not voters yet, what --max-moves
// bounds), and every invariant broken:
//
//   - Quorum: a membership change left a partition without a live
//     majority of its voters;
//   - Replication: a removal left a partition with fewer voters than its
//     replication factor (and fewer than before);
//   - Zone: at a convergence, a partition holds two more replicas in one
//     zone than in another that had an eligible node to take one;
//   - Throttle: more adds in flight than --max-moves, or more to one node
//     than --max-moves-per-node.
//
// A failed run prints its seed and its last events; the same Config
// replays it exactly (Report.Replay is the command).
package controlsim
