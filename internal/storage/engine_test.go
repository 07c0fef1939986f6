package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
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
