package http1

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
)

// serveRequest runs the handler and sends its answer; it reports whether
// the connection can take another request.
func (c *conn) serveRequest(req *http.Request) (keep bool) {
	if c.header == nil {
		c.header = make(http.Header, 8)
	}
	clear(c.header)
	x := &requestContext{c: c}
	if _, ok := req.Body.(*body); !ok {
		x.bodyRead = true
	}
	c.ctx = x
	req = req.WithContext(x)
	w := &c.resp
	*w = response{c: c, req: req, header: c.header, contentLength: -1}
	ended := false
	defer func() {
		if !ended {
			c.endContext(x) // the handler panicked
		}
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				keep = false
				return
			}
			panic(v)
		}
	}()
	_, hasBody := req.Body.(*body)
	c.setDeadlines(hasBody)
	if c.refused.status != 0 {
		c.s.BadRequest(w, req, c.refused.status, c.refused.detail)
	} else {
		c.s.Handler.ServeHTTP(w, req)
	}
	ended = true
	if !c.endContext(x) {
		w.closeAfter = true // the client is gone; its answer is still tried
	}
	if b, ok := req.Body.(*body); ok && b.expect {
		w.closeAfter = true // see body.discard
	}
	usable := w.finish()
	putBuffer(w.body) // an idle connection holds no buffer
	if !usable {
		return false
	}
	if b, ok := req.Body.(*body); ok && !b.discard() {
		return false
	}
	return !w.closeAfter && !c.s.closing.Load()
}

// response is the http.ResponseWriter of a request served here. The
// body is kept in a pooled buffer until the handler returns (then header
// and body leave in one write), flushes, or writes more than StreamAfter
// bytes (then the header leaves and the body follows as written: chunked
// unless the handler set Content-Length).
type response struct {
	c       *conn
	req     *http.Request
	header  http.Header
	status  int
	body    []byte // the body written so far, not yet sent
	sent    bool   // the header has been sent
	chunked bool
	// untilClose: the body sent before the end has no declared length
	// and ends when the connection closes (HTTP/1.0 has no chunked
	// coding).
	untilClose bool
	// contentLength is the handler's Content-Length, or -1.
	contentLength int64
	written       int64 // body bytes written by the handler
	closeAfter    bool
	err           error // a write to the connection failed
}

func (w *response) Header() http.Header { return w.header }

func (w *response) WriteHeader(code int) {
	if w.status != 0 {
		return
	}
	if code < 100 || code > 999 {
		panic("http1: invalid WriteHeader code " + strconv.Itoa(code))
	}
	if code < 200 {
		return // informational answers are not sent
	}
	w.status = code
	if cl := w.header.Get("Content-Length"); cl != "" {
		if v, err := strconv.ParseInt(cl, 10, 64); err == nil && v >= 0 {
			w.contentLength = v
		} else {
			w.header.Del("Content-Length")
		}
	}
}

func (w *response) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !bodyAllowed(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	if w.contentLength >= 0 && w.written+int64(len(p)) > w.contentLength {
		return 0, http.ErrContentLength
	}
	if w.err != nil {
		return 0, w.err
	}
	w.written += int64(len(p))
	if w.req.Method == http.MethodHead {
		return len(p), nil // counted for the Content-Length, not sent
	}
	if w.body == nil {
		w.body = getBuffer()
	}
	w.body = append(w.body, p...)
	if len(w.body) > w.c.s.StreamAfter {
		w.Flush()
		if w.err != nil {
			return 0, w.err
		}
	}
	return len(p), nil
}

// Flush sends the header, if it has not left, and the body written so
// far.
func (w *response) Flush() {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	w.flush(false)
}

// flush sends the header, if it has not left, and the body written so
// far; final is the handler's return. The header sent before the end
// declares a chunked body, unless the handler declared its length; the
// header of a whole answer declares the body's length.
func (w *response) flush(final bool) {
	if w.err != nil {
		return
	}
	out := getBuffer()
	defer func() { putBuffer(out) }()
	if !w.sent {
		streamed := !final && w.contentLength < 0 && bodyAllowed(w.status) && w.req.Method != http.MethodHead
		w.chunked = streamed && w.req.ProtoMinor == 1
		if streamed && !w.chunked {
			w.untilClose, w.closeAfter = true, true
		}
		out = w.appendHeader(out)
		w.sent = true
	}
	if len(w.body) > 0 {
		if w.chunked {
			out = strconv.AppendInt(out, int64(len(w.body)), 16)
			out = append(out, "\r\n"...)
			out = append(out, w.body...)
			out = append(out, "\r\n"...)
		} else {
			out = append(out, w.body...)
		}
		w.body = w.body[:0]
	}
	if final && w.chunked {
		out = append(out, "0\r\n\r\n"...)
	}
	if len(out) > 0 {
		if _, err := w.c.rwc.Write(out); err != nil {
			w.err = err
		}
	}
}

