package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/problem"
)

// The Idempotency-Key header makes a retry of an auto-increment insert, a
// transaction or a batch answer the first attempt's outcome instead of
// applying it twice (partition.Idempotency; docs/design/idempotency.md).
const (
	headerIdempotencyKey = "Idempotency-Key"
	// headerReplayed marks an answer that is a remembered outcome.
	headerReplayed = "Idempotent-Replayed"
	// headerIdempotencyOp carries, between nodes, which operation of a
	// batch a forwarded batch of one is; the REST listener drops it.
	headerIdempotencyOp = "X-Doppio-Idempotency-Op"
)

// DefaultIdempotencyRetention is how long an outcome is remembered unless
// Config.IdempotencyRetention says otherwise: a day, as Stripe's.
const DefaultIdempotencyRetention = 24 * time.Hour

// maxIdempotencyKey bounds a key's length, as Stripe's does.
const maxIdempotencyKey = 255

// idempotencyKey reads r's Idempotency-Key: "" when there is none, a
// Malformed problem when it is empty, repeated, too long or not printable
// ASCII.
func idempotencyKey(r *http.Request) (string, error) {
	vs := r.Header.Values(headerIdempotencyKey)
	switch {
	case len(vs) == 0:
		return "", nil
	case len(vs) > 1:
		return "", problem.Field(problem.Malformed, headerIdempotencyKey, "%s is given %d times; give it once", headerIdempotencyKey, len(vs))
	}
	k := vs[0]
	if k == "" {
		return "", problem.Field(problem.Malformed, headerIdempotencyKey, "%s is empty: give a unique key of 1 to %d printable ASCII characters (a UUID), or leave the header out", headerIdempotencyKey, maxIdempotencyKey)
	}
	if len(k) > maxIdempotencyKey {
		return "", problem.Field(problem.Malformed, headerIdempotencyKey, "%s is %d bytes long, more than the limit of %d", headerIdempotencyKey, len(k), maxIdempotencyKey)
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c < 0x20 || c > 0x7e {
			return "", problem.Field(problem.Malformed, headerIdempotencyKey, "%s has byte 0x%02x at offset %d: only printable ASCII (0x20 to 0x7e) is allowed", headerIdempotencyKey, c, i)
		}
	}
	return k, nil
}

// idempotency is what r asks of the partition under its Idempotency-Key
// (nil without one): the caller's scope and a fingerprint of the request,
// made of parts (the method, the path and the body, or a batch
// operation's own form).
func (s *Server) idempotency(r *http.Request, part int, parts ...[]byte) (*partition.Idempotency, error) {
	key, err := idempotencyKey(r)
	if err != nil || key == "" {
		return nil, err
	}
	h := sha256.New()
	for _, p := range parts {
		h.Write(binary.AppendUvarint(nil, uint64(len(p))))
		h.Write(p)
	}
	return &partition.Idempotency{Principal: user(r), Key: key, Part: part,
		Fingerprint: h.Sum(nil), Retain: s.cfg.IdempotencyRetention}, nil
}

// requestIdempotency is idempotency for a whole request (an insert, a
// transaction) whose body is body: whitespace in the JSON aside, a retry
// must repeat the method, the path and the body.
func (s *Server) requestIdempotency(r *http.Request, body []byte) (*partition.Idempotency, error) {
	var compact bytes.Buffer
	if json.Compact(&compact, body) == nil {
		body = compact.Bytes()
	}
	return s.idempotency(r, 0, []byte(r.Method), []byte(r.URL.EscapedPath()), body)
}

// batchOpIdempotency is idempotency for operation i of a batch on db:
// each operation of a batch is remembered on its own, in its own
// partition, under the batch's key and its index. A forwarded batch of
// one names the index it had in the client's batch.
func (s *Server) batchOpIdempotency(r *http.Request, db string, i int, b opBody) (*partition.Idempotency, error) {
	if v := r.Header.Get(headerIdempotencyOp); v != "" && r.Header.Get(headerForwardedBy) != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, problem.Field(problem.Malformed, headerIdempotencyOp, "%s %q is not an operation index", headerIdempotencyOp, v)
		}
		i = n
	}
	op, err := json.Marshal(b)
	if err != nil {
		return nil, err
	}
	return s.idempotency(r, i, []byte("batch operation"), []byte(db), op)
}

// markReplayed says on w that the answer is a remembered outcome.
func markReplayed(w http.ResponseWriter, res partition.Result) {
	if res.Replayed {
		w.Header().Set(headerReplayed, "true")
	}
}
