package datastream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/doppio-db/doppio/internal/cache"
	"github.com/doppio-db/doppio/internal/changes"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/schema"
)

// upsertChunk bounds the entries of one Redis pipeline.
const upsertChunk = 256

// redisSink is the cache tier's updater and bootstrapper: it upserts
// every change of a cacheable table (tombstones for deletes) with the
// change's SCN and commit time, raises the partition's watermarks once a
// task has delivered everything its replica had applied, and rewrites
// every entry of a partition's cacheable tables from a snapshot at least
// once per table's bootstrap period. Bootstraps run in the task that
// owns the partition, so they follow the stream's assignment, pauses and
// moves; a task taken over starts with one.
type redisSink struct {
	m       *Manager
	def     Definition
	store   *cache.Store
	metrics *cache.UpdaterMetrics

	mu    sync.Mutex
	parts map[int]*partCache
}

// partCache is what the sink knows of one partition's task here.
type partCache struct {
	watermark int64 // last raised, Unix ms
	booting   bool
	// booted is when each table's last complete bootstrap started.
	booted map[string]time.Time
	// doing is the table being bootstrapped and its documents so far.
	doing string
	done  int64
}

func newRedisSink(m *Manager, def Definition) (*redisSink, error) {
	st, err := cache.Open(cache.Config{Addrs: def.Sink.Addresses, Registry: m.cfg.Registry, Logger: m.log})
	if err != nil {
		return nil, err
	}
	um, err := cache.NewUpdaterMetrics(m.cfg.Registry)
	if err != nil {
		st.Close()
		return nil, err
	}
	return &redisSink{m: m, def: def, store: st, metrics: um, parts: map[int]*partCache{}}, nil
}

func (s *redisSink) close() { _ = s.store.Close() }

func (s *redisSink) part(p int) *partCache {
	pc, ok := s.parts[p]
	if !ok {
		pc = &partCache{booted: map[string]time.Time{}}
		s.parts[p] = pc
	}
	return pc
}

// deliver upserts the events of cacheable tables.
func (s *redisSink) deliver(ctx context.Context, id TaskID, evs []changes.Event, tables func(string) (*schema.Table, error)) error {
	ws := make([]cache.Write, 0, len(evs))
	for i := range evs {
		ev := &evs[i]
		if ev.Op == partition.OpReplace {
			// The load's end raises the table's cache generation: every
			// entry cached before it is abandoned at once.
			continue
		}
		tb, err := tables(ev.Table)
		if err != nil {
			return err
		}
		if !tb.Def.Cacheable() {
			continue
		}
		e := cache.Entry{SCN: ev.SCN, AsOf: ev.Mtime}
		if ev.Op != partition.OpDelete {
			e.Version, e.Data, e.Mtime = ev.AfterVersion, ev.After, ev.Mtime
		}
		ws = append(ws, cache.Write{Ref: s.ref(id, tb, ev.Key), Entry: e, TTL: tb.Def.Cache.TTL})
	}
	if err := s.upsert(ctx, ws); err != nil {
		return err
	}
	s.observeLag(id)
	return nil
}

func (s *redisSink) ref(id TaskID, tb *schema.Table, key []byte) cache.Ref {
	return cache.Ref{DB: id.DB, Generation: tb.Def.CacheGeneration, Table: tb.Def.Name, Partition: id.Partition, Key: key}
}

// errPredated ends a bootstrap whose snapshot predates the Redis
// incarnation: Redis restarted (or was replaced) while it ran.
var errPredated = errors.New("redis sink: Redis began a new incarnation after the snapshot was read")

// upsert writes ws in chunks; a state read (Write.Read) refused as
// predating the Redis incarnation fails it with errPredated.
func (s *redisSink) upsert(ctx context.Context, ws []cache.Write) error {
	for len(ws) > 0 {
		n := min(len(ws), upsertChunk)
		outs, err := s.store.UpsertBatch(ctx, ws[:n])
		if err != nil {
			return fmt.Errorf("redis sink: %w", err)
		}
		if slices.Contains(outs, cache.Predated) {
			return errPredated
		}
		ws = ws[n:]
	}
	return nil
}

// cacheable is the stream's cacheable tables of its database.
func (s *redisSink) cacheable(db string) []*schema.Table {
	var out []*schema.Table
	for _, tb := range s.m.schemas.Tables(db) {
		if tb.Def.Cacheable() && (len(s.def.Tables) == 0 || slices.Contains(s.def.Tables, tb.Def.Name)) {
			out = append(out, tb)
		}
	}
	return out
}

