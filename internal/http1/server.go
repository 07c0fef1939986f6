// Package http1 serves the document API over HTTP/1.1 with less work per
// request than net/http, and falls back to a net/http server for every
// connection it does not serve in full.
//
// A connection's requests are read into one buffer per connection; a
// request is served here when it is plain: HTTP/1.1, a method of the API,
// an origin-form target that FallbackFor does not claim (the streaming
// routes), a Host header, a body of declared length or chunked (no other
// transfer coding), no Upgrade, no Expect but 100-continue (answered when
// the handler first reads the body), a header block of at most
// MaxHeaderBytes; or HTTP/1.0 the same way, with or without a Host, with
// no transfer coding and no Expect (answered as net/http answers 1.0: a
// 1.0 status line, the connection kept only on Connection: keep-alive).
// The answer is built in buffers from a pool shared by all connections
// and leaves in one write (unless the handler streams more than
// StreamAfter bytes or flushes). What net/http spends per request beyond
// that, and this server does not, is a goroutine's background read to
// notice a client that disconnects (this server notices at the next read
// or write: no request's context is cancelled by a disconnect), the
// header snapshot at WriteHeader, a bufio reader and writer per request,
// and a context per request.
//
// A request that is not plain is judged as net/http would judge it (see
// BadRequest): one net/http would refuse is refused here, when BadRequest
// is set; otherwise its connection goes to net/http (Fallback), bytes
// already read included, which answers it and closes the connection.
package http1

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"golang.org/x/net/http/httpguts"
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
	Logger      *slog.Logger

	mu        sync.Mutex
	fallbackLn *listener // the fallback server's listener, once Serve started it
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	reaping   bool
	closing   atomic.Bool
	done      chan struct{} // closed when the server shuts down
	connsWG   sync.WaitGroup
}

