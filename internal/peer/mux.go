package peer

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/doppio-db/doppio/internal/backoff"
)

// preface is the HTTP/2 client connection preface (RFC 9113 3.4), the
// first bytes a gRPC client sends on a plaintext connection.
const preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// ALPN protocol names the Mux dispatches on under TLS.
const (
	ProtoGRPC = "h2"
	ProtoHTTP = "http/1.1"
)

// Config configures a Mux.
type Config struct {
	// TLS, when set, makes every connection complete a TLS handshake with
	// it before it is dispatched, by ALPN. Its NextProtos default to
	// ProtoGRPC and ProtoHTTP; set ClientAuth and ClientCAs to require a
	// node certificate of the cluster.
	TLS *tls.Config
	// HandshakeTimeout bounds how long a connection may take to show what
	// it is: its first bytes, or its TLS handshake (default 10 s). A
	// connection that has not by then is closed.
	HandshakeTimeout time.Duration
	Logger           *slog.Logger
}

// Mux splits one listener's connections between a gRPC server and an
// HTTP server (see the package doc).
type Mux struct {
	ln   net.Listener
	cfg  Config
	log  *slog.Logger
	grpc *sub
	http *sub

	// ctx ends when the Mux closes: it ends the handshakes under way.
	ctx       context.Context
	cancel    context.CancelFunc
	closeOnce sync.Once
	wg        sync.WaitGroup
}

// NewMux starts dispatching ln's connections; Close stops it and closes
// ln.
func NewMux(ln net.Listener, cfg Config) *Mux {
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.TLS != nil && len(cfg.TLS.NextProtos) == 0 {
		cfg.TLS = cfg.TLS.Clone()
		cfg.TLS.NextProtos = []string{ProtoGRPC, ProtoHTTP}
	}
	m := &Mux{ln: ln, cfg: cfg, log: cfg.Logger.With("component", "peer")}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.grpc, m.http = newSub(m), newSub(m)
	m.wg.Add(1)
	go m.accept()
	return m
}

// GRPC is the listener of the connections for the gRPC server.
func (m *Mux) GRPC() net.Listener { return m.grpc }

// HTTP is the listener of the connections for the peer HTTP server.
func (m *Mux) HTTP() net.Listener { return m.http }

// Addr is the address the Mux listens on.
func (m *Mux) Addr() net.Addr { return m.ln.Addr() }

// Close stops accepting, closes the listener and both sub-listeners (their
// Accept returns net.ErrClosed) and every connection not yet dispatched.
// Connections already dispatched belong to their servers.
func (m *Mux) Close() error {
	var err error
	m.closeOnce.Do(func() {
		m.cancel()
		err = m.ln.Close()
		m.wg.Wait()
	})
	return err
}

func (m *Mux) accept() {
	defer m.wg.Done()
	retry := backoff.Backoff{First: 5 * time.Millisecond, Max: time.Second}
	for {
		c, err := m.ln.Accept()
		if err != nil {
			if m.ctx.Err() != nil {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(retry.Next())
				continue
			}
			m.log.Error("peer listener stopped", "err", err)
			return
		}
		retry.Reset()
		m.wg.Add(1)
		go m.dispatch(c)
	}
}

// dispatch decides where c goes and waits until that server accepts it
// (or the Mux closes).
func (m *Mux) dispatch(c net.Conn) {
	defer m.wg.Done()
	to, conn, err := m.classify(c)
	if err != nil {
		m.log.Debug("peer connection dropped", "remote", c.RemoteAddr().String(), "err", err)
		c.Close()
		return
	}
	if !to.give(conn) {
		conn.Close()
	}
}

// classify reads what it must of c, within the handshake timeout, and
// returns the sub-listener c belongs to with the connection to give it.
func (m *Mux) classify(c net.Conn) (*sub, net.Conn, error) {
	deadline := time.Now().Add(m.cfg.HandshakeTimeout)
	if m.cfg.TLS != nil {
		tc := tls.Server(c, m.cfg.TLS)
		ctx, cancel := context.WithDeadline(m.ctx, deadline)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			return nil, nil, err
		}
		if tc.ConnectionState().NegotiatedProtocol == ProtoGRPC {
			return m.grpc, tc, nil
		}
		return m.http, tc, nil
	}
	if err := c.SetReadDeadline(deadline); err != nil {
		return nil, nil, err
	}
	stop := context.AfterFunc(m.ctx, func() { _ = c.SetReadDeadline(time.Now()) })
	defer stop()
	buf := make([]byte, 0, len(preface))
	for len(buf) < len(preface) && bytes.HasPrefix([]byte(preface), buf) {
		n, err := c.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil && n == 0 {
			if len(buf) == 0 {
				return nil, nil, err
			}
			break // what arrived is not the preface: HTTP judges it
		}
	}
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		return nil, nil, err
	}
	to := m.http
	if string(buf) == preface {
		to = m.grpc
	}
	return to, &replayConn{Conn: c, r: io.MultiReader(bytes.NewReader(buf), c)}, nil
}

// replayConn is a connection whose reads return the bytes classify read
// before the rest of it.
type replayConn struct {
	net.Conn
	r io.Reader
}

func (c *replayConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// CloseWrite half-closes the connection, as the HTTP servers do before a
// lingering close so a refused client still reads its answer.
func (c *replayConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

// sub is one side's listener: Accept returns the connections dispatched
// to it.
type sub struct {
	m      *Mux
	ch     chan net.Conn
	done   chan struct{}
	closed sync.Once
}

func newSub(m *Mux) *sub {
	return &sub{m: m, ch: make(chan net.Conn), done: make(chan struct{})}
}

func (s *sub) give(c net.Conn) bool {
	select {
	case s.ch <- c:
		return true
	case <-s.done:
		return false
	case <-s.m.ctx.Done():
		return false
	}
}

// Accept waits for the next connection dispatched here.
func (s *sub) Accept() (net.Conn, error) {
	select {
	case c := <-s.ch:
		return c, nil
	case <-s.done:
	case <-s.m.ctx.Done():
	}
	return nil, net.ErrClosed
}

// Close stops this side accepting; the Mux and the other side go on
// (Mux.Close closes the port).
func (s *sub) Close() error {
	s.closed.Do(func() { close(s.done) })
	return nil
}

func (s *sub) Addr() net.Addr { return s.m.ln.Addr() }
