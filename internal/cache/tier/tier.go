// Package tier is the cache tier's read side in a serving process (a node
// or a router): it looks a document's entry up in the in-process hot-key
// cache, then in Redis, judges whether it is fresh enough for the read's
// staleness bound, and fills both tiers after a miss with what the
// storage nodes answered (docs/design/cache.md).
//
// The caller's loop, per read of one document of a cacheable table with
// X-Doppio-Staleness D:
//
//	l := t.Read(ctx, ref, D)
//	if l.Source == Local || l.Source == Redis { answer l.Entry; return }
//	read the document at the nodes (its SCN and as-of come with it)
//	t.Fill(ref, entry, ttl)     // local now, Redis in the background
//	answer it
//
// Freshness: an entry's age bound is now - max(its as-of, its
// partition's watermark); it may answer a read with bound D when that is
// at most D - ClockSkew. The watermark counts only for an entry read in
// the Redis incarnation that holds it, and Redis refuses a fill read
// before (cache.Entry.Vouched, cache.Predated). An unhealthy Redis makes
// reads Bypass it and drops fills: no read ever fails because of the
// tier.
package tier

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/doppio-db/doppio/client/wire"
	"github.com/doppio-db/doppio/internal/cache"
	"github.com/doppio-db/doppio/internal/cache/local"
	"github.com/prometheus/client_golang/prometheus"
)

// Source says which tier answered a read.
type Source string

// The sources of an answer, as X-Doppio-Cache names them.
const (
	// Local: the in-process hot-key cache held a fresh enough entry.
	Local Source = "local"
	// Redis: Redis held a fresh enough entry.
	Redis Source = "redis"
	// Miss: neither held one; the nodes answer and the tiers are filled.
	Miss Source = "miss"
	// Bypass: the tier could not be asked (Redis unhealthy, or the table
	// is not cacheable); the nodes answer.
	Bypass Source = "bypass"
)

// Config configures a Tier.
type Config struct {
	// Store is the Redis tier (nil: none, only the local cache).
	Store *cache.Store
	// LocalBytes sizes the hot-key cache (0: none).
	LocalBytes int64
	// ClockSkew is subtracted from every staleness bound, for the clocks
	// of the nodes that stamped as-of times (default 50 ms; negative: 0).
	ClockSkew time.Duration
	// FillQueue bounds the Redis fills waiting to be sent (default 4096);
	// a fill beyond it is dropped.
	FillQueue int
	// Registry receives the metrics (nil: not registered).
	Registry prometheus.Registerer
	Logger   *slog.Logger
}

// Tier is one process's read side of the cache tier; safe for concurrent
// use.
type Tier struct {
	cfg   Config
	store *cache.Store
	local *local.Cache
	log   *slog.Logger
	m     *metrics

	fills chan cache.Write
	stop  chan struct{}
	done  sync.WaitGroup
}

// Doc names one document of a cacheable table for the tier.
type Doc struct {
	Ref cache.Ref
	// Table names the table in metrics and stats: "db.table".
	Table string
	// TTL is the table's: how long an entry lives after its last write.
	TTL time.Duration
}

// New starts a tier; Close stops it.
func New(cfg Config) (*Tier, error) {
	switch {
	case cfg.ClockSkew == 0:
		cfg.ClockSkew = 50 * time.Millisecond
	case cfg.ClockSkew < 0:
		cfg.ClockSkew = 0
	}
	if cfg.FillQueue <= 0 {
		cfg.FillQueue = 4096
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m, err := newMetrics(cfg.Registry)
	if err != nil {
		return nil, err
	}
	t := &Tier{cfg: cfg, store: cfg.Store, local: local.New(cfg.LocalBytes), log: cfg.Logger, m: m,
		fills: make(chan cache.Write, cfg.FillQueue), stop: make(chan struct{})}
	if t.local != nil && cfg.Registry != nil {
		// One process runs one tier: a second registration is a test's.
		_ = cfg.Registry.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "doppio_cache_local_bytes", Help: "Bytes of keys and documents the in-process hot-key cache holds.",
		}, func() float64 { return float64(t.local.Stats().Bytes) }))
		_ = cfg.Registry.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "doppio_cache_local_entries", Help: "Entries the in-process hot-key cache holds.",
		}, func() float64 { return float64(t.local.Stats().Entries) }))
	}
	if t.store != nil {
		t.done.Add(1)
		go t.fillLoop()
	}
	return t, nil
}

// Close stops the fills (those queued are dropped) and the local cache.
func (t *Tier) Close() {
	close(t.stop)
	t.done.Wait()
	t.local.Close()
}

// Lookup is what Read found.
type Lookup struct {
	Source Source
	// Entry is the entry that answers, from Local or Redis.
	Entry cache.Entry
	// Age is the entry's age bound (Local or Redis).
	Age time.Duration
}

