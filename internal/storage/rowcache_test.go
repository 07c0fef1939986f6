package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// The tests cache keys starting with "doc/".
func docKeys(key []byte) bool { return bytes.HasPrefix(key, []byte("doc/")) }

func openRowCached(t *testing.T, rowBytes int64) *Engine {
	t.Helper()
	e, err := Open(t.TempDir(), Options{CacheBytes: 8 << 20, RowCacheBytes: rowBytes, RowCacheKeys: docKeys})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func mustGet(t *testing.T, e *Engine, key string) string {
	t.Helper()
	v, err := e.Get([]byte(key))
	if errors.Is(err, ErrNotFound) {
		return "<absent>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(v)
}

// TestRowCacheAnswersRepeatedReadsAndForgetsEveryWrite: a second read of a
// document is a hit; every way of writing (synced and unsynced commits,
// enqueued batches, deletes, range deletions, ingestion) is seen by the next
// read; keys of other kinds are never cached.
func TestRowCacheAnswersRepeatedReadsAndForgetsEveryWrite(t *testing.T) {
	e := openRowCached(t, 1<<20)
	set := func(commit func(*Batch) error, kv ...string) {
		t.Helper()
		b := e.NewBatch()
		for i := 0; i < len(kv); i += 2 {
			b.Set([]byte(kv[i]), []byte(kv[i+1]))
		}
		if err := commit(b); err != nil {
			t.Fatal(err)
		}
	}
	enqueue := func(b *Batch) error {
		if err := e.Enqueue(b); err != nil {
			return err
		}
		return b.Wait()
	}
	set(e.Commit, "doc/a", "1", "meta/x", "m1")
	for range 3 {
		if got := mustGet(t, e, "doc/a"); got != "1" {
			t.Fatalf("doc/a = %q, want 1", got)
		}
		mustGet(t, e, "meta/x")
	}
	// The write left its value in the cache: every read is a hit.
	if st := e.RowCacheStats(); st.Hits != 3 || st.Misses != 0 || st.Bytes == 0 {
		t.Fatalf("after 3 reads of a document just written: %+v, want 3 hits, no miss", st)
	}

	// Neither the writer's buffer nor a reader's answer is the cached row.
	buf := []byte("w1")
	wb := e.NewBatch()
	wb.Set([]byte("doc/w"), buf)
	if err := e.Commit(wb); err != nil {
		t.Fatal(err)
	}
	copy(buf, "xx")
	got, err := e.Get([]byte("doc/w"))
	if err != nil || string(got) != "w1" {
		t.Fatalf("doc/w = %q, %v after the writer reused its buffer; want w1", got, err)
	}
	copy(got, "yy")
	if again := mustGet(t, e, "doc/w"); again != "w1" {
		t.Fatalf("doc/w = %q after a reader changed its answer; want w1", again)
	}
	// The same for a row a read inserted: an ingestion empties the cache,
	// the next read misses and caches what it read.
	if err := ingestOne(e, t.TempDir(), "doc/other", "o"); err != nil {
		t.Fatal(err)
	}
	missed := e.RowCacheStats().Misses
	if got, err = e.Get([]byte("doc/w")); err != nil || e.RowCacheStats().Misses != missed+1 {
		t.Fatalf("read after the ingestion: %v, misses %d → %d", err, missed, e.RowCacheStats().Misses)
	}
	copy(got, "zz")
	if again := mustGet(t, e, "doc/w"); again != "w1" {
		t.Fatalf("doc/w = %q after a reader changed the answer a miss cached; want w1", again)
	}
	// GetShared answers with the cached row itself, no copy, its capacity
	// clipped so an append cannot write into it.
	s1, err := e.GetShared([]byte("doc/w"))
	if err != nil || string(s1) != "w1" || cap(s1) != len(s1) {
		t.Fatalf("GetShared(doc/w) = %q (cap %d), %v", s1, cap(s1), err)
	}
	if s2, _ := e.GetShared([]byte("doc/w")); &s2[0] != &s1[0] {
		t.Fatal("GetShared copied the cached row")
	}
	if g, _ := e.Get([]byte("doc/w")); &g[0] == &s1[0] {
		t.Fatal("Get answered with the cached row itself")
	}

	for i, commit := range []func(*Batch) error{e.Commit, e.CommitNoSync, enqueue} {
		v := strconv.Itoa(i + 2)
		set(commit, "doc/a", v)
		if got := mustGet(t, e, "doc/a"); got != v {
			t.Fatalf("commit %d: doc/a = %q after writing %s", i, got, v)
		}
		mustGet(t, e, "doc/a") // cached again
	}

	b := e.NewBatch()
	b.Delete([]byte("doc/a"))
	if err := e.CommitNoSync(b); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, e, "doc/a"); got != "<absent>" {
		t.Fatalf("doc/a = %q after its delete", got)
	}

	set(e.Commit, "doc/b", "b1", "doc/c", "c1")
	mustGet(t, e, "doc/b")
	mustGet(t, e, "doc/c")
	b = e.NewBatch()
	b.DeleteRange([]byte("doc/"), []byte("doc0"))
	b.Set([]byte("doc/c"), []byte("c2")) // after the range deletion: survives it
	if err := e.Commit(b); err != nil {
		t.Fatal(err)
	}
	if got, got2 := mustGet(t, e, "doc/b"), mustGet(t, e, "doc/c"); got != "<absent>" || got2 != "c2" {
		t.Fatalf("after a range deletion: doc/b = %q, doc/c = %q; want absent, c2", got, got2)
	}

	// An ingested table replaces doc/c.
	if err := ingestOne(e, t.TempDir(), "doc/c", "c3"); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, e, "doc/c"); got != "c3" {
		t.Fatalf("doc/c = %q after ingesting c3", got)
	}
}

