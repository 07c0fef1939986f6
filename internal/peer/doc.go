// Package peer is the node-to-node listener and client: one port per node
// (membership.Node.GRPC, published in etcd) carries both the Raft
// transport, gRPC over HTTP/2, and the peer HTTP API, HTTP/1.1 served by
// internal/http1: the node-only routes (/_internal/*) and the API requests
// another node or a router forwards.
//
// A Mux owns the port's listener and hands each accepted connection to one
// of two listeners, GRPC and HTTP, the servers of either side accept from.
// It decides per connection, on its own goroutine and within
// Config.HandshakeTimeout, so a slow or silent peer never holds up the
// others:
//
//   - plaintext (Config.TLS nil): a connection whose first bytes are the
//     HTTP/2 client preface goes to GRPC, any other to HTTP, with the bytes
//     read to decide replayed;
//   - TLS: after the handshake, by the protocol ALPN chose: "h2" to GRPC,
//     anything else ("http/1.1", or none) to HTTP. The gRPC server then
//     runs without transport credentials of its own: the Mux terminates
//     TLS for both.
//
// A Client calls other nodes' peer HTTP servers, over TLS with ALPN
// "http/1.1" when it has a TLS configuration.
//
// The caller's duties: the peer HTTP server honours HeaderCaller (see
// CallerFrom), the REST listener never does; a node that forwards a
// request sets it from the caller the request already carries
// (SetCaller), so a forward never widens anyone's rights.
package peer
