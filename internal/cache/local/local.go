// Package local is the cache tier's in-process hot-key cache: the entries
// of the documents this process reads most, kept within a byte budget by
// W-TinyLFU (github.com/maypok86/otter/v2), so the hottest keys are
// answered without a round trip to Redis.
//
// It holds the same entries as Redis (internal/cache.Entry: SCN, as-of,
// schema version, Avro bytes, mtime, or a tombstone), under the same
// keys (cache.Ref.EntryKey, which carries the table's cache generation),
// and takes them by the same compare-by-SCN rule as Redis's script: an
// older SCN is refused, an equal one keeps the stored value with the later
// as-of, a newer one replaces it. Each entry expires its table's TTL after
// its last write, as in Redis. Whether an entry is fresh enough for a read
// is the caller's judgement (internal/cache/tier).
package local

import (
	"time"

	"github.com/doppio-db/doppio/internal/cache"
	"github.com/maypok86/otter/v2"
)

// entryOverhead approximates what an entry costs besides its key and
// Avro bytes (the cache's node, the item), so a budget of many tiny
// documents is not overrun.
const entryOverhead = 96

// Cache is the hot-key cache; safe for concurrent use. A nil *Cache holds
// nothing and refuses nothing.
type Cache struct {
	c *otter.Cache[string, item]
}

type item struct {
	e   cache.Entry
	ttl time.Duration
}

// New returns a cache of about maxBytes of keys and documents, or nil for
// maxBytes <= 0 (no hot-key cache).
func New(maxBytes int64) *Cache {
	if maxBytes <= 0 {
		return nil
	}
	return &Cache{c: otter.Must(&otter.Options[string, item]{
		MaximumWeight: uint64(maxBytes),
		Weigher: func(k string, v item) uint32 {
			return uint32(min(len(k)+len(v.e.Data)+entryOverhead, 1<<31))
		},
		ExpiryCalculator: otter.ExpiryWritingFunc(func(e otter.Entry[string, item]) time.Duration {
			return e.Value.ttl
		}),
	})}
}

// Get returns the entry stored under key (cache.Ref.EntryKey), if any.
// The entry's Data is shared: read it, never write into it.
func (c *Cache) Get(key string) (cache.Entry, bool) {
	if c == nil {
		return cache.Entry{}, false
	}
	it, ok := c.c.GetIfPresent(key)
	return it.e, ok
}

// Upsert stores e under key, by the compare-by-SCN rule, to expire ttl
// after this write; it returns what it did. e.Data must not change
// afterwards.
func (c *Cache) Upsert(key string, e cache.Entry, ttl time.Duration) cache.Outcome {
	if c == nil {
		return cache.Refused
	}
	out := cache.Written
	c.c.Compute(key, func(old item, found bool) (item, otter.ComputeOp) {
		out = compare(old.e, found, e)
		switch out {
		case cache.Refused:
			return old, otter.CancelOp
		case cache.Merged:
			old.e.AsOf = max(old.e.AsOf, e.AsOf)
			old.ttl = ttl
			return old, otter.WriteOp
		}
		return item{e: e, ttl: ttl}, otter.WriteOp
	})
	return out
}

// compare is the compare-by-SCN rule: what writing e over old (present
// when found) does. At equal SCNs a tombstone is the newer state (see
// cache.Store's script).
func compare(old cache.Entry, found bool, e cache.Entry) cache.Outcome {
	switch {
	case !found || old.SCN.Less(e.SCN):
		return cache.Written
	case e.SCN.Less(old.SCN):
		return cache.Refused
	case e.Tombstone() && !old.Tombstone():
		return cache.Written
	case old.Tombstone() && !e.Tombstone():
		return cache.Refused
	}
	return cache.Merged
}

// Stats is the cache's size now.
type Stats struct {
	Entries  int
	Bytes    uint64
	MaxBytes uint64
}

// Stats returns the cache's size now (zero for a nil cache).
func (c *Cache) Stats() Stats {
	if c == nil {
		return Stats{}
	}
	return Stats{Entries: c.c.EstimatedSize(), Bytes: c.c.WeightedSize(), MaxBytes: c.c.GetMaximum()}
}

// Close stops the cache's background work.
func (c *Cache) Close() {
	if c != nil {
		c.c.StopAllGoroutines()
	}
}
