package http1

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// via names who served a request: net/http puts its server in the
// request's context, this server does not.
func via(r *http.Request) string {
	if r.Context().Value(http.ServerContextKey) != nil {
		return "net/http"
	}
	return "http1"
}

// start serves h on a loopback listener and returns its address.
func start(t *testing.T, h http.Handler, tune func(*Server)) (string, *Server) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(h, nil)
	if tune != nil {
		tune(s)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; err != ErrServerClosed {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	return ln.Addr().String(), s
}

// echo answers "<server> <method> <path> <body>".
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "text/plain")
	fmt.Fprintf(w, "%s %s %s %s", via(r), r.Method, r.URL.Path, b)
})

// dial connects to addr; the connection closes at the test's end.
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// exchange writes raw on a new connection and reads n answers.
func exchange(t *testing.T, addr, raw string, n int) ([]*http.Response, []string, net.Conn) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	var resps []*http.Response
	var bodies []string
	for i := 0; i < n; i++ {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		if resp.StatusCode == http.StatusContinue {
			i--
			continue
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("answer %d body: %v", i, err)
		}
		resps = append(resps, resp)
		bodies = append(bodies, string(b))
	}
	return resps, bodies, c
}

func TestPlainRequestsAreServedHereOnOneConnection(t *testing.T) {
	addr, _ := start(t, echo, nil)
	raw := "GET /db/t/a HTTP/1.1\r\nHost: x\r\n\r\n" +
		"PUT /db/t/b HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Type: application/json\r\n\r\nhello" +
		"DELETE /db/t/c?x=1 HTTP/1.1\r\nHost: x\r\n\r\n"
	resps, bodies, _ := exchange(t, addr, raw, 3)
	want := []string{"http1 GET /db/t/a ", "http1 PUT /db/t/b hello", "http1 DELETE /db/t/c "}
	for i, w := range want {
		if bodies[i] != w {
			t.Errorf("answer %d = %q, want %q", i, bodies[i], w)
		}
		if resps[i].StatusCode != 200 || resps[i].ContentLength != int64(len(w)) || resps[i].Header.Get("Date") == "" {
			t.Errorf("answer %d: status %d, length %d, Date %q", i, resps[i].StatusCode, resps[i].ContentLength, resps[i].Header.Get("Date"))
		}
	}
}

// TestUnusualRequestsGoToNetHTTPWhichClosesTheirConnection: a request
// that is not plain is answered by net/http, which then closes the
// connection (what the client sent after it is not read), so the
// client's next request comes here again.
func TestUnusualRequestsGoToNetHTTPWhichClosesTheirConnection(t *testing.T) {
	addr, _ := start(t, echo, func(s *Server) {
		s.FallbackFor = func(target []byte) bool { return bytes.HasPrefix(target, []byte("/_stream/")) }
	})
	for name, tc := range map[string]struct {
		raw  string
		want []string
	}{
		"TE after a plain request": {
			"GET /db/a HTTP/1.1\r\nHost: x\r\n\r\n" +
				"POST /db/b HTTP/1.1\r\nHost: x\r\nTE: trailers\r\nContent-Length: 3\r\n\r\nabc" +
				"GET /db/c HTTP/1.1\r\nHost: x\r\n\r\n",
			[]string{"http1 GET /db/a ", "net/http POST /db/b abc"},
		},
		"a fallback route of the server": {
			"GET /_cluster HTTP/1.1\r\nHost: x\r\n\r\nGET /_stream/a HTTP/1.1\r\nHost: x\r\n\r\nGET /db/a HTTP/1.1\r\nHost: x\r\n\r\n",
			[]string{"http1 GET /_cluster ", "net/http GET /_stream/a "},
		},
		"HTTP/1.0 chunked":     {"PUT /db/a HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n", []string{"net/http PUT /db/a "}}, // 1.0 has no chunked coding: net/http reads no body
		"Trailer":              {"POST /db/a HTTP/1.1\r\nHost: x\r\nTrailer: X\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\nX: y\r\n\r\n", []string{"net/http POST /db/a hi"}},
		"chunked and a length": {"PUT /db/a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n\r\n1\r\na\r\n0\r\n\r\n", []string{"net/http PUT /db/a a"}},
		"chunked twice":        {"PUT /db/a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\n\r\n", []string{"Unsupported transfer encoding"}}, // net/http's 501
		"Expect another":       {"PUT /db/a HTTP/1.1\r\nHost: x\r\nExpect: something\r\nContent-Length: 1\r\n\r\na", []string{""}},                                                                  // net/http's 417
		"OPTIONS":              {"OPTIONS /db/a HTTP/1.1\r\nHost: x\r\n\r\n", []string{"net/http OPTIONS /db/a "}},
		"bare LF":              {"GET /db/a HTTP/1.1\nHost: x\n\n", []string{"net/http GET /db/a "}},
		"folded":               {"GET /db/a HTTP/1.1\r\nHost: x\r\nX: a\r\n b\r\n\r\n", []string{"net/http GET /db/a "}},
	} {
		t.Run(name, func(t *testing.T) {
			resps, bodies, c := exchange(t, addr, tc.raw, len(tc.want))
			for i, w := range tc.want {
				if bodies[i] != w {
					t.Errorf("answer %d = %q, want %q", i, bodies[i], w)
				}
			}
			if last := resps[len(resps)-1]; !last.Close {
				t.Error("net/http's answer does not say Connection: close")
			}
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if n, err := c.Read(make([]byte, 1)); err != io.EOF {
				t.Errorf("after net/http's answer: read %d, %v; want the connection closed", n, err)
			}
			if _, bodies, _ := exchange(t, addr, "GET /db/next HTTP/1.1\r\nHost: x\r\n\r\n", 1); bodies[0] != "http1 GET /db/next " {
				t.Errorf("the next connection's request: %q", bodies[0])
			}
		})
	}
}

