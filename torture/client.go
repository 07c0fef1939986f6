package torture

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/doppio-db/doppio/internal/backoff"
)

// Client is the workloads' HTTP client over a Target's endpoints. It sends
// each request to one node chosen at random (any node forwards to the
// partition's leader), bounds it by a timeout, and never retries a write:
// a retried write whose first attempt was applied would corrupt the
// history. One Client serves one workload client goroutine (it owns a
// rand.Rand); the http.Client underneath may be shared.
type Client struct {
	ID        int
	endpoints []string
	hc        *http.Client
	rng       *rand.Rand
	// Timeout bounds one request. The server is asked to answer within
	// Timeout minus a margin (X-Doppio-Timeout), so a slow write usually
	// ends in the server's 503 rather than a client-side timeout; both are
	// indeterminate.
	Timeout time.Duration
}

// DefaultTimeout is a request's budget: longer than an election (a write
// waits for a new leader) and short enough to record many operations.
const DefaultTimeout = 4 * time.Second

// newHTTPClient is shared by a workload's clients: no client-side retries
// beyond what net/http does for requests that wrote nothing, enough idle
// connections per node for every client, and t's TLS configuration.
func newHTTPClient(t Target) *http.Client {
	tr := newTransport(t.TLS())
	tr.MaxIdleConnsPerHost = 64
	tr.ResponseHeaderTimeout = 0
	return &http.Client{Transport: tr}
}

// newTransport is net/http's default transport speaking TLS with cfg
// (plaintext when cfg is nil). It speaks HTTP/1.1 either way, so that a
// secure run differs from a plaintext one by TLS and authentication only,
// not by the protocol's connection handling.
func newTransport(cfg *tls.Config) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if cfg != nil {
		tr.TLSClientConfig = cfg.Clone()
		tr.ForceAttemptHTTP2 = false
	}
	return tr
}

// NewClient returns client id over endpoints, picking nodes with rng.
func NewClient(id int, endpoints []string, hc *http.Client, rng *rand.Rand) *Client {
	return &Client{ID: id, endpoints: endpoints, hc: hc, rng: rng, Timeout: DefaultTimeout}
}

// Response is an answer the server gave.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Decode unmarshals the body into v.
func (r *Response) Decode(v any) error {
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.UseNumber()
	return dec.Decode(v)
}

// Do sends one request to a node picked at random and returns its answer
// (any status) or the transport error.
func (c *Client) Do(ctx context.Context, method, path string, body any, header ...string) (*Response, error) {
	return c.DoAt(ctx, c.rng.IntN(len(c.endpoints)), method, path, body, header...)
}

