package storage

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// rowCache keeps the values of recently read keys of one kind, coherent
// with every write path; the package doc ("Row cache") states how a read
// and a batch's begin and end marks keep it from serving a stale value.
type rowCache struct {
	cached     func(key []byte) bool
	spans      func(start, end []byte) bool // nil: every span may hold cached keys
	shardBytes int64
	seed       maphash.Seed
	shards     [rowShards]rowShard

	// Marks of every shard (range deletions, ingests) begun and ended.
	allBegun, allEnded atomic.Uint64

	hits, misses atomic.Uint64

	// beforeEnd, when set (tests), runs between a batch's commit and its
	// end mark: it can hold a batch there to force an order of ends.
	beforeEnd func(ws []rowWrite)
}

// rowWrite is a cached-kind key a batch writes, with its value (nil: a
// deletion).
type rowWrite struct{ key, value []byte }

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
	// keys written by batches between their begin and their end.
	pending map[string]*pendingKey
}

// pendingKey is a key some batches are writing.
type pendingKey struct {
	writers int  // batches between their begin and end marks
	shared  bool // another batch overlapped: none of them may cache the key
}

func newRowCache(bytes int64, cached func([]byte) bool) *rowCache {
	c := &rowCache{cached: cached, shardBytes: bytes / rowShards, seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].rows = map[string][]byte{}
		c.shards[i].pending = map[string]*pendingKey{}
	}
	return c
}

func (c *rowCache) shard(key []byte) *rowShard {
	return &c.shards[maphash.Bytes(c.seed, key)%rowShards]
}

// get returns the cached value of key, which the caller must not modify
// (a cached value is never changed in place: a write replaces it); on a
// miss, the shard's version to hand to put, and whether a put may succeed
// at all.
func (c *rowCache) get(key []byte) (v []byte, hit bool, version uint64, cacheable bool) {
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.rows[string(key)]; ok {
		c.hits.Add(1)
		return v[:len(v):len(v)], true, 0, false
	}
	c.misses.Add(1)
	return nil, false, s.version, s.writing == 0
}

// put caches value as key's, read from Pebble after get returned version,
// unless a write touched the shard since. The cache keeps value: no one
// may modify it after.
func (c *rowCache) put(key, value []byte, version uint64) {
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.version != version || s.writing != 0 {
		return
	}
	if _, ok := s.rows[string(key)]; ok {
		return
	}
	s.add(key, value, c.shardBytes)
}

// begin marks the shards of a batch's writes (or every shard) before the
// batch can be visible. It returns what end needs to decide whether the
// batch may leave its values in the cache.
func (c *rowCache) begin(ws []rowWrite, all bool) (epoch uint64, through bool) {
	if all {
		c.allBegun.Add(1)
		c.markAll(+1)
		return 0, false
	}
	epoch = c.allBegun.Load()
	through = c.allEnded.Load() == epoch
	for _, w := range ws {
		s := c.shard(w.key)
		s.mu.Lock()
		s.version++
		s.writing++
		s.drop(w.key)
		if pk := s.pending[string(w.key)]; pk != nil {
			pk.writers++
			pk.shared = true
		} else {
			s.pending[string(w.key)] = &pendingKey{writers: 1}
		}
		s.mu.Unlock()
	}
	return epoch, through
}

// end marks the shards again once the batch (sequence number seq) is
// visible, and caches the values it wrote where write-through is safe.
func (c *rowCache) end(ws []rowWrite, all bool, seq, epoch uint64, through bool) {
	if all {
		c.markAll(-1)
		c.allEnded.Add(1)
		return
	}
	through = through && seq != 0 && c.allBegun.Load() == epoch && c.allEnded.Load() == epoch
	for _, w := range ws {
		s := c.shard(w.key)
		s.mu.Lock()
		// No row of the key can have entered since begin: a read's insert
		// waits for the shard to have no write in flight, and another
		// batch's write-through of the key is refused as shared.
		s.version++
		s.writing--
		pk := s.pending[string(w.key)]
		pk.writers--
		if pk.writers > 0 {
			pk.shared = true
		} else {
			delete(s.pending, string(w.key))
			if through && !pk.shared && w.value != nil {
				s.add(w.key, w.value, c.shardBytes) // the batch's own copy
			}
		}
		s.mu.Unlock()
	}
}

func (c *rowCache) markAll(delta int) {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		s.version++
		s.writing += delta
		clear(s.rows)
		s.bytes = 0
		s.mu.Unlock()
	}
}

// drop removes key's row. The shard is locked.
func (s *rowShard) drop(key []byte) {
	if v, ok := s.rows[string(key)]; ok {
		delete(s.rows, string(key))
		s.bytes -= int64(len(key)+len(v)) + rowOverhead
	}
}

// add caches value (which it keeps: no one else may hold it) as key's,
// evicting rows to stay within limit. The shard is locked.
func (s *rowShard) add(key, value []byte, limit int64) {
	size := int64(len(key)+len(value)) + rowOverhead
	if size > limit/16 {
		return // one large value would flush a shard
	}
	s.drop(key)
	// Map iteration starts at a random entry: random eviction, which for
	// skewed access keeps the hot rows about as well as LRU without a list.
	for k, v := range s.rows {
		if s.bytes+size <= limit {
			break
		}
		delete(s.rows, k)
		s.bytes -= int64(len(k)+len(v)) + rowOverhead
	}
	s.rows[string(key)] = value
	s.bytes += size
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
