package partition

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/keys"
)

// BenchmarkReplaceSwapHeap measures the Go heap a replace load's swap
// holds at its peak: applyReplace renames every staged key into the
// table in one batch, so the batch holds the partition's staged bytes.
// It reports the staged bytes and the peak heap above the heap before the
// swap, sampled every millisecond. Run one size at a time, e.g.
//
//	go test ./internal/partition -run '^$' -bench 'ReplaceSwapHeap/MB=200' -benchtime 1x
func BenchmarkReplaceSwapHeap(b *testing.B) {
	for _, mb := range []int{25, 50, 100, 200} {
		b.Run(fmt.Sprintf("MB=%d", mb), func(b *testing.B) {
			for range b.N {
				staged, peak := swapHeap(b, mb<<20)
				b.ReportMetric(float64(staged)/(1<<20), "staged-MB")
				b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
			}
		})
	}
}

// swapHeap stages about size bytes of documents of loadTable's table in
// one partition (written to the store directly, as the chunks before a
// swap leave them), swaps them in, and returns the staged bytes and the
// heap the swap added at its peak.
func swapHeap(b *testing.B, size int) (staged int, peak uint64) {
	b.StopTimer()
	f, _ := loadFixture(b)
	p := f.rep.prefix
	const load = "0123456789abcdef0123"
	staging := StagingTable("Msg", load)
	body := []byte(strings.Repeat("x", 4000))
	var records uint64
	for staged < size {
		batch := f.engine.NewBatch()
		for n := 0; n < 4<<20 && staged < size; records++ {
			k, err := keys.EncodeTuple(keys.Tuple{fmt.Sprintf("box%04d", records%1000), int64(records)})
			if err != nil {
				b.Fatal(err)
			}
			key := p.Document(staging, k)
			v := Record{Version: 1, Mtime: 1, Avro: body}.encode()
			batch.Set(key, v)
			n += len(key) + len(v)
			staged += len(key) + len(v)
		}
		if err := f.engine.Commit(batch); err != nil {
			b.Fatal(err)
		}
	}
	from := LoadMark{Load: load, Offset: uint64(staged), Records: records}
	mark := f.engine.NewBatch()
	mark.Set(p.Meta(metaLoadPrefix+load), encodeLoadMark(from))
	if err := f.engine.Commit(mark); err != nil {
		b.Fatal(err)
	}
	if err := f.engine.Flush(); err != nil {
		b.Fatal(err)
	}

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var max atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > max.Load() {
				max.Store(ms.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	b.StartTimer()
	to := LoadMark{Load: load, Offset: from.Offset + 10, Records: records, Done: true}
	if _, err := f.rep.ReplaceChunk(context.Background(), "Msg", 1, from, to, nil); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	close(stop)
	wg.Wait()
	if got, _ := f.rep.LoadMark(load); got != to {
		b.Fatalf("mark %s after the swap", got)
	}
	if max.Load() < base {
		return staged, 0
	}
	return staged, max.Load() - base
}
