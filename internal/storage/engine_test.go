package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/testwait"
)

// TestGetSkipsTablesByBloomFilter: after the keys are flushed to a table,
// a Get of an absent key is answered by the table's bloom filter without
// reading its data block, and present keys are still found.
func TestGetSkipsTablesByBloomFilter(t *testing.T) {
	e, err := Open(t.TempDir(), Options{CacheBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	b := e.NewBatch()
	for i := range 1000 {
		b.Set(fmt.Appendf(nil, "doc/%04d", i), fmt.Appendf(nil, "value %d", i))
	}
	if err := e.Commit(b); err != nil {
		t.Fatal(err)
	}
	if err := e.db.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := e.Metrics().Levels[0].TablesCount; got == 0 {
		t.Fatalf("no table in L0 after flush")
	}
	v, err := e.Get([]byte("doc/0500"))
	if err != nil || string(v) != "value 500" {
		t.Fatalf("Get(doc/0500) = %q, %v", v, err)
	}
	before := e.Metrics().Filter.Hits
	for i := range 100 {
		if _, err := e.Get(fmt.Appendf(nil, "doc/%04d-absent", i*10)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get of an absent key: %v", err)
		}
	}
	if hits := e.Metrics().Filter.Hits - before; hits < 90 {
		t.Fatalf("bloom filter answered %d of 100 absent-key Gets, want at least 90", hits)
	}
}

// TestLargeValuesLiveInBlobFiles: values of 256 bytes or more go to blob
// files at flush, and a compaction keeps referencing them (no rewrite)
// while every value reads back, after a reopen too; small values stay in
// the tables.
func TestLargeValuesLiveInBlobFiles(t *testing.T) {
	dir := t.TempDir()
	e, err := Open(dir, Options{CacheBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	value := func(i int) []byte {
		if i%2 == 0 {
			return fmt.Appendf(nil, "small %d", i)
		}
		return bytes.Repeat(fmt.Appendf(nil, "%08d", i), 128) // 1 KiB
	}
	for round := range 2 {
		b := e.NewBatch()
		for i := range 1000 {
			b.Set(fmt.Appendf(nil, "doc/%04d/%d", i, round), value(i))
		}
		if err := e.Commit(b); err != nil {
			t.Fatal(err)
		}
		if err := e.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	// Exactly the 1,000 large values (500 per round), none of the small.
	m := e.Metrics()
	if m.BlobFiles.LiveCount == 0 || m.BlobFiles.ValueSize != 1000*1024 {
		t.Fatalf("after two flushes: %d blob files holding %d bytes of values, want %d", m.BlobFiles.LiveCount, m.BlobFiles.ValueSize, 1000*1024)
	}
	blobBytes := m.BlobFiles.ValueSize
	if err := e.db.Compact(context.Background(), []byte("doc/"), []byte("doc0"), false); err != nil {
		t.Fatal(err)
	}
	if m := e.Metrics(); m.BlobFiles.ValueSize != blobBytes {
		t.Errorf("compaction rewrote separated values: %d → %d bytes in blob files", blobBytes, m.BlobFiles.ValueSize)
	}
	check := func() {
		t.Helper()
		for round := range 2 {
			for i := range 1000 {
				v, err := e.Get(fmt.Appendf(nil, "doc/%04d/%d", i, round))
				if err != nil || !bytes.Equal(v, value(i)) {
					t.Fatalf("doc %d round %d: %q, %v", i, round, v, err)
				}
			}
		}
	}
	check()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if e, err = Open(dir, Options{CacheBytes: 8 << 20}); err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	check()
}

// tableBytes is the size of the store's sstables and blob files.
func tableBytes(e *Engine) uint64 {
	m := e.Metrics()
	return m.Table.Local.LiveSize + m.BlobFiles.Local.LiveSize
}

func TestReclaimCompactsADroppedSpanAway(t *testing.T) {
	e, err := Open(t.TempDir(), Options{CacheBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	rng := rand.New(rand.NewPCG(1, 2)) // values that do not compress
	for i := range 8 {
		b := e.NewBatch()
		for j := range 1000 {
			value := make([]byte, 1024)
			for k := range value {
				value[k] = byte(rng.Uint32())
			}
			b.Set([]byte(fmt.Sprintf("drop/%d/%04d", i, j)), value)
		}
		if err := e.Commit(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Flush(); err != nil {
		t.Fatal(err)
	}
	before := tableBytes(e)
	if before < 4<<20 {
		t.Fatalf("%d bytes of tables before the drop, want the 8 MiB written", before)
	}
	b := e.NewBatch()
	b.DeleteRange([]byte("drop/"), []byte("drop0"))
	b.Reclaim([]byte("drop/"), []byte("drop0"))
	if err := e.Commit(b); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 20*time.Second, "the dropped span compacted away", func() bool {
		return tableBytes(e) < before/10
	})
}

func TestCloseStopsReclaimsUnderWay(t *testing.T) {
	e, err := Open(t.TempDir(), Options{CacheBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	b := e.NewBatch()
	b.Set([]byte("k"), []byte("v"))
	b.DeleteRange([]byte("a"), []byte("z"))
	b.Reclaim([]byte("a"), []byte("z"))
	if err := e.Commit(b); err != nil {
		t.Fatal(err)
	}
	// A compaction still running at Close would panic in Pebble.
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}