// caughtUp raises the partition's watermark of every cache generation of
// its cacheable tables to freshAt, and starts a bootstrap when one is
// due.
func (s *redisSink) caughtUp(ctx context.Context, id TaskID, freshAt time.Time, l changes.Log) error {
	tables := s.cacheable(id.DB)
	ttl := map[int64]time.Duration{} // generation -> its longest TTL
	for _, tb := range tables {
		g := tb.Def.CacheGeneration
		ttl[g] = max(ttl[g], tb.Def.Cache.TTL)
	}
	at := freshAt.UnixMilli()
	var errs []error
	for g, d := range ttl {
		errs = append(errs, s.store.RaiseWatermark(ctx, id.DB, g, id.Partition, at, d))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	s.mu.Lock()
	pc := s.part(id.Partition)
	pc.watermark = max(pc.watermark, at)
	s.mu.Unlock()
	s.observeLag(id)
	s.maybeBootstrap(ctx, id, tables, l)
	return nil
}

func (s *redisSink) observeLag(id TaskID) {
	s.mu.Lock()
	wm := s.part(id.Partition).watermark
	s.mu.Unlock()
	if wm > 0 {
		s.metrics.Lag.WithLabelValues(id.DB, strconv.Itoa(id.Partition)).Set(time.Since(time.UnixMilli(wm)).Seconds())
	}
}

// snapshotter is a replica that can open a point-in-time view
// (*partition.Replica).
type snapshotter interface {
	Snapshot() (*partition.Snapshot, error)
}

// maybeBootstrap starts a bootstrap of the tables whose period has
// passed, unless one runs; it runs in the background under the task's
// context and ends with the task.
func (s *redisSink) maybeBootstrap(ctx context.Context, id TaskID, tables []*schema.Table, l changes.Log) {
	sn, ok := l.(snapshotter)
	if !ok {
		return
	}
	now := time.Now()
	s.mu.Lock()
	pc := s.part(id.Partition)
	var due []*schema.Table
	for _, tb := range tables {
		if last, ok := pc.booted[tb.Def.Name]; !ok || now.Sub(last) >= tb.Def.Cache.BootstrapEvery {
			due = append(due, tb)
		}
	}
	if pc.booting || len(due) == 0 {
		s.mu.Unlock()
		return
	}
	pc.booting = true
	s.mu.Unlock()
	go func() {
		err := s.bootstrap(ctx, id, pc, due, sn)
		s.mu.Lock()
		pc.booting, pc.doing, pc.done = false, "", 0
		s.mu.Unlock()
		if err != nil && ctx.Err() == nil {
			s.m.log.Warn("cache bootstrap failed; it runs again when the partition is next caught up", "datastream", id.Stream, "partition", id.Partition, "err", err)
		}
	}()
}

// bootstrap rewrites every document of tables in the partition from one
// snapshot, as of a time the replica was fresh before the snapshot. It
// records its progress in pc, which forget may have dropped meanwhile.
// A Redis that began a new incarnation meanwhile refuses the snapshot's
// writes: the bootstrap fails, and the next one (when the partition is
// next caught up) reads a snapshot that the new incarnation takes.
func (s *redisSink) bootstrap(ctx context.Context, id TaskID, pc *partCache, tables []*schema.Table, sn snapshotter) error {
	f, ok := s.m.replicas.(Freshness)
	if !ok {
		return errors.New("the node's replicas do not tell their freshness")
	}
	start := time.Now()
	at, ok := f.FreshAt(id.DB, id.Partition)
	if !ok || at.IsZero() {
		return errors.New("the replica is not fresh")
	}
	snap, err := sn.Snapshot()
	if err != nil {
		return err
	}
	defer snap.Close()
	for _, tb := range tables {
		s.mu.Lock()
		pc.doing, pc.done = tb.Def.Name, 0
		s.mu.Unlock()
		docs := s.metrics.BootstrapDocuments.WithLabelValues(id.DB, tb.Def.Name)
		ws := make([]cache.Write, 0, upsertChunk)
		flush := func() error {
			if err := s.upsert(ctx, ws); err != nil {
				return err
			}
			docs.Add(float64(len(ws)))
			s.mu.Lock()
			pc.done += int64(len(ws))
			s.mu.Unlock()
			ws = ws[:0]
			return nil
		}
		err := snap.Documents(tb.Def.Name, func(key []byte, rec partition.Record) error {
			ws = append(ws, cache.Write{
				Ref:   s.ref(id, tb, slices.Clone(key)),
				Entry: cache.Entry{SCN: rec.SCN, AsOf: at.UnixMilli(), Version: rec.Version, Data: slices.Clone(rec.Avro), Mtime: rec.Mtime},
				TTL:   tb.Def.Cache.TTL,
				Read:  true,
			})
			if len(ws) == upsertChunk {
				return flush()
			}
			return ctx.Err()
		})
		if err == nil {
			err = flush()
		}
		if err != nil {
			return fmt.Errorf("table %s: %w", tb.Def.Name, err)
		}
		s.mu.Lock()
		pc.booted[tb.Def.Name] = start
		s.mu.Unlock()
		s.observeBootstrap(id.DB, tb)
	}
	return nil
}

// observeBootstrap sets the table's bootstrap progress: the share of the
// partitions bootstrapped here within the table's period.
func (s *redisSink) observeBootstrap(db string, tb *schema.Table) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fresh, all := 0, 0
	for _, pc := range s.parts {
		all++
		if last, ok := pc.booted[tb.Def.Name]; ok && time.Since(last) < tb.Def.Cache.BootstrapEvery {
			fresh++
		}
	}
	if all > 0 {
		s.metrics.BootstrapProgress.WithLabelValues(db, tb.Def.Name).Set(float64(fresh) / float64(all))
	} else {
		s.metrics.BootstrapProgress.DeleteLabelValues(db, tb.Def.Name)
	}
}

