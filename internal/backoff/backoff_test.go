package backoff

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"
)

func seeded() *rand.Rand { return rand.New(rand.NewPCG(1, 2)) }

// TestStepsDoubleUpToTheCap: without jitter the waits are First, 2*First,
// ... and then Max for ever; Reset starts again from First.
func TestStepsDoubleUpToTheCap(t *testing.T) {
	b := Backoff{First: 5 * time.Millisecond, Max: 100 * time.Millisecond, Jitter: None}
	want := []time.Duration{5, 10, 20, 40, 80, 100, 100, 100}
	for i, w := range want {
		if p := b.Peek(); p != w*time.Millisecond {
			t.Fatalf("Peek before wait %d = %v, want %v", i, p, w*time.Millisecond)
		}
		if got := b.Next(); got != w*time.Millisecond {
			t.Fatalf("wait %d = %v, want %v", i, got, w*time.Millisecond)
		}
	}
	b.Reset()
	if got := b.Next(); got != 5*time.Millisecond {
		t.Fatalf("after Reset: %v, want 5ms", got)
	}
}

// TestCapBelowFirst: a Max below First caps the very first wait.
func TestCapBelowFirst(t *testing.T) {
	b := Backoff{First: time.Second, Max: 300 * time.Millisecond, Jitter: None}
	for i := range 3 {
		if got := b.Next(); got != 300*time.Millisecond {
			t.Fatalf("wait %d = %v, want 300ms", i, got)
		}
	}
}

// TestUncappedStepsStopDoublingBeforeOverflow: with no Max the step grows
// until doubling would overflow, then stays.
func TestUncappedStepsStopDoublingBeforeOverflow(t *testing.T) {
	b := Backoff{First: time.Second, Jitter: None}
	prev := time.Duration(0)
	for range 100 {
		got := b.Next()
		if got < prev {
			t.Fatalf("wait shrank from %v to %v", prev, got)
		}
		prev = got
	}
	if prev < 1<<61 {
		t.Fatalf("last wait %v: the step stopped growing too early", prev)
	}
}

// TestJitterStaysWithinItsRange: Equal waits lie in [step/2, step], Full
// in [0, step], for every step including the capped ones, and both
// actually spread (they do not always return one end).
func TestJitterStaysWithinItsRange(t *testing.T) {
	for _, tc := range []struct {
		name   string
		jitter Jitter
		lo     func(step time.Duration) time.Duration
	}{
		{"equal", Equal, func(s time.Duration) time.Duration { return s / 2 }},
		{"full", Full, func(time.Duration) time.Duration { return 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := Backoff{First: 50 * time.Millisecond, Max: time.Second, Jitter: tc.jitter, Rand: seeded()}
			lowHalf, highHalf := 0, 0
			for i := range 10000 {
				if i%20 == 0 {
					b.Reset()
				}
				step := b.Peek()
				got := b.Next()
				lo := tc.lo(step)
				if got < lo || got > step {
					t.Fatalf("wait %d = %v, outside [%v, %v]", i, got, lo, step)
				}
				if got > time.Second {
					t.Fatalf("wait %d = %v above the cap", i, got)
				}
				if got-lo < (step-lo)/2 {
					lowHalf++
				} else {
					highHalf++
				}
			}
			if lowHalf < 4000 || highHalf < 4000 {
				t.Fatalf("waits not spread over their range: %d in the lower half, %d in the upper", lowHalf, highHalf)
			}
		})
	}
}

// TestJitterReplaysFromItsSeed: the same seed gives the same waits.
func TestJitterReplaysFromItsSeed(t *testing.T) {
	a := Backoff{First: time.Millisecond, Max: time.Second, Rand: seeded()}
	b := Backoff{First: time.Millisecond, Max: time.Second, Rand: seeded()}
	for i := range 50 {
		if x, y := a.Next(), b.Next(); x != y {
			t.Fatalf("wait %d: %v and %v from one seed", i, x, y)
		}
	}
}

// TestCancelStopsTheWait: Wait and Sleep return the context's error as
// soon as it ends, and at once for a context already ended.
func TestCancelStopsTheWait(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(20 * time.Millisecond)
		cancel()
	}()
	b := Backoff{First: time.Hour, Jitter: None}
	start := time.Now()
	if err := b.Wait(ctx); err != context.Canceled {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("Wait returned after %v, long after the cancel", d)
	}
	if err := Sleep(ctx, time.Hour); err != context.Canceled {
		t.Fatalf("Sleep on an ended context = %v, want context.Canceled", err)
	}
}

// TestSleepWaitsItsDuration: a context that does not end lets the whole
// wait pass and Sleep returns nil.
func TestSleepWaitsItsDuration(t *testing.T) {
	start := time.Now()
	if err := Sleep(context.Background(), 10*time.Millisecond); err != nil {
		t.Fatalf("Sleep = %v", err)
	}
	if d := time.Since(start); d < 10*time.Millisecond {
		t.Fatalf("Sleep returned after %v, before its 10ms", d)
	}
}
