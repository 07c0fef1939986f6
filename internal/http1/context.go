package http1

import (
	"context"
	"sync"
	"time"
)

// requestContext is the context of a request served here. As net/http's,
// it ends when the handler returns or when the client disconnects. A
// disconnect is noticed by a read of the connection in the background,
// as net/http does; here that read starts only once something waits on
// Done and the body has been read, so that a handler that never waits
// does not pay for it.
type requestContext struct {
	c *conn

	mu       sync.Mutex
	ctx      context.Context // made by the first Done
	cancel   context.CancelFunc
	ended    bool // the handler returned or the client went away
	waited   bool // Done was asked for
	bodyRead bool // the body is read to its end, or there is none
	watching bool // the background read runs
}

func (x *requestContext) Deadline() (time.Time, bool) { return time.Time{}, false }

func (x *requestContext) Done() <-chan struct{} {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.ctx == nil {
		x.ctx, x.cancel = context.WithCancel(context.Background())
		if x.ended {
			x.cancel()
		}
		x.waited = true
		x.watch()
	}
	return x.ctx.Done()
}

func (x *requestContext) Err() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	switch {
	case x.ctx != nil:
		return x.ctx.Err()
	case x.ended:
		return context.Canceled
	}
	return nil
}

// Value answers from the context Done made, once there is one: a context
// derived from this one then finds its parent's cancellation directly,
// without a goroutine to relay it.
func (x *requestContext) Value(key any) any {
	x.mu.Lock()
	ctx := x.ctx
	x.mu.Unlock()
	if ctx == nil {
		return nil
	}
	return ctx.Value(key)
}

// bodyDone is told that the handler read the body to its end.
func (x *requestContext) bodyDone() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.bodyRead = true
	x.watch()
}

// watch starts the background read when something waits on Done and the
// body is read (before that, the handler's reads would see a disconnect).
// x.mu is held.
func (x *requestContext) watch() {
	if !x.waited || !x.bodyRead || x.ended || x.watching {
		return
	}
	x.watching = true
	x.c.watchDone = make(chan struct{})
	go x.c.backgroundRead(x)
}

// end ends the context, as the client's disconnect or the handler's
// return does, and reports whether the background read was started.
func (x *requestContext) end() (watching bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.ended = true
	if x.cancel != nil {
		x.cancel()
	}
	return x.watching
}

// backgroundRead reads one byte of the connection: an error before the
// handler returns (the client closed or reset the connection) ends the
// request's context; a byte (the client's next request) is kept for
// readRequest.
func (c *conn) backgroundRead(x *requestContext) {
	defer close(c.watchDone)
	c.peekN, c.peekErr = c.rwc.Read(c.peek[:])
	if c.peekN == 0 && !c.stopping.Load() {
		c.peekErr = errDisconnected
		x.end()
	}
}

// endContext ends the current request's context once its handler has
// returned, stopping the background read; it reports whether the
// connection can still be read.
func (c *conn) endContext(x *requestContext) bool {
	if !x.end() {
		return true
	}
	c.stopping.Store(true)
	c.rwc.SetReadDeadline(time.Unix(1, 0)) // unblocks the read
	<-c.watchDone
	c.stopping.Store(false)
	c.rwc.SetReadDeadline(time.Time{})
	c.readDeadline = false
	if c.peekN == 0 {
		return c.peekErr != errDisconnected
	}
	if c.lim == len(c.in) {
		if c.pos > 0 {
			c.lim = copy(c.in, c.in[c.pos:c.lim])
			c.pos = 0
		} else {
			grown := make([]byte, 2*len(c.in))
			copy(grown, c.in[:c.lim])
			c.in = grown
		}
	}
	c.in[c.lim] = c.peek[0]
	c.lim++
	return true
}