func TestBodyArrivingInPiecesAndBodiesLeftUnread(t *testing.T) {
	ignore := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/read" {
			echo(w, r)
			return
		}
		w.WriteHeader(http.StatusNoContent) // the body is left unread
	})
	addr, _ := start(t, ignore, nil)
	c := dial(t, addr)
	io.WriteString(c, "POST /read HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhel")
	time.Sleep(50 * time.Millisecond)
	io.WriteString(c, "lo worl")
	io.WriteString(c, "dPOST /skip HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabcGET /read HTTP/1.1\r\nHost: x\r\n\r\n")
	resps := readBodies(t, c, "http1 POST /read hello world", "", "http1 GET /read ")
	if resps[1].StatusCode != 204 || resps[1].Header.Get("Content-Length") != "" {
		t.Errorf("204: status %d, Content-Length %q", resps[1].StatusCode, resps[1].Header.Get("Content-Length"))
	}
}

// readBodies reads one answer per want from c and checks each body.
func readBodies(t *testing.T, c net.Conn, want ...string) []*http.Response {
	t.Helper()
	br := bufio.NewReader(c)
	var resps []*http.Response
	for i, w := range want {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if string(b) != w {
			t.Errorf("answer %d = %q, want %q", i, b, w)
		}
		resps = append(resps, resp)
	}
	return resps
}

func TestConnectionCloseIsHonoured(t *testing.T) {
	addr, _ := start(t, echo, nil)
	resps, _, c := exchange(t, addr, "GET /db/a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 1)
	if !resps[0].Close {
		t.Error("answer lacks Connection: close")
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("read after the answer: %d, %v; want EOF", n, err)
	}

	closing := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		io.WriteString(w, "bye")
	})
	addr, _ = start(t, closing, nil)
	resps, _, c = exchange(t, addr, "GET /db/a HTTP/1.1\r\nHost: x\r\n\r\n", 1)
	if !resps[0].Close {
		t.Error("handler's Connection: close not sent")
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("connection open after a handler's Connection: close: %v", err)
	}
}

