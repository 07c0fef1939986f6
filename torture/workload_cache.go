package torture

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/doppio-db/doppio/internal/cache"
	"github.com/doppio-db/doppio/internal/cache/cachecheck"
)

// Cache is the cache tier workload (docs/design/cache.md): clients write,
// delete and read a few hot documents of a cacheable table, every read
// with X-Doppio-Staleness, so that reads are answered by the nodes' hot-key
// caches, by the Redis the cluster runs outside its namespaces, or by the
// storage nodes, while a datastream with a Redis sink (the updater, which
// also bootstraps) keeps Redis in step with the commits.
//
// The check judges every read against the history of writes: a read
// invoked at t with bound b must show a state no older than the latest
// write acknowledged before t-b, nor older than its own X-Doppio-As-Of
// says; a value no write wrote is a phantom; a value whose document an
// acknowledged delete removed before then is a deleted document come
// back. A read the nodes could have answered must not fail: any answer but
// a document, its absence or the nodes' own "not now" (429, 503, 504, no
// connection) is a violation, and once the cluster has healed every node
// must answer every key. Last, the divergence checker (cachecheck) must
// find, within Converge, no entry in Redis that shows another state than
// the nodes.
type Cache struct {
	// Keys, Clients: the hot documents and the concurrent clients
	// (defaults 4, 4).
	Keys, Clients int
	// Bounds are the staleness bounds reads pick from (default 200 ms,
	// 1 s, 3 s: past the tier's clock-skew margin, so entries answer).
	Bounds []time.Duration
	// Converge bounds how long the check waits for Redis to agree with the
	// nodes after the heal (default 15 s: several bootstrap periods).
	Converge time.Duration

	hist  *History
	redis []string
}

const (
	cacheDB       = "torture_cache"
	cacheTable    = "Hot"
	cacheStream   = "torture_cache_updater"
	cachePartsNum = 4 // setupDatabase's partitions
)

// The table is cacheable with a TTL far past a run's check and a short
// bootstrap period, so bootstraps run during every nemesis.
const cacheTableDef = `{"key":[{"name":"k","type":"string"}],
 "schema":{"type":"record","name":"Hot","fields":[{"name":"v","type":"long","default":0}]},
 "cache":{"ttl":"60s","bootstrapEvery":"2s"}}`

// cacheRedis is what the workload needs of its Target besides the
// endpoints: the Redis the nodes were started with.
type cacheRedis interface{ CacheRedis() []string }

// cacheInput is a cache operation's input: a read's bound, a write's
// value (a delete has none).
type cacheInput struct {
	Kind  string        `json:"kind"` // "read", "write", "delete"
	Value int64         `json:"value,omitempty"`
	Bound time.Duration `json:"bound,omitempty"`
}

// cacheOutput is what a read saw.
type cacheOutput struct {
	Status int   `json:"status,omitempty"`
	Value  int64 `json:"value,omitempty"`
	Absent bool  `json:"absent,omitempty"`
	// Source is X-Doppio-Cache: local, redis, miss or bypass.
	Source string `json:"source,omitempty"`
	// AsOf is X-Doppio-As-Of as an offset into the history (HasAsOf when
	// the answer carried it).
	AsOf    time.Duration `json:"asOf,omitempty"`
	HasAsOf bool          `json:"hasAsOf,omitempty"`
	// Refused marks a failed read that the nodes could have answered.
	Refused bool `json:"refused,omitempty"`
}

// Name implements Workload.
func (w *Cache) Name() string { return "cache" }

func (w *Cache) defaults() {
	if w.Keys == 0 {
		w.Keys = 4
	}
	if w.Clients == 0 {
		w.Clients = 4
	}
	if len(w.Bounds) == 0 {
		w.Bounds = []time.Duration{200 * time.Millisecond, time.Second, 3 * time.Second}
	}
	if w.Converge == 0 {
		w.Converge = 15 * time.Second
	}
}

func (w *Cache) path(k int) string { return fmt.Sprintf("/%s/%s/h%d", cacheDB, cacheTable, k) }