// TestRowCacheStaysWithinItsBytes: reading far more than the cache holds
// keeps it under its bound, and every read still answers right.
func TestRowCacheStaysWithinItsBytes(t *testing.T) {
	const limit, n = 1 << 20, 10000
	e := openRowCached(t, limit)
	b := e.NewBatch()
	for i := range n {
		b.Set(fmt.Appendf(nil, "doc/%04d", i), bytes.Repeat([]byte{byte(i)}, 200))
	}
	if err := e.Commit(b); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		for i := range n {
			v, err := e.Get(fmt.Appendf(nil, "doc/%04d", i))
			if err != nil || len(v) != 200 || v[0] != byte(i) {
				t.Fatalf("doc/%04d = %x, %v", i, v, err)
			}
		}
	}
	if st := e.RowCacheStats(); st.Bytes > limit || st.Bytes < limit/2 {
		t.Fatalf("cache holds %d bytes, bound %d", st.Bytes, limit)
	}
}

// TestRowCacheNeverServesAStaleValue: writers move counters forward while
// readers read them; a read that starts after a write returned must see
// that write or a later one, through every commit path. With the cache
// filled by reads that overlap writes, an insert that ignored the writes in
// flight shows up here as a value older than one already acknowledged.
func TestRowCacheNeverServesAStaleValue(t *testing.T) {
	e := openRowCached(t, 1<<20)
	const keys, writes, readers = 4, 3000, 4
	var acked [keys]atomic.Int64
	commits := []func(*Batch) error{e.Commit, e.CommitNoSync, func(b *Batch) error {
		if err := e.Enqueue(b); err != nil {
			return err
		}
		return b.Wait()
	}}
	var wg sync.WaitGroup
	var done atomic.Bool
	for k := range keys {
		wg.Go(func() {
			key := fmt.Appendf(nil, "doc/%d", k)
			for i := 1; i <= writes; i++ {
				b := e.NewBatch()
				b.Set(key, []byte(strconv.Itoa(i)))
				if err := commits[i%len(commits)](b); err != nil {
					t.Error(err)
					return
				}
				acked[k].Store(int64(i))
			}
		})
	}
	var stale atomic.Int64
	var rg sync.WaitGroup
	for r := range readers {
		rg.Go(func() {
			for n := 0; !done.Load(); n++ {
				k := (n + r) % keys
				floor := acked[k].Load()
				v, err := e.Get(fmt.Appendf(nil, "doc/%d", k))
				if errors.Is(err, ErrNotFound) {
					if floor > 0 {
						stale.Add(1)
					}
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				if got, _ := strconv.ParseInt(string(v), 10, 64); got < floor {
					stale.Add(1)
					t.Errorf("doc/%d read %d after write %d was acknowledged", k, got, floor)
					return
				}
			}
		})
	}
	wg.Wait()
	done.Store(true)
	rg.Wait()
	if stale.Load() > 0 {
		t.Fatalf("%d stale reads", stale.Load())
	}
	st := e.RowCacheStats()
	if st.Hits == 0 {
		t.Fatalf("no read was answered by the cache (%+v): the test did not exercise it", st)
	}
	for k := range keys {
		if got := mustGet(t, e, fmt.Sprintf("doc/%d", k)); got != strconv.Itoa(writes) {
			t.Fatalf("doc/%d = %s at the end, want %d", k, got, writes)
		}
	}
}

// commitHeldAtEnd commits doc/k = v1 and returns once that batch waits
// between its commit and its end mark; closing release lets it end, and
// done then gives its commit's error.
func commitHeldAtEnd(e *Engine) (release chan struct{}, done chan error) {
	held, release := holdEnd(e, "v1")
	done = make(chan error)
	go func() {
		b := e.NewBatch()
		b.Set([]byte("doc/k"), []byte("v1"))
		done <- e.CommitNoSync(b)
	}()
	<-held
	return release, done
}

// holdEnd makes the batch that writes value wait between its commit and its
// end mark until release is closed; held is closed once it waits.
func holdEnd(e *Engine, value string) (held, release chan struct{}) {
	held, release = make(chan struct{}), make(chan struct{})
	e.rows.beforeEnd = func(ws []rowWrite) {
		for _, w := range ws {
			if string(w.value) == value {
				close(held)
				<-release
			}
		}
	}
	return held, release
}

// TestRowCacheWriteThroughNeverLeavesAnOlderValue holds a batch writing
// doc/k = v1 between its commit and its end mark while something newer
// replaces doc/k, then lets it end: the cache must keep the newer value.
// Two orders are forced: a later batch that ends first (the cache must
// follow sequence order, not the order of end marks), and an ingestion
// (whose sequence number the cache does not know).
func TestRowCacheWriteThroughNeverLeavesAnOlderValue(t *testing.T) {
	for _, tc := range []struct {
		name      string
		meanwhile func(t *testing.T, e *Engine) error
		want      string
	}{
		{"a later batch ends first", func(t *testing.T, e *Engine) error {
			b := e.NewBatch()
			b.Set([]byte("doc/k"), []byte("v2"))
			return e.CommitNoSync(b)
		}, "v2"},
		{"an ingestion overlaps", func(t *testing.T, e *Engine) error {
			return ingestOne(e, t.TempDir(), "doc/k", "ingested")
		}, "ingested"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := openRowCached(t, 1<<20)
			release, done := commitHeldAtEnd(e)
			if err := tc.meanwhile(t, e); err != nil {
				t.Fatal(err)
			}
			close(release)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			for range 2 { // the second read is from the cache
				if got := mustGet(t, e, "doc/k"); got != tc.want {
					t.Fatalf("doc/k = %q, want %q", got, tc.want)
				}
			}
		})
	}
}

