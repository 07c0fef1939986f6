// Package partition is one replica of one partition: it evaluates requests
// of a document group under that group's latch into a write set, hands the
// write set to the replicate step, and serves reads from the storage engine.
//
// Evaluation happens once, on the leader; apply is a pure function of the
// write set and its SCN, so followers apply mechanically and idempotently.
//
// # Bulk loads
//
// LoadChunk applies a chunk of a bulk load: evaluated like a write of many
// documents, it records how far its load got (a LoadMark, in partition
// metadata) and applies only from the mark recorded, checked at
// evaluation and again at apply (Applies), so no chunk applies twice. It
// is applied as one ingested sstable (ApplyIngest) on every replica.
//
// # Idempotent requests
//
// A request with an Idempotency (Request.Idempotency) that changes
// something stores its outcome in the write set that applies it, so every
// replica remembers it exactly when it holds the write, and a retry of
// the same request, at this leader or the next, is answered that outcome
// instead of running again (see idempotency.go). The leader purges
// expired outcomes with upkeep write sets (ForgetOutcomes).
//
// # Consistency checksums
//
// ComputeChecksums sums a replica's state at one applied index range by
// range, so that two replicas that disagree learn where:
//
//	documents/<table>   every document of a table
//	autoinc/<table>     the auto-increment counters of a table
//	index/<table>       every index entry of a table
//	log/<from>-<to>     change-log entries with sequence in [from, to]
//	meta                partition metadata, but the index build states
//	outcomes            the remembered outcomes of idempotent requests
//	other               anything else under the prefix (none today)
//
// Left out: the Raft section (log, hard state, applied index: each
// replica's own), and the index build states in metadata, which a replica
// records for itself (markReady) as well as through replication.
//
// The change log is trimmed by each replica on its own clock
// (Replica.TrimLog), so it is summed in buckets of LogBucket sequences,
// and Diff compares only the buckets both replicas hold whole.
package partition
