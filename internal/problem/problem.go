// Package problem is the error vocabulary shared by every layer: an error a
// user caused (or must retry) carries its kind and a precise detail, and the
// REST layer turns it into an RFC 9457 problem+json answer with the status
// that kind maps to. Any other error is an internal failure (500).
package problem

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Kind classifies a user-facing failure.
type Kind int

const (
	Malformed    Kind = iota // 400: the request cannot be parsed or is inconsistent
	NotFound                 // 404: the database, table or document is absent
	NotAllowed               // 405: the method does not apply to the resource
	Conflict                 // 409: incompatible schema, duplicate, state conflict
	Precondition             // 412: a conditional header or condition is false
	TooLarge                 // 413: body, document, batch or transaction too large
	MediaType                // 415: unsupported Content-Type
	Invalid                  // 422: the document does not match its schema
	Unavailable              // 503: not ready, no leader; nothing was applied, retry later
	Gone                     // 410: a change-stream position is no longer retained; bootstrap
	// Indeterminate (504): a write reached the replication log but its
	// outcome was not learnt before the deadline; it may or may not be
	// applied, so it must not be retried blindly (read to find out).
	Indeterminate
	// The protocol refusals, answered before any route: 417 (an Expect
	// other than 100-continue), 431 (a header block too long), 501 (a
	// transfer coding other than chunked), 505 (not HTTP/1.x).
	ExpectationFailed
	HeaderTooLarge
	NotImplemented
	VersionNotSupported
	// Unauthenticated (401): no credentials, or credentials that prove
	// nobody (wrong, expired, forged); the answer carries WWW-Authenticate.
	Unauthenticated
	// Forbidden (403): a known caller lacks the privilege the route needs.
	Forbidden
	// TooManyRequests (429): too many attempts; RetryAfter says when to
	// try again.
	TooManyRequests
	// OverQuota (429): a database's or user's capacity units are spent;
	// nothing was done. RetryAfter says when credit is back.
	OverQuota
	// IdempotencyInFlight (409): a request with the same Idempotency-Key
	// is under way; retry once it is answered.
	IdempotencyInFlight
	// IdempotencyMismatch (422): the Idempotency-Key was used by another
	// request; nothing was done.
	IdempotencyMismatch
)

var kinds = [...]struct {
	status int
	slug   string
	title  string
}{
	Malformed:           {http.StatusBadRequest, "malformed", "Malformed request"},
	NotFound:            {http.StatusNotFound, "not-found", "Not found"},
	NotAllowed:          {http.StatusMethodNotAllowed, "method-not-allowed", "Method not allowed"},
	Conflict:            {http.StatusConflict, "conflict", "Conflict"},
	Precondition:        {http.StatusPreconditionFailed, "precondition-failed", "Precondition failed"},
	TooLarge:            {http.StatusRequestEntityTooLarge, "too-large", "Too large"},
	MediaType:           {http.StatusUnsupportedMediaType, "unsupported-media-type", "Unsupported media type"},
	Invalid:             {http.StatusUnprocessableEntity, "schema-mismatch", "Document does not match its schema"},
	Unavailable:         {http.StatusServiceUnavailable, "unavailable", "Service unavailable"},
	Gone:                {http.StatusGone, "checkpoint-expired", "Checkpoint no longer retained"},
	Indeterminate:       {http.StatusGatewayTimeout, "outcome-unknown", "Outcome unknown"},
	ExpectationFailed:   {http.StatusExpectationFailed, "expectation-failed", "Expectation failed"},
	HeaderTooLarge:      {http.StatusRequestHeaderFieldsTooLarge, "header-too-large", "Request header too large"},
	NotImplemented:      {http.StatusNotImplemented, "not-implemented", "Not implemented"},
	VersionNotSupported: {http.StatusHTTPVersionNotSupported, "version-not-supported", "HTTP version not supported"},
	Unauthenticated:     {http.StatusUnauthorized, "unauthenticated", "Unauthenticated"},
	Forbidden:           {http.StatusForbidden, "forbidden", "Forbidden"},
	TooManyRequests:     {http.StatusTooManyRequests, "too-many-requests", "Too many requests"},
	OverQuota:           {http.StatusTooManyRequests, "over-quota", "Over quota"},
	IdempotencyInFlight: {http.StatusConflict, "idempotency-key-in-use", "Idempotency key in use"},
	IdempotencyMismatch: {http.StatusUnprocessableEntity, "idempotency-key-reused", "Idempotency key reused with another request"},
}

// Status is the HTTP status of k.
func (k Kind) Status() int { return kinds[k].status }

// Type is the problem type URI of k.
func (k Kind) Type() string { return typeBase + kinds[k].slug }

// typeBase prefixes every problem type URI.
const typeBase = "https://doppio.dev/problems/"

// InternalType is the problem type of a failure that is not the client's
// (500), the one answer no Kind names.
const InternalType = typeBase + "internal"

// Kinds returns every Kind in declaration order, so the API contract can
// list each problem type the server answers.
func Kinds() []Kind {
	all := make([]Kind, len(kinds))
	for i := range kinds {
		all[i] = Kind(i)
	}
	return all
}

// Title is the short, fixed summary of k.
func (k Kind) Title() string { return kinds[k].title }

// Error is a user-facing failure.
type Error struct {
	Kind   Kind
	Detail string
	// Field names the offending field, key part or parameter when there is one
	// (dotted path for nested fields).
	Field string
	// Operation is the index of the failing operation of a transaction or
	// batch, or -1.
	Operation int
	// RetryAfter, in seconds, accompanies Unavailable, TooManyRequests
	// and OverQuota.
	RetryAfter int
	// Wait is the exact time RetryAfter rounds up, when known (OverQuota:
	// until the buckets have repaid their debt).
	Wait time.Duration
}

func (e *Error) Error() string { return e.Detail }

// New returns an Error of kind k with a formatted detail.
func New(k Kind, format string, args ...any) *Error {
	return &Error{Kind: k, Detail: fmt.Sprintf(format, args...), Operation: -1}
}

// Field returns an Error of kind k about field.
func Field(k Kind, field, format string, args ...any) *Error {
	e := New(k, format, args...)
	e.Field = field
	return e
}

// As returns the *Error inside err, if any.
func As(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// Is reports whether err is an Error of kind k.
func Is(err error, k Kind) bool {
	e, ok := As(err)
	return ok && e.Kind == k
}
