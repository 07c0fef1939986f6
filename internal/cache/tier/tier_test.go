package tier

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/doppio-db/doppio/client/wire"
	"github.com/doppio-db/doppio/internal/cache"
	"github.com/doppio-db/doppio/internal/redistest"
	"github.com/doppio-db/doppio/internal/scn"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func doc(key string) Doc {
	return Doc{Ref: cache.Ref{DB: "db", Generation: 7, Table: "T", Partition: 1, Key: []byte(key)}, Table: "db.T", TTL: time.Minute}
}

func entryAt(seq uint64, asOf time.Time, data string) cache.Entry {
	e := cache.Entry{SCN: scn.SCN{Generation: 1, Sequence: seq}, AsOf: asOf.UnixMilli()}
	if data != "" {
		e.Version, e.Data, e.Mtime = 1, []byte(data), asOf.UnixMilli()
	}
	return e
}

// One real Redis serves the tests of the tier; each uses its own keys.
func TestReadsComeFromTheFreshestTierThatIsFreshEnough(t *testing.T) {
	rc := redistest.Start(t, 0)
	reg := prometheus.NewRegistry()
	st, err := cache.Open(cache.Config{Addrs: rc.Addrs(), Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tr, err := New(Config{Store: st, LocalBytes: 1 << 20, ClockSkew: -1, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	ctx := context.Background()

	// Nothing anywhere: a miss in both tiers.
	d := doc("a")
	if l := tr.Read(ctx, d, time.Second); l.Source != Miss {
		t.Fatalf("empty tier: %s, want miss", l.Source)
	}
	// A fill lands here at once and in Redis soon.
	now := time.Now()
	tr.Fill(d, entryAt(5, now, "v5"))
	if l := tr.Read(ctx, d, time.Second); l.Source != Local || string(l.Entry.Data) != "v5" || l.Age > time.Second {
		t.Fatalf("after a fill: %+v, want a local hit on v5", l)
	}
	waitRedis(t, st, d, 5)

	// A second process (a new tier, empty hot-key cache) finds it in Redis,
	// then in its own hot-key cache.
	tr2, err := New(Config{Store: st, LocalBytes: 1 << 20, ClockSkew: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer tr2.Close()
	if l := tr2.Read(ctx, d, time.Second); l.Source != Redis || string(l.Entry.Data) != "v5" {
		t.Fatalf("second process: %+v, want a redis hit", l)
	}
	if l := tr2.Read(ctx, d, time.Second); l.Source != Local {
		t.Fatalf("second process, again: %s, want local", l.Source)
	}

	// An entry older than the bound answers nothing: the nodes do.
	old := doc("old")
	tr.Fill(old, entryAt(3, now, "v3"))
	time.Sleep(time.Until(now.Add(1200 * time.Millisecond)))
	if l := tr.Read(ctx, old, time.Second); l.Source != Miss {
		t.Fatalf("entry 1.2s old, bound 1s: %s, want miss", l.Source)
	}
	waitRedis(t, st, old, 3)
	// The partition's watermark vouches for it: every change up to now
	// is in Redis, so the entry is current as of now.
	if err := st.RaiseWatermark(ctx, "db", 7, 1, time.Now().UnixMilli(), time.Minute); err != nil {
		t.Fatal(err)
	}
	if l := tr2.Read(ctx, old, time.Second); l.Source != Redis || l.Age > time.Second {
		t.Fatalf("after the watermark rose: %+v, want a fresh redis hit", l)
	}

	// A fill read before this Redis incarnation began (the first request
	// above claimed its epoch) might miss a change only a lost Redis got:
	// Redis refuses it.
	before := doc("before")
	tr.Fill(before, entryAt(4, now.Add(-10*time.Second), "v4"))
	waitFills(t, tr, "stale_epoch", 1)
	if e, _, err := st.Get(ctx, before.Ref); !errors.Is(err, cache.ErrMiss) {
		t.Fatalf("Redis holds %+v (%v) of a fill read before its epoch", e, err)
	}

	// A stale fill never replaces a tombstone, in either tier.
	gone := doc("gone")
	tr.Fill(gone, entryAt(9, now, ""))
	tr.Fill(gone, entryAt(8, now.Add(time.Second), "resurrected"))
	waitRedis(t, st, gone, 9)
	waitFills(t, tr, "refused", 1)
	if l := tr.Read(ctx, gone, time.Minute); l.Source != Local || !l.Entry.Tombstone() {
		t.Fatalf("local after a stale fill over a tombstone: %+v", l)
	}
	if l := tr2.Read(ctx, gone, time.Minute); l.Source != Redis || !l.Entry.Tombstone() {
		t.Fatalf("redis after a stale fill over a tombstone: %+v", l)
	}

	if got := testutil.ToFloat64(tr.m.requests.WithLabelValues("local", "db.T", "hit")); got < 2 {
		t.Errorf("doppio_cache_requests_total{local,hit} = %v, want at least 2", got)
	}
	if got := testutil.ToFloat64(tr.m.fills.WithLabelValues("redis", "refused")); got != 1 {
		t.Errorf("doppio_cache_fills_total{redis,refused} = %v, want 1 (the stale fill)", got)
	}

	// The second process's report: what answered each read, each tier's
	// lookups, its hot-key cache and its judgement of Redis.
	rep := tr2.Report("r2", "router")
	wantReads := wire.CacheReads{
		Answered: map[string]int64{"local": 1, "redis": 3, "miss": 0, "bypass": 0},
		Local:    wire.CacheLookups{Hit: 1, Miss: 3},
		Redis:    wire.CacheLookups{Hit: 3},
	}
	if !reflect.DeepEqual(rep.Tables, map[string]wire.CacheReads{"db.T": wantReads}) || rep.Process != "r2" || rep.Role != "router" ||
		rep.Local == nil || rep.Local.Entries != 3 || rep.Local.MaxBytes != 1<<20 ||
		!reflect.DeepEqual(rep.Redis, []wire.CacheEndpoint{{Addr: rc.Primary.Addr, Primary: true, Healthy: true}}) || len(rep.Fills) != 0 {
		t.Errorf("second process's report: %+v", rep)
	}
	if fills := tr.Report("n1", "node").Fills; fills["redis"]["refused"] != 1 || fills["local"]["refused"] != 1 || fills["redis"]["stale_epoch"] != 1 {
		t.Errorf("first process's fills %v: want the stale fill refused by both tiers, the one before the epoch by Redis", fills)
	}

	// Redis dies: reads bypass it (after the health monitor notices, at
	// once) and never fail; the hot-key cache still answers.
	rc.Primary.Kill()
	miss := doc("never")
	for range 20 {
		if l := tr2.Read(ctx, miss, time.Second); l.Source != Bypass && l.Source != Miss {
			t.Fatalf("Redis down: %s", l.Source)
		}
	}
	if l := tr2.Read(ctx, miss, time.Second); l.Source != Bypass {
		t.Fatalf("Redis down, health judged: %s, want bypass", l.Source)
	}
	if l := tr.Read(ctx, d, time.Minute); l.Source != Local {
		t.Fatalf("Redis down, hot key: %s, want local", l.Source)
	}
}

// waitFills waits until tr has counted n fills to Redis with result.
func waitFills(t *testing.T, tr *Tier, result string, n float64) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); testutil.ToFloat64(tr.m.fills.WithLabelValues("redis", result)) != n; {
		if time.Now().After(deadline) {
			t.Fatalf("doppio_cache_fills_total{redis,%s} = %v after 5s, want %v", result, testutil.ToFloat64(tr.m.fills.WithLabelValues("redis", result)), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitRedis waits until Redis holds d's entry at SCN sequence seq.
func waitRedis(t *testing.T, st *cache.Store, d Doc, seq uint64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		e, _, err := st.Get(context.Background(), d.Ref)
		if err == nil && e.SCN.Sequence == seq {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Redis holds %+v (%v), want SCN sequence %d", e, err, seq)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
