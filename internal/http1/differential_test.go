package http1

import (
	"bufio"
	"bytes"
	"io"
	"log"
	"net"
	"net/http"
	"reflect"
	"sync"
	"testing"
	"time"
)

// FuzzParseDifferential sends the same bytes to the fast path and to
// net/http alone, each over an in-memory connection, and requires the
// same outcome for the first request: the same parse (method, target,
// Host, header fields, body and its framing) when both serve it, or the
// same status when both refuse it. A request the fast path leaves to
// net/http agrees by construction: net/http parses it.
func FuzzParseDifferential(f *testing.F) {
	for _, seed := range differentialSeeds {
		f.Add([]byte(seed))
	}
	ours, theirs := newMemServer(false), newMemServer(true)
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > 32<<10 {
			return // net/http allows 4 KiB past MaxHeaderBytes; the limits are tested apart
		}
		got, want := ours.run(t, in), theirs.run(t, in)
		if got.via == "net/http" {
			return // fell back: net/http parsed it
		}
		if got.via == "" && want.via == "" && got.status == want.status {
			return // both refused alike, or neither found a whole request
		}
		got.via, want.via = "", ""
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("input %q\n fast path %+v\n net/http  %+v", in, got, want)
		}
	})
}

// outcome is what a server made of an input's first request.
type outcome struct {
	via           string // who ran the handler; "" when none did
	status        int    // of the first answer; 0 when none was sent
	method        string
	target        string
	host          string
	header        http.Header
	contentLength int64
	coding        []string
	body          string
	bodyErr       bool
}

// memServer serves in-memory connections, one input at a time.
type memServer struct {
	ln   *memListener
	mu   sync.Mutex
	seen *outcome // the first request's, set by the handler
}

func newMemServer(netHTTPOnly bool) *memServer {
	m := &memServer{ln: &memListener{conns: make(chan net.Conn)}}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		m.mu.Lock()
		if m.seen == nil {
			m.seen = &outcome{via: via(r), method: r.Method, target: r.RequestURI, host: r.Host, header: r.Header.Clone(),
				contentLength: r.ContentLength, coding: r.TransferEncoding, body: string(b), bodyErr: err != nil}
		}
		m.mu.Unlock()
	})
	quiet := log.New(io.Discard, "", 0)
	if netHTTPOnly {
		go (&http.Server{Handler: h, MaxHeaderBytes: 64 << 10, ErrorLog: quiet}).Serve(m.ln)
		return m
	}
	s := New(h, nil)
	s.Fallback.ErrorLog = quiet
	s.BadRequest = func(w http.ResponseWriter, r *http.Request, status int, detail string) { w.WriteHeader(status) }
	go s.Serve(m.ln)
	return m
}

// run serves in on a new connection and returns the outcome of its
// first request.
func (m *memServer) run(t *testing.T, in []byte) outcome {
	m.mu.Lock()
	m.seen = nil
	m.mu.Unlock()
	c := &memConn{in: bytes.NewReader(in), closed: make(chan struct{})}
	m.ln.conns <- c
	select {
	case <-c.closed:
	case <-time.After(10 * time.Second):
		t.Fatalf("input %q: the connection is still open", in)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var o outcome
	if m.seen != nil {
		o = *m.seen
		if o.via == "http1" {
			o.header.Del("Host") // net/http keeps it in r.Host only
			if len(o.header) == 0 {
				o.header = http.Header{}
			}
		}
	}
	br := bufio.NewReader(bytes.NewReader(c.out.Bytes()))
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			break
		}
		if resp.StatusCode >= 200 {
			o.status = resp.StatusCode
			break
		}
	}
	return o
}

// memConn is a connection whose client sent in and then closed its side.
type memConn struct {
	in     *bytes.Reader
	mu     sync.Mutex
	out    bytes.Buffer
	once   sync.Once
	closed chan struct{}
}

func (c *memConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.in.Read(p)
}

func (c *memConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.Write(p)
}

func (c *memConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

func (c *memConn) LocalAddr() net.Addr                { return memAddr{} }
func (c *memConn) RemoteAddr() net.Addr               { return memAddr{} }
func (c *memConn) SetDeadline(t time.Time) error      { return nil }
func (c *memConn) SetReadDeadline(t time.Time) error  { return nil }
func (c *memConn) SetWriteDeadline(t time.Time) error { return nil }

type memAddr struct{}

func (memAddr) Network() string { return "mem" }
func (memAddr) String() string  { return "mem" }

type memListener struct{ conns chan net.Conn }

func (l *memListener) Accept() (net.Conn, error) { return <-l.conns, nil }
func (l *memListener) Close() error              { return nil }
func (l *memListener) Addr() net.Addr            { return memAddr{} }

// differentialSeeds are the requests of this package's tests.
var differentialSeeds = []string{
	"GET /db/t/a HTTP/1.1\r\nHost: x\r\n\r\n",
	"PUT /db/t/b HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Type: application/json\r\n\r\nhello",
	"DELETE /db/t/c?x=1 HTTP/1.1\r\nHost: x\r\n\r\n",
	"POST /db/b HTTP/1.1\r\nHost: x\r\nTE: trailers\r\nContent-Length: 3\r\n\r\nabc",
	"PUT /db/a HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n",
	"POST /db/a HTTP/1.1\r\nHost: x\r\nTrailer: X\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\nX: y\r\n\r\n",
	"PUT /db/a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n\r\n1\r\na\r\n0\r\n\r\n",
	"PUT /db/a HTTP/1.1\r\nHost: x\r\nExpect: something\r\nContent-Length: 1\r\n\r\na",
	"GET /db/a HTTP/1.1\nHost: x\n\n",
	"GET /db/a HTTP/1.1\r\nHost: x\r\nX: a\r\n b\r\n\r\n",
	"GET /db/a HTTP/1.1\r\n\r\n",
	"GET /db/a HTTP/1.1\r\nHost : x\r\n\r\n",
	"GET /db/a HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
	"GET /db/a HTTP/1.1\r\nHost: a\"b\r\n\r\n",
	"PUT /db/a HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
	"PUT /db/a HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\na",
	"GET /db/%zz HTTP/1.1\r\nHost: x\r\n\r\n",
	"GET /db/a HTTP/1.1\r\nHost: x\r\nX: a\x01b\r\n\r\n",
	"GET /db/\x00 HTTP/1.1\r\nHost: x\r\n\r\n",
	"HELLO\r\nHost: x\r\n\r\n",
	"POST /db/a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n",
	"GET /db/a HTTP/1.1\r\nHost: x\r\nX\x7fY: 1\r\n\r\n",
	"GET /db/a HTTP/2.0\r\nHost: x\r\n\r\n",
	"POST /db/b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\n\r\nA;name=value\r\n0123456789\r\n1 \r\nx\r\n00\r\nX-Sum: 1\r\nY: 2\r\n\r\n",
	"POST /db/a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
	"POST /db/a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\n0\n\n",
	"POST /db/a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1 0\r\n0123456789abcdef\r\n0\r\n\r\n",
	"PUT /db/a HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi",
	"PUT /db/a HTTP/1.0\r\nConnection: Keep-Alive\r\nContent-Length: 5\r\n\r\nhello",
	"GET /db/t/a?x=1 HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n",
	"PATCH /db/t/c HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}GET /db/t/d HTTP/1.1\r\nHost: x\r\n\r\n",
	"PUT /db/a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nab",
}
