// Package replicas is the registry of this node's partition replicas and
// the routing decision for a request: given a database and partition key,
// the replica hosted here that leads (or, for a read that tolerates
// staleness, is fresh enough), or else the node to forward the request to.
package replicas

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/lazyctx"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/replication"
	"github.com/doppio-db/doppio/internal/schema"
	"github.com/doppio-db/doppio/internal/storage"
)

// Directory answers where other nodes are; the node implements it from the
// routing table it watches in etcd.
type Directory interface {
	// RoutedLeader returns the live node that publishes itself as leader of
	// partition p of db, and its peer address (internal/peer).
	RoutedLeader(db string, p int) (node, peer string, ok bool)
	// NodeByRaft returns the node id and peer address of a Raft member.
	NodeByRaft(raft uint64) (node, peer string, ok bool)
}

// Access says what a request needs of the replica.
type Access struct {
	// Read requests are made linearizable (ReadIndex) unless Staleness
	// allows a replica that was fresh within it to answer.
	Read      bool
	Staleness time.Duration
}

// Config configures a Registry.
type Config struct {
	Engine *storage.Engine
	Limits partition.Limits
	// Tables lists a database's current tables, whose indexes every opened
	// replica builds.
	Tables func(db string) []*schema.Table
	// Self is this node's Raft id.
	Self      uint64
	Directory Directory
	// LeadWait bounds how long a request waits for a leader to be known
	// (default 2 s; the request's own deadline may end it sooner).
	LeadWait time.Duration
	Logger   *slog.Logger
}

type hosted struct {
	rep    *partition.Replica
	member *replication.Member
}

// Registry opens and finds the partition replicas of this node, and routes
// requests to them or to the node that leads.
type Registry struct {
	cfg    Config
	log    *slog.Logger
	ctx    context.Context // of background work (index builds)
	cancel context.CancelFunc

	mu       sync.RWMutex
	replicas map[string]map[int]hosted
}