// New returns a server answering with h, plain requests here and the
// others through a net/http server with the same handler and header
// timeout.
func New(h http.Handler, logger *slog.Logger) *Server {
	const headerTimeout = 10 * time.Second
	fb := &http.Server{Handler: h, ReadHeaderTimeout: headerTimeout}
	fb.SetKeepAlivesEnabled(false)
	return &Server{Handler: h, ReadHeaderTimeout: headerTimeout, Logger: logger, Fallback: fb}
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
	if !s.unlessClosing(func() {
		if s.fallbackLn == nil {
			s.fallbackLn = newListener(ln.Addr())
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
	var backoff time.Duration
	for {
		rwc, err := ln.Accept()
		if err != nil {
			if s.closing.Load() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		c := &conn{s: s, rwc: rwc, remote: rwc.RemoteAddr().String()}
		if !s.unlessClosing(func() { s.conns[c] = struct{}{}; s.connsWG.Add(1) }) {
			rwc.Close()
			return ErrServerClosed
		}
		go c.serve()
	}
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
	if s.fallbackStarted() {
		return s.Fallback.Close()
	}
	return nil
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
}

// errFallback: the request is not plain; net/http takes the connection.
var errFallback = errors.New("fall back to net/http")

// errHeaderTooLarge: no header block ends within MaxHeaderBytes.
var errHeaderTooLarge = errors.New("header too large")

// refusal is why BadRequest answers a request.
type refusal struct {
	status int
	detail string
}

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
	c.in = make([]byte, 4096)
	for {
		if c.s.closing.Load() && c.pos == c.lim {
			return
		}
		req, err := c.readRequest()
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

var crlfcrlf = []byte("\r\n\r\n")

// readRequest reads and parses the next request's header. It returns
// errFallback, with nothing consumed, for a request net/http must answer.
func (c *conn) readRequest() (*http.Request, error) {
	end := -1
	for {
		if i := bytes.Index(c.in[c.pos:c.lim], crlfcrlf); i >= 0 {
			end = c.pos + i
			break
		}
		if c.lim > c.pos {
			// Part of a header: the read timeout runs from here.
			if c.state.Load() != stateHeader {
				c.since.Store(time.Now().UnixNano())
				c.state.Store(stateHeader)
			}
			if bytes.Contains(c.in[c.pos:c.lim], []byte("\n\n")) || bytes.Contains(c.in[c.pos:c.lim], []byte("\n\r\n")) {
				return nil, errFallback // bare LF line ends: net/http's to judge
			}
		}
		if err := c.fill(c.s.MaxHeaderBytes); err != nil {
			if err == errFallback && c.lim > c.pos {
				return nil, errHeaderTooLarge
			}
			return nil, err
		}
	}
	// A request has arrived: Shutdown no longer closes the connection as
	// idle (as net/http, once a request's first byte is read).
	c.state.Store(stateActive)
	head := c.in[c.pos:end]
	nl := bytes.Index(head, []byte("\r\n"))
	if nl < 0 {
		nl = len(head)
	}
	line := head[:nl]
	sp1 := bytes.IndexByte(line, ' ')
	if sp1 < 0 {
		return nil, errFallback
	}
	method := knownMethod(line[:sp1])
	rest := line[sp1+1:]
	sp2 := bytes.IndexByte(rest, ' ')
	if method == "" || sp2 <= 0 {
		return nil, errFallback
	}
	minor := 1
	switch string(rest[sp2+1:]) {
	case "HTTP/1.1":
	case "HTTP/1.0":
		minor = 0
	default:
		return nil, errFallback
	}
	target := rest[:sp2]
	if target[0] != '/' || (c.s.FallbackFor != nil && c.s.FallbackFor(target)) {
		return nil, errFallback
	}
	for _, b := range target {
		if b <= ' ' || b >= 0x7f {
			return nil, errFallback
		}
	}

	var block string
	if nl < len(head) {
		block = string(head[nl+2:])
	}
	hd, ok := parseHeader(block)
	// HTTP/1.1 requires a Host; HTTP/1.0 had no chunked coding and no
	// 100-continue, so net/http judges those requests.
	if !ok || (minor == 1 && !hd.hasHost) || (minor == 0 && (hd.chunked || hd.expectContinue)) {
		return nil, errFallback
	}
	raw := string(target)
	u, err := url.ParseRequestURI(raw)
	c.refused = refusal{}
	if err != nil {
		if c.s.BadRequest == nil {
			return nil, errFallback
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		c.refused = refusal{http.StatusBadRequest, "request target is not a valid URI: " + err.Error()}
		u = &url.URL{Path: raw}
	}
	c.pos = end + 4
	req := &http.Request{
		Method: method, URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: hd.fields, Host: hd.host, RemoteAddr: c.remote, RequestURI: raw,
		ContentLength: hd.contentLength, Close: hd.close, Body: http.NoBody,
	}
	if minor == 0 {
		// An HTTP/1.0 connection persists only when the client asks.
		req.Proto, req.ProtoMinor = "HTTP/1.0", 0
		req.Close = hd.close || !hd.keepAlive
	}
	switch {
	case hd.chunked:
		// As net/http: the coding is in TransferEncoding, not the header.
		delete(hd.fields, "Transfer-Encoding")
		req.ContentLength = -1
		req.TransferEncoding = chunkedCoding
		req.Body = &body{c: c, chunked: true, expect: hd.expectContinue}
	case hd.contentLength > 0:
		req.Body = &body{c: c, left: hd.contentLength, expect: hd.expectContinue}
	}
	return req, nil
}

// refuse judges a request that is not plain, as net/http would (cause is
// errFallback or errHeaderTooLarge): when net/http would refuse it before
// any handler, and BadRequest is set, it returns the request for
// BadRequest to answer (c.refused says why), having consumed what was
// read; otherwise nil, and the request falls back untouched.
func (c *conn) refuse(cause error) *http.Request {
	if c.s.BadRequest == nil {
		return nil
	}
	in := c.in[c.pos:c.lim]
	var why refusal
	if cause == errHeaderTooLarge {
		why = refusal{http.StatusRequestHeaderFieldsTooLarge, fmt.Sprintf("the request header is longer than %d bytes", c.s.MaxHeaderBytes)}
	} else if why = judge(in); why.status == 0 {
		return nil
	}
	// The method and target as far as the request line reads; the
	// request is answered as HTTP/1.1, and the connection closes.
	r := &http.Request{Method: "OTHER", URL: &url.URL{}, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: http.NoBody, RemoteAddr: c.remote, Close: true}
	line, _, _ := bytes.Cut(in, []byte("\n"))
	if method, rest, ok := bytes.Cut(line, []byte(" ")); ok {
		if m := knownMethod(method); m != "" {
			r.Method = m
		}
		target, _, _ := bytes.Cut(rest, []byte(" "))
		if utf8.Valid(target) && len(target) <= 8<<10 {
			r.URL.Path, r.RequestURI = string(target), string(target)
		}
	}
	c.refused = why
	c.pos = c.lim
	return r
}

// judge returns why net/http's server would refuse the request whose
// header block (and possibly more) in holds, or a zero refusal when it
// would serve it or cannot tell yet. It parses with http.ReadRequest, as
// net/http's server does, then makes the checks that server adds
// (Go 1.26 net/http/server.go, conn.readRequest and conn.serve).
func judge(in []byte) refusal {
	req, err := http.ReadRequest(bufio.NewReaderSize(bytes.NewReader(in), max(len(in), 16)))
	switch {
	case err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF):
		return refusal{}
	case err != nil && strings.Contains(err.Error(), "transfer encoding"):
		// net/http's unsupportedTEError: "unsupported transfer encoding"
		// or "too many transfer encodings", answered 501.
		return refusal{http.StatusNotImplemented, "transfer coding not supported (only chunked is)"}
	case err != nil:
		return refusal{http.StatusBadRequest, "the request cannot be parsed: " + err.Error()}
	}
	if req.ProtoMajor != 1 && !(req.ProtoMajor == 2 && req.ProtoMinor == 0 && req.Method == "PRI" && req.RequestURI == "*") {
		return refusal{http.StatusHTTPVersionNotSupported, fmt.Sprintf("HTTP/%d.%d is not supported: use HTTP/1.1", req.ProtoMajor, req.ProtoMinor)}
	}
	// ReadRequest drops the Host field from req.Header; net/http's server
	// judges the fields as read (the parse cannot fail the second time).
	tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(in)))
	tp.ReadLine()
	fields, _ := tp.ReadMIMEHeader()
	hosts := fields["Host"]
	h2c := req.Method == "PRI" && len(req.Header) == 0 && req.URL.Path == "*" && req.Proto == "HTTP/2.0"
	if req.ProtoAtLeast(1, 1) && len(hosts) == 0 && !h2c && req.Method != http.MethodConnect {
		return refusal{http.StatusBadRequest, "the request has no Host header (HTTP/1.1 requires one)"}
	}
	if len(hosts) == 1 && !httpguts.ValidHostHeader(hosts[0]) {
		return refusal{http.StatusBadRequest, fmt.Sprintf("the Host header %q is malformed", hosts[0])}
	}
	for k, vv := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return refusal{http.StatusBadRequest, fmt.Sprintf("the header field name %q is not valid", k)}
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return refusal{http.StatusBadRequest, fmt.Sprintf("the value of header field %s holds a character not allowed there", k)}
			}
		}
	}
	if e := req.Header.Get("Expect"); e != "" && !hasToken(e, "100-continue") {
		return refusal{http.StatusExpectationFailed, "only Expect: 100-continue is supported"}
	}
	return refusal{}
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

// header is what parseHeader reads of a request's header block.
type header struct {
	fields        http.Header
	host          string
	contentLength int64
	hasHost       bool
	close         bool // Connection: close
	keepAlive     bool // Connection: keep-alive (HTTP/1.0's way to persist)
	chunked       bool // Transfer-Encoding: chunked
	// expectContinue: Expect: 100-continue.
	expectContinue bool
}

var chunkedCoding = []string{"chunked"}

// parseHeader parses the header fields of a plain request: block is the
// block after the request line, without its final empty line; names and
// values are slices of it. ok is false for anything net/http must judge:
// a malformed field, a folded line, a repeated or malformed Host, a
// Content-Length that is not one decimal number, a Transfer-Encoding
// other than one "chunked" (or with a Content-Length), an Expect other
// than one "100-continue", Upgrade, TE or Trailer.
func parseHeader(block string) (hd header, ok bool) {
	n := strings.Count(block, "\n") + 1
	hd.fields = make(http.Header, n)
	values := make([]string, n) // one allocation for every field's value slice
	hasLength := false
	for len(block) > 0 {
		l, rest, _ := strings.Cut(block, "\r\n")
		block = rest
		colon := strings.IndexByte(l, ':')
		if colon <= 0 {
			return hd, false
		}
		for i := 0; i < colon; i++ {
			if !isTokenByte(l[i]) {
				return hd, false // obs-fold, space before the colon, a bad name
			}
		}
		v := strings.Trim(l[colon+1:], " \t")
		for i := 0; i < len(v); i++ {
			if b := v[i]; (b < ' ' && b != '\t') || b == 0x7f {
				return hd, false
			}
		}
		name := textproto.CanonicalMIMEHeaderKey(l[:colon])
		switch name {
		case "Host":
			if hd.hasHost || !httpguts.ValidHostHeader(v) {
				return hd, false
			}
			hd.host, hd.hasHost = v, true
		case "Content-Length":
			if hasLength || v == "" || len(v) > 18 || strings.Trim(v, "0123456789") != "" {
				return hd, false
			}
			hd.contentLength, _ = strconv.ParseInt(v, 10, 64)
			hasLength = true
		case "Transfer-Encoding":
			if hd.chunked || !strings.EqualFold(v, "chunked") {
				return hd, false
			}
			hd.chunked = true
		case "Expect":
			if hd.expectContinue || !strings.EqualFold(v, "100-continue") {
				return hd, false
			}
			hd.expectContinue = true
		case "Upgrade", "Te", "Trailer":
			return hd, false
		case "Connection":
			if hasToken(v, "upgrade") {
				return hd, false
			}
			hd.close = hd.close || hasToken(v, "close")
			hd.keepAlive = hd.keepAlive || hasToken(v, "keep-alive")
		}
		values[0] = v
		if old, ok := hd.fields[name]; ok {
			hd.fields[name] = append(old, v)
		} else {
			hd.fields[name] = values[:1:1]
		}
		values = values[1:]
	}
	return hd, !(hd.chunked && hasLength)
}

// knownMethod returns the method as a constant string (no allocation),
// or "" for a method the API does not serve.
func knownMethod(b []byte) string {
	for _, m := range apiMethods {
		if string(b) == m {
			return m
		}
	}
	return ""
}

var apiMethods = [...]string{http.MethodGet, http.MethodHead, http.MethodPut, http.MethodPost, http.MethodPatch, http.MethodDelete}

// hasToken reports whether the comma-separated list v holds token, in any
// case.
func hasToken(v, token string) bool {
	for item := range strings.SplitSeq(v, ",") {
		if strings.EqualFold(strings.Trim(item, " \t"), token) {
			return true
		}
	}
	return false
}

// isTokenByte: RFC 9110 tchar.
func isTokenByte(b byte) bool {
	switch {
	case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		return true
	}
	return b < 0x80 && strings.IndexByte("!#$%&'*+-.^_`|~", b) >= 0
}

// body reads a request body, of declared length or chunked, from the
// connection's buffer, then from the connection.
type body struct {
	c       *conn
	left    int64 // bytes left: of the body, or of the current chunk
	chunked bool
	started bool // chunked: a chunk-size line has been read
	done    bool // chunked: the last chunk and the trailer section are read
	expect  bool // a 100 Continue is owed before the first read
	err     error
}

// errBadChunked: a chunked body that breaks RFC 9112's framing. The
// connection cannot be read further.
var errBadChunked = errors.New("http1: malformed chunked request body")

// maxChunkLine bounds a chunk-size line (extensions included) and each
// trailer field line.
const maxChunkLine = 4096

func (b *body) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.expect {
		b.expect = false
		if err := b.c.sendContinue(); err != nil {
			b.err = err
			return 0, err
		}
	}
	for b.chunked && b.left == 0 && !b.done {
		if err := b.nextChunk(); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			b.err = err
			return 0, err
		}
	}
	if b.left == 0 {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	c := b.c
	if c.pos == c.lim {
		if int64(len(p)) >= b.left || len(p) >= len(c.in) {
			// Large reads go straight into p.
			n, err := c.rwc.Read(p[:min(int64(len(p)), b.left)])
			b.left -= int64(n)
			if err == io.EOF && b.left > 0 {
				err = io.ErrUnexpectedEOF
			}
			if err != nil && n == 0 {
				b.err = err
				return 0, err
			}
			return n, nil
		}
		c.pos, c.lim = 0, 0
		if err := c.fill(len(c.in)); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			b.err = err
			return 0, err
		}
	}
	n := copy(p[:min(int64(len(p)), b.left)], c.in[c.pos:c.lim])
	c.pos += n
	b.left -= int64(n)
	return n, nil
}