func TestAnswerShapes(t *testing.T) {
	big := strings.Repeat("x", 3000)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/sniff":
			io.WriteString(w, "<html><body>hi</body></html>")
		case "/stream":
			for i := 0; i < 10; i++ {
				io.WriteString(w, big)
			}
		case "/stream-length":
			w.Header().Set("Content-Length", fmt.Sprint(10*len(big)))
			for i := 0; i < 10; i++ {
				io.WriteString(w, big)
			}
		case "/flush":
			io.WriteString(w, "a")
			w.(http.Flusher).Flush()
			io.WriteString(w, "b")
		case "/split":
			w.Header().Set("X-Evil", "a\r\nSet-Cookie: x=1")
			w.WriteHeader(http.StatusCreated)
		case "/not-modified":
			w.WriteHeader(http.StatusNotModified)
		}
	})
	addr, _ := start(t, h, func(s *Server) { s.StreamAfter = 4096 })
	raw := "GET /sniff HTTP/1.1\r\nHost: x\r\n\r\n" +
		"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n" +
		"GET /stream-length HTTP/1.1\r\nHost: x\r\n\r\n" +
		"GET /flush HTTP/1.1\r\nHost: x\r\n\r\n" +
		"GET /split HTTP/1.1\r\nHost: x\r\n\r\n" +
		"GET /not-modified HTTP/1.1\r\nHost: x\r\n\r\n" +
		"HEAD /sniff HTTP/1.1\r\nHost: x\r\n\r\n" +
		"GET /sniff HTTP/1.1\r\nHost: x\r\n\r\n"
	c := dial(t, addr)
	io.WriteString(c, raw)
	br := bufio.NewReader(c)
	read := func(method string) (*http.Response, string) {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(b)
	}
	if resp, b := read("GET"); resp.Header.Get("Content-Type") != "text/html; charset=utf-8" || b != "<html><body>hi</body></html>" {
		t.Errorf("sniffed: %q %q", resp.Header.Get("Content-Type"), b)
	}
	if resp, b := read("GET"); len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" || b != strings.Repeat(big, 10) {
		t.Errorf("streamed: encoding %v, %d bytes", resp.TransferEncoding, len(b))
	}
	if resp, b := read("GET"); resp.ContentLength != int64(10*len(big)) || len(resp.TransferEncoding) != 0 || b != strings.Repeat(big, 10) {
		t.Errorf("streamed with a length: length %d, encoding %v, %d bytes", resp.ContentLength, resp.TransferEncoding, len(b))
	}
	if resp, b := read("GET"); b != "ab" || len(resp.TransferEncoding) != 1 {
		t.Errorf("flushed: %q, encoding %v", b, resp.TransferEncoding)
	}
	if resp, _ := read("GET"); resp.StatusCode != 201 || resp.Header.Get("Set-Cookie") != "" || resp.Header.Get("X-Evil") != "a  Set-Cookie: x=1" {
		t.Errorf("a line break in a value split the answer: %d %v", resp.StatusCode, resp.Header)
	}
	if resp, b := read("GET"); resp.StatusCode != 304 || b != "" || resp.Header.Get("Content-Length") != "" {
		t.Errorf("304: %d %q %q", resp.StatusCode, b, resp.Header.Get("Content-Length"))
	}
	if resp, b := read("HEAD"); resp.ContentLength != int64(len("<html><body>hi</body></html>")) || b != "" {
		t.Errorf("HEAD: length %d, body %q", resp.ContentLength, b)
	}
	if _, b := read("GET"); b != "<html><body>hi</body></html>" {
		t.Errorf("after HEAD: %q (a HEAD answer's body was sent)", b)
	}
}

func TestSlowHeaderIsCutAfterTheTimeout(t *testing.T) {
	addr, _ := start(t, echo, func(s *Server) { s.ReadHeaderTimeout = 300 * time.Millisecond })
	c := dial(t, addr)
	io.WriteString(c, "GET /db/a HTTP/1.1\r\nHo")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("a header left unfinished: %v, want the connection closed", err)
	}
}

func TestShutdownClosesIdleConnectionsAndWaitsForRequestsUnderWay(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	var answered atomic.Bool
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(entered)
			<-release
			answered.Store(true)
		}
		io.WriteString(w, "ok")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(h, nil)
	go s.Serve(ln)
	addr := ln.Addr().String()
	_, _, idle := exchange(t, addr, "GET /db/a HTTP/1.1\r\nHost: x\r\n\r\n", 1)
	busy, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	io.WriteString(busy, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	<-entered
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	time.Sleep(100 * time.Millisecond)
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with a request under way", err)
	default:
	}
	// The idle connection is closed at once; the busy one is not.
	idle.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := idle.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("idle connection during Shutdown: %v, want it closed", err)
	}
	close(release)
	busy.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(busy), nil)
	if err != nil || !answered.Load() || !resp.Close {
		t.Fatalf("request under way: %v, answered %v, close %v", err, answered.Load(), resp != nil && resp.Close)
	}
	select {
	case err := <-shut:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown did not return after the last request")
	}
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Error("still accepting after Shutdown")
	}
}

