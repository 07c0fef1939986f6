package http1

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/doppio-db/doppio/internal/backoff"
)

// Server serves HTTP/1.1 (and 1.0) connections.
type Server struct {
	// Handler answers the requests served here; Fallback's Handler
	// answers the others.
	Handler http.Handler
	// Fallback is the net/http server the connections this one does
	// not serve fall back to. Its Handler is normally the same as Handler. New's
	// serves one request per connection (keep-alives off): the client's
	// next request comes on a new connection, here, so a request that is
	// not plain does not leave the rest of its connection to net/http.
	Fallback *http.Server
	// ReadHeaderTimeout bounds how long a request's header may take to
	// arrive once its first byte has (default 10 s).
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle that long (0: never,
	// as net/http's default).
	IdleTimeout time.Duration
	// ReadTimeout bounds how long a request's body may take to arrive
	// once its header has (0: no bound, as net/http's default).
	// WriteTimeout bounds how long the answer may take to leave, from the
	// same moment. Both apply alike to the requests the fallback serves,
	// except those FallbackFor names: their answers last as long as the
	// client reads, and their uploads as long as the client sends.
	ReadTimeout, WriteTimeout time.Duration
	// MaxHeaderBytes: the longest header block a request may have
	// (default 64 KiB); Fallback gets the same limit unless it has its
	// own.
	MaxHeaderBytes int
	// FallbackFor, when set, names more requests net/http must answer, by
	// their raw target: those whose answers stream for as long as the
	// client reads (net/http ends their context when the client
	// disconnects).
	FallbackFor func(target []byte) bool
	// BadRequest, when set, answers here the requests net/http would
	// refuse before any handler runs, so that they get the handler's kind
	// of answer (problem+json in Doppio) rather than net/http's plain
	// text. status is 400 with what is malformed (a target that is not a
	// valid URI, a request line or header field that does not parse, a
	// missing, repeated or malformed Host, a bad Content-Length), 417 for
	// an Expect other than 100-continue, 431 for a header block longer
	// than MaxHeaderBytes, 501 for a transfer coding other than chunked,
	// 505 for a protocol version other than HTTP/1.x. r has the method
	// (OTHER when it is not one of the API's) and the raw target as
	// r.URL.Path, as far as they could be read. The connection closes
	// after the answer, except after a bad target (whose request is
	// otherwise well framed). Without BadRequest, net/http answers all of
	// them.
	//
	// A request is judged with net/http's own parser (http.ReadRequest)
	// and the checks its server adds, so what net/http accepts is still
	// left to it, and what it refuses is refused here.
	BadRequest func(w http.ResponseWriter, r *http.Request, status int, detail string)
	// StreamAfter: an answer longer than this is sent as it is written
	// (chunked, or as declared by the handler's Content-Length) rather
	// than whole (default 256 KiB).
	StreamAfter int
	// FallbackOnly turns the fast path off: every connection is served by
	// Fallback alone, with keep-alives, under the same deadlines.
	FallbackOnly bool
	// TLSConfig, when set, makes Serve serve TLS: each connection's
	// handshake completes within ReadHeaderTimeout; one that negotiated
	// HTTP/2 through ALPN (offered when TLSConfig.NextProtos names "h2")
	// is served by net/http's HTTP/2 server with keep-alives, the others
	// as plain connections are, their requests carrying r.TLS wherever
	// they are served. A client speaking plain HTTP to the port gets a
	// 400 that says so.
	TLSConfig *tls.Config
	Logger    *slog.Logger

	mu         sync.Mutex
	fallbackLn *listener // the fallback server's listener, once Serve started it
	// h2 serves the TLS connections that negotiated HTTP/2, from h2Ln.
	h2        *http.Server
	h2Ln      *listener
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	reaping   bool
	closing   atomic.Bool
	done      chan struct{} // closed when the server shuts down
	connsWG   sync.WaitGroup
}

// New returns a server answering with h, plain requests here and the
// others through a net/http server with the same handler and timeouts: a
// header must arrive within 10 s, a body within a minute, and an answer
// must leave within a minute.
func New(h http.Handler, logger *slog.Logger) *Server {
	const headerTimeout = 10 * time.Second
	fb := &http.Server{Handler: h, ReadHeaderTimeout: headerTimeout}
	fb.SetKeepAlivesEnabled(false)
	return &Server{Handler: h, ReadHeaderTimeout: headerTimeout, Logger: logger, Fallback: fb,
		ReadTimeout: time.Minute, WriteTimeout: time.Minute}
}

// ErrServerClosed is returned by Serve after Shutdown or Close.
var ErrServerClosed = http.ErrServerClosed

func (s *Server) init() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listeners == nil {
		s.listeners = map[net.Listener]struct{}{}
		s.conns = map[*conn]struct{}{}
		s.done = make(chan struct{})
	}
	if s.ReadHeaderTimeout <= 0 {
		s.ReadHeaderTimeout = 10 * time.Second
	}
	if s.MaxHeaderBytes <= 0 {
		s.MaxHeaderBytes = 64 << 10
	}
	if s.Fallback != nil && s.Fallback.MaxHeaderBytes == 0 {
		s.Fallback.MaxHeaderBytes = s.MaxHeaderBytes // one limit, whoever reads the header
	}
	if s.StreamAfter <= 0 {
		s.StreamAfter = 256 << 10
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
}

// Serve accepts connections on ln until Shutdown or Close, and always
// returns a non-nil error (ErrServerClosed after those).
func (s *Server) Serve(ln net.Listener) error {
	s.init()
	if s.FallbackOnly {
		return s.serveFallbackOnly(ln)
	}
	if !s.unlessClosing(func() {
		if s.fallbackLn == nil {
			s.fallbackLn = newListener(ln.Addr())
			s.Fallback.Handler = s.bounded(s.Fallback.Handler)
			if s.TLSConfig != nil {
				s.Fallback.Handler = withTLSState(s.Fallback.Handler)
				s.Fallback.ConnContext = rememberTLS(s.Fallback.ConnContext)
				if offersH2(s.TLSConfig) {
					s.startH2(ln.Addr())
				}
			}
			go func(l *listener) {
				if err := s.Fallback.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
					s.Logger.Error("http fallback server stopped", "err", err)
				}
			}(s.fallbackLn)
		}
		s.listeners[ln] = struct{}{}
		if !s.reaping {
			s.reaping = true
			go s.reap()
		}
	}) {
		ln.Close()
		return ErrServerClosed
	}
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
	}()
	// Temporary Accept errors (such as running out of descriptors) are
	// retried after a jittered wait, so that servers sharing the cause
	// do not all retry in step.
	retry := backoff.Backoff{First: 5 * time.Millisecond, Max: time.Second}
	for {
		rwc, err := ln.Accept()
		if err != nil {
			if s.closing.Load() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(retry.Next())
				continue
			}
			return err
		}
		retry.Reset()
		c := &conn{s: s, rwc: rwc, remote: rwc.RemoteAddr().String()}
		if s.TLSConfig != nil {
			c.rwc = tls.Server(rwc, s.TLSConfig) // the handshake is the connection's own work
		}
		if !s.unlessClosing(func() { s.conns[c] = struct{}{}; s.connsWG.Add(1) }) {
			rwc.Close()
			return ErrServerClosed
		}
		go c.serve()
	}
}

