package cache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// ErrUnavailable is returned when no healthy endpoint can take a request:
// for a read, neither the primary nor a replica; for a write, the
// primary. Nothing was sent.
var ErrUnavailable = errors.New("cache: no healthy Redis endpoint")

// ErrMiss is Get's answer for an entry Redis does not hold.
var ErrMiss = errors.New("cache: miss")

// Outcome is what the compare-by-SCN script did with a write.
type Outcome int

const (
	// Refused: the stored entry has a newer SCN; nothing changed.
	Refused Outcome = iota
	// Merged: the stored entry has the same SCN; its AsOf became the
	// later of the two and its TTL was set again.
	Merged
	// Written: the entry replaced an older one, or was absent.
	Written
	// Predated: the entry is a state read (Write.Read) as of a time
	// before the Redis incarnation began (its epoch); a change the lost
	// incarnation held may be missing from it. Nothing changed.
	Predated
)

// EpochKey is the Redis key of the incarnation's epoch: a hash of the
// run_id of the Redis process that claimed it ("run") and the time the
// incarnation vouches from ("t", Unix ms, the claimer's clock).
const EpochKey = "doppio:epoch"

// upsertScript is the one write of the tier. A Redis that lost its epoch
// (flushed) begins a new one at the writer's clock; a state read from
// before the epoch is refused first (docs/design/cache.md, "Redis
// incarnations"). SCN parts are compared as decimal strings (length,
// then bytes), exact for any uint64, where Lua's numbers are doubles. At
// equal SCNs a tombstone is the newer state: a document's SCN is the
// write that made it, a tombstone's a state at or after the delete (a
// read that found nothing names the SCN it had applied before it looked,
// which may be the document's own write, the delete landing in between).
var upsertScript = redis.NewScript(`
local t = redis.call('HGET', KEYS[2], 't')
if not t then
  redis.call('HSET', KEYS[2], 't', ARGV[8])
  t = ARGV[8]
end
if ARGV[9] == '1' and tonumber(ARGV[3]) < tonumber(t) then return 3 end
local function cmp(x, y)
  if #x ~= #y then if #x < #y then return -1 else return 1 end end
  if x == y then return 0 end
  if x < y then return -1 else return 1 end
end
local cur = redis.call('HMGET', KEYS[1], 'g', 's', 'a', 'v')
if cur[1] and cur[2] then
  local c = cmp(ARGV[1], cur[1])
  if c == 0 then c = cmp(ARGV[2], cur[2]) end
  if c == 0 and (ARGV[4] == '') ~= (not cur[4]) then
    if ARGV[4] == '' then c = 1 else c = -1 end
  end
  if c < 0 then return 0 end
  if c == 0 then
    if (not cur[3]) or tonumber(ARGV[3]) > tonumber(cur[3]) then
      redis.call('HSET', KEYS[1], 'a', ARGV[3])
    end
    redis.call('PEXPIRE', KEYS[1], ARGV[7])
    return 1
  end
end
redis.call('DEL', KEYS[1])
if ARGV[4] == '' then
  redis.call('HSET', KEYS[1], 'g', ARGV[1], 's', ARGV[2], 'a', ARGV[3])
else
  redis.call('HSET', KEYS[1], 'g', ARGV[1], 's', ARGV[2], 'a', ARGV[3], 'v', ARGV[4], 'd', ARGV[5], 'm', ARGV[6])
end
redis.call('PEXPIRE', KEYS[1], ARGV[7])
return 2
`)

// watermarkScript raises a watermark, never lowers it, and sets its TTL.
var watermarkScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if (not cur) or tonumber(ARGV[1]) > tonumber(cur) then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 0
`)

// claimScript makes the epoch the connected Redis process's: kept when
// that process claimed it, begun anew at ARGV[2] when it is absent (an
// empty Redis) or came from another process (loaded from an RDB or AOF
// file, or replicated to a promoted replica).
var claimScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'run') == ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'run', ARGV[1], 't', ARGV[2])
return 1
`)

// Config configures a Store.
type Config struct {
	// Addrs are the Redis endpoints, host:port: the primary first, then
	// its replicas.
	Addrs []string
	// Timeout bounds one request to one endpoint (default 500 ms).
	Timeout time.Duration
	Health  HealthConfig
	// Registry receives the metrics (nil: not registered). Several
	// Stores of one process may share it: they share the metrics.
	Registry prometheus.Registerer
	Logger   *slog.Logger
}