// nextChunk reads the line break that ends the chunk before (if any) and
// the next chunk-size line, whose extensions are ignored; after the last
// chunk, it reads the trailer section and drops its fields.
func (b *body) nextChunk() error {
	c := b.c
	if b.started {
		l, err := c.line()
		if err != nil {
			return err
		}
		if len(l) != 0 {
			return errBadChunked
		}
	}
	b.started = true
	l, err := c.line()
	if err != nil {
		return err
	}
	size, _, _ := bytes.Cut(l, []byte(";"))
	n, ok := parseChunkSize(bytes.TrimRight(size, " \t"))
	if !ok {
		return errBadChunked
	}
	if n > 0 {
		b.left = n
		return nil
	}
	for total := 0; ; {
		l, err := c.line()
		if err != nil {
			return err
		}
		if len(l) == 0 {
			b.done = true
			return nil
		}
		if total += len(l) + 2; total > c.s.MaxHeaderBytes {
			return errBadChunked
		}
	}
}

// parseChunkSize parses a chunk size: 1 to 15 hexadecimal digits.
func parseChunkSize(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 15 {
		return 0, false
	}
	var n int64
	for _, d := range b {
		switch {
		case '0' <= d && d <= '9':
			d -= '0'
		case 'a' <= d && d <= 'f':
			d -= 'a' - 10
		case 'A' <= d && d <= 'F':
			d -= 'A' - 10
		default:
			return 0, false
		}
		n = n<<4 | int64(d)
	}
	return n, true
}

