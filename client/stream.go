package client

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// StreamAnswer is the open answer of Stream: its headers, and its body to
// read until the caller closes it.
type StreamAnswer struct {
	Header http.Header
	Body   io.ReadCloser
}

// Stream sends a GET for a long-lived answer (a change stream) to path,
// the escaped path from the root, with query and an Accept of accept.
// It goes through the client's transport, TLS and credentials and is
// retried as any read (WithRetry) until the server answers; WithTimeout
// does not bound the answer's body. A status other than 200 is an *Error.
func (c *Client) Stream(ctx context.Context, path string, query url.Values, accept string) (*StreamAnswer, error) {
	r := newRequest(http.MethodGet, path)
	r.stream = true
	for k, v := range query {
		r.query[k] = strings.Join(v, ",")
	}
	r.header.Set("Accept", accept)
	res, err := c.do(ctx, r)
	if err != nil {
		return nil, err
	}
	if res.stream == nil {
		// A 2xx other than 200 carries no stream.
		return nil, &Error{Status: res.status, Title: http.StatusText(res.status), Detail: "the answer is not a stream"}
	}
	return &StreamAnswer{Header: res.header, Body: res.stream}, nil
}

// BaseURL is the server URL the client was made for, without a trailing
// slash.
func (c *Client) BaseURL() string { return c.base }

// At returns a client of the server at baseURL that shares c's HTTP
// client (transport, TLS), credentials and retry time, then applies
// opts; smart routing is not carried over.
func (c *Client) At(baseURL string, opts ...Option) *Client {
	at := &Client{base: strings.TrimRight(baseURL, "/"), hc: c.hc, retry: c.retry, authorization: c.authorization}
	for _, o := range opts {
		o(at)
	}
	return at
}
