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
// StreamAfter bytes or flushes). A request's context ends when its
// handler returns or its client disconnects, as under net/http; the
// background read that notices a disconnect starts only when something
// waits on the context's Done. A body must arrive within ReadTimeout and
// an answer leave within WriteTimeout of the header's end. What net/http
// spends per request beyond that, and this server does not, is the
// background read for a handler that never waits, the header snapshot at
// WriteHeader, and a bufio reader and writer per request.
//
// A request that is not plain is judged as net/http would judge it (see
// BadRequest): one net/http would refuse is refused here, when BadRequest
// is set; otherwise its connection goes to net/http (Fallback), bytes
// already read included, which answers it and closes the connection.
//
// With TLSConfig the server completes each connection's handshake first:
// HTTP/2 connections (ALPN) go to a net/http HTTP/2 server, the others
// are served as above, every request carrying r.TLS. A client of the
// other protocol (plain HTTP at a TLS port, TLS at a plain port) gets a
// 400 at once rather than a connection left waiting.
package http1
