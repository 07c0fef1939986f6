package auth

import (
	"math"
	"sync"
	"time"
)

// limiter is a set of token buckets by key, each holding up to burst
// tokens and refilled at rate per second. Pure but for its lock: the
// caller passes the time.
type limiter struct {
	rate  float64
	burst float64

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

// maxBuckets bounds the buckets kept; beyond it, full ones are dropped
// (a full bucket is what a new one would be).
const maxBuckets = 1 << 14

func newLimiter(rate float64, burst int) *limiter {
	return &limiter{rate: rate, burst: float64(burst), buckets: map[string]*bucket{}}
}

// take takes one token from each of keys' buckets, or from none: it
// returns how long until all of them hold one (0 when taken).
func (l *limiter) take(now time.Time, keys ...string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var wait time.Duration
	bs := make([]*bucket, len(keys))
	for i, k := range keys {
		b := l.buckets[k]
		if b == nil {
			b = &bucket{tokens: l.burst, at: now}
			l.buckets[k] = b
		}
		if now.After(b.at) {
			b.tokens = math.Min(l.burst, b.tokens+now.Sub(b.at).Seconds()*l.rate)
			b.at = now
		}
		if b.tokens < 1 {
			wait = max(wait, time.Duration((1-b.tokens)/l.rate*float64(time.Second)))
		}
		bs[i] = b
	}
	if wait > 0 {
		return wait
	}
	for _, b := range bs {
		b.tokens--
	}
	if len(l.buckets) > maxBuckets {
		l.sweep(now)
	}
	return 0
}

// sweep drops the buckets that have refilled.
func (l *limiter) sweep(now time.Time) {
	for k, b := range l.buckets {
		if b.tokens+now.Sub(b.at).Seconds()*l.rate >= l.burst {
			delete(l.buckets, k)
		}
	}
}
