package storage

import (
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
