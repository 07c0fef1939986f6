package partition

import "context"

// Replicator is the replicate step: it orders a write set in the partition's
// timeline, makes it durable and applied, and returns its SCN. On one node
// the Local sequencer does this; with replication a Raft group does, and
// nothing above this interface changes.
type Replicator interface {
	Replicate(ctx context.Context, ws *WriteSet) (SCN, error)
	// Applied is the SCN of the last applied write set.
	Applied() SCN
	// Lead returns nil once this replica may evaluate writes: it leads the
	// partition and has applied everything committed before its leadership
	// began, so an evaluation sees every earlier write. Otherwise it fails
	// with a problem.Unavailable error (after waiting at most until ctx ends
	// for a new leader to become ready).
	Lead(ctx context.Context) error
	// ReadIndex returns nil once this replica has applied every write
	// acknowledged before the call, so a read served after it is
	// linearizable.
	ReadIndex(ctx context.Context) error
}

// DurableApplier is implemented by a Replicator whose applied write sets
// are durable before they become visible (so reads need not wait for a
// document group's latch, see Replica.ReadFence).
type DurableApplier interface {
	AppliesDurableWrites() bool
}

// InFlightError is a Replicate failure whose write set may still be
// applied (its entry is in the replication log, but the caller's deadline
// came first). Settled is closed once its fate is decided, applied or
// not; until then Execute keeps the document group's latch, so that no
// evaluation reads the group's state without a write that may yet land
// behind it (two transactions conditioned on one document would both
// commit, the second over the first).
type InFlightError struct {
	Err     error
	Settled <-chan struct{}
}

func (e *InFlightError) Error() string { return e.Err.Error() }
func (e *InFlightError) Unwrap() error { return e.Err }