// Store is the cache tier's Redis, through the compare-by-SCN script.
// Safe for concurrent use.
type Store struct {
	cfg       Config
	endpoints []*endpoint // [0] is the primary
	metrics   *metrics
	log       *slog.Logger
	stop      context.CancelFunc
	done      chan struct{}
}

type endpoint struct {
	addr    string
	primary bool
	cl      *redis.Client
	gauge   prometheus.Gauge

	mu     sync.Mutex
	health *Health
}

// Open makes a Store over cfg.Addrs; it does not dial until the first
// request, so an unreachable Redis makes requests fail, never Open.
func Open(cfg Config) (*Store, error) {
	if len(cfg.Addrs) == 0 {
		return nil, errors.New("cache: no Redis address")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 500 * time.Millisecond
	}
	cfg.Health = cfg.Health.withDefaults()
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m, err := newMetrics(cfg.Registry)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Store{cfg: cfg, metrics: m, log: cfg.Logger.With("component", "cache"), stop: cancel, done: make(chan struct{})}
	for i, addr := range cfg.Addrs {
		opts := &redis.Options{
			Addr: addr, Protocol: 2, DisableIdentity: true,
			DialTimeout: cfg.Timeout, ReadTimeout: cfg.Timeout, WriteTimeout: cfg.Timeout,
			// The health judgement, not the client, decides about
			// retrying elsewhere.
			MaxRetries: -1,
		}
		if i == 0 {
			opts.OnConnect = func(ctx context.Context, cn *redis.Conn) error { return s.claim(ctx, cn, addr) }
		}
		e := &endpoint{
			addr: addr, primary: i == 0, health: NewHealth(cfg.Health), gauge: m.healthy.WithLabelValues(addr),
			cl: redis.NewClient(opts),
		}
		e.gauge.Set(1)
		s.endpoints = append(s.endpoints, e)
	}
	go s.probe(ctx)
	return s, nil
}

// claim runs on every new connection to the primary, before its first
// request: every write of this Store to a Redis process is thus preceded
// by that process holding an epoch of its own.
func (s *Store) claim(ctx context.Context, cn *redis.Conn, addr string) error {
	info, err := cn.Info(ctx, "server").Result()
	if err != nil {
		return err
	}
	run := runID(info)
	if run == "" {
		return errors.New("cache: INFO server names no run_id")
	}
	n, err := claimScript.Run(ctx, cn, []string{EpochKey}, run, time.Now().UnixMilli()).Int64()
	if err != nil {
		return fmt.Errorf("cache: claim the epoch: %w", err)
	}
	if n == 1 {
		s.metrics.epochs.Inc()
		s.log.Info("cache: a new Redis incarnation begins", "endpoint", addr, "run_id", run)
	}
	return nil
}

// runID is the run_id line of INFO server.
func runID(info string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "run_id:"); ok {
			return v
		}
	}
	return ""
}

// Close stops the probes and closes the connections.
func (s *Store) Close() error {
	s.stop()
	<-s.done
	var errs []error
	for _, e := range s.endpoints {
		errs = append(errs, e.cl.Close())
	}
	return errors.Join(errs...)
}

// EndpointState is one endpoint as the Store judges it now.
type EndpointState struct {
	Addr    string `json:"addr"`
	Primary bool   `json:"primary"`
	Healthy bool   `json:"healthy"`
}

// Endpoints returns every endpoint's state, the primary first.
func (s *Store) Endpoints() []EndpointState {
	out := make([]EndpointState, len(s.endpoints))
	for i, e := range s.endpoints {
		out[i] = EndpointState{Addr: e.addr, Primary: e.primary, Healthy: e.healthy()}
	}
	return out
}

func (e *endpoint) healthy() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.health.Healthy()
}

// do runs one request on the endpoint and judges its outcome: only a
// failure of the endpoint's (unreachable, timed out) counts, not an
// error reply nor the caller giving up.
func (e *endpoint) do(ctx context.Context, timeout time.Duration, fn func(ctx context.Context, cl *redis.Client) error) error {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	err := fn(rctx, e.cl)
	took := time.Since(start)
	var reply redis.Error
	failed := err != nil && !errors.As(err, &reply) && ctx.Err() == nil
	if ctx.Err() != nil && err != nil {
		return ctx.Err()
	}
	e.mu.Lock()
	down := e.health.Request(failed, took)
	e.mu.Unlock()
	if down {
		e.gauge.Set(0)
	}
	if err != nil && failed {
		return fmt.Errorf("cache: redis %s: %w", e.addr, err)
	}
	return err
}