// AsOf is the time the answering entry's state was the latest at: its
// as-of, raised to its partition's watermark.
func (l Lookup) AsOf() time.Time { return time.UnixMilli(l.Entry.AsOf) }

// Read looks d's entry up for a read that accepts state as old as bound.
func (t *Tier) Read(ctx context.Context, d Doc, bound time.Duration) Lookup {
	c := t.m.table(d.Table)
	l := t.read(ctx, c, d, bound)
	c.answer(l.Source)
	return l
}

func (t *Tier) read(ctx context.Context, c *tableCounters, d Doc, bound time.Duration) Lookup {
	limit := bound - t.cfg.ClockSkew
	key := d.Ref.EntryKey()
	if t.local != nil {
		e, ok := t.local.Get(key)
		switch {
		case !ok:
			c.inc(tierLocal, resultMiss)
		case fresh(e, 0, limit):
			c.inc(tierLocal, resultHit)
			return Lookup{Source: Local, Entry: e, Age: max(e.Age(time.Now(), 0), 0)}
		default:
			c.inc(tierLocal, resultStale)
		}
	}
	if t.store == nil {
		return Lookup{Source: Miss}
	}
	e, wm, err := t.store.Get(ctx, d.Ref)
	switch {
	case errors.Is(err, cache.ErrMiss):
		c.inc(tierRedis, resultMiss)
		return Lookup{Source: Miss}
	case err != nil:
		// Unhealthy, or this request failed: the nodes answer.
		c.bypassed()
		return Lookup{Source: Bypass}
	}
	// A watermark raised in this Redis incarnation vouches only for states
	// read in it (the clocks' skew included).
	wm = e.Vouched(wm, t.cfg.ClockSkew)
	if !fresh(e, wm, limit) {
		c.inc(tierRedis, resultStale)
		return Lookup{Source: Miss}
	}
	c.inc(tierRedis, resultHit)
	// The watermark vouches for the entry until then: the local copy
	// keeps that as its as-of.
	e.AsOf = max(e.AsOf, wm)
	if t.local != nil {
		t.local.Upsert(key, e, d.TTL)
	}
	return Lookup{Source: Redis, Entry: e, Age: max(e.Age(time.Now(), 0), 0)}
}

// fresh reports whether e, with its partition's watermark wm, is no older
// than limit now.
func fresh(e cache.Entry, wm int64, limit time.Duration) bool {
	return limit >= 0 && e.Age(time.Now(), wm) <= limit
}

// Fill stores what the nodes answered (a document or a tombstone, with
// its SCN and as-of) in the local cache now and in Redis in the
// background, both by the compare-by-SCN rule, to live d.TTL.
func (t *Tier) Fill(d Doc, e cache.Entry) {
	if t.local != nil {
		t.m.fill(tierLocal, t.local.Upsert(d.Ref.EntryKey(), e, d.TTL))
	}
	if t.store == nil {
		return
	}
	select {
	case t.fills <- cache.Write{Ref: d.Ref, Entry: e, TTL: d.TTL, Read: true}:
	default:
		t.m.fillN(tierRedis, "dropped", 1)
	}
}

// maxBatch bounds the fills sent to Redis in one pipeline.
const maxBatch = 64

// fillLoop sends queued fills to Redis, as many at a time as are queued.
func (t *Tier) fillLoop() {
	defer t.done.Done()
	batch := make([]cache.Write, 0, maxBatch)
	for {
		select {
		case <-t.stop:
			return
		case f := <-t.fills:
			batch = append(batch[:0], f)
		}
	more:
		for len(batch) < maxBatch {
			select {
			case f := <-t.fills:
				batch = append(batch, f)
			default:
				break more
			}
		}
		outs, err := t.store.UpsertBatch(context.Background(), batch)
		if err != nil {
			// Unhealthy (nothing sent) or failed: the updater and the next
			// miss make up for it.
			t.m.fillN(tierRedis, "dropped", len(batch))
			continue
		}
		for _, o := range outs {
			t.m.fill(tierRedis, o)
		}
	}
}

// Report is the tier's counters and state now, for /_cluster: process
// names it, role is "node" or "router".
func (t *Tier) Report(process, role string) wire.CacheProcess {
	p := wire.CacheProcess{Process: process, Role: role, Redis: []wire.CacheEndpoint{}}
	t.m.report(&p)
	if t.local != nil {
		st := t.local.Stats()
		p.Local = &wire.CacheLocal{Entries: st.Entries, Bytes: st.Bytes, MaxBytes: st.MaxBytes}
	}
	if t.store != nil {
		for _, e := range t.store.Endpoints() {
			p.Redis = append(p.Redis, wire.CacheEndpoint{Addr: e.Addr, Primary: e.Primary, Healthy: e.Healthy})
		}
	}
	return p
}
