package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestAcknowledgedWritesSurviveKill9 writes from several goroutines, kills
// the node with SIGKILL mid-stream, restarts it on the same data directory
// and finds every acknowledged write with the acknowledged content.
func TestAcknowledgedWritesSurviveKill9(t *testing.T) {
	data := t.TempDir()
	n := startDev(t, data)
	setupCounters(t, n)

	type ack struct {
		path, writer string
		n            int64
	}
	var (
		mu    sync.Mutex
		acked []ack
		wg    sync.WaitGroup
	)
	ctx, cancel := context.WithCancel(context.Background())
	const writers = 8
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int64(0); ctx.Err() == nil; i++ {
				path := fmt.Sprintf("/e2e/Counter/g%d/%d", i%16, int64(w)*1_000_000+i)
				doc := map[string]any{"n": i, "writer": fmt.Sprint("w", w)}
				status, _, _, err := n.try(ctx, "PUT", path, doc)
				if err != nil {
					return // the node died: this write is indeterminate
				}
				if status == 201 {
					mu.Lock()
					acked = append(acked, ack{path, fmt.Sprint("w", w), i})
					mu.Unlock()
				}
			}
		}()
	}
	time.Sleep(1500 * time.Millisecond)
	n.kill()
	cancel()
	wg.Wait()
	if len(acked) < 100 {
		t.Fatalf("only %d writes acknowledged before the kill; the test proves little", len(acked))
	}

	n = startDev(t, data)
	for _, a := range acked {
		status, _, body := n.do("GET", a.path, nil)
		if status != 200 {
			t.Fatalf("acknowledged write %s lost after kill -9: status %d %s", a.path, status, body)
		}
		var doc struct {
			N      int64  `json:"n"`
			Writer string `json:"writer"`
		}
		if err := json.Unmarshal(body, &doc); err != nil || doc.N != a.n || doc.Writer != a.writer {
			t.Fatalf("%s after restart = %s, want n=%d writer=%s", a.path, body, a.n, a.writer)
		}
	}
	t.Logf("%d acknowledged writes all present after kill -9", len(acked))
}

