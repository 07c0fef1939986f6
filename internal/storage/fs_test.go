package storage

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// countingFS counts the write(2)-level writes made to files it created.
type countingFS struct {
	vfs.FS
	writes map[string][]int // file name → sizes of its writes, in order
}

func (fs *countingFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	if err != nil {
		return nil, err
	}
	return &countingFile{File: f, sizes: func(n int) { fs.writes[filepath.Base(name)] = append(fs.writes[filepath.Base(name)], n) }}, nil
}

type countingFile struct {
	vfs.File
	sizes func(int)
}

func (f *countingFile) Write(p []byte) (int, error) {
	f.sizes(len(p))
	return f.File.Write(p)
}

// TestTablesReachTheKernelInLargeWrites: a table or blob file written in
// small pieces reaches the file system in writes of writeBufferBytes (the
// last one shorter), while every other file's writes go through as made;
// each file reads back byte for byte, and whatever looks at the file
// (Stat, ReadAt, a sync) sees every byte written before it.
func TestTablesReachTheKernelInLargeWrites(t *testing.T) {
	dir := t.TempDir()
	under := &countingFS{FS: vfs.Default, writes: map[string][]int{}}
	fs := coalescingFS{under}
	rnd := rand.New(rand.NewPCG(1, 2))
	for _, name := range []string{"000007.sst", "000008.blob", "000009.log", "MANIFEST-000001"} {
		f, err := fs.Create(filepath.Join(dir, name), vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		var want []byte
		for i := range 400 {
			p := make([]byte, 1+rnd.IntN(4096))
			for j := range p {
				p[j] = byte(rnd.Uint32())
			}
			if n, err := f.Write(p); n != len(p) || err != nil {
				t.Fatalf("%s: Write = %d, %v", name, n, err)
			}
			want = append(want, p...)
			if i == 150 {
				st, err := f.Stat()
				if err != nil || st.Size() != int64(len(want)) {
					t.Fatalf("%s: Stat after %d bytes: size %d, %v", name, len(want), st.Size(), err)
				}
				got := make([]byte, 100)
				if _, err := f.ReadAt(got, int64(len(want)-100)); err != nil || !bytes.Equal(got, want[len(want)-100:]) {
					t.Fatalf("%s: ReadAt of the last bytes written: %v", name, err)
				}
			}
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Size() != int64(len(want)) {
			t.Fatalf("%s: after Sync the kernel's file has %d bytes, want %d (%v)", name, st.Size(), len(want), err)
		}
		tail := []byte("tail")
		if _, err := f.Write(tail); err != nil {
			t.Fatal(err)
		}
		want = append(want, tail...)
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: read back %d bytes, wrote %d (%v)", name, len(got), len(want), err)
		}

		sizes := under.writes[name]
		coalesced := name == "000007.sst" || name == "000008.blob"
		if !coalesced {
			if len(sizes) != 401 {
				t.Fatalf("%s: %d writes reached the file system, want each of the 401 made", name, len(sizes))
			}
			continue
		}
		// Stat and ReadAt at write 150, the Sync and Close each write out
		// a shorter run; every other write is a full buffer.
		short := 0
		for _, n := range sizes {
			if n != writeBufferBytes {
				short++
			}
		}
		if short > 3 || len(sizes) > len(want)/writeBufferBytes+3 {
			t.Fatalf("%s: writes of %v reached the file system; want runs of %d", name, sizes, writeBufferBytes)
		}
	}
}

// TestFlushedTablesReadBack: with the coalescing file system under Pebble,
// a flush of many documents writes tables and blob files that read back.
func TestFlushedTablesReadBack(t *testing.T) {
	e, err := Open(t.TempDir(), Options{CacheBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	value := func(i int) []byte { return bytes.Repeat(fmt.Appendf(nil, "%08d", i), 40) } // 320 bytes: separated
	b := e.NewBatch()
	for i := range 5000 {
		b.Set(fmt.Appendf(nil, "doc/%05d", i), value(i))
	}
	if err := e.Commit(b); err != nil {
		t.Fatal(err)
	}
	if err := e.db.Flush(); err != nil {
		t.Fatal(err)
	}
	if m := e.Metrics(); m.Levels[0].TablesCount == 0 || m.BlobFiles.LiveCount == 0 {
		t.Fatalf("after the flush: %d tables in L0, %d blob files", m.Levels[0].TablesCount, m.BlobFiles.LiveCount)
	}
	for i := range 5000 {
		v, err := e.Get(fmt.Appendf(nil, "doc/%05d", i))
		if err != nil || !bytes.Equal(v, value(i)) {
			t.Fatalf("Get(doc/%05d) = %.20q…, %v", i, v, err)
		}
	}
}

// BenchmarkFlush flushes a memtable of 1-KiB documents (separated into a
// blob file) through the coalescing file system and through the OS's
// directly, as Pebble alone would write it (4-KiB writes), while synced
// commits go on as in a serving node.
func BenchmarkFlush(b *testing.B) {
	for _, c := range []struct {
		name string
		fs   vfs.FS
	}{{"pebble-4KiB-writes", vfs.Default}, {"coalesced", coalescingFS{vfs.Default}}} {
		b.Run(c.name, func(b *testing.B) {
			e, err := Open(b.TempDir(), Options{CacheBytes: 256 << 20, fs: c.fs})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			value := bytes.Repeat([]byte("0123456789abcdef"), 64)
			b.SetBytes(16 << 20)
			n := 0
			for b.Loop() {
				b.StopTimer()
				for range 16 {
					batch := e.NewBatch()
					for range 1024 {
						n++
						batch.Set(fmt.Appendf(nil, "doc/%09d", n), value)
					}
					if err := e.CommitNoSync(batch); err != nil {
						b.Fatal(err)
					}
				}
				stop := make(chan struct{})
				done := make(chan struct{})
				go func() {
					defer close(done)
					for {
						select {
						case <-stop:
							return
						default:
						}
						batch := e.NewBatch()
						batch.Set([]byte("log"), value[:200])
						if err := e.Commit(batch); err != nil {
							panic(err)
						}
					}
				}()
				b.StartTimer()
				if err := e.db.Flush(); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				close(stop)
				<-done
				b.StartTimer()
			}
		})
	}
}
