// Package etcdhttp speaks to etcd through its v3 JSON gateway (HTTP on
// every member's client URL), so that the change-stream consumer keeps its
// groups and checkpoints in etcd without linking gRPC. It offers only what
// consumer groups and the etcd checkpoint store need: leases, ranges, puts,
// transactions with value and creation compares, and prefix watches.
//
// The gateway's JSON is protojson with proto field names: keys and values
// are base64, int64 fields (revisions, lease ids, TTLs) are strings.
package etcdhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
)

// Client sends gateway requests to Endpoints, moving to the next one when
// a member cannot be reached. The zero HTTP uses http.DefaultClient.
type Client struct {
	Endpoints []string // "host:port" or a URL
	HTTP      *http.Client
	next      atomic.Uint32
}

// KeyValue is one stored key.
type KeyValue struct {
	Key            string
	Value          string
	CreateRevision int64
	ModRevision    int64
}

// Error is a request etcd answered with an error.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return fmt.Sprintf("etcd: %s (code %d)", e.Message, e.Code) }

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

func endpointURL(ep string) string {
	if !strings.Contains(ep, "://") {
		ep = "http://" + ep
	}
	return strings.TrimSuffix(ep, "/")
}

// post sends req to path on the first member that answers and returns the
// response, whose body the caller closes.
func (c *Client) post(ctx context.Context, path string, req any, extra http.Header) (*http.Response, error) {
	if len(c.Endpoints) == 0 {
		return nil, errors.New("etcd: no endpoints")
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var last error
	start := int(c.next.Load())
	for i := range c.Endpoints {
		n := (start + i) % len(c.Endpoints)
		hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, endpointURL(c.Endpoints[n])+path, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		hreq.Header.Set("Content-Type", "application/json")
		for k, v := range extra {
			hreq.Header[k] = v
		}
		resp, err := c.httpClient().Do(hreq)
		if err != nil {
			last = err
			if ctx.Err() != nil {
				return nil, err
			}
			continue
		}
		c.next.Store(uint32(n))
		if resp.StatusCode != http.StatusOK {
			defer resp.Body.Close()
			e := &Error{Code: resp.StatusCode}
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			if json.Unmarshal(b, e) != nil || e.Message == "" {
				e.Message = strings.TrimSpace(string(b))
			}
			return nil, e
		}
		return resp, nil
	}
	c.next.Add(1)
	return nil, last
}

// call sends one unary request and decodes its answer into out.
func (c *Client) call(ctx context.Context, path string, req, out any) error {
	resp, err := c.post(ctx, path, req, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(out)
}

// The gateway's messages, by their proto field names.
type (
	kv struct {
		Key            []byte `json:"key"`
		Value          []byte `json:"value"`
		CreateRevision int64  `json:"create_revision,string"`
		ModRevision    int64  `json:"mod_revision,string"`
	}
	header struct {
		Revision int64 `json:"revision,string"`
	}
	rangeRequest struct {
		Key      []byte `json:"key"`
		RangeEnd []byte `json:"range_end,omitempty"`
		KeysOnly bool   `json:"keys_only,omitempty"`
	}
	rangeResponse struct {
		Header header `json:"header"`
		Kvs    []kv   `json:"kvs"`
	}
	putRequest struct {
		Key   []byte `json:"key"`
		Value []byte `json:"value"`
		Lease int64  `json:"lease,omitempty,string"`
	}
	deleteRequest struct {
		Key []byte `json:"key"`
	}
)

func (k kv) public() KeyValue {
	return KeyValue{Key: string(k.Key), Value: string(k.Value), CreateRevision: k.CreateRevision, ModRevision: k.ModRevision}
}

func publics(kvs []kv) []KeyValue {
	out := make([]KeyValue, 0, len(kvs))
	for _, k := range kvs {
		out = append(out, k.public())
	}
	return out
}

// prefixEnd is the range end covering every key that starts with prefix.
func prefixEnd(prefix string) []byte {
	end := []byte(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return []byte{0} // every key
}

// Get returns the key, or nil when it does not exist.
func (c *Client) Get(ctx context.Context, key string) (*KeyValue, error) {
	var resp rangeResponse
	if err := c.call(ctx, "/v3/kv/range", rangeRequest{Key: []byte(key)}, &resp); err != nil {
		return nil, err
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	kv := resp.Kvs[0].public()
	return &kv, nil
}

// GetPrefix returns every key starting with prefix, in key order; with
// keysOnly their values are left empty.
func (c *Client) GetPrefix(ctx context.Context, prefix string, keysOnly bool) ([]KeyValue, error) {
	var resp rangeResponse
	req := rangeRequest{Key: []byte(prefix), RangeEnd: prefixEnd(prefix), KeysOnly: keysOnly}
	if err := c.call(ctx, "/v3/kv/range", req, &resp); err != nil {
		return nil, err
	}
	return publics(resp.Kvs), nil
}

// Put stores value under key, attached to lease unless it is 0.
func (c *Client) Put(ctx context.Context, key, value string, lease int64) error {
	var resp struct{}
	return c.call(ctx, "/v3/kv/put", putRequest{Key: []byte(key), Value: []byte(value), Lease: lease}, &resp)
}

// Compare is one condition of a transaction.
type Compare struct {
	Result         string `json:"result"` // EQUAL
	Target         string `json:"target"` // VALUE or CREATE
	Key            []byte `json:"key"`
	Value          []byte `json:"value,omitempty"`
	CreateRevision *int64 `json:"create_revision,omitempty,string"`
}

// ValueIs holds while key exists with value.
func ValueIs(key, value string) Compare {
	return Compare{Result: "EQUAL", Target: "VALUE", Key: []byte(key), Value: []byte(value)}
}

// Absent holds while key does not exist (its creation revision is 0).
func Absent(key string) Compare {
	var zero int64
	return Compare{Result: "EQUAL", Target: "CREATE", Key: []byte(key), CreateRevision: &zero}
}

// Op is one operation of a transaction.
type Op struct {
	Put    *putRequest    `json:"request_put,omitempty"`
	Delete *deleteRequest `json:"request_delete_range,omitempty"`
	Range  *rangeRequest  `json:"request_range,omitempty"`
}

// PutOp stores value under key, attached to lease unless it is 0.
func PutOp(key, value string, lease int64) Op {
	return Op{Put: &putRequest{Key: []byte(key), Value: []byte(value), Lease: lease}}
}

// DeleteOp deletes key.
func DeleteOp(key string) Op { return Op{Delete: &deleteRequest{Key: []byte(key)}} }

// GetOp reads key.
func GetOp(key string) Op { return Op{Range: &rangeRequest{Key: []byte(key)}} }

// TxnResult is a transaction's outcome: whether its compares held, and the
// keys each of the operations that ran read (nil for writes).
type TxnResult struct {
	Succeeded bool
	Reads     [][]KeyValue
}

// Txn atomically applies the operations of then if every compare holds,
// and those of otherwise if not.
func (c *Client) Txn(ctx context.Context, compares []Compare, then, otherwise []Op) (TxnResult, error) {
	req := struct {
		Compare []Compare `json:"compare,omitempty"`
		Success []Op      `json:"success,omitempty"`
		Failure []Op      `json:"failure,omitempty"`
	}{compares, then, otherwise}
	var resp struct {
		Succeeded bool `json:"succeeded"`
		Responses []struct {
			Range *rangeResponse `json:"response_range"`
		} `json:"responses"`
	}
	if err := c.call(ctx, "/v3/kv/txn", req, &resp); err != nil {
		return TxnResult{}, err
	}
	out := TxnResult{Succeeded: resp.Succeeded}
	for _, r := range resp.Responses {
		var kvs []KeyValue
		if r.Range != nil {
			kvs = publics(r.Range.Kvs)
		}
		out.Reads = append(out.Reads, kvs)
	}
	return out, nil
}

type lease struct {
	ID  int64 `json:"ID,string"`
	TTL int64 `json:"TTL,omitempty,string"`
}

// Grant creates a lease of ttl seconds and returns its id.
func (c *Client) Grant(ctx context.Context, ttl int64) (int64, error) {
	var resp lease
	if err := c.call(ctx, "/v3/lease/grant", lease{TTL: ttl}, &resp); err != nil {
		return 0, err
	}
	if resp.ID == 0 {
		return 0, errors.New("etcd: lease grant returned no lease")
	}
	return resp.ID, nil
}

// KeepAlive renews the lease once and returns its remaining TTL in
// seconds; 0 means the lease has expired.
func (c *Client) KeepAlive(ctx context.Context, id int64) (int64, error) {
	resp, err := c.post(ctx, "/v3/lease/keepalive", lease{ID: id}, nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var msg struct {
		Result *lease `json:"result"`
		Error  *Error `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil {
		return 0, err
	}
	if msg.Error != nil {
		return 0, msg.Error
	}
	if msg.Result == nil {
		return 0, errors.New("etcd: empty keepalive response")
	}
	return msg.Result.TTL, nil
}

// Revoke ends the lease, deleting the keys attached to it.
func (c *Client) Revoke(ctx context.Context, id int64) error {
	var resp struct{}
	return c.call(ctx, "/v3/lease/revoke", lease{ID: id}, &resp)
}
