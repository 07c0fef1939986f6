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
