// Package router maps a request's database and partition key to the
// partition replica that serves it.
//
// On one node every partition is local; with replication the router is also
// where requests for partitions led elsewhere are forwarded.
package router

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/cespare/xxhash/v2"
	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/schema"
	"github.com/doppio-db/doppio/internal/storage"
)

// PartitionOf is the partition of db holding the document group whose
// encoded partition key is pk. Only hash partitioning exists today; the
// database's partitioner names the function, so range partitioning can be
// added without touching callers.
func PartitionOf(db schema.Database, pk []byte) int {
	return int(xxhash.Sum64(pk) % uint64(db.Partitions))
}

// Router opens and finds the partition replicas of this node.
type Router struct {
	engine *storage.Engine
	limits partition.Limits
	tables func(db string) []*schema.Table
	log    *slog.Logger
	ctx    context.Context // of background work (index builds)
	cancel context.CancelFunc

	mu       sync.RWMutex
	replicas map[string][]*partition.Replica
}

// New returns a router over the replicas stored in e; tables lists a
// database's current tables, whose indexes every opened replica builds.
func New(e *storage.Engine, limits partition.Limits, tables func(db string) []*schema.Table, log *slog.Logger) *Router {
	ctx, cancel := context.WithCancel(context.Background())
	return &Router{engine: e, limits: limits, tables: tables, log: log, ctx: ctx, cancel: cancel, replicas: map[string][]*partition.Replica{}}
}

// Close stops the replicas' background work and waits for it to end.
func (r *Router) Close() {
	r.cancel()
	for _, ps := range r.All() {
		for _, p := range ps {
			p.WaitIndexJobs()
		}
	}
}

// SyncIndexes brings the indexes of db's open replicas in line with its
// current tables (see partition.Replica.SyncIndexes).
func (r *Router) SyncIndexes(db string) error {
	r.mu.RLock()
	ps := r.replicas[db]
	r.mu.RUnlock()
	tables := r.tables(db)
	for _, p := range ps {
		if err := p.SyncIndexes(r.ctx, tables, r.log); err != nil {
			return fmt.Errorf("partition %s/%d: %w", db, p.ID, err)
		}
	}
	return nil
}

// Locate returns the replica of db holding the document group of the
// partition key pk (a string or int64), opening the database's partitions on
// first use.
func (r *Router) Locate(db schema.Database, pk any) (*partition.Replica, error) {
	enc, err := keys.EncodeTuple(keys.Tuple{pk})
	if err != nil {
		return nil, err
	}
	ps, err := r.Partitions(db)
	if err != nil {
		return nil, err
	}
	return ps[PartitionOf(db, enc)], nil
}

// Partitions returns every replica of db, opening them on first use.
func (r *Router) Partitions(db schema.Database) ([]*partition.Replica, error) {
	r.mu.RLock()
	ps, ok := r.replicas[db.Name]
	r.mu.RUnlock()
	if ok {
		return ps, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if ps, ok := r.replicas[db.Name]; ok {
		return ps, nil
	}
	ps = make([]*partition.Replica, db.Partitions)
	for i := range ps {
		prefix := keys.PartitionPrefix(db.Name, i)
		seq, err := partition.NewLocal(r.engine, prefix)
		if err != nil {
			return nil, fmt.Errorf("open partition %s/%d: %w", db.Name, i, err)
		}
		ps[i] = partition.New(r.engine, db.Name, i, seq, r.limits)
		if err := ps[i].SyncIndexes(r.ctx, r.tables(db.Name), r.log); err != nil {
			return nil, fmt.Errorf("open partition %s/%d: %w", db.Name, i, err)
		}
	}
	r.replicas[db.Name] = ps
	return ps, nil
}

// All returns every open replica, grouped by database.
func (r *Router) All() map[string][]*partition.Replica {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make(map[string][]*partition.Replica, len(r.replicas))
	for k, v := range r.replicas {
		out[k] = v
	}
	return out
}
