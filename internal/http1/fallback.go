package http1

import (
	"errors"
	"net"
	"sync"
)

// errFallback: the request is not plain; net/http takes the connection.
var errFallback = errors.New("fall back to net/http")

// prefixConn is a connection given to net/http with the bytes already
// read from it.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (p *prefixConn) Read(b []byte) (int, error) {
	if len(p.prefix) > 0 {
		n := copy(b, p.prefix)
		p.prefix = p.prefix[n:]
		return n, nil
	}
	return p.Conn.Read(b)
}

// listener gives net/http the connections that fall back.
type listener struct {
	addr   net.Addr
	ch     chan net.Conn
	done   chan struct{}
	closed sync.Once
}

func newListener(addr net.Addr) *listener {
	return &listener{addr: addr, ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *listener) give(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *listener) Close() error {
	l.closed.Do(func() { close(l.done) })
	return nil
}

func (l *listener) Addr() net.Addr { return l.addr }
