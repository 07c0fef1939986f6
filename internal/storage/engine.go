package storage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Engine is an open Pebble store.
type Engine struct {
	db   *pebble.DB
	opts *pebble.Options
	dir  string
	rows *rowCache // nil without a row cache

	// waiters maps a topic to the channel closed by the next committed
	// batch that names it (see Batch.Notify and Engine.Changed).
	mu      sync.Mutex
	waiters map[string]chan struct{}

	// reclaims are the background compactions of dropped spans (see
	// Batch.Reclaim); Close cancels and waits for them, since Pebble
	// refuses a compaction of a closed store by panicking.
	closed       bool
	reclaims     sync.WaitGroup
	stopReclaims context.CancelFunc
	reclaimCtx   context.Context
}

// Options configure Open.
type Options struct {
	// CacheBytes is the block cache size; 0 means 512 MiB. Pebble charges
	// memtables to it, so it must be well above MemTableSize.
	CacheBytes int64
	// RowCacheBytes bounds the row cache: values of keys for which
	// RowCacheKeys is true, kept in memory once read with Get. 0 means none.
	RowCacheBytes int64
	RowCacheKeys  func(key []byte) bool
	// RowCacheSpans, if set, reports whether a range deletion of [start,
	// end) may delete a cached key; one that may not (a log truncation)
	// leaves the row cache alone. Unset: every range deletion empties it.
	RowCacheSpans func(start, end []byte) bool
	Logger        *slog.Logger

	fs vfs.FS // the file system under Pebble; unset: coalescingFS over the OS's
}

// Open opens (creating if needed) the store in dir.
func Open(dir string, o Options) (*Engine, error) {
	if o.CacheBytes == 0 {
		o.CacheBytes = 512 << 20
	}
	cache := pebble.NewCache(o.CacheBytes)
	defer cache.Unref()
	opts := &pebble.Options{
		Cache:              cache,
		FormatMajorVersion: pebble.FormatNewest,
		MemTableSize:       64 << 20,
		Logger:             quietLogger{o.Logger},
		FS:                 o.fs,
	}
	if opts.FS == nil {
		opts.FS = coalescingFS{vfs.Default}
	}
	// Values of 256 bytes or more (documents, change-log entries) go to
	// blob files that compactions reference rather than rewrite: under
	// updates, compactions were the largest cost after the HTTP exchange.
	// A compaction whose output would reference more than
	// MaxBlobReferenceDepth overlapping blob files rewrites the values
	// instead, and every flush writes a blob file overlapping all others
	// (its values come from every partition): at a depth of 10, a node
	// under updates rewrote values in most compactions; at 40, none. A
	// point read fetches one value from one blob file whatever the depth.
	opts.Experimental.ValueSeparationPolicy = func() pebble.ValueSeparationPolicy {
		return pebble.ValueSeparationPolicy{
			Enabled: true, MinimumSize: 256, MaxBlobReferenceDepth: 40,
			RewriteMinimumAge: 5 * time.Minute, TargetGarbageRatio: 0.2,
		}
	}
	opts.EnsureDefaults() // the options sstables for Ingest are written with
	// A document read is a point Get: a bloom filter per table (10 bits
	// per key, about 1% false positives) lets it skip the tables of every
	// level that do not hold the key instead of seeking in each.
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		opts.Levels[i].FilterType = pebble.TableFilter
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("open pebble in %s: %w", dir, err)
	}
	e := &Engine{db: db, opts: opts, dir: dir, waiters: map[string]chan struct{}{}}
	e.reclaimCtx, e.stopReclaims = context.WithCancel(context.Background())
	if o.RowCacheBytes > 0 && o.RowCacheKeys != nil {
		e.rows = newRowCache(o.RowCacheBytes, o.RowCacheKeys)
		e.rows.spans = o.RowCacheSpans
	}
	return e, nil
}

// Close flushes nothing extra (the WAL is already synced) and closes,
// after stopping the background compactions of dropped spans.
func (e *Engine) Close() error {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.stopReclaims()
	e.reclaims.Wait()
	return e.db.Close()
}

// ErrNotFound is returned by Get for an absent key.
var ErrNotFound = errors.New("not found")

