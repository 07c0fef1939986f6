package client

import (
	"errors"
	"fmt"
	"net/http"
)

// ErrNotModified is returned by a read whose IfNoneMatch condition held: the
// caller's copy is current.
var ErrNotModified = errors.New("client: not modified")

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
