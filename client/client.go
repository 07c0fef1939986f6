package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/doppio-db/doppio/internal/backoff"
)

// DefaultRetry is how long a request is retried by default (see WithRetry).
const DefaultRetry = 10 * time.Second

// Client talks to one Doppio server (or a load balancer in front of many).
type Client struct {
	base   string
	hc     *http.Client
	retry  time.Duration
	routes *routing // nil unless WithSmartRouting
	// authorization is the Authorization header every request carries
	// (WithToken, WithBasicAuth); "" for none.
	authorization string
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient makes the client send its requests through hc.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) { c.hc = hc }
}

// WithTimeout bounds each HTTP exchange (each attempt, when retrying). It
// applies to the HTTP client in effect when the option is applied, copying
// it, so give it after WithHTTPClient.
func WithTimeout(d time.Duration) Option {
	return func(c *Client) {
		hc := *c.hc
		hc.Timeout = d
		c.hc = &hc
	}
}

// WithTLS makes the client speak TLS configured by cfg (its RootCAs to
// trust the cluster's CA, its Certificates to authenticate by a client
// certificate); give an https:// base URL. It applies to the HTTP
// client in effect, copying it and its transport, so give it after
// WithHTTPClient; a client whose transport is not an *http.Transport is
// left as it is (configure its TLS there).
func WithTLS(cfg *tls.Config) Option {
	return func(c *Client) {
		var tr *http.Transport
		switch t := c.hc.Transport.(type) {
		case nil:
			tr = http.DefaultTransport.(*http.Transport).Clone()
		case *http.Transport:
			tr = t.Clone()
		default:
			return
		}
		tr.TLSClientConfig = cfg.Clone()
		hc := *c.hc
		hc.Transport = tr
		c.hc = &hc
	}
}

// WithRetry sets the total time within which a request answered 503 or
// 429 or refused a connection is retried; 0 disables retries. A 429 is
// retried after its Retry-After, and answered at once when that wait
// would end past the retry time or the context's deadline. A write under
// an Idempotency-Key (an insert, a transaction, a batch) is also retried
// after a broken exchange, a 504 outcome-unknown, or a 409 saying its
// first attempt is still in flight: the server answers a retry with the
// first outcome.
func WithRetry(maxElapsed time.Duration) Option {
	return func(c *Client) { c.retry = maxElapsed }
}

// New returns a client of the server at baseURL, e.g. "http://127.0.0.1:8080"
// (or "https://…" with WithTLS). The smart routing (WithSmartRouting)
// reaches the other nodes with the scheme and TLS of baseURL.
func New(baseURL string, opts ...Option) *Client {
	c := &Client{base: strings.TrimRight(baseURL, "/"), hc: &http.Client{}, retry: DefaultRetry}
	for _, o := range opts {
		o(c)
	}
	return c
}

// request is one HTTP call before it is sent.
type request struct {
	method string
	path   string // escaped path, from the root
	query  map[string]string
	header http.Header
	body   []byte
	// route names the document group, for smart routing; unrouted is set
	// once the routed leader failed, so retries go through the seed server.
	route    *routeKey
	unrouted bool
	// stream leaves a 200 answer's body open (response.stream) for the
	// caller to read for as long as it lasts, free of WithTimeout.
	stream bool
}

func newRequest(method, path string) *request {
	return &request{method: method, path: path, query: map[string]string{}, header: http.Header{}}
}

func (r *request) jsonBody(v any) error {
	switch v := v.(type) {
	case json.RawMessage:
		r.body = v
	case []byte:
		r.body = v
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("client: encode request body: %w", err)
		}
		r.body = b
	}
	r.header.Set("Content-Type", "application/json")
	return nil
}

func (r *request) url(base string) string {
	u := base + r.path
	sep := "?"
	for _, k := range sortedKeys(r.query) {
		u += sep + k + "=" + queryEscape(r.query[k])
		sep = "&"
	}
	return u
}

// response is a read answer.
type response struct {
	status int
	header http.Header
	body   []byte
	stream io.ReadCloser // the open body of a streamed 200 answer
}

