// Package replication replicates each partition with its own Raft group
// (go.etcd.io/raft/v3) and stands behind partition.Replicator, so that the
// layers above see only "replicate this write set, get its SCN".
//
// A Host is one node's side of every Raft group it holds a replica of:
//
//   - One goroutine (the loop) drives all Raft groups: it ticks them, steps the
//     messages the transport delivers, and handles their Ready output. The
//     log appends and hard states of all Raft groups that are ready at the same
//     time go to Pebble in one synced batch, followed by the application of
//     their committed entries in the same batch, so many Raft groups share one
//     fsync. A leader's appends go out at once (its own append counts
//     towards a commit only once synced); other messages only after that
//     batch is durable. A batch that only applies committed entries is not
//     synced (Ready.MustSync): they are durable in the log already, and are
//     applied again after a crash that loses the batch, so a write costs
//     one fsync, not two.
//   - Raft state lives in the node's Pebble store under each partition's
//     prefix (keys.Partition.Raft...). Applying a committed write set writes,
//     in one batch, the partition's documents, counters, change-log entry and
//     applied SCN (partition.Apply) and the Raft applied index, so a restart
//     resumes exactly after the last applied entry.
//   - SCNs: generation = the Raft term of the entry, sequence = the previous
//     applied sequence + 1. Sequences count committed write sets, so the
//     change log has no gaps although Raft indexes also count empty and
//     configuration entries.
//   - Idle Raft groups cost nothing: a leader whose followers have everything
//     stops ticking and tells them to stop too (quiescence). The transport's
//     per-node liveness (one ping per tick per node pair, and the stream
//     breaking) stands in for the heartbeats: when a node is seen dead, every
//     Raft group it led wakes up and elects within a few ticks.
//   - Transport: gRPC, one long-lived stream per ordered node pair carrying
//     batches of Raft messages of all Raft groups; snapshots go on their own
//     streams as sstables, and replace the receiver's range (data and Raft
//     state) in one atomic Pebble ingestion (see snapshot.go).
//   - Leadership: CheckQuorum and PreVote. A NotLeader partition.NotAppliedError
//     promises the write was not applied; a proposal in the log when its leader steps
//     down waits for the entry applied at its index (committed, or
//     superseded), so its outcome is known unless the caller's deadline
//     passes first (problem.Indeterminate).
//
// Reads: ReadIndex makes a read linearizable (Raft ReadIndex, one quorum
// round shared by the concurrent readers of a Raft group; none at all for the
// ready leader that is its Raft group's only voter, or that holds a leader
// lease, which a new leader pays for by committing nothing until every
// earlier lease has run out: see lease.go); FreshAt bounds the staleness
// of a follower read.
package replication
