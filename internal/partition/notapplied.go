package partition

import (
	"errors"
	"fmt"
	"slices"

	"github.com/doppio-db/doppio/internal/problem"
)

// NotAppliedError says a request failed having changed nothing: no write
// set of it reached a replication log (or the one that did was superseded),
// so running it again, routed afresh or later, is safe. Reason says why;
// the other fields say which partition and which leader to try, as far as
// the layer that failed knows them. It unwraps to a problem.Unavailable
// error with a Retry-After, so a request that is not run again answers 503.
type NotAppliedError struct {
	Reason NotAppliedReason
	// DB and Partition name the partition when the registry failed the
	// request (NoLeader, Elsewhere); DB is "" otherwise.
	DB        string
	Partition int
	// Leader is the Raft id of the leader a member knows (0: none), in
	// Term (NotLeader).
	Leader uint64
	Term   uint64
	// Node and Peer are the leading node's id and peer address, where
	// another node forwards the request (Elsewhere).
	Node string
	Peer string
	// Detail says what happened, in the words of the layer that failed;
	// Cause is an earlier failure it summarises (NoLeader).
	Detail string
	Cause  error
}

// NotAppliedReason says why a request was not applied.
type NotAppliedReason uint8

const (
	// NotLeader: this member is not the leader, or not yet (or no longer)
	// able to act as it; Leader names the one it knows.
	NotLeader NotAppliedReason = iota + 1
	// NoLeader: no leader of the partition became known in time.
	NoLeader
	// Elsewhere: another node leads the partition; the request is to be
	// forwarded there.
	Elsewhere
	// StaleEvaluation: the partition applied a write while a request that
	// changes nothing was evaluated, so its answer may be stale.
	StaleEvaluation
	// RefusedThere: the node the request was forwarded to (or this node,
	// starting) proved it applied nothing.
	RefusedThere
)

// ErrStaleEvaluation: the partition applied a write while a request that
// changes nothing (a refused condition, a no-op) was evaluated, so its
// answer may be stale. Nothing was applied; the request may run again.
var ErrStaleEvaluation = &NotAppliedError{Reason: StaleEvaluation, Detail: "the partition changed while the request was evaluated (a leadership change); nothing was applied, retry"}

func (e *NotAppliedError) Error() string {
	switch e.Reason {
	case NotLeader:
		d := e.Detail
		if d == "" {
			d = "this replica is not the leader"
		}
		if e.Leader == 0 {
			return d + "; no leader is known (election in progress)"
		}
		return fmt.Sprintf("%s; the leader is node %d (term %d)", d, e.Leader, e.Term)
	case NoLeader:
		d := fmt.Sprintf("partition %s/%d has no leader available", e.DB, e.Partition)
		if e.Cause != nil {
			d += ": " + e.Cause.Error()
		}
		return d
	case Elsewhere:
		return fmt.Sprintf("partition %s/%d is led by node %s (%s)", e.DB, e.Partition, e.Node, e.Peer)
	}
	return e.Detail
}

// Unwrap makes the error a retryable 503 to the API.
func (e *NotAppliedError) Unwrap() error {
	return &problem.Error{Kind: problem.Unavailable, Detail: e.Error(), Operation: -1, RetryAfter: 1}
}

// AsNotApplied returns the first *NotAppliedError in err's chain if there
// is one and, when reasons are given, its Reason is among them.
func AsNotApplied(err error, reasons ...NotAppliedReason) (*NotAppliedError, bool) {
	var na *NotAppliedError
	if !errors.As(err, &na) {
		return nil, false
	}
	if len(reasons) > 0 && !slices.Contains(reasons, na.Reason) {
		return nil, false
	}
	return na, true
}

// IsNotApplied reports whether err proves that the request it ended left
// nothing applied, so that it may run again. A write whose entry reached a
// Raft log and whose fate is unknown is not among them.
func IsNotApplied(err error) bool {
	_, ok := AsNotApplied(err)
	return ok
}
