package partition

import (
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/storage"
)

// checksumState writes a partition with two tables' documents, index
// entries and counters, logEntries change-log entries, metadata, an index
// build state and Raft keys into a fresh Pebble store, lets edit change it,
// and returns its checksums.
func checksumState(t *testing.T, logEntries uint64, edit func(b *storage.Batch, p keys.Partition)) Checksums {
	t.Helper()
	e, err := storage.Open(t.TempDir(), storage.Options{CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	p := keys.PartitionPrefix("db", 3)
	b := e.NewBatch()
	for _, table := range []string{"a", "b"} {
		for i := range 20 {
			k := tupleKey(t, fmt.Sprintf("k%02d", i))
			b.Set(p.Document(table, k), fmt.Appendf(nil, "%s value %d", table, i))
			b.Set(append(p.Index(table, k, "f"), byte(i)), nil)
		}
		b.Set(p.AutoIncrement(table, tupleKey(t, "c")), binary.BigEndian.AppendUint64(nil, 7))
	}
	for s := uint64(1); s <= logEntries; s++ {
		b.Set(p.Log(2, s), fmt.Appendf(nil, "entry %d", s))
	}
	b.Set(p.Meta(metaApplied), encodeSCN(SCN{Generation: 2, Sequence: logEntries}))
	b.Set(p.Meta(metaIndexPrefix+buildKey("a", "f")), []byte("sig\x00ready"))
	b.Set(p.RaftApplied(), []byte("applied 1"))
	b.Set(p.RaftLog(5), []byte("raft entry"))
	// Neighbours outside the partition are never summed.
	b.Set(keys.PartitionPrefix("db", 2).Document("a", tupleKey(t, "x")), []byte("other partition"))
	b.Set(keys.PartitionPrefix("db", 4).Document("a", tupleKey(t, "x")), []byte("other partition"))
	if edit != nil {
		edit(b, p)
	}
	if err := e.Commit(b); err != nil {
		t.Fatal(err)
	}
	it, err := e.NewIter(p, p.End())
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	paced := 0
	sums, err := ComputeChecksums(it, p, func(n int) error { paced += n; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if uint64(paced) != sums.Bytes() {
		t.Fatalf("pace saw %d bytes, checksums cover %d", paced, sums.Bytes())
	}
	return sums
}

func tupleKey(t *testing.T, parts ...any) []byte {
	k, err := keys.EncodeTuple(keys.Tuple(parts))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestChecksumRangesNameExactlyWhatDiffers(t *testing.T) {
	base := checksumState(t, 10, nil)
	var names []string
	for _, r := range base.Ranges {
		names = append(names, r.Name)
	}
	want := []string{"autoinc/a", "autoinc/b", "documents/a", "documents/b", "index/a", "index/b", "log/0-4095", "meta"}
	if !slices.Equal(names, want) {
		t.Fatalf("ranges %v, want %v", names, want)
	}
	if base.LogFirst != 1 {
		t.Fatalf("first log entry %d, want 1", base.LogFirst)
	}
	cases := []struct {
		name string
		edit func(b *storage.Batch, p keys.Partition)
		want []string
	}{
		{"identical state", func(*storage.Batch, keys.Partition) {}, nil},
		{"one changed value", func(b *storage.Batch, p keys.Partition) {
			b.Set(p.Document("b", tupleKey(t, "k05")), []byte("b value 5!"))
		}, []string{"documents/b"}},
		{"extra key", func(b *storage.Batch, p keys.Partition) {
			b.Set(p.Document("a", tupleKey(t, "k99")), []byte("stray"))
		}, []string{"documents/a"}},
		{"missing key", func(b *storage.Batch, p keys.Partition) {
			b.Delete(p.Document("a", tupleKey(t, "k00")))
		}, []string{"documents/a"}},
		{"missing index entry", func(b *storage.Batch, p keys.Partition) {
			b.Delete(append(p.Index("b", tupleKey(t, "k03"), "f"), 3))
		}, []string{"index/b"}},
		{"extra table", func(b *storage.Batch, p keys.Partition) {
			b.Set(p.Document("c", tupleKey(t, "k00")), []byte("new"))
		}, []string{"documents/c"}},
		{"counter", func(b *storage.Batch, p keys.Partition) {
			b.Set(p.AutoIncrement("a", tupleKey(t, "c")), binary.BigEndian.AppendUint64(nil, 8))
		}, []string{"autoinc/a"}},
		{"change-log entry", func(b *storage.Batch, p keys.Partition) {
			b.Set(p.Log(2, 4), []byte("entry 4?"))
		}, []string{"log/0-4095"}},
		{"applied SCN", func(b *storage.Batch, p keys.Partition) {
			b.Set(p.Meta(metaApplied), encodeSCN(SCN{Generation: 2, Sequence: 9}))
		}, []string{"meta"}},
		{"replica-local: Raft section", func(b *storage.Batch, p keys.Partition) {
			b.Set(p.RaftApplied(), []byte("applied 2"))
			b.Set(p.RaftLog(6), []byte("another raft entry"))
		}, nil},
		{"replica-local: index build state", func(b *storage.Batch, p keys.Partition) {
			b.Delete(p.Meta(metaIndexPrefix + buildKey("a", "f")))
		}, nil},
		{"replica-local: change log trimmed", func(b *storage.Batch, p keys.Partition) {
			b.DeleteRange(p.LogPrefix(), p.Log(2, 6))
		}, nil},
		{"meta key shaped like a log key", func(b *storage.Batch, p keys.Partition) {
			b.Set(append(p.MetaPrefix(), make([]byte, 16)...), []byte("x"))
		}, []string{"meta"}},
		{"other partitions", func(b *storage.Batch, p keys.Partition) {
			b.Set(keys.PartitionPrefix("db", 4).Document("a", tupleKey(t, "y")), []byte("x"))
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := checksumState(t, 10, tc.edit)
			if d := Diff(base, got); !slices.Equal(d, tc.want) {
				t.Fatalf("Diff = %v, want %v", d, tc.want)
			}
			if d := Diff(got, base); !slices.Equal(d, tc.want) {
				t.Fatalf("reversed Diff = %v, want %v", d, tc.want)
			}
		})
	}
}

func TestChecksumComparesOnlyLogBucketsBothReplicasHoldWhole(t *testing.T) {
	const n = 3*LogBucket + 10
	full := checksumState(t, n, nil)
	// Trimmed into the second bucket, and one entry of the third changed:
	// the first two buckets are not comparable, the third differs.
	trimmed := checksumState(t, n, func(b *storage.Batch, p keys.Partition) {
		b.DeleteRange(p.LogPrefix(), p.Log(2, LogBucket+100))
		b.Set(p.Log(2, 2*LogBucket+1), []byte("changed"))
	})
	if trimmed.LogFirst != LogBucket+100 {
		t.Fatalf("first log entry %d, want %d", trimmed.LogFirst, LogBucket+100)
	}
	want := []string{fmt.Sprintf("log/%d-%d", 2*LogBucket, 3*LogBucket-1)}
	if d := Diff(full, trimmed); !slices.Equal(d, want) {
		t.Fatalf("Diff = %v, want %v", d, want)
	}
	// A change in a bucket the trimmed replica no longer holds whole goes
	// unseen by design; one in the last, partial bucket does not.
	tail := checksumState(t, n, func(b *storage.Batch, p keys.Partition) {
		b.Set(p.Log(2, n), []byte("changed"))
	})
	want = []string{fmt.Sprintf("log/%d-%d", 3*LogBucket, 4*LogBucket-1)}
	if d := Diff(full, tail); !slices.Equal(d, want) {
		t.Fatalf("Diff = %v, want %v", d, want)
	}
}

func TestChecksumStopsWhenPaceFails(t *testing.T) {
	e, err := storage.Open(t.TempDir(), storage.Options{CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	p := keys.PartitionPrefix("db", 0)
	b := e.NewBatch()
	for i := range 2000 {
		b.Set(p.Document("a", tupleKey(t, int64(i))), make([]byte, 512))
	}
	if err := e.Commit(b); err != nil {
		t.Fatal(err)
	}
	it, err := e.NewIter(p, p.End())
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	stop := fmt.Errorf("stopped")
	calls := 0
	_, err = ComputeChecksums(it, p, func(int) error { calls++; return stop })
	if err != stop || calls != 1 {
		t.Fatalf("err %v after %d pace calls, want the pace error after 1", err, calls)
	}
}

// BenchmarkComputeChecksums sums a partition of 64 MiB of 1 KiB documents,
// unthrottled: the ceiling of a node's checksum rate.
func BenchmarkComputeChecksums(b *testing.B) {
	e, err := storage.Open(b.TempDir(), storage.Options{CacheBytes: 128 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	p := keys.PartitionPrefix("db", 0)
	val := make([]byte, 1024)
	const docs = 64 << 10
	for i := 0; i < docs; i += 4096 {
		batch := e.NewBatch()
		for j := i; j < i+4096; j++ {
			k, _ := keys.EncodeTuple(keys.Tuple{int64(j)})
			batch.Set(p.Document("t", k), val)
		}
		if err := e.Commit(batch); err != nil {
			b.Fatal(err)
		}
	}
	if err := e.Flush(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var total uint64
	for range b.N {
		it, err := e.NewIter(p, p.End())
		if err != nil {
			b.Fatal(err)
		}
		sums, err := ComputeChecksums(it, p, nil)
		it.Close()
		if err != nil || sums.Ranges[0].Keys != docs {
			b.Fatalf("%v %+v", err, sums)
		}
		total += sums.Bytes()
	}
	b.SetBytes(int64(total / uint64(b.N)))
}