// probe pings the unhealthy endpoints until the Store closes.
func (s *Store) probe(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(s.cfg.Health.ProbeEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, e := range s.endpoints {
			if e.healthy() {
				continue
			}
			pctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
			start := time.Now()
			err := e.cl.Ping(pctx).Err()
			cancel()
			e.mu.Lock()
			up := e.health.Probe(err != nil, time.Since(start))
			e.mu.Unlock()
			if up {
				e.gauge.Set(1)
				s.log.Info("cache endpoint healthy again", "endpoint", e.addr)
			}
		}
	}
}

// reader is where a read goes: the primary, else a healthy replica.
func (s *Store) reader() (*endpoint, error) {
	for _, e := range s.endpoints {
		if e.healthy() {
			return e, nil
		}
	}
	return nil, ErrUnavailable
}

// writer is where a write goes: the primary while it is healthy.
func (s *Store) writer() (*endpoint, error) {
	if e := s.endpoints[0]; e.healthy() {
		return e, nil
	}
	return nil, ErrUnavailable
}

// Get reads the entry r names, its partition's watermark (Unix ms, 0
// when absent) and the incarnation's epoch (Entry.Epoch) in one round
// trip. An absent entry is ErrMiss (the watermark is still returned).
func (s *Store) Get(ctx context.Context, r Ref) (Entry, int64, error) {
	e, err := s.reader()
	if err != nil {
		return Entry{}, 0, err
	}
	var fields []any
	var wm, epoch string
	err = e.do(ctx, s.cfg.Timeout, func(ctx context.Context, cl *redis.Client) error {
		pipe := cl.Pipeline()
		h := pipe.HMGet(ctx, r.EntryKey(), "g", "s", "a", "v", "d", "m")
		w := pipe.Get(ctx, r.WatermarkKey())
		ep := pipe.HGet(ctx, EpochKey, "t")
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		fields, wm, epoch = h.Val(), w.Val(), ep.Val()
		return nil
	})
	if err != nil {
		return Entry{}, 0, err
	}
	watermark, _ := strconv.ParseInt(wm, 10, 64)
	ent, ok, err := parseEntry(fields)
	if err != nil {
		return Entry{}, watermark, fmt.Errorf("cache: entry %s: %w", r.EntryKey(), err)
	}
	if !ok {
		return Entry{}, watermark, ErrMiss
	}
	if ent.Epoch, err = strconv.ParseInt(epoch, 10, 64); err != nil {
		// No epoch: no incarnation vouches for what this Redis holds.
		ent.Epoch = math.MaxInt64
	}
	return ent, watermark, nil
}

// parseEntry decodes HMGET g s a v d m.
func parseEntry(f []any) (Entry, bool, error) {
	str := func(i int) (string, bool) {
		if i >= len(f) || f[i] == nil {
			return "", false
		}
		v, ok := f[i].(string)
		return v, ok
	}
	g, ok1 := str(0)
	sq, ok2 := str(1)
	if !ok1 || !ok2 {
		return Entry{}, false, nil
	}
	var ent Entry
	var err error
	if ent.SCN.Generation, err = strconv.ParseUint(g, 10, 64); err != nil {
		return Entry{}, false, err
	}
	if ent.SCN.Sequence, err = strconv.ParseUint(sq, 10, 64); err != nil {
		return Entry{}, false, err
	}
	a, _ := str(2)
	if ent.AsOf, err = strconv.ParseInt(a, 10, 64); err != nil {
		return Entry{}, false, err
	}
	v, ok := str(3)
	if !ok {
		return ent, true, nil // a tombstone
	}
	ver, err := strconv.ParseUint(v, 10, 32)
	if err != nil || ver == 0 {
		return Entry{}, false, fmt.Errorf("schema version %q", v)
	}
	ent.Version = uint32(ver)
	d, _ := str(4)
	ent.Data = []byte(d)
	m, _ := str(5)
	if ent.Mtime, err = strconv.ParseInt(m, 10, 64); err != nil {
		return Entry{}, false, err
	}
	return ent, true, nil
}

// Write is one entry to upsert with its table's TTL.
type Write struct {
	Ref   Ref
	Entry Entry
	TTL   time.Duration
	// Read marks a state read from a replica (a fill, a bootstrap), as
	// opposed to a change from the log (the updater): it is refused as
	// Predated when its AsOf is before the incarnation's epoch. A change
	// is never refused so: it is history the new incarnation must hold.
	Read bool
}