// TestShutdownWhileServeStarts shuts servers down while their Serve is
// starting: Serve answers ErrServerClosed and closes its listener, and no
// fallback server is left serving (the race detector watches the fallback
// listener, which Serve creates and Shutdown reads).
func TestShutdownWhileServeStarts(t *testing.T) {
	for i := 0; i < 50; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s := New(http.NotFoundHandler(), nil)
		served := make(chan error, 1)
		go func() { served <- s.Serve(ln) }()
		if err := s.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-served:
			if !errors.Is(err, ErrServerClosed) {
				t.Fatalf("Serve after Shutdown: %v, want ErrServerClosed", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Serve still running after Shutdown")
		}
		if c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
			c.Close()
			t.Fatal("listener still accepting after Shutdown")
		}
		if s.fallbackStarted() {
			select {
			case <-s.fallbackLn.done:
			case <-time.After(5 * time.Second):
				t.Fatal("fallback listener still open after Shutdown")
			}
		}
	}
}

// TestMangledRequestsNeverPanic sends thousands of mangled requests, each
// on its own connection, and checks that the server logs no panic, that
// whatever comes back parses as HTTP answers, and that it still serves.
func TestMangledRequestsNeverPanic(t *testing.T) {
	var logged strings.Builder
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logged.Write(p)
	}), nil))
	addr, _ := start(t, echo, func(s *Server) { s.Logger = logger; s.Fallback.ErrorLog = log.New(io.Discard, "", 0) })
	valid := []string{
		"GET /db/t/a?x=1 HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n",
		"PUT /db/t/b HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\nhello",
		"PATCH /db/t/c HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}GET /db/t/d HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /db/t/e HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n0\r\nT: 1\r\n\r\nGET /db/t/f HTTP/1.1\r\nHost: x\r\n\r\n",
		"PUT /db/t/g HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi",
	}
	rng := rand.New(rand.NewPCG(20261124, 1))
	for i := 0; i < 2000; i++ {
		b := []byte(valid[rng.IntN(len(valid))])
		for m := rng.IntN(4) + 1; m > 0; m-- {
			switch p := rng.IntN(len(b) + 1); rng.IntN(4) {
			case 0: // flip a byte
				if p < len(b) {
					b[p] = byte(rng.IntN(256))
				}
			case 1: // delete a byte
				if p < len(b) {
					b = append(b[:p], b[p+1:]...)
				}
			case 2: // insert a separator
				b = append(b[:p], append([]byte{"\r\n :\x00/%"[rng.IntN(7)]}, b[p:]...)...)
			case 3: // cut
				b = b[:p]
			}
		}
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Write(b)
		c.(*net.TCPConn).CloseWrite()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		br := bufio.NewReader(c)
		for {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				if err != io.EOF && !errors.Is(err, io.ErrUnexpectedEOF) && !isReset(err) {
					t.Fatalf("input %q: answer does not parse: %v", b, err)
				}
				break
			}
			io.Copy(io.Discard, resp.Body)
		}
		c.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Contains(logged.String(), "panic") {
		t.Fatalf("server logged a panic:\n%s", logged.String())
	}
	_, bodies, _ := exchange(t, addr, valid[0], 1)
	if bodies[0] != "http1 GET /db/t/a " {
		t.Fatalf("after the mangled inputs: %q", bodies[0])
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET)
}

// netHTTP serves h with net/http alone, with http1's header limit.
func netHTTP(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &http.Server{Handler: h, MaxHeaderBytes: 64 << 10}
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return ln.Addr().String()
}

// refusing answers what BadRequest is given, so a test sees who refused
// a request and why.
func refusing(s *Server) {
	s.BadRequest = func(w http.ResponseWriter, r *http.Request, status int, detail string) {
		w.WriteHeader(status)
		fmt.Fprintf(w, "%s refused %s %s: %s", via(r), r.Method, r.URL.Path, detail)
	}
}