// TestConcurrentIncrementsOverHTTP hammers one counter with $inc from many
// clients; the final value is exactly the number of increments.
func TestConcurrentIncrementsOverHTTP(t *testing.T) {
	n := startDev(t, t.TempDir())
	setupCounters(t, n)
	n.must(201, "PUT", "/e2e/Counter/hot/1", map[string]any{"n": 0})
	n.must(201, "PUT", "/e2e/Counter/cold/1", map[string]any{"n": 0})
	const clients, each = 16, 40
	var wg sync.WaitGroup
	errs := make(chan string, clients)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := "/e2e/Counter/hot/1"
			if c%4 == 0 {
				path = "/e2e/Counter/cold/1"
			}
			for range each {
				status, _, b, err := n.try(context.Background(), "PATCH", path, `{"$inc":{"n":1}}`)
				if err != nil || status != 200 {
					errs <- fmt.Sprintf("PATCH %s: %d %s %v", path, status, b, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	for path, want := range map[string]int64{"/e2e/Counter/hot/1": clients * 3 / 4 * each, "/e2e/Counter/cold/1": clients / 4 * each} {
		var doc struct{ N int64 }
		if err := json.Unmarshal(n.must(200, "GET", path, nil), &doc); err != nil || doc.N != want {
			t.Fatalf("%s: n = %d, want %d", path, doc.N, want)
		}
	}
}

// TestReadsSeeEveryAcknowledgedWriteThroughTheRowCache: documents read
// again are answered by the node's row cache (its hit counter moves), and a
// read that follows an acknowledged write sees that write or a later one,
// with readers hammering the same documents while the writes land.
func TestReadsSeeEveryAcknowledgedWriteThroughTheRowCache(t *testing.T) {
	n := startDev(t, t.TempDir())
	setupCounters(t, n)
	const docs, incs = 4, 60
	for d := range docs {
		n.must(201, "PUT", fmt.Sprintf("/e2e/Counter/rc/%d", d), map[string]any{"n": 0})
	}
	hits0 := metricSum(t, "doppio_row_cache_hits_total", "", n)
	for range 3 {
		n.must(200, "GET", "/e2e/Counter/rc/0", nil)
	}
	if got := metricSum(t, "doppio_row_cache_hits_total", "", n) - hits0; got < 2 {
		t.Fatalf("3 reads of one document: %v row cache hits, want at least 2", got)
	}

	var acked [docs]atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	var readers sync.WaitGroup
	errs := make(chan string, 8)
	for r := range 4 {
		readers.Go(func() {
			for i := r; ctx.Err() == nil; i++ {
				d := i % docs
				floor := acked[d].Load()
				status, _, body, err := n.try(ctx, "GET", fmt.Sprintf("/e2e/Counter/rc/%d", d), nil)
				if err != nil || ctx.Err() != nil {
					return
				}
				var doc struct{ N int64 }
				if status != 200 || json.Unmarshal(body, &doc) != nil || doc.N < floor {
					errs <- fmt.Sprintf("GET rc/%d after %d acknowledged increments: %d %s", d, floor, status, body)
					return
				}
			}
		})
	}
	var writers sync.WaitGroup
	for d := range docs {
		writers.Go(func() {
			for i := int64(1); i <= incs; i++ {
				path := fmt.Sprintf("/e2e/Counter/rc/%d", d)
				if status, _, b, err := n.try(context.Background(), "PATCH", path, `{"$inc":{"n":1}}`); err != nil || status != 200 {
					errs <- fmt.Sprintf("PATCH %s: %d %s %v", path, status, b, err)
					return
				}
				acked[d].Store(i)
			}
		})
	}
	writers.Wait()
	cancel()
	readers.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	for d := range docs {
		var doc struct{ N int64 }
		if err := json.Unmarshal(n.must(200, "GET", fmt.Sprintf("/e2e/Counter/rc/%d", d), nil), &doc); err != nil || doc.N != incs {
			t.Fatalf("rc/%d: n = %d, want %d", d, doc.N, incs)
		}
	}
}

// TestWritesReportTheirCommitAndWALSyncTimes: every acknowledged write
// adds one sample to the leader's replication commit histogram, and its
// durability shows as WAL syncs in the storage histogram, both in seconds.
func TestWritesReportTheirCommitAndWALSyncTimes(t *testing.T) {
	n := startDev(t, t.TempDir())
	setupCounters(t, n)
	commits0 := metricSum(t, "doppio_replication_commit_seconds_count", "", n)
	seconds0 := metricSum(t, "doppio_replication_commit_seconds_sum", "", n)
	syncs0 := metricSum(t, "doppio_storage_wal_sync_seconds_count", "", n)
	const writes = 5
	for i := range writes {
		n.must(201, "PUT", fmt.Sprintf("/e2e/Counter/lat/%d", i), map[string]any{"n": i})
	}
	if got := metricSum(t, "doppio_replication_commit_seconds_count", "", n) - commits0; got != writes {
		t.Errorf("%d writes: %v commits observed, want %d", writes, got, writes)
	}
	// Each write was answered, so each commit took less than the request
	// deadline (5 s), and none took no time at all (a synced log batch).
	if got := metricSum(t, "doppio_replication_commit_seconds_sum", "", n) - seconds0; got <= 0 || got > writes*5 {
		t.Errorf("%d writes: commits took %v s in all, want more than 0 and under %d", writes, got, writes*5)
	}
	// One at a time, each write waits for a sync of its own.
	if got := metricSum(t, "doppio_storage_wal_sync_seconds_count", "", n) - syncs0; got < writes {
		t.Errorf("%d writes one after another: %v WAL syncs, want at least %d", writes, got, writes)
	}
	if got := metricSum(t, "doppio_storage_wal_sync_seconds_bucket", `le="+Inf"`, n); got != metricSum(t, "doppio_storage_wal_sync_seconds_count", "", n) {
		t.Errorf("WAL sync +Inf bucket %v differs from the count", got)
	}
}