func (w *Write) args(now int64) []any {
	e := &w.Entry
	ttl := max(w.TTL.Milliseconds(), 1)
	read := "0"
	if w.Read {
		read = "1"
	}
	if e.Tombstone() {
		return []any{e.SCN.Generation, e.SCN.Sequence, e.AsOf, "", "", "", ttl, now, read}
	}
	return []any{e.SCN.Generation, e.SCN.Sequence, e.AsOf, e.Version, e.Data, e.Mtime, ttl, now, read}
}

// Upsert writes one entry through the compare-by-SCN script.
func (s *Store) Upsert(ctx context.Context, w Write) (Outcome, error) {
	out, err := s.UpsertBatch(ctx, []Write{w})
	if err != nil {
		return Refused, err
	}
	return out[0], nil
}

// UpsertBatch writes entries through the compare-by-SCN script in one
// pipeline, in order, and returns each one's outcome. An error means some
// may have been written: running the batch again is harmless.
func (s *Store) UpsertBatch(ctx context.Context, ws []Write) ([]Outcome, error) {
	if len(ws) == 0 {
		return nil, nil
	}
	e, err := s.writer()
	if err != nil {
		return nil, err
	}
	outs := make([]Outcome, len(ws))
	err = e.do(ctx, s.cfg.Timeout+time.Duration(len(ws))*time.Millisecond, func(ctx context.Context, cl *redis.Client) error {
		now := time.Now().UnixMilli()
		return evalBatch(ctx, cl, upsertScript, len(ws), func(i int) ([]string, []any) {
			return []string{ws[i].Ref.EntryKey(), EpochKey}, ws[i].args(now)
		}, func(i int, v int64) { outs[i] = Outcome(v) })
	})
	if err != nil {
		return nil, err
	}
	for _, o := range outs {
		switch o {
		case Refused:
			s.metrics.rejected.Inc()
		case Predated:
			s.metrics.predated.Inc()
		}
	}
	return outs, nil
}

// evalBatch runs script n times in one pipeline; after a Redis that lost
// its scripts (restarted) answers NOSCRIPT it loads the script and runs
// the pipeline once more, which the scripts make harmless.
func evalBatch(ctx context.Context, cl *redis.Client, script *redis.Script, n int, call func(i int) ([]string, []any), result func(i int, v int64)) error {
	for attempt := 0; ; attempt++ {
		pipe := cl.Pipeline()
		cmds := make([]*redis.Cmd, n)
		for i := range n {
			keys, args := call(i)
			cmds[i] = script.EvalSha(ctx, pipe, keys, args...)
		}
		_, err := pipe.Exec(ctx)
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") && attempt == 0 {
			if err := script.Load(ctx, cl).Err(); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		for i, c := range cmds {
			v, err := c.Int64()
			if err != nil {
				return err
			}
			result(i, v)
		}
		return nil
	}
}

// RaiseWatermark sets the watermark of a partition's tables of one cache
// generation to at (Unix ms) unless it is already later, and its TTL to
// ttl.
func (s *Store) RaiseWatermark(ctx context.Context, db string, generation int64, partition int, at int64, ttl time.Duration) error {
	e, err := s.writer()
	if err != nil {
		return err
	}
	return e.do(ctx, s.cfg.Timeout, func(ctx context.Context, cl *redis.Client) error {
		return evalBatch(ctx, cl, watermarkScript, 1, func(int) ([]string, []any) {
			return []string{WatermarkKey(db, generation, partition)}, []any{at, max(ttl.Milliseconds(), 1)}
		}, func(int, int64) {})
	})
}

// Keys calls fn with the encoded key of every entry of a table of one
// generation on the primary (a SCAN: entries written meanwhile may be
// missed or seen twice), until fn fails. For tests and checks, not the
// request path.
func (s *Store) Keys(ctx context.Context, db string, generation int64, table string, fn func(key []byte) error) error {
	e, err := s.writer()
	if err != nil {
		return err
	}
	pattern := TablePattern(db, generation, table)
	prefix := pattern[:len(pattern)-1]
	var cursor uint64
	for {
		var keys []string
		err := e.do(ctx, s.cfg.Timeout, func(ctx context.Context, cl *redis.Client) error {
			var err error
			keys, cursor, err = cl.Scan(ctx, cursor, pattern, 1000).Result()
			return err
		})
		if err != nil {
			return err
		}
		for _, k := range keys {
			if key, ok := DecodeKey(prefix, k); ok {
				if err := fn(key); err != nil {
					return err
				}
			}
		}
		if cursor == 0 {
			return nil
		}
	}
}
