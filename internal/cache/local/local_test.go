package local

import (
	"fmt"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/cache"
	"github.com/doppio-db/doppio/internal/scn"
)

func entry(g, s uint64, asOf int64, data string) cache.Entry {
	e := cache.Entry{SCN: scn.SCN{Generation: g, Sequence: s}, AsOf: asOf}
	if data != "" {
		e.Version, e.Data, e.Mtime = 1, []byte(data), asOf
	}
	return e
}

// The same rule as Redis's script: an older SCN never replaces a newer
// one, an equal one keeps the value and the later as-of, and at an equal
// SCN a tombstone is the newer state (a 404 names the SCN applied before
// it looked, which may be the document's own write).
func TestUpsertComparesBySCN(t *testing.T) {
	c := New(1 << 20)
	defer c.Close()
	const k = "doppio:db:1:T:a"
	steps := []struct {
		e        cache.Entry
		want     cache.Outcome
		wantData string
		wantAsOf int64
	}{
		{entry(2, 5, 100, "v5"), cache.Written, "v5", 100},
		{entry(2, 4, 900, "v4"), cache.Refused, "v5", 100},   // older: a stale fill
		{entry(2, 5, 300, "other"), cache.Merged, "v5", 300}, // same SCN: later as-of only
		{entry(2, 5, 200, "v5"), cache.Merged, "v5", 300},    // never lowers as-of
		{entry(2, 7, 400, ""), cache.Written, "", 400},       // the delete's tombstone
		{entry(2, 6, 999, "v6"), cache.Refused, "", 400},     // cannot resurrect it
		{entry(3, 1, 500, "v-new-term"), cache.Written, "v-new-term", 500},
		{entry(3, 1, 600, ""), cache.Written, "", 600}, // a 404 at the document's SCN
		{entry(3, 1, 700, "v-new-term"), cache.Refused, "", 600},
		{entry(3, 1, 800, ""), cache.Merged, "", 800},
	}
	for i, st := range steps {
		if got := c.Upsert(k, st.e, time.Minute); got != st.want {
			t.Fatalf("step %d: Upsert = %v, want %v", i, got, st.want)
		}
		e, ok := c.Get(k)
		if !ok || string(e.Data) != st.wantData || e.AsOf != st.wantAsOf || e.Tombstone() != (st.wantData == "") {
			t.Fatalf("step %d: entry %+v (present %v), want data %q as-of %d", i, e, ok, st.wantData, st.wantAsOf)
		}
	}
}

func TestEntriesExpireAfterTheirTTL(t *testing.T) {
	c := New(1 << 20)
	defer c.Close()
	c.Upsert("short", entry(1, 1, 1, "x"), 50*time.Millisecond)
	c.Upsert("long", entry(1, 1, 1, "y"), time.Hour)
	time.Sleep(150 * time.Millisecond)
	if _, ok := c.Get("short"); ok {
		t.Error("an entry outlived its TTL")
	}
	if _, ok := c.Get("long"); !ok {
		t.Error("an entry vanished before its TTL")
	}
}

// The budget holds: many more documents than fit leave the cache within
// it (W-TinyLFU chooses which).
func TestCacheStaysWithinItsBytes(t *testing.T) {
	const budget = 64 << 10
	c := New(budget)
	defer c.Close()
	doc := string(make([]byte, 1000))
	for i := range 1000 {
		c.Upsert(fmt.Sprintf("k%d", i), entry(1, uint64(i+1), 1, doc), time.Hour)
	}
	c.c.CleanUp()
	st := c.Stats()
	if st.Bytes > budget || st.MaxBytes != budget {
		t.Fatalf("stats %+v: over the budget of %d bytes", st, budget)
	}
	if st.Entries == 0 || st.Entries > budget/1000 {
		t.Fatalf("stats %+v: want some entries, at most %d", st, budget/1000)
	}
}

func TestNilCacheHoldsNothing(t *testing.T) {
	var c *Cache = New(0)
	if c != nil {
		t.Fatal("New(0) made a cache")
	}
	if out := c.Upsert("k", entry(1, 1, 1, "x"), time.Minute); out != cache.Refused {
		t.Errorf("nil Upsert = %v", out)
	}
	if _, ok := c.Get("k"); ok {
		t.Error("nil Get found an entry")
	}
	c.Close()
}