func TestBadTargetIsAnsweredHereWhenTheServerSaysHow(t *testing.T) {
	addr, _ := start(t, echo, refusing)
	resps, bodies, _ := exchange(t, addr, "PUT /db/%zz HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabcGET /db/a HTTP/1.1\r\nHost: x\r\n\r\n", 2)
	if want := `http1 refused PUT /db/%zz: request target is not a valid URI: invalid URL escape "%zz"`; resps[0].StatusCode != 400 || bodies[0] != want {
		t.Errorf("bad target: %d %q, want 400 %q", resps[0].StatusCode, bodies[0], want)
	}
	if bodies[1] != "http1 GET /db/a " {
		t.Errorf("the request after it: %q", bodies[1])
	}
}

// readBody answers "<server> <method> <path> <body>" like echo, or 400
// with the error when the body cannot be read whole.
var readBody = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/skip" {
		w.WriteHeader(http.StatusNoContent) // the body is left unread
		return
	}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	fmt.Fprintf(w, "%s %s %s %s %d %q", via(r), r.Method, r.URL.Path, b, r.ContentLength, r.TransferEncoding)
})

// TestChunkedBodiesAreServedHere: chunked request bodies (several chunks,
// extensions, hexadecimal in either case, trailer fields) are read here,
// and the connection stays here for the requests after them; bodies left
// unread are skipped.
func TestChunkedBodiesAreServedHere(t *testing.T) {
	addr, _ := start(t, readBody, nil)
	raw := "POST /db/a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n" +
		"POST /db/b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\n\r\nA;name=value\r\n0123456789\r\n1 \r\nx\r\n00\r\nX-Sum: 1\r\nY: 2\r\n\r\n" +
		"POST /skip HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\nf\r\n0123456789abcde\r\n0\r\n\r\n" +
		"PUT /db/c HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok"
	resps, bodies, _ := exchange(t, addr, raw, 4)
	want := []string{
		`http1 POST /db/a abc -1 ["chunked"]`,
		`http1 POST /db/b 0123456789x -1 ["chunked"]`,
		``,
		`http1 PUT /db/c ok 2 []`,
	}
	for i, w := range want {
		if bodies[i] != w {
			t.Errorf("answer %d = %q, want %q", i, bodies[i], w)
		}
	}
	if resps[2].StatusCode != 204 {
		t.Errorf("unread body: status %d, want 204", resps[2].StatusCode)
	}
}

// TestChunkedBodyArrivingInPieces: a chunked body split inside its size
// lines, data and trailer is read whole.
func TestChunkedBodyArrivingInPieces(t *testing.T) {
	addr, _ := start(t, readBody, nil)
	c := dial(t, addr)
	for _, piece := range []string{
		"POST /db/a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1", "0\r\n0123456", "789abcdef\r", "\n2;e", "xt\r\nhi\r\n0\r", "\nT: 1", "\r\n\r\n",
		"GET /db/b HTTP/1.1\r\nHost: x\r\n\r\n",
	} {
		io.WriteString(c, piece)
		time.Sleep(20 * time.Millisecond)
	}
	readBodies(t, c, `http1 POST /db/a 0123456789abcdefhi -1 ["chunked"]`, `http1 GET /db/b  0 []`)
}

