package client

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
)

// headerIdempotencyKey is the header the server remembers a write's
// outcome under (see IdempotencyKey).
const headerIdempotencyKey = "Idempotency-Key"

// IdempotencyKey sends an auto-increment insert, a transaction or a batch
// under key: the server remembers its outcome (for 24 hours by default),
// and a request sent again with the same key, by this client's retries or
// by the application after a crash or an ErrOutcomeUnknown, answers that
// outcome instead of applying twice. A key is 1 to 255 printable ASCII
// characters, unique per request (a UUID); reused for another request it
// is refused with ErrUnprocessable, and while its first request is still
// in flight with ErrConflict. Without this option the client makes a key
// of its own for each such call, shared by that call's retries.
func IdempotencyKey(key string) WriteOption { return header{headerIdempotencyKey, key} }

// newIdempotencyKey returns a random key of 32 hex digits.
func newIdempotencyKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// idempotent gives r an Idempotency-Key of the client's own unless the
// caller gave one, so that its retries cannot apply it twice.
func (r *request) idempotent() {
	if r.header.Get(headerIdempotencyKey) == "" {
		r.header.Set(headerIdempotencyKey, newIdempotencyKey())
	}
}

// mayResend reports whether r may be sent again after a failure that does
// not prove it changed nothing (a broken exchange, an outcome-unknown
// answer): a read may, and a write under an Idempotency-Key, whose
// outcome the server answers again.
func (r *request) mayResend() bool {
	return r.method == http.MethodGet || r.header.Get(headerIdempotencyKey) != ""
}