// finish sends what is left of the answer once the handler has returned;
// it reports whether the connection is still usable.
func (w *response) finish() bool {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	streamed := w.sent
	if !streamed && w.contentLength >= 0 && w.written != w.contentLength && w.req.Method != http.MethodHead {
		// A handler that declared a length and wrote another: net/http
		// closes the connection after the short answer.
		w.closeAfter = true
	}
	w.flush(true)
	if streamed && w.contentLength >= 0 && w.written != w.contentLength {
		return false // the client cannot know where the answer ends
	}
	return w.err == nil
}

// appendHeader appends the status line and header fields, dropping those
// whose name is not a token (as net/http does), and adds Date,
// Content-Length (of a whole answer), Content-Type (sniffed, as net/http
// does) and, as net/http does, Connection: close when an HTTP/1.1
// answer closes the connection, Connection: keep-alive when an HTTP/1.0
// one does not.
func (w *response) appendHeader(b []byte) []byte {
	h := w.header
	if hasToken(h.Get("Connection"), "close") || w.req.Close || w.c.s.closing.Load() {
		w.closeAfter = true
	}
	http10 := w.req.ProtoMinor == 0
	if http10 {
		b = append(b, "HTTP/1.0 "...)
	} else {
		b = append(b, "HTTP/1.1 "...)
	}
	b = strconv.AppendInt(b, int64(w.status), 10)
	b = append(b, ' ')
	b = append(b, http.StatusText(w.status)...)
	b = append(b, "\r\n"...)
	for k, vs := range h {
		if k == "Content-Length" && !bodyAllowed(w.status) {
			continue
		}
		if !httpguts.ValidHeaderFieldName(k) {
			continue // dropped, as net/http does: a bad name could split the answer
		}
		for _, v := range vs {
			b = appendField(b, k, v)
		}
	}
	if _, ok := h["Date"]; !ok {
		b = append(b, "Date: "...)
		b = append(b, date()...)
		b = append(b, "\r\n"...)
	}
	if bodyAllowed(w.status) {
		if _, ok := h["Content-Type"]; !ok && w.written > 0 && w.req.Method != http.MethodHead {
			b = appendField(b, "Content-Type", http.DetectContentType(w.body))
		}
		switch {
		case w.chunked:
			b = append(b, "Transfer-Encoding: chunked\r\n"...)
		case w.untilClose:
		case w.contentLength < 0:
			b = append(b, "Content-Length: "...)
			b = strconv.AppendInt(b, w.written, 10)
			b = append(b, "\r\n"...)
		}
	}
	switch {
	case w.closeAfter && !http10 && !hasToken(h.Get("Connection"), "close"):
		b = append(b, "Connection: close\r\n"...)
	case !w.closeAfter && http10 && !hasToken(h.Get("Connection"), "keep-alive"):
		b = append(b, "Connection: keep-alive\r\n"...)
	}
	return append(b, "\r\n"...)
}

// appendField appends "k: v\r\n", a line break in v replaced by a space
// (as net/http does), so no value can split the answer.
func appendField(b []byte, k, v string) []byte {
	b = append(b, k...)
	b = append(b, ": "...)
	if strings.ContainsAny(v, "\r\n") {
		v = strings.NewReplacer("\r", " ", "\n", " ").Replace(v)
	}
	b = append(b, v...)
	return append(b, "\r\n"...)
}

func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}

// date is the Date header's value, formatted at most once a second.
func date() string {
	now := time.Now().Unix()
	if d := cachedDate.Load(); d != nil && d.unix == now {
		return d.text
	}
	d := &dateText{unix: now, text: time.Unix(now, 0).UTC().Format(http.TimeFormat)}
	cachedDate.Store(d)
	return d.text
}

type dateText struct {
	unix int64
	text string
}

var cachedDate atomic.Pointer[dateText]

// buffers hold answers being built, shared by all connections.
var buffers sync.Pool

func getBuffer() []byte {
	if b, ok := buffers.Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return make([]byte, 0, 4096)
}

// putBuffer returns b to the pool, unless it grew past the size of an
// answer sent whole (StreamAfter's default).
func putBuffer(b []byte) {
	if b == nil || cap(b) > 256<<10 {
		return
	}
	buffers.Put(&b)
}
