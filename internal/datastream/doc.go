// Package datastream runs named pipelines (datastreams, as in Brooklin)
// from databases' change logs to sinks: Kafka today.
//
// A datastream is a definition stored in etcd (database, optional table
// and partition filters, the sink, an auto-pause policy, where to start)
// plus its runtime state: whole-stream or per-partition pauses, and per
// partition a checkpoint (the last SCN the sink acknowledged). It runs as
// one task per (datastream, partition). A task reads the partition's
// change log from a replica hosted on its node, produces each transaction's
// events to the sink, waits for the sink's acknowledgement and only then
// moves the checkpoint: delivery is at least once, and every record
// carries its SCN so consumers drop what they have seen.
//
// Tasks are spread over the nodes by Assign, a pure function of the
// tasks, the live nodes and the placement that every node computes alike:
// a task runs on a live node placed to hold a replica of its partition,
// preferably not the partition's preferred leader. A node runs a task only
// while it holds the task's owner key in etcd, created under the node's
// datastream lease; checkpoint writes compare that key, so a node that
// lost its lease (dead, cut off) can neither run the task twice nor move
// its checkpoint. When a node dies its lease expires and the next node in
// the assignment takes the task over from the last checkpoint.
//
// The Kafka sink may dial over TLS and authenticate with SASL (SCRAM or,
// over TLS only, PLAIN); its password and client key are stored with the
// definition but every answer shows them as Redacted (security.go).
//
// Records are the change events as JSON, the post-images in Avro, or
// Debezium's envelope (debezium.go). A "from":"snapshot" stream first
// delivers every document of its tables as of one SCN, resumable across
// owners without a gap or a duplicate (snapshot.go), then the log.
//
// A task whose sink refuses its records keeps retrying with backoff; after
// the policy's count of consecutive failures it is auto-paused for the
// policy's time, with its last error in the status, and the other
// partitions go on.
//
// Layout in etcd under the prefix (next to the catalog and membership):
//
//	{prefix}/datastreams/defs/{name}               JSON Record: definition, pauses, creation time
//	{prefix}/datastreams/owners/{name}/{partition} owner node id, under the owner's lease
//	{prefix}/datastreams/tasks/{name}/{partition}  JSON TaskRecord: checkpoint, auto-pause, last error
//	                                              (written by the owner only, fenced on the owner key)
//	{prefix}/datastreams/status/{node}             JSON: the node's tasks' live status, under its lease
//
// # Assignment
//
// Assign places the tasks in three steps:
//
//   - a task's candidates are the live nodes placed to hold a replica of
//     its partition, without the partition's preferred leader when another
//     one is live (reading there would load the node that takes writes);
//   - candidates are ranked by a hash of (task, node) — rendezvous
//     hashing, so a change elsewhere does not reorder a task's choices —
//     and a task takes its first candidate below the load limit, visiting
//     tasks in hash order; when all its candidates are full it takes the
//     least loaded one. The limit is the mean load rounded up while it is
//     small, else 1.25 × the mean (at most ceil(1.25 × mean) either way);
//   - a node left below the mean rounded down (while it is small), or
//     below mean / 1.25, then takes a task from a node with at least two
//     more, along the shortest chain of moves to candidates.
//
// Preferred leaders rather than current ones keep tasks still while
// leaderships move back and forth; the controller makes them agree.
//
// What this package does not do: HTTP (internal/api), placement
// (internal/controller), reading the change log (internal/changes).
package datastream
