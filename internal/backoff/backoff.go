// Package backoff paces retries: capped exponential waits with jitter, so
// that many callers failing together do not retry together.
//
// A retry loop holds one Backoff, asks it for each wait with Next (or
// waits with Wait, which also stops when the context ends) and calls
// Reset after a success. The package imports only the standard library:
// the public client uses it.
package backoff

import (
	"context"
	"math"
	"math/rand/v2"
	"time"
)

// Jitter says how much of each wait is random.
type Jitter int

const (
	// Equal jitter waits between half the step and the whole step, so
	// retries keep most of their pacing while spreading apart.
	Equal Jitter = iota
	// Full jitter waits between zero and the whole step.
	Full
	// None waits exactly the step.
	None
)

// Backoff is the state of one retry loop. The step starts at First and
// doubles after every Next up to Max; each wait is the step shortened by
// the Jitter. A Backoff is not safe for concurrent use.
type Backoff struct {
	// First is the first step; it must be positive.
	First time.Duration
	// Max caps the step; zero leaves it uncapped.
	Max time.Duration
	// Jitter chooses the range of each wait; the zero value is Equal.
	Jitter Jitter
	// Rand draws the jitter; nil uses math/rand/v2's global source.
	// Tests pass a seeded one.
	Rand *rand.Rand

	step time.Duration // the step the next wait is drawn from; 0 is First
}

// Peek returns the step the next wait is drawn from: an upper bound of
// what Next returns next. It changes nothing.
func (b *Backoff) Peek() time.Duration {
	if b.step == 0 {
		return b.First
	}
	return b.step
}

// Next returns the wait before the next attempt and doubles the step (up
// to Max). With Equal jitter the wait lies in [step/2, step], with Full
// in [0, step], with None it is the step.
func (b *Backoff) Next() time.Duration {
	step := b.Peek()
	if b.Max > 0 {
		step = min(step, b.Max)
	}
	switch {
	case b.Max > 0 && step > b.Max/2:
		b.step = b.Max
	case step <= math.MaxInt64/2:
		b.step = 2 * step
	default:
		b.step = step
	}
	switch b.Jitter {
	case Full:
		return b.draw(step)
	case None:
		return step
	default:
		return step/2 + b.draw(step-step/2)
	}
}

// draw returns a uniform duration in [0, d].
func (b *Backoff) draw(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	if b.Rand != nil {
		return time.Duration(b.Rand.Int64N(int64(d) + 1))
	}
	return time.Duration(rand.Int64N(int64(d) + 1))
}

// Reset starts the steps again from First, as after a success.
func (b *Backoff) Reset() {
	b.step = 0
}

// Wait sleeps for Next's wait. It returns ctx.Err() at once if ctx ends
// first, and nil after a full wait.
func (b *Backoff) Wait(ctx context.Context) error {
	return Sleep(ctx, b.Next())
}

// Sleep waits d or until ctx ends, whichever is first; it returns
// ctx.Err() if ctx ended first (or had ended), nil otherwise.
func Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