// CacheProgress is a Redis sink task's progress in the datastream
// status.
type CacheProgress struct {
	// Watermark is the partition's watermark as last raised (Unix ms).
	Watermark int64 `json:"watermark"`
	// Bootstrapping names the table being bootstrapped now, with the
	// documents rewritten so far.
	Bootstrapping string `json:"bootstrapping,omitempty"`
	Documents     int64  `json:"documents,omitempty"`
	// Bootstrapped is when each table's last complete bootstrap started
	// (Unix ms).
	Bootstrapped map[string]int64 `json:"bootstrapped,omitempty"`
}

// statusSink is a sink that adds its own progress to a task's state,
// and forgets a partition whose task here ended.
type statusSink interface {
	// progress is called about once a status interval for every running
	// task, with how many write sets the task has yet to deliver.
	progress(p int, lagTxns uint64) *CacheProgress
	forget(p int)
}

// progress reports a partition's cache progress and sets its gauges
// from it now, so that a stalled updater's lag keeps growing.
func (s *redisSink) progress(p int, lagTxns uint64) *CacheProgress {
	s.mu.Lock()
	pc, ok := s.parts[p]
	if !ok {
		s.mu.Unlock()
		return nil
	}
	out := &CacheProgress{Watermark: pc.watermark, Bootstrapping: pc.doing, Documents: pc.done}
	for t, at := range pc.booted {
		if out.Bootstrapped == nil {
			out.Bootstrapped = map[string]int64{}
		}
		out.Bootstrapped[t] = at.UnixMilli()
	}
	s.mu.Unlock()
	part := strconv.Itoa(p)
	if out.Watermark > 0 {
		s.metrics.Lag.WithLabelValues(s.def.Database, part).Set(time.Since(time.UnixMilli(out.Watermark)).Seconds())
	}
	s.metrics.LagTransactions.WithLabelValues(s.def.Database, part).Set(float64(lagTxns))
	for _, tb := range s.cacheable(s.def.Database) {
		s.observeBootstrap(s.def.Database, tb)
	}
	return out
}

// forget drops what the sink knows of a partition whose task ended here:
// its gauges, and its bootstraps, so that a task taken over again starts
// with one.
func (s *redisSink) forget(p int) {
	s.mu.Lock()
	delete(s.parts, p)
	s.mu.Unlock()
	part := strconv.Itoa(p)
	s.metrics.Lag.DeleteLabelValues(s.def.Database, part)
	s.metrics.LagTransactions.DeleteLabelValues(s.def.Database, part)
	for _, tb := range s.cacheable(s.def.Database) {
		s.observeBootstrap(s.def.Database, tb)
	}
}