// TestMalformedChunkedBodiesAreRefusedAndEndTheConnection: the handler's
// read fails, its answer goes out, and the connection closes (what
// follows the body cannot be found).
func TestMalformedChunkedBodiesAreRefusedAndEndTheConnection(t *testing.T) {
	addr, _ := start(t, readBody, nil)
	head := "POST /db/a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
	next := "GET /db/b HTTP/1.1\r\nHost: x\r\n\r\n"
	for name, body := range map[string]string{
		"not hexadecimal":              "zz\r\nabc\r\n0\r\n\r\n",
		"no size":                      "\r\nabc\r\n0\r\n\r\n",
		"size too long":                "1000000000000000\r\nabc\r\n0\r\n\r\n",
		"data overruns":                "3\r\nabcd\r\n0\r\n\r\n",
		"bare LF":                      "3\nabc\n0\n\n",
		"size line too long":           "3;" + strings.Repeat("e", 5000) + "\r\nabc\r\n0\r\n\r\n",
		"trailer too long":             "3\r\nabc\r\n0\r\n" + strings.Repeat("X: y\r\n", 20000) + "\r\n",
		"negative size":                "-3\r\nabc\r\n0\r\n\r\n",
		"space inside the size":        "1 0\r\n0123456789abcdef\r\n0\r\n\r\n",
		"CR inside the size line":      "3;\r\r\nabc\r\n0\r\n\r\n",
		"trailer line without a colon": "3\r\nabc\r\n0\r\n0\r\n\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			resps, bodies, c := exchange(t, addr, head+body+next, 1)
			if resps[0].StatusCode != http.StatusBadRequest || !strings.Contains(bodies[0], "malformed chunked") {
				t.Errorf("answer %d %q, want 400 for a malformed chunked body", resps[0].StatusCode, bodies[0])
			}
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if n, err := c.Read(make([]byte, 1)); n != 0 || (err != io.EOF && !isReset(err)) {
				t.Errorf("after the answer: read %d bytes, %v; want the connection closed", n, err)
			}
		})
	}
	t.Run("cut short", func(t *testing.T) {
		c := dial(t, addr)
		io.WriteString(c, head+"5\r\nab")
		c.(*net.TCPConn).CloseWrite()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 400 || !strings.Contains(string(b), io.ErrUnexpectedEOF.Error()) {
			t.Errorf("answer %d %q, want 400 for an unexpected EOF", resp.StatusCode, b)
		}
	})
}

// TestExpectContinue: the interim 100 Continue is sent when the handler
// first reads the body, and only then; a handler that answers without
// reading gets no 100, and the connection closes after its answer.
func TestExpectContinue(t *testing.T) {
	addr, _ := start(t, readBody, nil)
	for _, framing := range []string{"Content-Length: 2", "Transfer-Encoding: chunked"} {
		body := "hi"
		if strings.HasPrefix(framing, "Transfer") {
			body = "2\r\nhi\r\n0\r\n\r\n"
		}
		t.Run(framing, func(t *testing.T) {
			c := dial(t, addr)
			br := bufio.NewReader(c)
			fmt.Fprintf(c, "PUT /db/a HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n%s\r\n\r\n", framing)
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			resp, err := http.ReadResponse(br, nil)
			if err != nil || resp.StatusCode != http.StatusContinue {
				t.Fatalf("before the body: %v, %v; want 100 Continue", resp, err)
			}
			io.WriteString(c, body)
			if resp, err = http.ReadResponse(br, nil); err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			if !strings.HasPrefix(string(b), "http1 PUT /db/a hi ") || resp.Close {
				t.Errorf("answer %q (close %v), want http1's echo of the body, connection kept", b, resp.Close)
			}
		})
	}
	t.Run("body never read", func(t *testing.T) {
		c := dial(t, addr)
		io.WriteString(c, "PUT /skip HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusNoContent || !resp.Close {
			t.Errorf("answer %d (close %v), want 204 with Connection: close and no 100 before it", resp.StatusCode, resp.Close)
		}
		if n, err := br.Read(make([]byte, 1)); n != 0 || (err != io.EOF && !isReset(err)) {
			t.Errorf("after the answer: read %d bytes, %v; want the connection closed", n, err)
		}
	})
}

