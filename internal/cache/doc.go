// Package cache is the store of the cache tier: documents kept in Redis,
// written by every writer through one compare-by-SCN script so that an
// older state never replaces a newer one (docs/design/cache.md holds the
// contract).
//
// An Entry is one document (or a tombstone) as of an SCN, with the time
// at which it was known to be the latest (AsOf). A Ref names it: the
// database, the table's cache generation, the table, the partition and
// the encoded key. Writers call Upsert (one entry) or UpsertBatch (many,
// pipelined); the script refuses an entry older than the one stored,
// merges an equal one by keeping the later AsOf, and replaces anything
// older, tombstones included, then sets the table's TTL. RaiseWatermark
// moves a partition's watermark forward, never back. Get reads an entry
// and its partition's watermark in one round trip; an entry's age bound
// is now - max(AsOf, watermark).
//
// Redis incarnations: each Redis process holds an epoch (EpochKey), begun
// by the first connection of any Store to a process that has none of its
// own (restarted empty, loaded from a file, promoted from replica). A
// state read (Write.Read: a fill, a bootstrap) from before the epoch is
// refused as Predated, since a change only the lost Redis held may be
// missing from it; a watermark vouches only for entries read within the
// epoch (Entry.Vouched).
//
// The Store talks to a primary and its replicas (the first address is
// the primary). Every request feeds its endpoint's health: an endpoint
// whose recent requests failed or were slow too often is marked
// unhealthy (see Health, a pure judgement) and gets no requests but
// probes until enough probes pass. Reads go to the primary, or to a
// healthy replica while the primary is unhealthy; writes go to the
// primary only, and fail fast with ErrUnavailable while it is unhealthy:
// a fill is then dropped, the updater retries.
//
// What this package does not do: decide what to cache or when an entry
// is fresh enough (the read path), read change logs (the updater in
// internal/datastream).
package cache
