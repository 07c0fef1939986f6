// Package changes consumes Doppio's change stream (GET /_changes/{db}).
//
// Both ways go through a *client.Client, with its transport, TLS,
// credentials and retries: Open(ctx, c, db, o) reads one stream line by
// line (events and checkpoint-only lines); New(c, db, handle) makes a
// Consumer.
//
// A Consumer is the managed way: it subscribes to a database (optionally
// filtered by tables and partitions), groups events into whole
// transactions and hands each to its Handle callback, in commit order per
// partition. Progress is kept per partition in a CheckpointStore (in
// memory, or in etcd with EtcdStore); a restarted consumer resumes from
// it, so a transaction is delivered at least once: those handled after the
// last saved checkpoint are delivered again after a crash (Handle must be
// idempotent, e.g. by remembering each partition's last applied SCN).
// A Handle error is retried (with backoff) until it succeeds or the
// consumer stops; nothing is skipped. Connection failures move to the next
// server and resume from the last handled transaction.
//
// Two events are a table's rather than a document's, with no key and no
// images: OpDrop (the table's documents in the partition are gone) and
// OpReplace (a bulk load in replace mode swapped them for the loaded
// ones, which are no events). On OpReplace, drop what you hold of the
// table in that partition and read it again with Reread.
//
// With Group and EtcdEndpoints set, several instances of one consumer
// group split the partitions among themselves: each instance registers
// under a lease, partitions are assigned by rank in the sorted member list,
// and an instance consumes a partition only while it holds the
// partition's ownership key (created under its lease, deleted when it
// hands the partition over), so no two instances ever consume — or save a
// checkpoint for — the same partition at once. An instance that dies loses
// its lease; its partitions move to the others after the lease's TTL.
//
// Groups and EtcdStore speak to etcd through its v3 JSON gateway over
// HTTP, so this package links neither gRPC nor the etcd client. A secure
// cluster's etcd admits nodes only and serves no gateway: there, groups
// and checkpoints live in an etcd of the application's own.
package changes
