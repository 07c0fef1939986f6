package storage

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestIngestBatchAppliesItsLastWriteOfEachKey(t *testing.T) {
	e, err := Open(t.TempDir(), Options{CacheBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	b := e.NewBatch()
	b.Set([]byte("a1"), []byte("old"))
	b.Set([]byte("b1"), []byte("old"))
	if err := e.Commit(b); err != nil {
		t.Fatal(err)
	}
	if _, err := e.GetShared([]byte("a1")); err != nil { // cached now
		t.Fatal(err)
	}
	b = e.NewBatch()
	b.Delete([]byte("a1"))
	b.Set([]byte("c1"), []byte("first"))
	b.Set([]byte("b2"), []byte("new"))
	b.Set([]byte("c1"), []byte("second"))
	b.Delete([]byte("b2"))
	b.Set([]byte("b2"), []byte("again"))
	if err := e.IngestBatch(context.Background(), b, "test", func(k []byte) int { return int(k[0]) }); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a1": "", "b1": "old", "b2": "again", "c1": "second"}
	for k, v := range want {
		got, err := e.GetShared([]byte(k))
		if v == "" {
			if !errors.Is(err, ErrNotFound) {
				t.Fatalf("%s = %q, %v; want it deleted", k, got, err)
			}
			continue
		}
		if err != nil || string(got) != v {
			t.Fatalf("%s = %q, %v; want %q", k, got, err, v)
		}
	}
	if n := e.Metrics().Ingest.Count; n != 1 {
		t.Fatalf("%d ingestions, want 1", n)
	}
	left, _ := os.ReadDir(filepath.Join(e.dir+".staging", "test"))
	if len(left) != 0 {
		t.Fatalf("%d files left in staging", len(left))
	}

	b = e.NewBatch()
	b.Set([]byte("d1"), []byte("x"))
	b.DeleteRange([]byte("a"), []byte("z"))
	if err := e.IngestBatch(context.Background(), b, "test", func([]byte) int { return 0 }); err == nil {
		t.Fatal("a batch with a range deletion was ingested")
	}
	if _, err := e.Get([]byte("d1")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a refused batch wrote d1: %v", err)
	}
}