// do sends r, retrying as configured, and returns the answer when its
// status is below 400 (or 304); any other status is returned as *Error.
func (c *Client) do(ctx context.Context, r *request) (*response, error) {
	start := time.Now()
	b := backoff.Backoff{First: 50 * time.Millisecond, Max: time.Second}
	for {
		resp, err := c.once(ctx, r)
		// A read may always be sent again; a write only after a failure
		// that proves it was not applied (a refused connection, a 503).
		if c.routes != nil && r.route != nil && !r.unrouted && ((err != nil && (r.mayResend() || errors.Is(err, syscall.ECONNREFUSED))) || (err == nil && resp.status == http.StatusServiceUnavailable)) {
			// The routed leader could not serve: retry at once through
			// the seed server, which forwards.
			c.missed(r)
			if ctx.Err() == nil && time.Since(start) < c.retry {
				continue
			}
		}
		var wait time.Duration
		switch {
		case err == nil && resp.status == http.StatusServiceUnavailable:
			wait = b.Next()
			if s, perr := strconv.Atoi(resp.header.Get("Retry-After")); perr == nil && s >= 0 {
				wait = time.Duration(s) * time.Second
			}
		case err == nil && resp.status == http.StatusTooManyRequests:
			// Over quota: nothing was done, so any request may be sent
			// again, but not before the quota has credit again.
			wait = b.Next()
			if s, perr := strconv.Atoi(resp.header.Get("Retry-After")); perr == nil && s > 0 {
				wait = time.Duration(s) * time.Second
			}
			if dl, ok := ctx.Deadline(); wait > c.retry-time.Since(start) || (ok && time.Until(dl) < wait) {
				return resp, resp.problem()
			}
		case err != nil && errors.Is(err, syscall.ECONNREFUSED):
			wait = b.Next()
		case r.mayResend() && r.method != http.MethodGet && (err != nil && ctx.Err() == nil || err == nil && resendable(resp)):
			// The server answers the first outcome again, or says when
			// it is decided.
			wait = b.Next()
			if s, perr := strconv.Atoi(resp.retryAfter()); perr == nil && s > 0 {
				wait = time.Duration(s) * time.Second
			}
		default:
			if err != nil {
				return nil, err
			}
			return resp, resp.problem()
		}
		remaining := c.retry - time.Since(start)
		if remaining <= 0 || ctx.Err() != nil {
			if err != nil {
				return nil, err
			}
			return resp, resp.problem()
		}
		if err := backoff.Sleep(ctx, min(wait, remaining)); err != nil {
			return nil, err
		}
	}
}

func (c *Client) once(ctx context.Context, r *request) (*response, error) {
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, r.url(c.baseFor(ctx, r)), body)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	for k, v := range r.header {
		req.Header[k] = v
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "application/json")
	}
	c.authorize(req)
	hc := c.hc
	if r.stream && hc.Timeout != 0 {
		unbounded := *hc
		unbounded.Timeout = 0
		hc = &unbounded
	}
	res, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if r.stream && res.StatusCode == http.StatusOK {
		return &response{status: res.StatusCode, header: res.Header, stream: res.Body}, nil
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, fmt.Errorf("client: read answer to %s %s: %w", r.method, r.path, err)
	}
	return &response{status: res.StatusCode, header: res.Header, body: b}, nil
}

// resendable reports whether an idempotent write's answer leaves its
// outcome to a retry: outcome unknown, or its key still in flight.
func resendable(resp *response) bool {
	return resp.status == http.StatusGatewayTimeout ||
		resp.status == http.StatusConflict && strings.HasSuffix(resp.problemType(), "/idempotency-key-in-use")
}

// problemType is the type of a problem answer ("" if it has none).
func (r *response) problemType() string {
	var p struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(r.body, &p)
	return p.Type
}

// retryAfter is the answer's Retry-After ("" for none, or no answer).
func (r *response) retryAfter() string {
	if r == nil {
		return ""
	}
	return r.header.Get("Retry-After")
}

// problem returns the *Error an answer carries, or nil when it succeeded.
func (r *response) problem() error {
	if r.status < 400 {
		return nil
	}
	e := &Error{}
	if err := json.Unmarshal(r.body, e); err != nil || e.Status == 0 {
		detail := strings.TrimSpace(string(r.body))
		if len(detail) > 512 {
			detail = detail[:512] + "…"
		}
		e = &Error{Title: http.StatusText(r.status), Detail: detail}
	}
	e.Status = r.status
	if e.RetryAfter == 0 {
		e.RetryAfter, _ = strconv.Atoi(r.header.Get("Retry-After"))
	}
	return e
}

// call sends r and decodes the answer's JSON body into out; the response
// is returned, for its status, even when only the decoding failed.
func (c *Client) call(ctx context.Context, r *request, out any) (*response, error) {
	res, err := c.do(ctx, r)
	if err != nil {
		return nil, err
	}
	return res, res.decode(out)
}

// decode parses the JSON answer into v.
func (r *response) decode(v any) error {
	if err := json.Unmarshal(r.body, v); err != nil {
		return fmt.Errorf("client: decode answer (status %d): %w", r.status, err)
	}
	return nil
}
