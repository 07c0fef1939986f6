package partition

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/storage"
)

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
	if ws.Ingest || ws.Load != nil {
		return l.ingest(ws, encoded)
	}
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

// ingest applies a write set by ingestion, in turn with the batches: the
// ingestion makes every batch before it durable.
func (l *Local) ingest(ws *WriteSet, encoded []byte) (SCN, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	marks := map[string]LoadMark{}
	ok, err := Applies(l.engine, l.prefix, ws, marks)
	if err != nil {
		return SCN{}, err
	}
	if !ok {
		return SCN{}, ws.Load.Refusal(marks[ws.Load.From.Load])
	}
	scn := SCN{Generation: l.last.Generation, Sequence: l.last.Sequence + 1}
	if err := ApplyIngest(l.engine, l.prefix, ws, encoded, scn); err != nil {
		return SCN{}, err
	}
	l.last = scn
	return scn, nil
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
