package auth

import (
	"testing"
	"time"
)

func TestLimiterBurstThenRate(t *testing.T) {
	l := newLimiter(2, 3) // 3 at once, then 2 per second
	t0 := time.Unix(1000, 0)
	type step struct {
		at   time.Duration
		keys []string
		wait time.Duration
	}
	for i, s := range []step{
		{0, []string{"u", "a"}, 0},
		{0, []string{"u", "a"}, 0},
		{0, []string{"u", "a"}, 0},
		{0, []string{"u", "a"}, 500 * time.Millisecond}, // both empty
		{0, []string{"v", "a"}, 500 * time.Millisecond}, // a fresh user, the same address
		{0, []string{"u", "b"}, 500 * time.Millisecond}, // a fresh address, the same user
		{250 * time.Millisecond, []string{"u", "a"}, 250 * time.Millisecond},
		{500 * time.Millisecond, []string{"u", "a"}, 0},
		{500 * time.Millisecond, []string{"u", "a"}, 500 * time.Millisecond},
		{time.Hour, []string{"u", "a"}, 0}, // refilled, capped at the burst
		{time.Hour, []string{"u", "a"}, 0},
		{time.Hour, []string{"u", "a"}, 0},
		{time.Hour, []string{"u", "a"}, 500 * time.Millisecond},
	} {
		if got := l.take(t0.Add(s.at), s.keys...); got != s.wait {
			t.Fatalf("step %d (%v %v): wait %v, want %v", i, s.at, s.keys, got, s.wait)
		}
	}
}

func TestLimiterRefusalTakesNothing(t *testing.T) {
	l := newLimiter(1, 1)
	t0 := time.Unix(0, 0)
	l.take(t0, "a") // a is empty now
	if l.take(t0, "b", "a") == 0 {
		t.Fatal("took with a empty")
	}
	if w := l.take(t0, "b"); w != 0 {
		t.Fatalf("b lost its token to a refused take: wait %v", w)
	}
}

func TestLimiterSweepKeepsItBounded(t *testing.T) {
	l := newLimiter(1, 1)
	t0 := time.Unix(0, 0)
	for i := range maxBuckets + 10 {
		l.take(t0.Add(time.Duration(i)*time.Second), string(rune('a'+i%26))+time.Duration(i).String())
	}
	if n := len(l.buckets); n > maxBuckets {
		t.Fatalf("%d buckets kept, bound %d", n, maxBuckets)
	}
}
