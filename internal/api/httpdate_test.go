package api

import (
	"math/rand/v2"
	"net/http"
	"testing"
	"time"
)

// TestHTTPDateIsTimeFormat: httpDate equals time.Format with
// http.TimeFormat, in UTC, for random instants of years 0 to 9999 and
// beyond, in any location.
func TestHTTPDateIsTimeFormat(t *testing.T) {
	rng := rand.New(rand.NewPCG(20261125, 3))
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		paris = time.FixedZone("CET", 3600)
	}
	lo, hi := time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli(), time.Date(10001, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	for i := range 100000 {
		tm := time.UnixMilli(lo + rng.Int64N(hi-lo))
		if i%2 == 0 {
			tm = tm.In(paris)
		}
		if got, want := httpDate(tm), tm.UTC().Format(http.TimeFormat); got != want {
			t.Fatalf("httpDate(%v) = %q, want %q", tm, got, want)
		}
	}
}

func BenchmarkHTTPDate(b *testing.B) {
	tm := time.UnixMilli(1764000000123)
	b.Run("httpDate", func(b *testing.B) {
		for b.Loop() {
			_ = httpDate(tm)
		}
	})
	b.Run("Format", func(b *testing.B) {
		for b.Loop() {
			_ = tm.UTC().Format(http.TimeFormat)
		}
	})
}