// DoAt sends one request to endpoint i.
func (c *Client) DoAt(ctx context.Context, i int, method, path string, body any, header ...string) (*Response, error) {
	var rd io.Reader
	if body != nil {
		b, ok := body.([]byte)
		if !ok {
			var err error
			if b, err = json.Marshal(body); err != nil {
				return nil, err
			}
		}
		rd = bytes.NewReader(b)
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.endpoints[i]+path, rd)
	if err != nil {
		return nil, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	// The server answers (at worst 503) before the client gives up.
	req.Header.Set("X-Doppio-Timeout", (timeout * 3 / 4).String())
	for j := 0; j+1 < len(header); j += 2 {
		req.Header.Set(header[j], header[j+1])
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		// The status line came, the body did not: the outcome is known
		// only as far as the status says, and the body may matter.
		return nil, fmt.Errorf("read answer: %w", err)
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// Classify says what an answer (or transport error) means for an operation,
// as Jepsen does:
//
//   - 2xx (and 304): acknowledged.
//   - 4xx: a definite failure; the server refused before changing anything
//     (412 precondition failed, 404, 409, 400, 422...). The API's
//     contract is that bad input changes nothing.
//   - 503: a definite failure. The server's contract (docs/design/
//     replication-and-failover.md, "Not applied vs unknown") is that a 503 always means nothing was
//     applied; a write whose entry reached the log and whose fate is unknown
//     answers 504. (A 503 marked X-Doppio-Not-Applied says so explicitly.)
//   - a refused connection: failed, the request never reached a server.
//   - a read that did not succeed is failed whatever the reason: a read has
//     no effect, so an unanswered read constrains nothing.
//   - otherwise (504, other 5xx, timeouts, resets): indeterminate. The
//     workloads never retry a write.
func Classify(write bool, resp *Response, err error) Outcome {
	switch {
	case err == nil && (resp.Status < 300 || resp.Status == http.StatusNotModified):
		return Acked
	case err == nil && resp.Status >= 400 && resp.Status < 500:
		return Failed
	case !write:
		return Failed
	case err != nil && errors.Is(err, syscall.ECONNREFUSED):
		return Failed
	case err == nil && resp.Status == http.StatusServiceUnavailable:
		return Failed
	}
	return Indeterminate
}

// describe renders an answer or error for a history's Error field.
func describe(resp *Response, err error) error {
	if err != nil {
		return err
	}
	if resp.Status < 300 {
		return nil
	}
	var pb struct {
		Detail string `json:"detail"`
	}
	_ = json.Unmarshal(resp.Body, &pb)
	if pb.Detail == "" {
		pb.Detail = strings.TrimSpace(string(resp.Body))
		if len(pb.Detail) > 200 {
			pb.Detail = pb.Detail[:200]
		}
	}
	return fmt.Errorf("%d %s", resp.Status, pb.Detail)
}

// Retry sends the request until the answer's status is one of want,
// cycling through the nodes with a backoff, or until ctx ends. It is for
// setup and final reads only: idempotent requests whose repetition is
// harmless.
func (c *Client) Retry(ctx context.Context, method, path string, body any, want ...int) (*Response, error) {
	retry := backoff.Backoff{First: 50 * time.Millisecond, Max: time.Second}
	var last error
	for attempt := 0; ; attempt++ {
		resp, err := c.DoAt(ctx, attempt%len(c.endpoints), method, path, body)
		if err == nil {
			for _, w := range want {
				if resp.Status == w {
					return resp, nil
				}
			}
			if resp.Status >= 400 && resp.Status < 500 && resp.Status != http.StatusNotFound && resp.Status != http.StatusTooManyRequests {
				// 404 may be a table the catalog has not seen yet.
				return resp, fmt.Errorf("%s %s: %w", method, path, describe(resp, nil))
			}
		}
		last = describe(resp, err)
		if err := retry.Wait(ctx); err != nil {
			return nil, fmt.Errorf("%s %s: %w (last: %v)", method, path, err, last)
		}
	}
}

// workloadPartitions is how many partitions a workload's database has.
const workloadPartitions = 4

// setupDatabase is every workload's first step of Setup: a client for
// setup requests, seeded with seed so that setups replay, and db with its
// tables created and served (see createDatabase), in workloadPartitions
// partitions.
func setupDatabase(ctx context.Context, t Target, seed uint64, db string, tables map[string]string) (*Client, error) {
	c := NewClient(-1, t.Endpoints(), newHTTPClient(t), rand.New(rand.NewPCG(seed, seed+1)))
	return c, createDatabase(ctx, c, db, workloadPartitions, tables)
}

// createDatabase creates db with the given tables (name → table schema
// JSON), replicated on up to three nodes, and retries until each table is
// served.
func createDatabase(ctx context.Context, c *Client, db string, partitions int, tables map[string]string) error {
	replicas := min(3, len(c.endpoints))
	if _, err := c.Retry(ctx, "PUT", "/_schemas/"+db, map[string]any{"partitions": partitions, "replicas": replicas}, 200, 201); err != nil {
		return err
	}
	for name, def := range tables {
		if _, err := c.Retry(ctx, "PUT", "/_schemas/"+db+"/"+name, []byte(def), 200, 201); err != nil {
			return err
		}
	}
	return nil
}

// clientRNGs derives one generator per client from the run's rng, so a run
// replays from its seed as far as the scheduler allows.
func clientRNGs(rng *rand.Rand, n int) []*rand.Rand {
	out := make([]*rand.Rand, n)
	for i := range out {
		out[i] = rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
	}
	return out
}

// runClients is a workload's Run: n clients, each with its generator from
// clientRNGs, call op until ctx ends (seq counts a client's calls from 1),
// recording into a fresh history stored in *hist and closed at the end.
func runClients(ctx context.Context, t Target, rng *rand.Rand, n int, hist **History, op func(c *Client, seq int64)) error {
	*hist = NewHistory()
	defer (*hist).Close()
	hc := newHTTPClient(t)
	rngs := clientRNGs(rng, n)
	var wg sync.WaitGroup
	for id := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := NewClient(id, t.Endpoints(), hc, rngs[id])
			for seq := int64(1); ctx.Err() == nil; seq++ {
				op(c, seq)
			}
		}()
	}
	wg.Wait()
	return nil
}

// num reads a JSON number decoded with UseNumber (or a float64).
func num(v any) (int64, bool) {
	switch n := v.(type) {
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	case float64:
		return int64(n), true
	case int64:
		return n, true
	case int:
		return int64(n), true
	}
	return 0, false
}
