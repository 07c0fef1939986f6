// Package loadgen drives closed-loop request workloads for the
// benchmarks and summarises what they measured: each worker sends one
// request after another, each request is recorded with its kind, when it
// began, how long it took and whether it failed, and a Summary gives one
// kind's throughput and latency quantiles over a time window.
package loadgen

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// Op is one request.
type Op struct {
	Kind   string
	At     time.Duration // when it began, since the run started
	Took   time.Duration
	Failed bool
}

// Request sends one request of worker w, drawing what it needs from r,
// and says its kind.
type Request func(ctx context.Context, w int, r *rand.Rand) (kind string, err error)

// Run is a workload in progress.
type Run struct {
	Start  time.Time
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	ops    []Op
}

// Start starts workers workers sending req in a loop until Stop or the
// end of ctx; seed makes the workers' draws reproducible.
func Start(ctx context.Context, workers int, seed uint64, req Request) *Run {
	ctx, cancel := context.WithCancel(ctx)
	r := &Run{Start: time.Now(), cancel: cancel}
	for w := range workers {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			var mine []Op
			for ctx.Err() == nil {
				began := time.Now()
				kind, err := req(ctx, w, rng)
				if ctx.Err() != nil {
					break // cut short by the end, not measured
				}
				mine = append(mine, Op{Kind: kind, At: began.Sub(r.Start), Took: time.Since(began), Failed: err != nil})
			}
			r.mu.Lock()
			r.ops = append(r.ops, mine...)
			r.mu.Unlock()
		}()
	}
	return r
}

// Now is the time since the run started, on the clock of its ops' At.
func (r *Run) Now() time.Duration { return time.Since(r.Start) }

// Stop ends the workers and returns every op they completed.
func (r *Run) Stop() []Op {
	r.cancel()
	r.wg.Wait()
	return r.ops
}

// Summary is one kind of request within a time window.
type Summary struct {
	Ops, Failed int
	Seconds     float64
	Throughput  float64 // successful requests per second
	P50, P99    time.Duration
}

// Summarize summarises the ops of kind ("" for every kind) that began in
// [from, to).
func Summarize(ops []Op, kind string, from, to time.Duration) Summary {
	s := Summary{Seconds: (to - from).Seconds()}
	var lat []time.Duration
	for _, o := range ops {
		if o.At < from || o.At >= to || (kind != "" && o.Kind != kind) {
			continue
		}
		s.Ops++
		if o.Failed {
			s.Failed++
			continue
		}
		lat = append(lat, o.Took)
	}
	if s.Seconds > 0 {
		s.Throughput = float64(len(lat)) / s.Seconds
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		s.P50 = lat[len(lat)/2]
		s.P99 = lat[min(len(lat)-1, int(0.99*float64(len(lat))))]
	}
	return s
}

// Level is a workload's summary at one concurrency.
type Level struct {
	Workers int
	Summary
}

// Ramp runs req at each concurrency in turn, for warm (not measured) and
// then window, and summarises each window.
func Ramp(ctx context.Context, levels []int, warm, window time.Duration, seed uint64, req Request) ([]Level, error) {
	var out []Level
	for _, n := range levels {
		r := Start(ctx, n, seed, req)
		select {
		case <-ctx.Done():
			r.Stop()
			return out, ctx.Err()
		case <-time.After(warm + window):
		}
		out = append(out, Level{Workers: n, Summary: Summarize(r.Stop(), "", warm, warm+window)})
	}
	return out, nil
}

// AtP99 is the highest throughput a curve reaches with a p99 of at most
// p99, and that level; ok is false when no level is that fast.
func AtP99(curve []Level, p99 time.Duration) (best Level, ok bool) {
	for _, l := range curve {
		if l.P99 > 0 && l.P99 <= p99 && l.Failed == 0 && (!ok || l.Throughput > best.Throughput) {
			best, ok = l, true
		}
	}
	return best, ok
}
