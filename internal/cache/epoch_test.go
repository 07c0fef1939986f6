package cache

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/doppio-db/doppio/internal/redistest"
)

// retry runs op until it succeeds, as the updater retries a write and a
// reconnecting client finds the restarted Redis.
func retry(t *testing.T, what string, op func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := op()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func upsertOnce(t *testing.T, s *Store, w Write) Outcome {
	t.Helper()
	var out Outcome
	retry(t, "upsert", func() (err error) { out, err = s.Upsert(ctxT(t), w); return err })
	return out
}

// TestAFillHeldAcrossARedisRestartIsRefused replays the window a Redis
// restart used to leave: a fill reads a document's state, a later change
// reaches the nodes and the Redis that is then lost, the fill is sent to
// the restarted, empty Redis, and the updater raises the watermark. The
// fill predates the new incarnation and is refused, so the watermark
// vouches for nothing stale.
func TestAFillHeldAcrossARedisRestartIsRefused(t *testing.T) {
	c := redistest.Start(t, 0)
	reg := prometheus.NewRegistry()
	router := openStore(t, c.Addrs(), reg) // sends fills
	updater := openStore(t, c.Addrs(), nil)
	ctx := ctxT(t)

	// The router reads the document's state from the nodes: v5.
	read := time.Now().UnixMilli()
	held := Write{Ref: ref, Entry: doc(2, 5, read, "v5"), TTL: time.Minute, Read: true}
	// A later change, v6, commits; the updater delivers it to this Redis
	// and raises the watermark past it.
	committed := read + 1
	if out := upsertOnce(t, updater, Write{Ref: ref, Entry: doc(2, 6, committed, "v6"), TTL: time.Minute}); out != Written {
		t.Fatalf("the change: %v, want written", out)
	}
	if err := updater.RaiseWatermark(ctx, ref.DB, ref.Generation, ref.Partition, committed, time.Minute); err != nil {
		t.Fatal(err)
	}
	// Redis restarts empty: v6 is lost.
	c.Primary.Restart(t)

	// The held fill arrives at the new incarnation: refused.
	if out := upsertOnce(t, router, held); out != Predated {
		t.Fatalf("the fill read before the restart: %v, want predated", out)
	}
	if n := testutil.ToFloat64(router.metrics.predated); n != 1 {
		t.Fatalf("doppio_cache_writes_stale_epoch_total = %v, want 1", n)
	}
	// The updater, caught up, raises the watermark in the new incarnation.
	raised := time.Now().UnixMilli()
	retry(t, "raise the watermark", func() error {
		return updater.RaiseWatermark(ctx, ref.DB, ref.Generation, ref.Partition, raised, time.Minute)
	})
	if e, wm, err := router.Get(ctx, ref); !errors.Is(err, ErrMiss) || wm != raised {
		t.Fatalf("after the restart: %+v, watermark %d, %v; want a miss under watermark %d", e, wm, err, raised)
	}

	// A change replayed into the new incarnation (the updater's at least
	// once) is history, never refused, but the watermark cannot vouch for
	// it: it predates the epoch.
	if out := upsertOnce(t, updater, Write{Ref: ref, Entry: doc(2, 6, committed, "v6"), TTL: time.Minute}); out != Written {
		t.Fatalf("the replayed change: %v, want written", out)
	}
	e, wm, err := router.Get(ctx, ref)
	if err != nil || string(e.Data) != "v6" || e.Vouched(wm, 0) != 0 {
		t.Fatalf("the replayed change: %+v, vouched by %d (%v); want v6 vouched by nothing", e, e.Vouched(wm, 0), err)
	}
	// A fill read now is written, and the watermark vouches for it.
	now := time.Now().UnixMilli()
	if out := upsertOnce(t, router, Write{Ref: ref, Entry: doc(2, 7, now, "v7"), TTL: time.Minute, Read: true}); out != Written {
		t.Fatalf("a fill read after the restart: %v, want written", out)
	}
	if e, wm, err := router.Get(ctx, ref); err != nil || string(e.Data) != "v7" || e.Vouched(wm, 0) != raised {
		t.Fatalf("the fresh fill: %+v, vouched by %d (%v); want v7 vouched by %d", e, e.Vouched(wm, 0), err, raised)
	}
}

// TestARedisLoadedFromItsFileBeginsANewEpoch: a restart that loads an
// RDB file brings back the epoch key with the entries it vouched for,
// but not the changes written after the save. The first connection to
// the new process begins a new epoch, so the watermark the updater
// raises next vouches for none of the loaded entries.
func TestARedisLoadedFromItsFileBeginsANewEpoch(t *testing.T) {
	c := redistest.Start(t, 0)
	s := openStore(t, c.Addrs(), nil)
	ctx := ctxT(t)
	saved := time.Now().UnixMilli()
	if out := upsertOnce(t, s, Write{Ref: ref, Entry: doc(1, 1, saved, "saved"), TTL: time.Minute}); out != Written {
		t.Fatalf("first change: %v", out)
	}
	oldRun, err := c.Primary.Do("HGET", EpochKey, "run")
	if err != nil || oldRun == "" {
		t.Fatalf("no epoch claimed: %q %v", oldRun, err)
	}
	if _, err := c.Primary.Do("SAVE"); err != nil {
		t.Fatal(err)
	}
	// A later change goes only to the Redis that is then lost.
	if out := upsertOnce(t, s, Write{Ref: ref, Entry: doc(1, 2, saved+1, "lost"), TTL: time.Minute}); out != Written {
		t.Fatalf("second change: %v", out)
	}
	c.Primary.Restart(t)
	if got, _ := c.Primary.Do("HGET", ref.EntryKey(), "s"); got != "1" {
		t.Fatalf("the restarted Redis holds sequence %q, want the saved 1", got)
	}
	raised := time.Now().UnixMilli()
	retry(t, "raise the watermark", func() error {
		return s.RaiseWatermark(ctx, ref.DB, ref.Generation, ref.Partition, raised, time.Minute)
	})
	if run, _ := c.Primary.Do("HGET", EpochKey, "run"); run == oldRun || run == "" {
		t.Fatalf("epoch run %q after the restart, want a new one (was %q)", run, oldRun)
	}
	e, wm, err := s.Get(ctx, ref)
	if err != nil || string(e.Data) != "saved" || wm != raised || e.Vouched(wm, 0) != 0 {
		t.Fatalf("loaded entry %+v, watermark %d, vouched by %d (%v); want the saved entry vouched by nothing", e, wm, e.Vouched(wm, 0), err)
	}
	if least := time.Since(time.UnixMilli(saved)); e.Age(time.Now(), e.Vouched(wm, 0)) < least {
		t.Fatalf("loaded entry's age bound is below %v, the age of its as-of", least)
	}
}

// TestAPromotedReplicaBeginsANewEpoch: a replica holds its primary's
// epoch; promoted, it may lack the primary's last writes, so a Store
// writing to it begins an epoch of its own and refuses fills read
// before.
func TestAPromotedReplicaBeginsANewEpoch(t *testing.T) {
	c := redistest.Start(t, 1)
	s := openStore(t, c.Addrs()[:1], nil)
	read := time.Now().UnixMilli()
	if out := upsertOnce(t, s, Write{Ref: ref, Entry: doc(1, 1, read, "a"), TTL: time.Minute}); out != Written {
		t.Fatalf("write to the primary: %v", out)
	}
	primaryRun, _ := c.Primary.Do("HGET", EpochKey, "run")
	retry(t, "the replica gets the epoch", func() error {
		if run, err := c.Replicas[0].Do("HGET", EpochKey, "run"); err != nil || run != primaryRun {
			return errors.New("not yet")
		}
		return nil
	})
	if _, err := c.Replicas[0].Do("REPLICAOF", "NO", "ONE"); err != nil {
		t.Fatal(err)
	}
	promoted := openStore(t, []string{c.Replicas[0].Addr}, nil)
	if out := upsertOnce(t, promoted, Write{Ref: ref, Entry: doc(1, 2, read, "read before"), TTL: time.Minute, Read: true}); out != Predated {
		t.Fatalf("a fill read before the promotion: %v, want predated", out)
	}
	if run, _ := c.Replicas[0].Do("HGET", EpochKey, "run"); run == primaryRun {
		t.Fatal("the promoted replica kept its primary's epoch")
	}
}

// TestAFlushedRedisBeginsAnEpochAtTheNextWrite: without a restart, and
// so without a new connection, a Redis that lost every key begins an
// epoch at its first write.
func TestAFlushedRedisBeginsAnEpochAtTheNextWrite(t *testing.T) {
	c := redistest.Start(t, 0)
	s := openStore(t, c.Addrs(), nil)
	read := time.Now().UnixMilli()
	upsertOnce(t, s, Write{Ref: ref, Entry: doc(1, 1, read, "a"), TTL: time.Minute})
	if _, err := c.Primary.Do("FLUSHALL"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond)
	if out := upsertOnce(t, s, Write{Ref: ref, Entry: doc(1, 1, read, "a"), TTL: time.Minute, Read: true}); out != Predated {
		t.Fatalf("a fill read before the flush: %v, want predated", out)
	}
}