// serveFallbackOnly serves ln with the fallback server alone.
func (s *Server) serveFallbackOnly(ln net.Listener) error {
	if !s.unlessClosing(func() {
		if s.fallbackLn == nil {
			// Not given connections: it marks the fallback as started,
			// for Shutdown and Close.
			s.fallbackLn = newListener(ln.Addr())
			s.Fallback.Handler = s.bounded(s.Fallback.Handler)
			s.Fallback.SetKeepAlivesEnabled(true)
			if s.Fallback.IdleTimeout == 0 {
				s.Fallback.IdleTimeout = s.IdleTimeout
			}
		}
		s.listeners[ln] = struct{}{}
	}) {
		ln.Close()
		return ErrServerClosed
	}
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
	}()
	served := &sniffListener{Listener: ln, cfg: s.TLSConfig}
	err := s.Fallback.Serve(served)
	if s.closing.Load() {
		return ErrServerClosed // stop closed ln before shutting the fallback down
	}
	return err
}

// unlessClosing runs f under the server's lock unless the server is
// closing, and reports whether it ran: what f registers, stop and
// Shutdown see.
func (s *Server) unlessClosing(f func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Load() {
		return false
	}
	f()
	return true
}

// Shutdown stops accepting, closes idle connections, lets every request
// under way finish (its connection closes after the answer), and shuts
// the fallback server down; it returns when all are done or ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.init()
	s.stop()
	finished := make(chan struct{})
	go func() { s.connsWG.Wait(); close(finished) }()
	var fbErr error
	if s.fallbackStarted() {
		fbErr = s.Fallback.Shutdown(ctx)
	}
	if h2 := s.h2Server(); h2 != nil {
		fbErr = errors.Join(fbErr, h2.Shutdown(ctx))
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		s.closeIdle()
		select {
		case <-finished:
			return fbErr
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// Close closes the listeners and every connection at once.
func (s *Server) Close() error {
	s.init()
	s.stop()
	s.mu.Lock()
	for c := range s.conns {
		c.rwc.Close()
	}
	s.mu.Unlock()
	var err error
	if h2 := s.h2Server(); h2 != nil {
		err = h2.Close()
	}
	if s.fallbackStarted() {
		err = errors.Join(err, s.Fallback.Close())
	}
	return err
}

// startH2 starts the HTTP/2 server of the TLS connections that ask for
// it: the fallback's handler and limits with keep-alives on, as HTTP/2
// multiplexes a client's requests over one connection. Called under mu.
func (s *Server) startH2(addr net.Addr) {
	s.h2Ln = newListener(addr)
	s.h2 = &http.Server{
		Handler: s.Fallback.Handler, ReadHeaderTimeout: s.ReadHeaderTimeout, IdleTimeout: s.IdleTimeout,
		MaxHeaderBytes: s.MaxHeaderBytes, ErrorLog: s.Fallback.ErrorLog,
	}
	go func(srv *http.Server, l *listener) {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) && !s.closing.Load() {
			s.Logger.Error("http/2 server stopped", "err", err)
		}
	}(s.h2, s.h2Ln)
}

func (s *Server) h2Server() *http.Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.h2
}

