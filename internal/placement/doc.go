// Package placement is the placement driver's brain: a pure function from
// the cluster (nodes, their zones and health), the databases (partition
// count, replication factor) and the current placement (per partition, the
// replicas and the leader its Raft group reports) to a target placement and
// the next few moves towards it. It does no I/O, reads no clock, starts no
// goroutine and uses no randomness, so every decision can be replayed from
// its input, and it is tested over thousands of random cluster shapes.
//
// # The model
//
// Every partition of a database is one Raft group with Database.Replicas
// voters. Placement keeps the Espresso paper's constraints (section 4,
// "Cluster Manager"), in this order of precedence:
//
//  1. at most one replica of a partition per node;
//  2. the replication factor is restored when a node is gone, and never
//     drops during a move: a replica is removed only after its replacement
//     was added and caught up;
//  3. a partition's replicas are spread over zones as evenly as the zones
//     allow: all in distinct zones when there are at least as many zones as
//     replicas, else zone counts differing by at most one (a zone with too
//     few nodes holds what it can);
//  4. replicas are spread evenly over the eligible nodes (alive, not
//     draining): per database and in total, the fullest and the emptiest
//     node differ by at most one where the zones allow it (always within a
//     zone);
//  5. leaders are spread the same way, each on a caught-up voter;
//  6. minimal movement: a placement that meets the constraints is not
//     touched, and a node that joins receives about 1/N of the replicas,
//     taken from the fullest nodes, nothing else moves.
//
// Node health arrives already judged (see StateOf): an Alive node works; a
// Down node (dead for less than the configured delay) keeps its replicas,
// since it will likely come back and catch up from the log, but loses its
// leaderships; a Gone node (dead past the delay, or missing from the node
// list) has its replicas recreated elsewhere. This is Helix's delayed
// rebalancing. A Draining node gives everything away, keeping a replica only
// while no other node can take it.
//
// A partition whose voters have no live majority cannot change its Raft
// membership; placement reports it in Plan.Unavailable and leaves it alone.
//
// Mode ShardedMySQL replaces constraints 4 to 6 with the layout the paper
// compares against: nodes form replica sets, each set hosts whole shards and
// one node of each set leads them all. It exists to measure failover.
//
// # Spread's steps
//
// Spread mode computes its target in steps that each move as little as
// they can:
//
//  1. repair: keep every current replica on a node that is not gone or
//     draining, add replicas up to the replication factor (on the zone with
//     the fewest replicas of the partition, then the least loaded node);
//  2. zones: move replicas of partitions whose zones are not spread as
//     evenly as the zones allow;
//  3. balance: while two eligible nodes differ by two or more replicas of a
//     database, move one from the fuller to the emptier; then the same for
//     replica totals, moving within a database where it keeps that
//     database balanced;
//  4. drop the extra replicas of partitions caught in the middle of a move
//     (its add is complete), fix their zones, and balance again. The
//     replica to drop is the one the last plan (Input.Previous) did not
//     keep; that drop happens before step 2, so balancing sees true loads.
//
// Every step only moves what violates a constraint, so a placement that
// meets them all is its own target. Balancing prefers replicas that do not
// exist yet (new partitions, adds of this plan), then replicas that do not
// lead, and never undoes a move of the last plan still under way.
//
// # Moves
//
// A Plan holds the target and an ordered list of moves, at most
// Options.MaxMoves, the most urgent first: leaderships of partitions whose
// leader is missing, down, draining or leaving; removals that complete a
// move; adds that restore the replication factor; adds that fix zones,
// drain nodes or balance; last, leadership transfers that balance leaders
// (only once replicas have settled, so a rebalance does not move leaders
// twice). New partitions are not moves: Plan.Create places a new database
// in one step.
//
// Every call replans from scratch, so two calls could disagree about where
// a replica belongs while much work is pending. Three rules make the loop
// converge instead of moving a replica back and forth: a move's removal
// takes the replica the last plan meant to replace (Input.Previous);
// balancing leaves alone a replica that the last plan just placed while
// its move is under way; and a balancing add starts only if it evens out
// the current loads (the counts as they are, not as planned).
//
// # Cost
//
// A call reads the whole current placement and writes a whole plan, so it
// costs time linear in the replicas; beyond that, its work follows what
// must change, not the cluster's size. The balancing steps take their
// moves from node orders kept up to date as loads change (overall and per
// zone) instead of trying every pair of nodes: a zone that none of a
// node's replicas may enter is passed over whole, a leadership is offered
// only to its partition's other voters, and a new replica's node comes
// from per-zone heaps of the least loaded nodes. These searches make
// exactly the moves a scan of every node and every pair would (a property
// test holds them to it); docs/benchmarks/placement.md has the curve.
//
// # The caller's duties
//
// The controller (one active at a time, elected through etcd) runs this
// loop:
//
//	var previous placement.Placement
//	for {
//		in := placement.Input{
//			Nodes:     nodes(),            // health judged with StateOf
//			Databases: databases(),
//			Current:   reportedPlacement(), // what the Raft groups report
//			Previous:  previous,           // the last plan's Target
//			Options:   placement.Options{MaxMoves: 16},
//		}
//		plan, err := placement.Compute(in)
//		if err != nil { ... }
//		createGroups(plan.Create)          // one batched etcd write
//		for _, m := range plan.Moves {
//			issue(m)                       // asynchronously
//		}
//		previous = plan.Target
//		waitForChange()                    // a move completed, a node changed
//	}
//
// The duties are:
//
//   - Report Current truthfully: Replicas are the caught-up voters of each
//     group, Learners the replicas being added (an AddReplica in flight, until
//     promoted), Leader the Raft leader or "" if none is known. A removed
//     replica must disappear from Current.
//   - An AddReplica is: add a learner on To, stream a snapshot, catch up,
//     promote to voter. Until promoted, report it as a learner: that counts
//     against MaxMoves and keeps the matching RemoveReplica back.
//   - Issue a RemoveReplica only as returned: Compute returns it only once
//     every replacement of that partition is a voter and the replica to remove
//     no longer leads.
//   - A TransferLeader names a caught-up voter. When From is down or empty,
//     make To campaign instead of asking From to step down.
//   - Pass the last plan's Target as Previous. Without it (a new controller)
//     placement still converges, but a move whose add completed may be
//     finished differently than planned.
//   - Call again whenever a move completes or fails, a node changes state,
//     or a database is created; a move that failed is simply planned again.
//   - Partitions of databases not in Databases are ignored: dropping a
//     database is not placement's job.
package placement