// TestRowCacheWritesThroughBesideOtherKeysWrites: batches writing other
// keys of the same shard at the same time do not stop a write-through (a
// shard-wide condition left the cache mostly empty after a bulk load that
// applied several partitions at once).
func TestRowCacheWritesThroughBesideOtherKeysWrites(t *testing.T) {
	e := openRowCached(t, 1<<20)
	other := ""
	for i := 0; other == ""; i++ {
		if k := fmt.Sprintf("doc/o%d", i); e.rows.shard([]byte(k)) == e.rows.shard([]byte("doc/k")) {
			other = k
		}
	}
	release, done := commitHeldAtEnd(e)
	b := e.NewBatch()
	b.Set([]byte(other), []byte("o1"))
	if err := e.CommitNoSync(b); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	before := e.RowCacheStats()
	if got := mustGet(t, e, "doc/k"); got != "v1" {
		t.Fatalf("doc/k = %q", got)
	}
	if got := mustGet(t, e, other); got != "o1" {
		t.Fatalf("%s = %q", other, got)
	}
	if after := e.RowCacheStats(); after.Hits != before.Hits+2 || after.Misses != before.Misses {
		t.Fatalf("row cache %+v -> %+v: want both writes answered from the cache", before, after)
	}
}

// ingestOne ingests a table of one key, written in dir.
func ingestOne(e *Engine, dir, key, value string) error {
	path := filepath.Join(dir, "t.sst")
	f, err := FileWritable(path)
	if err != nil {
		return err
	}
	w := e.NewSSTWriter(f)
	if err := w.Set([]byte(key), []byte(value)); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return e.Ingest(context.Background(), []string{path})
}

// TestRowCacheOutlivesRangeDeletionsOfOtherSpans: a range deletion that
// RowCacheSpans says holds no cached key (a log truncation) leaves the
// cache as it is; one that may still empties it.
func TestRowCacheOutlivesRangeDeletionsOfOtherSpans(t *testing.T) {
	e, err := Open(t.TempDir(), Options{CacheBytes: 8 << 20, RowCacheBytes: 1 << 20, RowCacheKeys: docKeys,
		RowCacheSpans: func(start, end []byte) bool {
			return !bytes.HasPrefix(start, []byte("log/")) || !bytes.HasPrefix(end, []byte("log/"))
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	b := e.NewBatch()
	b.Set([]byte("doc/a"), []byte("1"))
	b.Set([]byte("log/1"), []byte("x"))
	if err := e.Commit(b); err != nil {
		t.Fatal(err)
	}
	deleteRange := func(start, end string) {
		b := e.NewBatch()
		b.DeleteRange([]byte(start), []byte(end))
		if err := e.Commit(b); err != nil {
			t.Fatal(err)
		}
	}
	deleteRange("log/0", "log/9")
	before := e.RowCacheStats()
	if got := mustGet(t, e, "doc/a"); got != "1" {
		t.Fatalf("doc/a = %q", got)
	}
	if after := e.RowCacheStats(); after.Hits != before.Hits+1 {
		t.Fatalf("row cache %+v -> %+v after a log range deletion: want a hit", before, after)
	}
	deleteRange("doc/", "doc0")
	if got := mustGet(t, e, "doc/a"); got != "<absent>" {
		t.Fatalf("doc/a = %q after its range was deleted", got)
	}
}