// TestHTTP10IsServedHereAsNetHTTPWould: HTTP/1.0 requests are served here,
// answered as net/http answers them (the same input goes to a net/http
// server): an HTTP/1.0 status line; the connection kept only when the
// client asks with Connection: keep-alive, which the answer repeats; no
// Host needed; an answer streamed without a length is not chunked (1.0
// has no chunked coding) but ends with the connection.
func TestHTTP10IsServedHereAsNetHTTPWould(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Via", via(r))
		if r.URL.Path == "/big" {
			for range 40 {
				w.Write(bytes.Repeat([]byte("x"), 10<<10))
			}
			return
		}
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.Path, b)
	})
	ours, _ := start(t, h, func(s *Server) { s.StreamAfter = 64 << 10 })
	theirs := netHTTP(t, h)
	type answer struct {
		proto, connection, transferEncoding string
		contentLength                       int64
		body                                string
		open                                bool // the connection serves a next request
	}
	ask := func(addr, raw string) answer {
		c := dial(t, addr)
		io.WriteString(c, raw+"GET /next HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		br := bufio.NewReader(c)
		method, _, _ := strings.Cut(raw, " ")
		r, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Fatalf("%q: body: %v", raw, err)
		}
		if via := r.Header.Get("X-Via"); (addr == ours) != (via == "http1") {
			t.Errorf("%q was answered by %s", raw, via)
		}
		a := answer{proto: r.Proto, connection: r.Header.Get("Connection"), transferEncoding: strings.Join(r.TransferEncoding, ","),
			contentLength: r.ContentLength, body: string(b)}
		if next, err := http.ReadResponse(br, nil); err == nil {
			b, _ := io.ReadAll(next.Body)
			a.open = string(b) == "GET /next "
		}
		return a
	}
	for _, raw := range []string{
		"GET /db/a HTTP/1.0\r\n\r\n",
		"GET /db/a HTTP/1.0\r\nHost: x\r\n\r\n",
		"GET /db/a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
		"PUT /db/a HTTP/1.0\r\nConnection: Keep-Alive\r\nContent-Length: 5\r\n\r\nhello",
		"DELETE /db/a HTTP/1.0\r\nConnection: close\r\n\r\n",
		"HEAD /db/a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
		"GET /big HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
		"GET /big HTTP/1.0\r\n\r\n",
	} {
		want, got := ask(theirs, raw), ask(ours, raw)
		if want.body != got.body {
			t.Errorf("%q: body of %d bytes here, %d from net/http", raw, len(got.body), len(want.body))
		}
		got.body, want.body = "", ""
		if got != want {
			t.Errorf("%q:\n here     %+v\n net/http %+v", raw, got, want)
		}
	}
}

// TestInvalidResponseHeaderNamesAreDroppedAsNetHTTPDrops: a field whose
// name is not a token (a space, a colon, a line break, empty) is left out
// of the answer on both paths; the valid fields around it are sent.
func TestInvalidResponseHeaderNamesAreDroppedAsNetHTTPDrops(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, k := range []string{"Bad Name", "X:Y", "X\r\nSet-Cookie", "", "Ã"} {
			w.Header()[k] = []string{"1"}
		}
		w.Header().Set("X-Ok", "yes")
		io.WriteString(w, via(r))
	})
	ours, _ := start(t, h, nil)
	for _, addr := range []string{ours, netHTTP(t, h)} {
		c := dial(t, addr)
		io.WriteString(c, "GET /db/a HTTP/1.1\r\nHost: x\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		br := bufio.NewReader(c)
		var head []string
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if l == "\r\n" {
				break
			}
			head = append(head, l)
		}
		got := strings.Join(head, "")
		for _, bad := range []string{"Bad Name", "X:Y", "Set-Cookie", "\r\n: 1", "Ã"} {
			if strings.Contains(got, bad) {
				t.Errorf("%s: the answer's header holds %q:\n%s", addr, bad, got)
			}
		}
		if !strings.Contains(got, "X-Ok: yes\r\n") {
			t.Errorf("%s: the valid field is missing:\n%s", addr, got)
		}
	}
}

// TestFallbackOnlyServesEveryRequestWithNetHTTP: with the fast path off,
// net/http answers every request, keeping the connection alive, and
// answers a malformed one itself, even with BadRequest set.
func TestFallbackOnlyServesEveryRequestWithNetHTTP(t *testing.T) {
	addr, _ := start(t, echo, func(s *Server) { s.FallbackOnly = true; refusing(s) })
	raw := "GET /db/a HTTP/1.1\r\nHost: x\r\n\r\n" +
		"PUT /db/b HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi" +
		"GET /db/c HTTP/1.1\r\n\r\n"
	resps, bodies, _ := exchange(t, addr, raw, 3)
	want := []string{"net/http GET /db/a ", "net/http PUT /db/b hi", "400 Bad Request: missing required Host header"}
	for i, w := range want {
		if bodies[i] != w {
			t.Errorf("answer %d = %q, want %q", i, bodies[i], w)
		}
	}
	if resps[0].Close || resps[1].Close {
		t.Error("net/http closed a keep-alive connection")
	}
}
