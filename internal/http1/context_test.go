package http1

import (
	"io"
	"net/http"
	"testing"
	"time"
)

// TestDisconnectEndsTheRequestContext: a client that goes away while its
// request is being served ends the request's context, on either path,
// with a body read first or none.
func TestDisconnectEndsTheRequestContext(t *testing.T) {
	type result struct {
		via   string
		ended bool
	}
	entered := make(chan struct{}, 1)
	got := make(chan result, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		entered <- struct{}{}
		select {
		case <-r.Context().Done():
			got <- result{via(r), true}
		case <-time.After(5 * time.Second):
			got <- result{via(r), false}
		}
	})
	addr, _ := start(t, h, nil)
	for path, field := range viaBoth {
		for _, req := range []string{
			"GET /db/a HTTP/1.1\r\nHost: x\r\n" + field + "\r\n",
			"PUT /db/a HTTP/1.1\r\nHost: x\r\n" + field + "Content-Length: 2\r\n\r\nhi",
		} {
			c := dial(t, addr)
			io.WriteString(c, req)
			<-entered
			c.Close()
			if r := <-got; r.via != path || !r.ended {
				t.Errorf("%q: %s's handler saw its context ended: %v; want %s's ended", req, r.via, r.ended, path)
			}
		}
	}
}

// TestRequestContextOutlivesTheNextRequestsArrival: the client's next
// request arriving while a handler waits on its context does not end
// that context, and is served after it.
func TestRequestContextOutlivesTheNextRequestsArrival(t *testing.T) {
	entered := make(chan struct{}, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/wait" {
			io.WriteString(w, "next")
			return
		}
		entered <- struct{}{}
		select {
		case <-r.Context().Done():
			io.WriteString(w, "ended")
		case <-time.After(200 * time.Millisecond):
			io.WriteString(w, "waited")
		}
	})
	addr, _ := start(t, h, nil)
	c := dial(t, addr)
	io.WriteString(c, "GET /wait HTTP/1.1\r\nHost: x\r\n\r\n")
	<-entered
	time.Sleep(20 * time.Millisecond) // the background read is under way
	io.WriteString(c, "GET /db/b HTTP/1.1\r\nHost: x\r\n\r\n")
	readBodies(t, c, "waited", "next")
}

// TestRequestContextEndsWhenTheHandlerReturns, as net/http's does.
func TestRequestContextEndsWhenTheHandlerReturns(t *testing.T) {
	kept := make(chan *http.Request, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Context().Err() != nil {
			t.Errorf("%s: context ended before the handler returned", via(r))
		}
		kept <- r
	})
	addr, _ := start(t, h, nil)
	for path, field := range viaBoth {
		exchange(t, addr, "GET /db/a HTTP/1.1\r\nHost: x\r\n"+field+"\r\n", 1)
		r := <-kept
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
			t.Errorf("%s: the context did not end after the handler returned", path)
		}
	}
}