// Get returns a copy of the value of key, or ErrNotFound. Keys of the row
// cache's kind are answered from it when they are there.
func (e *Engine) Get(key []byte) ([]byte, error) {
	v, shared, err := e.get(key)
	if shared {
		v = append([]byte(nil), v...)
	}
	return v, err
}

// GetShared is Get without the copy: the value may be the row cache's
// own, which the caller must not modify (nor append to: its capacity is
// its length).
func (e *Engine) GetShared(key []byte) ([]byte, error) {
	v, _, err := e.get(key)
	return v, err
}

// get returns the value of key and whether it is the row cache's.
func (e *Engine) get(key []byte) ([]byte, bool, error) {
	c := e.rows
	if c == nil || !c.cached(key) {
		v, err := get(e.db, key)
		return v, false, err
	}
	v, hit, version, cacheable := c.get(key)
	if hit {
		return v, true, nil
	}
	v, err := get(e.db, key)
	if err == nil && cacheable {
		v = v[:len(v):len(v)]
		c.put(key, v, version)
		return v, true, nil
	}
	return v, false, err
}

func get(r pebble.Reader, key []byte) ([]byte, error) {
	v, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	out := append([]byte(nil), v...)
	return out, closer.Close()
}

// Iter is an iterator over [lower, upper).
type Iter = pebble.Iterator

// NewIter returns an iterator over keys in [lower, upper).
func (e *Engine) NewIter(lower, upper []byte) (*Iter, error) {
	return e.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
}

// Batch is a set of writes applied atomically.
type Batch struct {
	b      *pebble.Batch
	e      *Engine
	topics []string

	// The row cache's keys the batch writes, or all of them (a range
	// deletion): marked before the batch is applied and once it is visible.
	rows    []rowWrite
	allRows bool
	// reclaim: spans to compact once the batch is committed.
	reclaim [][2][]byte
}

// NewBatch starts an empty batch. Commit, CommitNoSync and Enqueue/Wait
// release it; a batch given up uncommitted is released with Close.
func (e *Engine) NewBatch() *Batch { return &Batch{b: e.db.NewBatch(), e: e} }

// Close releases a batch that will not be committed.
func (b *Batch) Close() { _ = b.b.Close() }

// Notify makes the batch wake, once it is committed and durable, whoever
// waits on topic (Engine.Changed). Readers that tail data (the change
// stream) wait on a topic instead of polling.
func (b *Batch) Notify(topic string) {
	if !slices.Contains(b.topics, topic) {
		b.topics = append(b.topics, topic)
	}
}

// Changed returns a channel closed when the next batch notifying topic is
// committed. Take it before reading, so a commit between the read and the
// wait is not missed.
func (e *Engine) Changed(topic string) <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	ch, ok := e.waiters[topic]
	if !ok {
		ch = make(chan struct{})
		e.waiters[topic] = ch
	}
	return ch
}

func (b *Batch) committed() {
	if len(b.reclaim) > 0 {
		b.e.compactLater(b.reclaim)
	}
	if len(b.topics) == 0 {
		return
	}
	e := b.e
	e.mu.Lock()
	for _, t := range b.topics {
		if ch, ok := e.waiters[t]; ok {
			close(ch)
			delete(e.waiters, t)
		}
	}
	e.mu.Unlock()
}

// Set records key = value.
func (b *Batch) Set(key, value []byte) {
	_ = b.b.Set(key, value, nil)
	b.wrote(key, value, true)
}

// wrote keeps copies of a cached-kind key and value the batch writes: the
// caller may reuse its buffers, and a write-through hands the value copy
// to the cache.
func (b *Batch) wrote(key, value []byte, set bool) {
	if c := b.e.rows; c != nil && !b.allRows && c.cached(key) {
		w := rowWrite{key: append([]byte(nil), key...)}
		if set {
			w.value = append(make([]byte, 0, len(value)), value...)
		}
		b.rows = append(b.rows, w)
	}
}

