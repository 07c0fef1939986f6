package http1

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

const (
	stateIdle   = iota // waiting for a request's first byte
	stateHeader        // a request's header has begun to arrive
	stateActive        // a request is being served
)

// conn is one client connection served here.
type conn struct {
	s      *Server
	rwc    net.Conn
	remote string
	tls    *tls.ConnectionState // the handshake's outcome, on a TLS connection
	state  atomic.Int32
	since  atomic.Int64 // unix ns: when the state began (idle: 0 until the first answer)

	in       []byte // in[pos:lim] is read and not yet consumed
	pos, lim int
	// Reused by each request in turn (a handler must not keep its
	// ResponseWriter or the Header map once it returns, as with
	// net/http).
	resp   response
	header http.Header
	// refused, when status is not 0, is why the current request is
	// answered by BadRequest rather than the handler.
	refused refusal
	// readDeadline: ReadTimeout's deadline is set for the current
	// request's body, and must be cleared before the next request.
	readDeadline bool

	// ctx is the current request's context; the rest is its background
	// read's (see requestContext).
	ctx       *requestContext
	watchDone chan struct{} // closed when the background read returns
	stopping  atomic.Bool   // the background read is being stopped
	peek      [1]byte
	peekN     int
	peekErr   error
}

// errDisconnected: the background read found the client gone.
var errDisconnected = errors.New("http1: client disconnected")

// errHeaderTooLarge: no header block ends within MaxHeaderBytes.
var errHeaderTooLarge = errors.New("header too large")

func (c *conn) serve() {
	fellBack := false
	defer func() {
		if v := recover(); v != nil {
			c.s.Logger.Error("http connection panic", "remote", c.remote, "panic", v)
		}
		if !fellBack {
			c.rwc.Close()
		}
		c.s.mu.Lock()
		delete(c.s.conns, c)
		c.s.mu.Unlock()
		c.s.connsWG.Done()
	}()
	if tc, ok := c.rwc.(*tls.Conn); ok {
		if !c.handshake(tc) {
			return
		}
		if c.tls.NegotiatedProtocol == "h2" && c.s.h2Ln != nil {
			fellBack = c.s.h2Ln.give(tc)
			return
		}
	}
	c.in = make([]byte, 4096)
	for {
		if c.s.closing.Load() && c.pos == c.lim {
			return
		}
		req, err := c.readRequest()
		if err == errTLSToPlain {
			answer(c.rwc, tlsToPlainAnswer)
			return
		}
		if err == errFallback || err == errHeaderTooLarge {
			if req := c.refuse(err); req != nil {
				c.serveRequest(req)
				c.lingeringClose()
				return
			}
			fellBack = c.s.fallbackLn.give(&prefixConn{Conn: c.rwc, prefix: c.in[c.pos:c.lim]})
			return
		}
		if err != nil {
			return
		}
		keep := c.serveRequest(req)
		if c.readDeadline {
			c.rwc.SetReadDeadline(time.Time{}) // the header has no deadline: see reap
			c.readDeadline = false
		}
		c.since.Store(time.Now().UnixNano())
		c.state.Store(stateIdle)
		if !keep {
			return
		}
	}
}

// fill reads more bytes into c.in after c.lim, moving the unread bytes to
// the front and growing the buffer (up to max) when it is full.
func (c *conn) fill(max int) error {
	if c.pos > 0 {
		n := copy(c.in, c.in[c.pos:c.lim])
		c.pos, c.lim = 0, n
	}
	if c.lim == len(c.in) {
		if len(c.in) >= max {
			return errFallback
		}
		grown := make([]byte, min(2*len(c.in), max))
		copy(grown, c.in[:c.lim])
		c.in = grown
	}
	n, err := c.rwc.Read(c.in[c.lim:])
	c.lim += n
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// lingeringClose ends a connection after a refusal: the answer has left;
// the client may still be sending the request (a body, a header too
// long), and closing with unread bytes would reset the connection before
// the client reads the answer. So the write side closes first and what
// arrives is read and dropped until the client closes or half a second
// passes, as net/http does.
func (c *conn) lingeringClose() {
	if cw, ok := c.rwc.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	c.rwc.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	io.CopyN(io.Discard, c.rwc, 1<<20)
}

// setDeadlines bounds the current request's body (ReadTimeout) and its
// answer (WriteTimeout) from now, as net/http bounds them.
func (c *conn) setDeadlines(hasBody bool) {
	if c.s.ReadTimeout <= 0 && c.s.WriteTimeout <= 0 {
		return
	}
	now := time.Now()
	if d := c.s.WriteTimeout; d > 0 {
		c.rwc.SetWriteDeadline(now.Add(d))
	}
	if d := c.s.ReadTimeout; d > 0 && hasBody {
		c.rwc.SetReadDeadline(now.Add(d))
		c.readDeadline = true
	}
}
