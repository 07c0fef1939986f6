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
//     resumes exactly after the last applied entry. A bulk-load chunk ends
//     the batch and is applied as one ingested sstable holding the same
//     effects and the applied index (partition.ApplyIngest), once the
//     batches before it are durable; a chunk whose from-mark is no longer
//     the partition's is a no-op on every replica (partition.Applies).
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
//
// The sole voter's shortcut needs no clock. The ready leader of a group
// whose only voter it is answers ReadIndex at once, without a round through
// the loop: it is its own quorum, so no other replica can have been elected
// and no write can be acknowledged elsewhere; every write acknowledged
// before the call was applied here before its answer (Replicate returns
// after the apply), and "ready" means the entries of earlier terms are
// applied too. A configuration that adds a voter takes effect on the loop,
// which publishes it before it steps any message of the new voter, so a
// vote for another leader is never cast while this view still reads "sole
// voter". The ready leader within its lease answers at once too: no other
// leader can have committed anything yet, and everything this one
// acknowledged it applied first.
//
// # Snapshots
//
// A snapshot of a partition is every key under its prefix except the Raft
// section (documents, index entries, change log, metadata), read through
// one Pebble iterator (a consistent point in time), plus the applied state
// read through the same iterator, which gives the snapshot's position.
//
// The sender writes the keys as sstables straight into the stream (no
// file, no copy in memory): each table holds a run of keys and a range
// deletion over the span it covers, and the tables tile the partition's
// data spans (below and above the Raft section) without overlapping.
//
// Stream: 'h' header (sender, partition, the MsgSnap); per table, 'c'
// chunks of its bytes then 'e' its end; then 't' trailer (the applied
// state). The receiver writes the tables to files in a staging directory
// and steps the MsgSnap restated at the trailer's position. The Ready that
// installs it adds one more table covering the Raft section (a range
// deletion, the hard state, applied and truncated states at the snapshot)
// and ingests all of them in one Pebble ingestion, which is atomic: after
// a crash the replica has either its old state (and raft asks for the
// snapshot again; the staged files are discarded at start) or the
// snapshot's, whole, with a Raft state that agrees with it.
package replication
