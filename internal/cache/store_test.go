package cache

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/doppio-db/doppio/internal/redistest"
	"github.com/doppio-db/doppio/internal/scn"
)

func openStore(t *testing.T, addrs []string, reg prometheus.Registerer) *Store {
	t.Helper()
	s, err := Open(Config{Addrs: addrs, Registry: reg, Health: HealthConfig{ProbeEvery: 50 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var ref = Ref{DB: "mail", Generation: 7, Table: "Message", Partition: 3, Key: []byte("\x02bob\x00\x01")}

func doc(g, s uint64, asOf int64, data string) Entry {
	return Entry{SCN: scn.SCN{Generation: g, Sequence: s}, AsOf: asOf, Version: 2, Data: []byte(data), Mtime: int64(s % 1000)}
}

func tomb(g, s uint64, asOf int64) Entry {
	return Entry{SCN: scn.SCN{Generation: g, Sequence: s}, AsOf: asOf}
}

// TestUpsertOrdersEntriesBySCN: every writer's entry goes through one
// script that keeps the newest SCN whatever the order of arrival.
func TestUpsertOrdersEntriesBySCN(t *testing.T) {
	c := redistest.Start(t, 0)
	reg := prometheus.NewRegistry()
	s := openStore(t, c.Addrs(), reg)
	ctx := ctxT(t)
	steps := []struct {
		name  string
		write Entry
		want  Outcome
		after Entry // what Get answers next
	}{
		{"first write", doc(2, 10, 1000, "v10"), Written, doc(2, 10, 1000, "v10")},
		{"older SCN refused", doc(2, 9, 5000, "v9"), Refused, doc(2, 10, 1000, "v10")},
		{"older generation refused despite a larger sequence", doc(1, 99, 5000, "old term"), Refused, doc(2, 10, 1000, "v10")},
		{"equal SCN keeps the value, takes the later as-of", doc(2, 10, 3000, "ignored"), Merged, doc(2, 10, 3000, "v10")},
		{"equal SCN never lowers the as-of", doc(2, 10, 2000, "ignored"), Merged, doc(2, 10, 3000, "v10")},
		{"newer SCN replaces", doc(2, 11, 3500, "v11"), Written, doc(2, 11, 3500, "v11")},
		{"a tombstone beats an older fill", tomb(2, 12, 4000), Written, tomb(2, 12, 4000)},
		{"a fill read before the delete cannot resurrect", doc(2, 11, 9000, "v11"), Refused, tomb(2, 12, 4000)},
		{"a new term's insert replaces the tombstone", doc(3, 1, 9500, "v3:1"), Written, doc(3, 1, 9500, "v3:1")},
		{"uint64 SCN parts compare exactly", doc(3, 1<<60+1, 9600, "big"), Written, doc(3, 1<<60+1, 9600, "big")},
		{"one less at 2^60 is refused", doc(3, 1<<60, 9700, "smaller"), Refused, doc(3, 1<<60+1, 9600, "big")},
		// A read that found nothing names the SCN it had applied before it
		// looked: the document's own write, the delete landing in between.
		{"a tombstone at the document's SCN replaces it", tomb(3, 1<<60+1, 9800), Written, tomb(3, 1<<60+1, 9800)},
		{"the document at its tombstone's SCN is refused", doc(3, 1<<60+1, 9900, "big"), Refused, tomb(3, 1<<60+1, 9800)},
		{"an equal tombstone merges", tomb(3, 1<<60+1, 9950), Merged, tomb(3, 1<<60+1, 9950)},
	}
	for _, st := range steps {
		got, err := s.Upsert(ctx, Write{Ref: ref, Entry: st.write, TTL: time.Minute})
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if got != st.want {
			t.Fatalf("%s: outcome %d, want %d", st.name, got, st.want)
		}
		e, _, err := s.Get(ctx, ref)
		if err != nil {
			t.Fatalf("%s: get: %v", st.name, err)
		}
		want := st.after
		if e.SCN != want.SCN || e.AsOf != want.AsOf || e.Version != want.Version || string(e.Data) != string(want.Data) || e.Mtime != want.Mtime {
			t.Fatalf("%s: entry %+v, want %+v", st.name, e, want)
		}
	}
	if n := testutil.ToFloat64(s.metrics.rejected); n != 5 {
		t.Fatalf("rejected writes counted %v, want 5", n)
	}
	// A tombstone drops the document's fields rather than keeping them.
	if _, err := s.Upsert(ctx, Write{Ref: ref, Entry: tomb(4, 1, 10000), TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Primary.Do("HLEN", ref.EntryKey()); err != nil || got != "3" {
		t.Fatalf("tombstone hash has %s fields (%v), want 3 (g s a)", got, err)
	}
}

// TestUpsertSetsTheTableTTL: every write, merged ones too, sets the TTL;
// a refused one leaves it.
func TestUpsertSetsTheTableTTL(t *testing.T) {
	c := redistest.Start(t, 0)
	s := openStore(t, c.Addrs(), nil)
	ctx := ctxT(t)
	pttl := func() int64 {
		v, err := c.Primary.Do("PTTL", ref.EntryKey())
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	if _, err := s.Upsert(ctx, Write{Ref: ref, Entry: doc(1, 5, 100, "x"), TTL: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if ms := pttl(); ms <= 9000 || ms > 10000 {
		t.Fatalf("PTTL %d ms after a write with TTL 10s", ms)
	}
	if _, err := s.Upsert(ctx, Write{Ref: ref, Entry: doc(1, 5, 200, "x"), TTL: 60 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if ms := pttl(); ms <= 59000 {
		t.Fatalf("PTTL %d ms after a merged write with TTL 60s", ms)
	}
	if _, err := s.Upsert(ctx, Write{Ref: ref, Entry: doc(1, 4, 300, "x"), TTL: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if ms := pttl(); ms <= 58000 {
		t.Fatalf("PTTL %d ms: a refused write changed the TTL", ms)
	}
	// The watermark: raised, never lowered, with its TTL.
	for _, at := range []int64{500, 400, 700} {
		if err := s.RaiseWatermark(ctx, ref.DB, ref.Generation, ref.Partition, at, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	_, wm, err := s.Get(ctx, Ref{DB: ref.DB, Generation: ref.Generation, Table: ref.Table, Partition: ref.Partition, Key: []byte("absent")})
	if !errors.Is(err, ErrMiss) || wm != 700 {
		t.Fatalf("get of an absent entry: watermark %d, %v; want 700, ErrMiss", wm, err)
	}
	if v, _ := c.Primary.Do("PTTL", ref.WatermarkKey()); v == "-1" || v == "-2" {
		t.Fatalf("watermark PTTL %s: no TTL", v)
	}
}

// TestUpsertBatchAfterRedisLostItsScripts: a Redis restarted empty has
// no scripts; the batch loads them and goes through.
func TestUpsertBatchAfterRedisLostItsScripts(t *testing.T) {
	c := redistest.Start(t, 0)
	s := openStore(t, c.Addrs(), nil)
	ctx := ctxT(t)
	ws := []Write{{Ref: ref, Entry: doc(1, 1, 1, "a"), TTL: time.Minute}, {Ref: ref, Entry: doc(1, 2, 2, "b"), TTL: time.Minute}, {Ref: ref, Entry: doc(1, 1, 3, "a"), TTL: time.Minute}}
	out, err := s.UpsertBatch(ctx, ws)
	if err != nil || len(out) != 3 || out[0] != Written || out[1] != Written || out[2] != Refused {
		t.Fatalf("batch: %v %v, want written, written, refused", out, err)
	}
	if _, err := c.Primary.Do("SCRIPT", "FLUSH"); err != nil {
		t.Fatal(err)
	}
	out, err = s.UpsertBatch(ctx, ws[1:2])
	if err != nil || out[0] != Merged {
		t.Fatalf("batch after SCRIPT FLUSH: %v %v, want merged", out, err)
	}
}

// TestStoreStopsSendingToAKilledPrimaryReadsFromItsReplicaAndResumes:
// killed, the primary is judged unhealthy after a few failed requests;
// reads then go to the replica (which has what the primary had), writes
// fail fast; restarted, it gets requests again once probes pass.
func TestStoreStopsSendingToAKilledPrimaryReadsFromItsReplicaAndResumes(t *testing.T) {
	c := redistest.Start(t, 1)
	reg := prometheus.NewRegistry()
	s := openStore(t, c.Addrs(), reg)
	ctx := ctxT(t)
	if _, err := s.Upsert(ctx, Write{Ref: ref, Entry: doc(1, 1, 100, "replicated"), TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		if n, err := c.Replicas[0].Do("EXISTS", ref.EntryKey()); err == nil && n == "1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the replica did not get the entry within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.Primary.Kill()
	failures := 0
	for s.Endpoints()[0].Healthy {
		if _, err := s.Upsert(ctx, Write{Ref: ref, Entry: doc(1, 2, 200, "lost"), TTL: time.Minute}); err == nil {
			t.Fatal("a write to a killed primary succeeded")
		}
		if failures++; failures > 3 {
			t.Fatalf("still healthy after %d failed requests", failures)
		}
	}
	if v := testutil.ToFloat64(s.metrics.healthy.WithLabelValues(c.Primary.Addr)); v != 0 {
		t.Fatalf("doppio_cache_endpoint_healthy of the killed primary = %v", v)
	}
	start := time.Now()
	if _, err := s.Upsert(ctx, Write{Ref: ref, Entry: doc(1, 2, 200, "lost"), TTL: time.Minute}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("write while the primary is unhealthy: %v, want ErrUnavailable", err)
	}
	if took := time.Since(start); took > 50*time.Millisecond {
		t.Fatalf("write to an unhealthy primary took %v: it must not be sent", took)
	}
	e, _, err := s.Get(ctx, ref)
	if err != nil || string(e.Data) != "replicated" {
		keys, kerr := c.Replicas[0].Do("DBSIZE")
		t.Logf("replica DBSIZE %s %v; endpoints %+v", keys, kerr, s.Endpoints())
		t.Fatalf("read with the primary dead: %+v %v, want the replica's entry", e, err)
	}
	c.Primary.Restart(t)
	deadline := time.Now().Add(10 * time.Second)
	for !s.Endpoints()[0].Healthy {
		if time.Now().After(deadline) {
			t.Fatal("the restarted primary was not judged healthy within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := s.Upsert(ctx, Write{Ref: ref, Entry: doc(1, 3, 300, "back"), TTL: time.Minute}); err != nil {
		t.Fatalf("write after the primary came back: %v", err)
	}
	if e, _, err := s.Get(ctx, ref); err != nil || string(e.Data) != "back" {
		t.Fatalf("read after the primary came back: %+v %v", e, err)
	}
}

// TestGetWithEveryEndpointDownIsUnavailable: nothing to read from is an
// error the read path turns into a bypass, not a miss.
func TestGetWithEveryEndpointDownIsUnavailable(t *testing.T) {
	c := redistest.Start(t, 0)
	s := openStore(t, c.Addrs(), nil)
	ctx := ctxT(t)
	c.Primary.Kill()
	var err error
	for range 10 {
		if _, _, err = s.Get(ctx, ref); errors.Is(err, ErrUnavailable) {
			return
		}
		if err == nil || errors.Is(err, ErrMiss) {
			t.Fatalf("get from a killed Redis: %v", err)
		}
	}
	t.Fatalf("get never became ErrUnavailable: %v", err)
}
