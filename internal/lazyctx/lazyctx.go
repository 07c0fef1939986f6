// Package lazyctx has a context with a deadline whose timer starts only
// when something waits on it (Done). Most requests never block (a point
// read at its leader is a store lookup), and a timer with its cancellation
// registered in the connection's context was a visible share of a read's
// CPU and allocations.
package lazyctx

import (
	"context"
	"sync"
	"time"
)

// WithTimeout is context.WithTimeout with the timer started on the first
// Done. Err, Deadline and Value do not start it.
func WithTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	c := &lazy{Context: parent, deadline: time.Now().Add(d)}
	return c, c.cancel
}

type lazy struct {
	context.Context // the parent
	deadline        time.Time

	mu    sync.Mutex
	timed context.Context // context.WithDeadline of the parent, once Done was asked for
	stop  context.CancelFunc
	ended bool // cancel was called
}

func (c *lazy) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *lazy) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timed == nil {
		c.timed, c.stop = context.WithDeadline(c.Context, c.deadline)
		if c.ended {
			c.stop()
		}
	}
	return c.timed.Done()
}

// Err answers without starting the timer.
func (c *lazy) Err() error {
	c.mu.Lock()
	timed, ended := c.timed, c.ended
	c.mu.Unlock()
	switch {
	case timed != nil:
		return timed.Err()
	case ended:
		return context.Canceled
	}
	if err := c.Context.Err(); err != nil {
		return err
	}
	if !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// cancel ends the context, stopping its timer if one was started.
func (c *lazy) cancel() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ended = true
	if c.stop != nil {
		c.stop()
	}
}
