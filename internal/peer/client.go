package peer

import (
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

// NewClient returns a client that dials peers in plaintext, or with
// tlsCfg (its certificate proves this process is a node of the cluster)
// over TLS, asking ALPN for ProtoHTTP so the peer's Mux hands the
// connection to its HTTP server.
func NewClient(tlsCfg *tls.Config) *Client {
	tr := &http.Transport{
		MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second,
		DialContext: (&net.Dialer{Timeout: time.Second}).DialContext,
		// Never HTTP/2: "h2" is the Raft transport's protocol on this port.
		TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{},
	}
	c := &Client{http: &http.Client{Transport: tr}, scheme: "http"}
	if tlsCfg != nil {
		tr.TLSClientConfig = tlsCfg.Clone()
		tr.TLSClientConfig.NextProtos = []string{ProtoHTTP}
		tr.TLSHandshakeTimeout = 5 * time.Second
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
