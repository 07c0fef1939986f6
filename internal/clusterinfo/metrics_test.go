package clusterinfo

import (
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestWALSyncHistogramInSeconds: Pebble's sync latencies (nanoseconds, a
// hundred buckets) are exported in seconds at a few of Pebble's own bucket
// bounds, each with its exact cumulative count.
func TestWALSyncHistogramInSeconds(t *testing.T) {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Buckets: pebble.FsyncLatencyBuckets})
	for _, d := range []time.Duration{50 * time.Microsecond, 150 * time.Microsecond, 220 * time.Microsecond, 3 * time.Millisecond, 40 * time.Millisecond, 20 * time.Second} {
		h.Observe(float64(d))
	}
	desc := prometheus.NewDesc("sync_seconds", "test", nil, nil)
	m, err := inSeconds(desc, h)
	if err != nil {
		t.Fatal(err)
	}
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	hist := out.GetHistogram()
	if hist.GetSampleCount() != 6 {
		t.Errorf("count %d, want 6", hist.GetSampleCount())
	}
	if want := (50e-6 + 150e-6 + 220e-6 + 3e-3 + 40e-3 + 20); hist.GetSampleSum() < want*0.999999 || hist.GetSampleSum() > want*1.000001 {
		t.Errorf("sum %v s, want %v", hist.GetSampleSum(), want)
	}
	got := map[float64]uint64{}
	for _, b := range hist.GetBucket() {
		got[b.GetUpperBound()] = b.GetCumulativeCount()
	}
	// Pebble's buckets are 100 µs apart up to 5 ms: the 250 µs bound is
	// exported as 200 µs (two samples at or below it); 2.5 ms is one of
	// them.
	for bound, want := range map[float64]uint64{100e-6: 1, 200e-6: 2, 500e-6: 3, 1e-3: 3, 2.5e-3: 3, 5e-3: 4, 10: 5} {
		n, ok := nearest(got, bound)
		if !ok || n != want {
			t.Errorf("bucket le=%v: %d (present %v), want %d; buckets %v", bound, n, ok, want, got)
		}
	}
	if len(got) > len(syncBounds) {
		t.Errorf("%d buckets exported, want at most %d", len(got), len(syncBounds))
	}
	for b := range got {
		if b > 10 {
			t.Errorf("bucket le=%v beyond 10 s", b)
		}
	}
}

// nearest finds the bucket whose bound is within a nanosecond of bound.
func nearest(buckets map[float64]uint64, bound float64) (uint64, bool) {
	for b, n := range buckets {
		if b > bound-1e-9 && b < bound+1e-9 {
			return n, true
		}
	}
	return 0, false
}
