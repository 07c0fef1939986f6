package http1

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// viaBoth names a request of each path: the same request served here,
// and with a TE field, which makes it fall back to net/http.
var viaBoth = map[string]string{"http1": "", "net/http": "TE: trailers\r\n"}

// TestStalledBodyHitsTheReadTimeout: a client that sends a header and
// then stops sending the body it declared fails the handler's read after
// ReadTimeout, on either path.
func TestStalledBodyHitsTheReadTimeout(t *testing.T) {
	type result struct {
		via string
		err error
	}
	got := make(chan result, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		got <- result{via(r), err}
	})
	addr, _ := start(t, h, func(s *Server) { s.ReadTimeout = 300 * time.Millisecond })
	for path, field := range viaBoth {
		t.Run(path, func(t *testing.T) {
			c := dial(t, addr)
			io.WriteString(c, "PUT /db/a HTTP/1.1\r\nHost: x\r\n"+field+"Content-Length: 10\r\n\r\nabc")
			select {
			case r := <-got:
				var ne net.Error
				if r.via != path || !errors.As(r.err, &ne) || !ne.Timeout() {
					t.Errorf("%s's handler read the body: %v; want %s's read to time out", r.via, r.err, path)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the handler still waits for the body")
			}
		})
	}
}

// TestAnswerNeverReadHitsTheWriteTimeout: a client that never reads a
// large answer fails the handler's writes after WriteTimeout, on either
// path.
func TestAnswerNeverReadHitsTheWriteTimeout(t *testing.T) {
	type result struct {
		via string
		err error
	}
	got := make(chan result, 1)
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var err error
		for i := 0; i < 1024 && err == nil; i++ {
			_, err = w.Write(chunk)
		}
		got <- result{via(r), err}
	})
	addr, _ := start(t, h, func(s *Server) { s.WriteTimeout = 300 * time.Millisecond })
	for path, field := range viaBoth {
		t.Run(path, func(t *testing.T) {
			c := dial(t, addr)
			io.WriteString(c, "GET /db/big HTTP/1.1\r\nHost: x\r\n"+field+"\r\n")
			select {
			case r := <-got:
				if r.via != path || r.err == nil {
					t.Errorf("%s's handler wrote the answer: %v; want %s's write to fail", r.via, r.err, path)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the handler still writes to a client that does not read")
			}
		})
	}
}
