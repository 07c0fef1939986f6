package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/doppio-db/doppio/internal/partition"
	"io"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/doppio-db/doppio/internal/backoff"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/replicas"
)

// headerNotApplied marks a 503 that proves the request changed nothing (no
// leader here, a leadership transfer, a leader elsewhere that this node may
// not forward to), so the node that forwarded it may send it again.
const headerNotApplied = "X-Doppio-Not-Applied"

// notApplied reports whether err proves that r changed nothing, so that it
// may run again: every failure of a read, and for a write the failures
// that happened before its proposal entered a Raft log (see
// replicas.NotApplied).
func notApplied(r *http.Request, err error) bool {
	if err == nil {
		return false
	}
	if partition.IsNotApplied(err) {
		return true
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		pe, ok := problem.As(err)
		return ok && pe.Kind == problem.Unavailable
	}
	return false
}

// retryBackoff paces the attempts of a request that met a leadership
// change: elections and transfers settle in tens of milliseconds.
func retryBackoff() backoff.Backoff {
	return backoff.Backoff{First: 5 * time.Millisecond, Max: 100 * time.Millisecond}
}

// serve runs a data request to its end within its deadline: the handler,
// then forwarding to the partition's leader when it is elsewhere. A
// failure that proves nothing was applied (an election, a leadership
// transfer, a leader that moved on, a forwarded request refused there) is
// not answered: the request runs again, routed afresh, until it succeeds,
// fails for another reason, or the deadline is near; so a client sees the
// common leadership changes only as latency. A write whose outcome is
// unknown (its entry was appended, then the deadline passed) is never run
// again.
func (s *Server) serve(rt *route, w *statusWriter, r *http.Request, p params) error {
	deadline, _ := r.Context().Deadline()
	bo := retryBackoff()
	var body []byte
	if s.relay != nil && relayed(rt.pattern) {
		if rt.pattern == "/_cluster" && r.Method == http.MethodGet && s.tier != nil {
			return s.relayClusterWithCache(w, r)
		}
		return s.relayAny(w, r)
	}
	for attempt := 0; ; attempt++ {
		if attempt > 0 && body != nil {
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		b, err := s.call(rt, w, r, p)
		if attempt == 0 {
			body = b
		}
		if to, ok := partition.AsNotApplied(err, partition.Elsewhere); ok && !w.wrote {
			early := s.early.Load()
			k := earlyKey{peer: to.Peer, db: to.DB, user: user(r), method: r.Method, pattern: rt.pattern}
			if err := early.refuse(k, time.Now()); err != nil {
				return err
			}
			err = s.forward(w, r, body, to.Peer, to)
			early.learn(k, w, time.Now())
			if r.Header.Get(headerForwardedBy) != "" {
				// Never forwarded twice: the node that sent it here routes
				// it again.
				return err
			}
		}
		if w.wrote || !notApplied(r, err) || r.Context().Err() != nil {
			return err
		}
		if time.Until(deadline) < bo.Peek()+retryMargin(deadline) {
			return err
		}
		if !s.pause(r, err, bo.Next()) {
			return err
		}
	}
}

// pause waits before a request runs again: wait, or less if this node's
// replica of the partition sees its leadership change first. It reports
// false if the request's context ended.
func (s *Server) pause(r *http.Request, err error, wait time.Duration) bool {
	var changed <-chan struct{}
	if db, p, ok := replicas.Partition(err); ok && s.registry != nil {
		changed = s.registry.Changed(db, p)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-r.Context().Done():
		return false
	case <-changed:
	case <-t.C:
	}
	return true
}

// retryMargin is the part of a request's remaining time kept for answering
// (and, forwarded, for the answer to travel back).
func retryMargin(deadline time.Time) time.Duration {
	return min(time.Until(deadline)/10, 50*time.Millisecond)
}

// forwardError turns a failed forwarding exchange into the error to
// answer; it proves nothing was applied there when the connection was
// refused (the request never arrived) or the request is a read.
func forwardError(r *http.Request, to error, err error) error {
	pe := &problem.Error{Kind: problem.Unavailable, Operation: -1, RetryAfter: 1,
		Detail: fmt.Sprintf("%s, but forwarding there failed: %v", to.Error(), err)}
	var op *net.OpError
	if errors.Is(err, syscall.ECONNREFUSED) || (errors.As(err, &op) && op.Op == "dial") || r.Method == http.MethodGet || r.Method == http.MethodHead {
		return &partition.NotAppliedError{Reason: partition.RefusedThere, Detail: pe.Detail}
	}
	// The write may have reached the leader before the exchange broke.
	return &problem.Error{Kind: problem.Indeterminate, Operation: -1,
		Detail: fmt.Sprintf("%s, but the exchange with it failed: %v; the write may or may not have been applied", to.Error(), err)}
}

// refusedThere reads a forwarded request's 503 answer that proves nothing
// was applied there (or any 503 to a read) into an error, so that the
// request can be routed again instead of answered.
func refusedThere(r *http.Request, resp *http.Response, to error) error {
	if resp.StatusCode != http.StatusServiceUnavailable {
		return nil
	}
	if resp.Header.Get(headerNotApplied) == "" && r.Method != http.MethodGet && r.Method != http.MethodHead {
		return nil
	}
	var pb problemBody
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = json.Unmarshal(b, &pb)
	return &partition.NotAppliedError{Reason: partition.RefusedThere,
		Detail: fmt.Sprintf("%s, which could not serve it: %s", to.Error(), pb.Detail)}
}
