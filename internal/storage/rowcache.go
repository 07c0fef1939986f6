package storage

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// rowCache keeps the values of recently read keys of one kind (the node
// caches documents) so that a point read of a hot key skips Pebble's
// memtables and levels: under YCSB's read-only workload a Pebble Get was
// 28% of a node's CPU, most of it searching a large memtable and creating
// table iterators level by level.
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
// write. A range deletion or an ingest marks every shard.
type rowCache struct {
	cached     func(key []byte) bool
	shardBytes int64
	seed       maphash.Seed
	shards     [rowShards]rowShard

	hits, misses atomic.Uint64
}

const rowShards = 64

// rowOverhead is charged per cached row on top of its key and value: the
// map entry, the string and slice headers.
const rowOverhead = 64

type rowShard struct {
	mu      sync.Mutex
	rows    map[string][]byte
	bytes   int64
	version uint64 // moves at every begin and end of a write touching the shard
	writing int    // writes between their begin and their end
}

func newRowCache(bytes int64, cached func([]byte) bool) *rowCache {
	c := &rowCache{cached: cached, shardBytes: bytes / rowShards, seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].rows = map[string][]byte{}
	}
	return c
}

func (c *rowCache) shard(key []byte) *rowShard {
	return &c.shards[maphash.Bytes(c.seed, key)%rowShards]
}

// get returns a copy of the cached value of key; on a miss, the shard's
// version to hand to put, and whether a put may succeed at all.
func (c *rowCache) get(key []byte) (v []byte, hit bool, version uint64, cacheable bool) {
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.rows[string(key)]; ok {
		c.hits.Add(1)
		return append(make([]byte, 0, len(v)), v...), true, 0, false
	}
	c.misses.Add(1)
	return nil, false, s.version, s.writing == 0
}

// put caches value as key's, read from Pebble after get returned version,
// unless a write touched the shard since.
func (c *rowCache) put(key, value []byte, version uint64) {
	size := int64(len(key)+len(value)) + rowOverhead
	if size > c.shardBytes/16 {
		return // one large value would flush a shard
	}
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.version != version || s.writing != 0 {
		return
	}
	if _, ok := s.rows[string(key)]; ok {
		return
	}
	// Map iteration starts at a random entry: random eviction, which for
	// skewed access keeps the hot rows about as well as LRU without a list.
	for k, v := range s.rows {
		if s.bytes+size <= c.shardBytes {
			break
		}
		delete(s.rows, k)
		s.bytes -= int64(len(k)+len(v)) + rowOverhead
	}
	s.rows[string(key)] = append([]byte(nil), value...)
	s.bytes += size
}

// mark is begin (+1) or end (-1) of a write of keys, or of every key.
func (c *rowCache) mark(keys [][]byte, all bool, delta int) {
	if all {
		for i := range c.shards {
			s := &c.shards[i]
			s.mu.Lock()
			s.version++
			s.writing += delta
			clear(s.rows)
			s.bytes = 0
			s.mu.Unlock()
		}
		return
	}
	for _, k := range keys {
		s := c.shard(k)
		s.mu.Lock()
		s.version++
		s.writing += delta
		if v, ok := s.rows[string(k)]; ok {
			delete(s.rows, string(k))
			s.bytes -= int64(len(k)+len(v)) + rowOverhead
		}
		s.mu.Unlock()
	}
}

// RowCacheStats are the row cache's counters since the engine opened.
type RowCacheStats struct {
	Hits, Misses uint64
	Bytes        int64
}

// RowCacheStats reports the row cache's hits, misses and size; zero when
// the engine has none.
func (e *Engine) RowCacheStats() RowCacheStats {
	c := e.rows
	if c == nil {
		return RowCacheStats{}
	}
	st := RowCacheStats{Hits: c.hits.Load(), Misses: c.misses.Load()}
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		st.Bytes += s.bytes
		s.mu.Unlock()
	}
	return st
}
