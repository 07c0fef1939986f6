package node

import (
	"context"

	"github.com/doppio-db/doppio/internal/bulkload"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/replicas"
)

// loadReplicas finds the partitions this node leads for bulk loads.
type loadReplicas struct {
	r    *replicas.Registry
	self uint64 // this node's Raft id
}

func (l loadReplicas) Leading(db string, p int) (bulkload.Partition, bool) {
	rep, g, ok := l.r.Hosted(db, p)
	if !ok || g.Removed() {
		return nil, false
	}
	// Ready, not only leading: a new leader may not have applied every
	// committed entry yet, and its load mark would read stale.
	if lead, ready := g.Leader(); lead != l.self || !ready {
		return nil, false
	}
	return loadPartition{rep}, true
}

// loadPartition is a partition replica as a bulk load drives it.
type loadPartition struct{ r *partition.Replica }

func (p loadPartition) LoadMark(load string) (bulkload.Mark, error) {
	m, err := p.r.LoadMark(load)
	return bulkload.Mark(m), err
}

func (p loadPartition) LoadChunk(ctx context.Context, table string, version uint32, from, to bulkload.Mark, docs []bulkload.Doc) (partition.SCN, error) {
	return p.r.LoadChunk(ctx, table, version, partition.LoadMark(from), partition.LoadMark(to), loadDocs(docs))
}

func (p loadPartition) ReplaceChunk(ctx context.Context, table string, version uint32, from, to bulkload.Mark, docs []bulkload.Doc) (partition.SCN, error) {
	return p.r.ReplaceChunk(ctx, table, version, partition.LoadMark(from), partition.LoadMark(to), loadDocs(docs))
}

func (p loadPartition) DiscardStaging(ctx context.Context, table string, from bulkload.Mark) error {
	_, err := p.r.DiscardStaging(ctx, table, partition.LoadMark(from))
	return err
}

func loadDocs(docs []bulkload.Doc) []partition.LoadDoc {
	ds := make([]partition.LoadDoc, len(docs))
	for i, d := range docs {
		ds[i] = partition.LoadDoc{Key: d.Key, Avro: d.Doc}
	}
	return ds
}