// fallbackStarted reports whether Serve started the fallback server;
// after stop, none starts.
func (s *Server) fallbackStarted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fallbackLn != nil
}

func (s *Server) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Swap(true) {
		return
	}
	close(s.done)
	for ln := range s.listeners {
		ln.Close()
	}
	if s.fallbackLn != nil {
		s.fallbackLn.Close()
	}
	if s.h2Ln != nil {
		s.h2Ln.Close()
	}
}

func (s *Server) closeIdle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.state.Load() == stateIdle {
			c.rwc.Close()
		}
	}
}

// reap closes connections whose request header has been arriving for
// longer than ReadHeaderTimeout, or idle for longer than IdleTimeout: a
// sweep every second instead of a deadline per request.
func (s *Server) reap() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		now := time.Now().UnixNano()
		s.mu.Lock()
		for c := range s.conns {
			since := c.since.Load()
			switch c.state.Load() {
			case stateHeader:
				if now-since > int64(s.ReadHeaderTimeout) {
					c.rwc.Close()
				}
			case stateIdle:
				if s.IdleTimeout > 0 && since != 0 && now-since > int64(s.IdleTimeout) {
					c.rwc.Close()
				}
			}
		}
		s.mu.Unlock()
	}
}

// bounded gives the fallback's requests the deadlines of those served
// here (ReadTimeout, WriteTimeout), through net/http's ResponseController,
// and clears them for the requests FallbackFor names.
func (s *Server) bounded(h http.Handler) http.Handler {
	if s.ReadTimeout <= 0 && s.WriteTimeout <= 0 {
		return h
	}
	if h == nil {
		h = http.DefaultServeMux
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var read, write time.Time // zero: none, and none left from a request before
		if s.FallbackFor == nil || !s.FallbackFor([]byte(r.RequestURI)) {
			now := time.Now()
			if s.ReadTimeout > 0 {
				read = now.Add(s.ReadTimeout)
			}
			if s.WriteTimeout > 0 {
				write = now.Add(s.WriteTimeout)
			}
		}
		rc := http.NewResponseController(w)
		rc.SetReadDeadline(read)
		rc.SetWriteDeadline(write)
		h.ServeHTTP(w, r)
	})
}
