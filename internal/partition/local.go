package partition

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/storage"
)

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

// Local is the single-node Replicator: a per-partition sequencer. Batches
// are enqueued to the WAL in SCN order under its lock and waited for outside
// it, so concurrent writers of one partition share WAL syncs.
type Local struct {
	engine *storage.Engine
	prefix keys.Partition

	mu   sync.Mutex
	last SCN
}

// localGeneration is the generation of a partition that has only ever had
// one (local) leader.
const localGeneration = 1

// NewLocal opens the sequencer of partition prefix, resuming after the last
// applied SCN stored there.
func NewLocal(e *storage.Engine, prefix keys.Partition) (*Local, error) {
	l := &Local{engine: e, prefix: prefix, last: SCN{Generation: localGeneration}}
	v, err := e.Get(prefix.Meta(metaApplied))
	switch {
	case errors.Is(err, storage.ErrNotFound):
	case err != nil:
		return nil, err
	default:
		scn, ok := decodeSCN(v)
		if !ok {
			return nil, fmt.Errorf("partition %x: corrupt applied SCN", []byte(prefix))
		}
		l.last = scn
	}
	return l, nil
}

// Replicate implements Replicator.
func (l *Local) Replicate(ctx context.Context, ws *WriteSet) (SCN, error) {
	encoded := ws.Encode()
	b := l.engine.NewBatch()
	l.mu.Lock()
	scn := SCN{Generation: l.last.Generation, Sequence: l.last.Sequence + 1}
	Apply(b, l.prefix, ws, encoded, scn)
	if err := l.engine.Enqueue(b); err != nil {
		l.mu.Unlock()
		return SCN{}, err
	}
	l.last = scn
	l.mu.Unlock()
	return scn, b.Wait()
}

// Lead implements Replicator: a single node always leads.
func (l *Local) Lead(context.Context) error { return nil }

// ReadIndex implements Replicator: writes are applied before they are
// acknowledged, so every read is linearizable.
func (l *Local) ReadIndex(context.Context) error { return nil }

// Applied implements Replicator.
func (l *Local) Applied() SCN {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}
