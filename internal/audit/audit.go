// Package audit writes the audit log: one JSON line per security-relevant
// action (who, what, when, from where, with what outcome), in a file of
// its own, apart from the operational log, so it can be kept, shipped and
// protected on its own terms.
//
// What is audited: logins (successful and failed), user and grant
// changes, schema changes, database drops, backups, restores, node
// intents, datastream changes and bulk operations (BulkLoad), each
// whether it succeeded, failed or was refused for lack of a credential or
// privilege. Each line is written with one write call, so concurrent
// writers never interleave within a line and a crash loses at most the
// line being written; lines are not synced to disk one by one.
package audit

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/doppio-db/doppio/internal/auth"
)

// Outcomes of an audited action.
const (
	Success = "success" // done
	Failure = "failure" // attempted and failed (bad input, conflict, a wrong password)
	Denied  = "denied"  // refused before it began: no credential or no privilege
)

// Event is one audit line.
type Event struct {
	Time time.Time `json:"time"`
	// User is who acted ("" when the node runs without authentication);
	// Node, that a node of the cluster acted.
	User string `json:"user"`
	Node bool   `json:"node,omitempty"`
	// From is the client's address.
	From string `json:"from,omitempty"`
	// Action names what was done, e.g. "login", "user.put", "grant.add",
	// "schema.put", "restore", "bulk.load".
	Action string `json:"action"`
	// Target is the resource acted on: a request's method and path, a
	// user, a database.
	Target  string `json:"target,omitempty"`
	Outcome string `json:"outcome"`
	// Status is the HTTP status answered, when there was one.
	Status int    `json:"status,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// Log appends events to a file. A nil *Log records nothing. Safe for
// concurrent use.
type Log struct {
	mu  sync.Mutex
	f   *os.File
	now func() time.Time
}

// Open opens (creating it and its directory if needed) the audit log at
// path for appending; only its owner may read it.
func Open(path string) (*Log, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	return &Log{f: f, now: time.Now}, nil
}

// Record appends e, stamping its time when e has none.
func (l *Log) Record(e Event) error {
	if l == nil {
		return nil
	}
	if e.Time.IsZero() {
		e.Time = l.now()
	}
	e.Time = e.Time.UTC()
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return os.ErrClosed
	}
	_, err = l.f.Write(append(b, '\n'))
	return err
}

// BulkLoad records a bulk load into db by caller from the address from,
// with its outcome (err nil: success) and detail (e.g. documents loaded).
func (l *Log) BulkLoad(caller auth.Caller, from, db, detail string, err error) error {
	e := Event{User: caller.User, Node: caller.Node, From: from, Action: "bulk.load", Target: db, Outcome: Success, Detail: detail}
	if err != nil {
		e.Outcome, e.Detail = Failure, err.Error()
	}
	return l.Record(e)
}

// Close closes the file; later records fail with os.ErrClosed.
func (l *Log) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
