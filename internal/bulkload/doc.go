// Package bulkload runs bulk loads: it takes a build (a directory of
// per-partition files and a manifest, docs/design/bulk.md) from where the
// user says it is and has each partition's leader apply its file, in
// chunks, while the table serves.
//
// A load is a record in etcd, identified by the SHA-256 of the build's
// manifest, so the same build is the same load and a changed one is a
// new load. Start checks the build against the catalog before recording
// anything: the database and table exist, the partition count and
// partitioner match, the schema version is registered; each mismatch is
// a problem naming the manifest's field.
//
// Every node's Manager follows the loads (an etcd watch, and a tick for
// leaderships that moved) and drives the partitions it leads, at most
// Config.Parallel at once, within the node's and the load's byte rates.
// A load goes through these states (Next, a pure function of the record
// and the partitions' progress, decides; the node whose compare-and-swap
// lands moves it):
//
//	verifying  each partition's leader fetches its file (a directory
//	           every node reads, or http(s) into a staging copy resumed
//	           with Range requests) and checks its size and SHA-256; one
//	           refused file fails the load before anything is applied
//	loading    each leader reads its file from the partition's mark and
//	           applies chunks of about Config.ChunkBytes with
//	           Partition.LoadChunk, each a compare-and-swap of the mark
//	           from where it is to where the chunk ends
//	done | cancelled | failed
//
// The partition's mark is replicated with the documents it covers, so a
// new leader (after a failover, a kill -9) resumes exactly after the last
// applied chunk: nothing skipped, nothing applied twice. Loading a build
// that is done again answers the done load at once; one that was
// cancelled or failed starts a new run, in which partitions already done
// stay done.
//
// Modes: merge (loaded documents replace those with the same key) and
// replace, whose chunks are staged out of sight and whose last step in
// each partition is a swap: the table's documents for the staged ones at
// one SCN (partition.Replica.ReplaceChunk; docs/design/bulk.md).
//
// A replace that ends failed or cancelled leaves, in each partition that
// staged and did not swap, a staging table no read sees; once the load
// has ended and is not started again, each partition's leader deletes it
// through Raft (Partition.DiscardStaging, conditional on the mark it
// read, so a run started meanwhile keeps it) and reports it in the
// partition's progress (stagingLeft decides which partitions to check).
//
// Cancel: a partition starts loading only by writing its progress on the
// condition that the load's record has not changed since the driver read
// it, so after a cancel no partition starts, and those already loading
// finish: each partition ends fully loaded or untouched.
//
// Layout in etcd under the prefix:
//
//	{prefix}/bulk/loads/{id}         JSON Record: source, mode, the manifest's files, state
//	{prefix}/bulk/progress/{id}/{p}  JSON Progress of partition p, written by its leader's driver
//
// What this package does not do: HTTP (internal/api), applying a chunk
// to the partition's documents and indexes (internal/partition), the
// file format (internal/bulk).
package bulkload