// New returns a registry with no replica open.
func New(cfg Config) *Registry {
	if cfg.LeadWait <= 0 {
		cfg.LeadWait = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Registry{cfg: cfg, log: cfg.Logger, ctx: ctx, cancel: cancel, replicas: map[string]map[int]hosted{}}
}

// Close stops the replicas' background work and waits for it to end.
func (r *Registry) Close() {
	r.cancel()
	for _, ps := range r.All() {
		for _, p := range ps {
			p.WaitIndexJobs()
		}
	}
}

// Open makes the replica of partition p of db, replicated by member g, available
// to requests, and returns it (the existing one if open).
func (r *Registry) Open(db string, p int, g *replication.Member) (*partition.Replica, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if h, ok := r.replicas[db][p]; ok && h.member == g {
		return h.rep, nil
	}
	rep := partition.New(r.cfg.Engine, db, p, g, r.cfg.Limits)
	if err := rep.SyncIndexes(r.ctx, r.cfg.Tables(db), r.log); err != nil {
		return nil, fmt.Errorf("open partition %s/%d: %w", db, p, err)
	}
	if r.replicas[db] == nil {
		r.replicas[db] = map[int]hosted{}
	}
	r.replicas[db][p] = hosted{rep: rep, member: g}
	return rep, nil
}

// Drop stops routing to the replica of partition p of db (it was moved
// away); its background work ends.
func (r *Registry) Drop(db string, p int) {
	r.mu.Lock()
	h, ok := r.replicas[db][p]
	if ok {
		delete(r.replicas[db], p)
		if len(r.replicas[db]) == 0 {
			delete(r.replicas, db)
		}
	}
	r.mu.Unlock()
	if ok {
		h.rep.WaitIndexJobs()
	}
}

// Hosted returns this node's replica of partition p of db and its member
// of the partition's Raft group.
func (r *Registry) Hosted(db string, p int) (*partition.Replica, *replication.Member, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	h, ok := r.replicas[db][p]
	return h.rep, h.member, ok
}

// SyncIndexes brings the indexes of db's open replicas in line with its
// current tables (see partition.Replica.SyncIndexes).
func (r *Registry) SyncIndexes(db string) error {
	tables := r.cfg.Tables(db)
	for _, p := range r.Partitions(db) {
		if err := p.SyncIndexes(r.ctx, tables, r.log); err != nil {
			return fmt.Errorf("partition %s/%d: %w", db, p.ID, err)
		}
	}
	return nil
}

// Locate routes a request for the document group of the partition key pk
// (a string or int64) of db; see Route.
func (r *Registry) Locate(ctx context.Context, db schema.Database, pk any, a Access) (*partition.Replica, error) {
	rep, _, err := r.LocateAt(ctx, db, pk, a)
	return rep, err
}

// LocateAt is Locate that also returns a time at which the replica had
// applied every write committed before it: for a leader's read the time
// its ReadIndex began, for a stale read the replica's FreshAt. A read of
// the replica answers a state at least that fresh.
func (r *Registry) LocateAt(ctx context.Context, db schema.Database, pk any, a Access) (*partition.Replica, time.Time, error) {
	enc, err := keys.EncodeTuple(keys.Tuple{pk})
	if err != nil {
		return nil, time.Time{}, err
	}
	return r.route(ctx, db, keys.PartitionOf(enc, db.Partitions), a)
}

// Route returns the replica of partition p of db that serves a request
// here: the hosted leader (for a read, once ReadIndex confirms it is
// current), or a hosted replica fresh within a stale read's bound. If
// another node leads, it fails with an Elsewhere
// *partition.NotAppliedError; if no leader becomes
// known within LeadWait (or ctx), with a NoLeader one (both retryable 503s).
func (r *Registry) Route(ctx context.Context, db schema.Database, p int, a Access) (*partition.Replica, error) {
	rep, _, err := r.route(ctx, db, p, a)
	return rep, err
}

func (r *Registry) route(ctx context.Context, db schema.Database, p int, a Access) (*partition.Replica, time.Time, error) {
	if p < 0 || p >= db.Partitions {
		return nil, time.Time{}, problem.New(problem.NotFound, "database %s has no partition %d", db.Name, p)
	}
	// The wait's timer starts only if a leader must be waited for.
	wait, cancel := lazyctx.WithTimeout(ctx, r.cfg.LeadWait)
	defer cancel()
	for {
		rep, g, ok := r.Hosted(db.Name, p)
		if ok && !g.Removed() {
			if a.Read && a.Staleness > 0 {
				if fresh := g.FreshAt(); time.Since(fresh) <= a.Staleness {
					return rep, fresh, nil
				}
			}
			err := g.Lead(wait)
			if err == nil {
				at := time.Now()
				if a.Read {
					if err := g.ReadIndex(ctx); err != nil {
						return nil, time.Time{}, err
					}
				}
				return rep, at, nil
			}
			if fw := r.redirect(db.Name, p, err); fw != nil {
				return nil, time.Time{}, fw
			}
			// The replica here knows no leader after waiting (it may have
			// wrongly seen the leader's node die and forgotten it, while
			// the leader, quiesced, has nothing to tell it): the routing
			// table may name one. That node checks it still leads.
			if fw := r.routed(db.Name, p); fw != nil {
				return nil, time.Time{}, fw
			}
			if wait.Err() != nil {
				return nil, time.Time{}, noLeader(db.Name, p, err)
			}
		} else if node, http, ok := r.cfg.Directory.RoutedLeader(db.Name, p); ok {
			return nil, time.Time{}, elsewhere(db.Name, p, node, http)
		}
		// Not hosted here and no leader published yet (a new database, or
		// an election in progress): look again shortly.
		select {
		case <-wait.Done():
			return nil, time.Time{}, noLeader(db.Name, p, nil)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// noLeader says no leader of the partition became known in time; the
// request was not applied anywhere.
func noLeader(db string, p int, cause error) error {
	return &partition.NotAppliedError{Reason: partition.NoLeader, DB: db, Partition: p, Cause: cause}
}

// Redirect turns a NotLeader error that names another node as the
// partition's leader into an Elsewhere one, so the request can be
// forwarded, and one that names no reachable leader into a NoLeader one
// (all *partition.NotAppliedError); other errors are returned unchanged.
func (r *Registry) Redirect(db string, p int, err error) error {
	if fw := r.redirect(db, p, err); fw != nil {
		return fw
	}
	if _, ok := partition.AsNotApplied(err, partition.NotLeader); ok {
		return noLeader(db, p, err)
	}
	return err
}

// Changed returns a channel closed at the next leadership change of this
// node's replica of partition p of db (nil if none is hosted here), for a
// request to wait on before it is routed again.
func (r *Registry) Changed(db string, p int) <-chan struct{} {
	if _, g, ok := r.Hosted(db, p); ok {
		return g.Changed()
	}
	return nil
}

// Partition names the partition an error of routing is about.
func Partition(err error) (db string, p int, ok bool) {
	if na, ok := partition.AsNotApplied(err, partition.Elsewhere, partition.NoLeader); ok {
		return na.DB, na.Partition, true
	}
	return "", 0, false
}

func (r *Registry) redirect(db string, p int, err error) *partition.NotAppliedError {
	nl, ok := partition.AsNotApplied(err, partition.NotLeader)
	if !ok || nl.Leader == 0 || nl.Leader == r.cfg.Self {
		return nil
	}
	node, peer, ok := r.cfg.Directory.NodeByRaft(nl.Leader)
	if !ok {
		return nil
	}
	return elsewhere(db, p, node, peer)
}

// routed is the partition's leader published in the routing table, if it
// is another live node.
func (r *Registry) routed(db string, p int) *partition.NotAppliedError {
	node, peer, ok := r.cfg.Directory.RoutedLeader(db, p)
	if !ok {
		return nil
	}
	if self, _, known := r.cfg.Directory.NodeByRaft(r.cfg.Self); known && self == node {
		return nil
	}
	return elsewhere(db, p, node, peer)
}

// Partitions returns db's replicas hosted on this node, by partition.
func (r *Registry) Partitions(db string) []*partition.Replica {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*partition.Replica, 0, len(r.replicas[db]))
	for _, h := range r.replicas[db] {
		out = append(out, h.rep)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// All returns every open replica, grouped by database.
func (r *Registry) All() map[string][]*partition.Replica {
	r.mu.RLock()
	dbs := make([]string, 0, len(r.replicas))
	for db := range r.replicas {
		dbs = append(dbs, db)
	}
	r.mu.RUnlock()
	out := make(map[string][]*partition.Replica, len(dbs))
	for _, db := range dbs {
		out[db] = r.Partitions(db)
	}
	return out
}

// elsewhere says partition p of db is led by node, whose peer address is
// peer: the request is to be forwarded there. Unforwarded, it is a 503
// with a Retry-After.
func elsewhere(db string, p int, node, peer string) *partition.NotAppliedError {
	return &partition.NotAppliedError{Reason: partition.Elsewhere, DB: db, Partition: p, Node: node, Peer: peer}
}