// Setup implements Workload: the cacheable table (its documents start
// absent) and the updater, a datastream into the cluster's Redis.
func (w *Cache) Setup(ctx context.Context, t Target) error {
	w.defaults()
	if r, ok := t.(cacheRedis); ok {
		w.redis = r.CacheRedis()
	}
	if len(w.redis) == 0 {
		return errors.New("cache: the cluster runs no Redis for the cache tier")
	}
	c, err := setupDatabase(ctx, t, 31, cacheDB, map[string]string{cacheTable: cacheTableDef})
	if err != nil {
		return err
	}
	stream := map[string]any{"database": cacheDB, "from": "earliest",
		"sink":      map[string]any{"type": "redis", "addresses": w.redis},
		"autoPause": map[string]any{"failures": 1000, "resumeAfter": "1s"}}
	if _, err := c.Retry(ctx, "PUT", "/_datastreams/"+cacheStream, stream, 200, 201); err != nil {
		return err
	}
	for k := range w.Keys {
		if _, err := c.Retry(ctx, "GET", w.path(k), nil, 200, 404); err != nil {
			return err
		}
	}
	return nil
}

// Run implements Workload: three reads in four, then writes and deletes.
func (w *Cache) Run(ctx context.Context, t Target, rng *rand.Rand) error {
	w.defaults()
	return runClients(ctx, t, rng, w.Clients, &w.hist, func(c *Client, seq int64) {
		k := c.rng.IntN(w.Keys)
		switch n := c.rng.IntN(16); {
		case n < 12:
			w.read(ctx, c, -1, k, w.Bounds[c.rng.IntN(len(w.Bounds))])
		case n < 15:
			// Unique values: a read names the write it saw.
			v := int64(c.ID+1)*1_000_000_000 + seq
			op := w.hist.Invoke(c.ID, "write", strconv.Itoa(k), true, cacheInput{Kind: "write", Value: v})
			resp, err := c.Do(ctx, "PUT", w.path(k), map[string]any{"v": v})
			w.hist.Complete(op, Classify(true, resp, err), nil, describe(resp, err))
		default:
			op := w.hist.Invoke(c.ID, "delete", strconv.Itoa(k), true, cacheInput{Kind: "delete"})
			resp, err := c.Do(ctx, "DELETE", w.path(k), nil)
			w.hist.Complete(op, Classify(true, resp, err), nil, describe(resp, err))
		}
	})
}

// read records one staleness-bounded read of key k at endpoint at (-1:
// any) and reports whether it was answered.
func (w *Cache) read(ctx context.Context, c *Client, at, k int, bound time.Duration) (answered bool, refused bool) {
	op := w.hist.Invoke(c.ID, "read", strconv.Itoa(k), false, cacheInput{Kind: "read", Bound: bound})
	if at < 0 {
		at = c.rng.IntN(len(c.endpoints))
	}
	resp, err := c.DoAt(ctx, at, "GET", w.path(k), nil, "X-Doppio-Staleness", bound.String())
	var out cacheOutput
	if err != nil {
		w.hist.Complete(op, Failed, out, err)
		return false, false
	}
	out.Status, out.Source = resp.Status, resp.Header.Get("X-Doppio-Cache")
	if ms, err := strconv.ParseInt(resp.Header.Get("X-Doppio-As-Of"), 10, 64); err == nil {
		// How long ago, by the wall clock the nodes stamp with, placed on
		// the history's monotonic timeline: no clock slew over a run.
		now := time.Now()
		out.AsOf, out.HasAsOf = now.Sub(w.hist.start)-now.Sub(time.UnixMilli(ms)), true
	}
	var doc struct {
		V any `json:"v"`
	}
	switch {
	case resp.Status == http.StatusOK && resp.Decode(&doc) == nil:
		v, ok := num(doc.V)
		if !ok {
			out.Refused = true
			w.hist.Complete(op, Failed, out, fmt.Errorf("no value in %s", resp.Body))
			return false, true
		}
		out.Value = v
		w.hist.Complete(op, Acked, out, nil)
		return true, false
	case resp.Status == http.StatusNotFound && out.HasAsOf:
		// A document's absence carries the partition's SCN and as-of; a
		// 404 without them is about the table, not the document.
		out.Absent = true
		w.hist.Complete(op, Acked, out, nil)
		return true, false
	}
	switch resp.Status {
	case http.StatusNotFound, http.StatusTooManyRequests, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
	default:
		out.Refused = true
	}
	w.hist.Complete(op, Failed, out, describe(resp, nil))
	return false, out.Refused
}

