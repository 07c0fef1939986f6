// Package storage is the node's storage engine: one Pebble store holding every
// partition replica of the node, each under its own key prefix.
//
// Writes are atomic batches. Commit makes a batch durable before it returns:
// Pebble's commit pipeline groups the WAL syncs of concurrent committers, so
// many writers share one fsync. Callers that must order batches (the
// partition sequencer) use Enqueue under their lock and Wait outside it.
//
// # Row cache
//
// The engine keeps the values of recently read keys of one kind (the node
// caches documents) so that a point read of a hot key skips Pebble's
// memtables and levels, where a Get spends most of its time searching a
// large memtable and creating table iterators level by level.
//
// Coherence. Every batch that writes a cached-kind key marks the key's
// shard before the batch can become visible (begin) and again once it is
// visible (end): the shard's version moves and the key leaves the cache
// both times, and the shard counts the writes between the two marks. A read
// that misses notes the shard's version, reads Pebble, and inserts what it
// read only if the version has not moved and no write was in flight when it
// started. A value read before a write became visible therefore never
// enters the cache after that write began, and a read that starts once the
// write is visible finds the key absent or inserted by a read that saw the
// write. A range deletion or an ingest marks every shard, except a range
// deletion of a span that holds no cached key (Options.RowCacheSpans), so
// that the Raft log's truncation does not empty the whole cache.
//
// Write-through. At its end a batch leaves the values it wrote in the cache
// (a document read after its update is a hit), but only when that cannot be
// older than what Pebble holds: no other batch wrote the same key at any
// point of this batch's life (Pebble makes batches visible in sequence
// order, but their end marks may run in any order, so of two overlapping
// writers of a key neither caches it), and no range deletion or ingest was
// in flight at any point of it (an ingest's sequence number is not known
// here). Writes of other keys of the shard do not matter: a shard-wide
// condition let almost no batch write through while many partitions
// applied their batches at once.
package storage