// writeRows brackets commit with the row cache's marks: before the batch
// can be visible and once it is.
func (b *Batch) writeRows(commit func() error) error {
	c := b.e.rows
	if c == nil || (!b.allRows && len(b.rows) == 0) {
		return commit()
	}
	epoch, through := c.begin(b.rows, b.allRows)
	err := commit()
	var seq uint64
	if err == nil {
		seq = uint64(b.b.SeqNum())
	}
	if c.beforeEnd != nil {
		c.beforeEnd(b.rows)
	}
	c.end(b.rows, b.allRows, seq, epoch, through)
	return err
}

// Delete records the deletion of key.
func (b *Batch) Delete(key []byte) {
	_ = b.b.Delete(key, nil)
	b.wrote(key, nil, false)
}

// DeleteRange records the deletion of [start, end).
func (b *Batch) DeleteRange(start, end []byte) {
	_ = b.b.DeleteRange(start, end, nil)
	if c := b.e.rows; c != nil && (c.spans == nil || c.spans(start, end)) {
		b.allRows = true
		b.rows = nil
	}
}

// Reclaim asks for [start, end), which the batch deletes with
// DeleteRange, to be compacted in the background once the batch is
// committed: a dropped table's space returns to the file system now
// rather than when Pebble's own compactions reach the span.
func (b *Batch) Reclaim(start, end []byte) {
	b.reclaim = append(b.reclaim, [2][]byte{slices.Clone(start), slices.Clone(end)})
}

// compactLater compacts spans, one after another, in a goroutine of its
// own; Close stops it.
func (e *Engine) compactLater(spans [][2][]byte) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	e.reclaims.Add(1)
	e.mu.Unlock()
	go func() {
		defer e.reclaims.Done()
		for _, s := range spans {
			if err := e.db.Compact(e.reclaimCtx, s[0], s[1], false); err != nil {
				return // closing, or the span holds nothing to compact
			}
		}
	}()
}

// Len is the batch's encoded size.
func (b *Batch) Len() int { return b.b.Len() }

// Commit applies the batch and returns once it is durable.
func (e *Engine) Commit(b *Batch) error {
	defer b.b.Close()
	if err := b.writeRows(func() error { return b.b.Commit(pebble.Sync) }); err != nil {
		return err
	}
	b.committed()
	return nil
}

// CommitNoSync applies the batch without waiting for its WAL sync: it is
// visible at once and durable with the next synced commit. Only for a
// batch whose loss in a crash is repaired on restart (Raft's application of
// entries that are already durable in its log).
func (e *Engine) CommitNoSync(b *Batch) error {
	defer b.b.Close()
	if err := b.writeRows(func() error { return b.b.Commit(pebble.NoSync) }); err != nil {
		return err
	}
	b.committed()
	return nil
}

// Enqueue applies the batch to the WAL and memtable in call order without
// waiting for the sync; the caller must call Wait. Batches enqueued in order
// become durable in that order.
func (e *Engine) Enqueue(b *Batch) error {
	// Visible once applied, durable at Wait.
	if err := b.writeRows(func() error { return e.db.ApplyNoSyncWait(b.b, pebble.Sync) }); err != nil {
		b.b.Close()
		return err
	}
	return nil
}

// Wait blocks until an enqueued batch is durable, then releases it.
func (b *Batch) Wait() error {
	defer b.b.Close()
	if err := b.b.SyncWait(); err != nil {
		return err
	}
	b.committed()
	return nil
}

// Flush writes the memtable to sstables (benchmarks use it to read from
// tables, as a loaded store does).
func (e *Engine) Flush() error { return e.db.Flush() }

// Compact compacts the keys in [start, end) down to the last level, in the
// foreground (benchmarks that must not measure the tombstones of their
// setup).
func (e *Engine) Compact(start, end []byte) error {
	return e.db.Compact(context.Background(), start, end, true)
}

// Metrics exposes Pebble's metrics for the node's /metrics.
func (e *Engine) Metrics() *pebble.Metrics { return e.db.Metrics() }

type quietLogger struct{ l *slog.Logger }

func (q quietLogger) Infof(format string, args ...any) {}
func (q quietLogger) Errorf(format string, args ...any) {
	if q.l != nil {
		q.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
	}
}
func (q quietLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if q.l != nil {
		q.l.Error(msg, "component", "pebble")
	}
	panic(msg)
}
