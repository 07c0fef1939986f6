package client

import (
	"errors"
	"fmt"
	"net/http"
)

// ErrNotModified is returned by a read whose IfNoneMatch condition held: the
// caller's copy is current.
var ErrNotModified = errors.New("client: not modified")

// The sentinels an *Error matches with errors.Is, by its status, so that
// callers need not know HTTP statuses.
var (
	// ErrNotFound: 404, the database, table, document or named object
	// does not exist.
	ErrNotFound = errors.New("client: not found")
	// ErrConflict: 409, an incompatible schema, a duplicate or a state
	// that forbids the request.
	ErrConflict = errors.New("client: conflict")
	// ErrPreconditionFailed: 412, a write condition (IfMatch, IfNoneMatch,
	// IfUnmodifiedSince, a transaction operation's condition) was false.
	ErrPreconditionFailed = errors.New("client: precondition failed")
	// ErrUnprocessable: 422, the document does not match its table's
	// schema.
	ErrUnprocessable = errors.New("client: unprocessable")
	// ErrOverQuota: 429, a quota was spent and nothing was done; the
	// *Error's RetryAfter says when to send it again.
	ErrOverQuota = errors.New("client: over quota")
	// ErrUnavailable: 503, the server could not serve (no leader, not
	// ready) and applied nothing; the retry time ran out.
	ErrUnavailable = errors.New("client: unavailable")
	// ErrOutcomeUnknown: 504 outcome-unknown, a write reached the
	// replication log but its outcome was not learnt in time: it may or
	// may not be applied, so read before sending it again.
	ErrOutcomeUnknown = errors.New("client: outcome unknown")
)

// sentinels maps a status to the sentinel an *Error of it matches.
var sentinels = map[int]error{
	http.StatusNotFound:            ErrNotFound,
	http.StatusConflict:            ErrConflict,
	http.StatusPreconditionFailed:  ErrPreconditionFailed,
	http.StatusUnprocessableEntity: ErrUnprocessable,
	http.StatusTooManyRequests:     ErrOverQuota,
	http.StatusServiceUnavailable:  ErrUnavailable,
	http.StatusGatewayTimeout:      ErrOutcomeUnknown,
}

// Error is a failure the server answered, from its RFC 9457 problem document.
type Error struct {
	// Status is the HTTP status (400, 404, 409, 412, 413, 415, 422, 429, 503…).
	Status int `json:"status"`
	// Type is the problem type URI, e.g. https://doppio.dev/problems/not-found.
	Type string `json:"type"`
	// Title is the fixed summary of Type.
	Title string `json:"title"`
	// Detail says precisely what went wrong.
	Detail string `json:"detail"`
	// Field names the offending field, key part or parameter, if any.
	Field string `json:"field,omitempty"`
	// Operation is the index of the failing operation of a transaction.
	Operation *int `json:"operation,omitempty"`
	// RetryAfter, in seconds, accompanies 503 and 429 answers.
	RetryAfter int `json:"retryAfter,omitempty"`
}

// Is reports whether target is the sentinel of e's status, so that
// errors.Is(err, ErrNotFound) holds for a 404 while the *Error, with its
// detail, stays reachable by errors.As. A 504 that is not the server's
// outcome-unknown problem (a proxy's timeout) matches it all the same:
// either way the write may have been applied.
func (e *Error) Is(target error) bool {
	s, ok := sentinels[e.Status]
	return ok && s == target
}

func (e *Error) Error() string {
	title := e.Title
	if title == "" {
		title = http.StatusText(e.Status)
	}
	if e.Detail == "" {
		return fmt.Sprintf("doppio: %d %s", e.Status, title)
	}
	return fmt.Sprintf("doppio: %d %s: %s", e.Status, title, e.Detail)
}

func hasStatus(err error, status int) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == status
}

// IsNotFound reports whether err is a 404: the database, table or document
// does not exist.
func IsNotFound(err error) bool { return hasStatus(err, http.StatusNotFound) }

// IsConflict reports whether err is a 409: an incompatible schema or a
// duplicate.
func IsConflict(err error) bool { return hasStatus(err, http.StatusConflict) }

// IsPreconditionFailed reports whether err is a 412: a write condition
// (IfMatch, IfNoneMatch, IfUnmodifiedSince or a transaction operation's
// condition) was false.
func IsPreconditionFailed(err error) bool { return hasStatus(err, http.StatusPreconditionFailed) }

// IsOverQuota reports whether err is a 429: a quota of the database or of
// the caller was spent, nothing was done, and the request may be sent
// again after the error's RetryAfter seconds (the client's retry did so
// while its retry time and the context allowed).
func IsOverQuota(err error) bool { return hasStatus(err, http.StatusTooManyRequests) }
