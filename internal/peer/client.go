package peer

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"time"
)

// Client calls other nodes' peer HTTP servers. It is safe for concurrent
// use and keeps connections alive between calls.
type Client struct {
	http   *http.Client
	scheme string
}

// NewClient returns a client that dials peers in plaintext, or, with
// dialTLS (which presents this process's node certificate, as
// certs.Loader.DialTLS does), over TLS. dialTLS must not offer ALPN "h2":
// that is the Raft transport's protocol on a peer port, and the Mux
// hands a connection without ALPN, or with "http/1.1", to HTTP.
func NewClient(dialTLS func(ctx context.Context, network, addr string) (net.Conn, error)) *Client {
	tr := &http.Transport{
		MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second,
		DialContext:    (&net.Dialer{Timeout: time.Second}).DialContext,
		DialTLSContext: dialTLS,
		// Never HTTP/2 on a peer port.
		TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{},
	}
	c := &Client{http: &http.Client{Transport: tr}, scheme: "http"}
	if dialTLS != nil {
		c.scheme = "https"
	}
	return c
}

// URL is the URL of requestURI (an escaped path, with its query) on the
// peer listener at addr (host:port).
func (c *Client) URL(addr, requestURI string) string {
	return c.scheme + "://" + addr + requestURI
}

// Do sends req, as http.Client.Do does.
func (c *Client) Do(req *http.Request) (*http.Response, error) { return c.http.Do(req) }