// line returns the next line of a chunked body's framing without its
// CRLF, reading more as needed. The line aliases the connection's buffer
// until the next read. A line ended by a bare LF, or longer than
// maxChunkLine, is malformed.
func (c *conn) line() ([]byte, error) {
	for {
		if i := bytes.IndexByte(c.in[c.pos:c.lim], '\n'); i >= 0 {
			l := c.in[c.pos : c.pos+i]
			c.pos += i + 1
			if len(l) == 0 || l[len(l)-1] != '\r' || len(l) > maxChunkLine+1 {
				return nil, errBadChunked
			}
			return l[:len(l)-1], nil
		}
		if c.lim-c.pos > maxChunkLine {
			return nil, errBadChunked
		}
		if err := c.fill(max(len(c.in), 2*maxChunkLine)); err != nil {
			if err == errFallback {
				err = errBadChunked
			}
			return nil, err
		}
	}
}

// sendContinue sends the interim 100 Continue that a request with
// Expect: 100-continue waits for, unless the handler has chosen its
// answer already (as net/http).
func (c *conn) sendContinue() error {
	if w := &c.resp; w.status != 0 || w.sent {
		return nil
	}
	_, err := io.WriteString(c.rwc, "HTTP/1.1 100 Continue\r\n\r\n")
	return err
}

func (b *body) Close() error { return nil }

// discard consumes what the handler left of the body: at most 256 KiB,
// as net/http; it reports whether the connection can take another
// request. It cannot when a 100 Continue was owed and never sent: the
// client may send the body or not.
func (b *body) discard() bool {
	if b.err != nil || b.expect {
		return false
	}
	if !b.chunked && b.left > 256<<10 {
		return false
	}
	_, err := io.CopyN(io.Discard, b, 256<<10+1)
	return err == io.EOF
}

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