// Check implements Workload: a final read of every key at every node
// joins the history, which is then judged; then Redis must converge to
// the nodes' state.
func (w *Cache) Check(ctx context.Context, t Target, dir string) Result {
	w.defaults()
	if w.hist == nil {
		return Result{Workload: w.Name(), Failures: []string{"cache: Check before Run"}}
	}
	hc := newHTTPClient(t)
	c := NewClient(-1, t.Endpoints(), hc, rand.New(rand.NewPCG(31, 32)))
	var unanswered []string
	bound := w.Bounds[len(w.Bounds)-1]
	for k := range w.Keys {
		for at := range t.Endpoints() {
			deadline := time.Now().Add(10 * time.Second)
			for {
				ok, refused := w.read(ctx, c, at, k, bound)
				if ok || refused {
					break
				}
				if time.Now().After(deadline) || ctx.Err() != nil {
					unanswered = append(unanswered, fmt.Sprintf("h%d at %s", k, t.Endpoints()[at]))
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	ops := w.hist.Ops()
	res := w.hist.result(w.Name())
	for _, u := range unanswered {
		res.Violations++
		res.Failures = append(res.Failures, "cache: the healed cluster did not answer the staleness-bounded read of "+u)
	}
	for _, f := range checkCacheReads(ops) {
		res.Violations++
		res.Failures = append(res.Failures, f)
	}
	hits := 0
	for _, op := range ops {
		if out, ok := op.Output.(cacheOutput); ok && op.Outcome == Acked && (out.Source == "local" || out.Source == "redis") {
			hits++
		}
	}
	if hits == 0 {
		res.Failures = append(res.Failures, fmt.Sprintf("cache: none of %d reads was answered from the cache tier: the run tested nothing", len(ops)))
	}
	for _, d := range w.converge(ctx, t, hc) {
		res.Violations++
		res.Failures = append(res.Failures, d)
	}
	if !res.OK() && dir != "" {
		p := filepath.Join(dir, "cache-history.jsonl")
		if WriteJSONL(p, ops) == nil {
			res.Artifacts = append(res.Artifacts, p)
		}
	}
	return res
}

// converge runs the divergence checker until Redis shows no entry that
// differs from the nodes, and returns what still differed after
// Converge.
func (w *Cache) converge(ctx context.Context, t Target, hc *http.Client) []string {
	c := NewClient(-1, t.Endpoints(), hc, rand.New(rand.NewPCG(33, 34)))
	resp, err := c.Retry(ctx, "GET", "/_schemas/"+cacheDB+"/"+cacheTable, nil, 200)
	if err != nil {
		return []string{"cache: read the table's cache generation: " + err.Error()}
	}
	var tv struct {
		CacheGeneration int64 `json:"cacheGeneration"`
	}
	if err := resp.Decode(&tv); err != nil || tv.CacheGeneration == 0 {
		return []string{fmt.Sprintf("cache: no cache generation in %s (%v)", resp.Body, err)}
	}
	st, err := cache.Open(cache.Config{Addrs: w.redis})
	if err != nil {
		return []string{"cache: open Redis: " + err.Error()}
	}
	defer st.Close()
	tables := []cachecheck.Table{{Name: cacheTable, Generation: tv.CacheGeneration}}
	deadline := time.Now().Add(w.Converge)
	for attempt := 0; ; attempt++ {
		src := cachecheck.HTTPSource{URL: t.Endpoints()[attempt%len(t.Endpoints())], Client: hc}
		rep, err := cachecheck.Check(ctx, st, src, cacheDB, cachePartsNum, tables)
		if err == nil && len(rep.Diverged) == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			if err != nil {
				return []string{fmt.Sprintf("cache: the divergence check did not complete within %v: %v", w.Converge, err)}
			}
			var out []string
			for _, d := range rep.Diverged {
				out = append(out, fmt.Sprintf("cache: Redis still differs from the nodes %v after the heal: %v", w.Converge, d))
			}
			return out
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// cacheWrite is one write or delete that may have taken effect.
type cacheWrite struct {
	op      Op
	deleted bool
	// end is when it was acknowledged; never for an indeterminate one.
	end time.Duration
}

// readLimit is a time the state a read shows must be the latest after,
// and what promised it.
type readLimit struct {
	at   time.Duration
	what string
}

// never is the completion of an operation whose effect may come at any
// time.
const never = time.Duration(math.MaxInt64)

// checkCacheReads judges every answered read of a cache history (see
// Cache) and describes each violation, and each failed read the nodes
// could have answered.
func checkCacheReads(ops []Op) []string {
	var out []string
	keys, byKey := groupByKey(ops)
	for _, k := range keys {
		out = append(out, checkCacheKey(byKey[k])...)
	}
	return out
}

func checkCacheKey(ops []Op) []string {
	var writes []cacheWrite // acknowledged or indeterminate
	byValue := map[int64]cacheWrite{}
	for _, op := range ops {
		in, _ := op.Input.(cacheInput)
		if in.Kind == "read" || (op.Outcome != Acked && op.Outcome != Indeterminate) {
			continue
		}
		cw := cacheWrite{op: op, deleted: in.Kind == "delete", end: op.Complete}
		if op.Outcome != Acked {
			cw.end = never
		}
		writes = append(writes, cw)
		if !cw.deleted {
			byValue[in.Value] = cw
		}
	}
	// Acknowledged writes by completion, with the latest invocation of
	// any (and of any delete) acknowledged up to each: a state written
	// by w is superseded at time T exactly when some write acknowledged
	// before T was invoked after w was acknowledged.
	acked := make([]cacheWrite, 0, len(writes))
	for _, cw := range writes {
		if cw.end != never {
			acked = append(acked, cw)
		}
	}
	sort.Slice(acked, func(i, j int) bool { return acked[i].end < acked[j].end })
	latest, latestDelete := make([]time.Duration, len(acked)), make([]time.Duration, len(acked))
	for i, cw := range acked {
		latest[i], latestDelete[i] = -1, -1
		if i > 0 {
			latest[i], latestDelete[i] = latest[i-1], latestDelete[i-1]
		}
		latest[i] = max(latest[i], cw.op.Invoke)
		if cw.deleted {
			latestDelete[i] = max(latestDelete[i], cw.op.Invoke)
		}
	}
	// supersededAt: is a state that started to hold at end superseded by
	// writes acknowledged before T, and is one of them a delete?
	supersededAt := func(end, at time.Duration) (any, byDelete bool) {
		i := sort.Search(len(acked), func(i int) bool { return acked[i].end >= at }) - 1
		if i < 0 {
			return false, false
		}
		return latest[i] > end, latestDelete[i] > end
	}
	witness := func(end, at time.Duration) string {
		for _, cw := range acked {
			if cw.end < at && cw.op.Invoke > end {
				return describeOp(cw.op)
			}
		}
		return "?"
	}

	var out []string
	for _, op := range ops {
		in, _ := op.Input.(cacheInput)
		res, _ := op.Output.(cacheOutput)
		if in.Kind != "read" {
			continue
		}
		if op.Outcome != Acked {
			if res.Refused {
				out = append(out, "cache: a read the nodes could answer failed: "+describeOp(op))
			}
			continue
		}
		// The state shown must be the latest at some time after both the
		// bound's start and the answer's as-of.
		limits := []readLimit{{op.Invoke - in.Bound, fmt.Sprintf("its staleness bound %v", in.Bound)}}
		if res.HasAsOf {
			limits = append(limits, readLimit{res.AsOf, fmt.Sprintf("its X-Doppio-As-Of (%.3fs)", res.AsOf.Seconds())})
		}
		if res.Absent {
			// The document's absence held from the start or after a delete
			// invoked before the read ended.
			since := time.Duration(-1)
			for _, cw := range writes {
				if cw.deleted && cw.op.Invoke < op.Complete {
					since = max(since, cw.end)
				}
			}
			for _, l := range limits {
				if sup, _ := supersededAt(since, l.at); sup {
					out = append(out, fmt.Sprintf("cache: stale read (%s source): absent, older than %s; acknowledged before then: %s\n  read: %s",
						res.Source, l.what, witness(since, l.at), describeOp(op)))
					break
				}
			}
			continue
		}
		w, ok := byValue[res.Value]
		if !ok || w.op.Invoke > op.Complete {
			out = append(out, fmt.Sprintf("cache: phantom read (%s source): value %d was never written before it was read\n  read: %s", res.Source, res.Value, describeOp(op)))
			continue
		}
		for _, l := range limits {
			sup, byDelete := supersededAt(w.end, l.at)
			if !sup {
				continue
			}
			kind := "stale read"
			if byDelete {
				kind = "deleted document came back"
			}
			out = append(out, fmt.Sprintf("cache: %s (%s source): value %d, older than %s; acknowledged before then: %s\n  read: %s\n  its write: %s",
				kind, res.Source, res.Value, l.what, witness(w.end, l.at), describeOp(op), describeOp(w.op)))
			break
		}
	}
	return out
}
