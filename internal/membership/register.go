package membership

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// DefaultTTL is how long a node's registration outlives its last
// keep-alive: the failure detector's delay for routing tables.
const DefaultTTL = 3 * time.Second

// leadershipBatch is how long leadership changes are collected before one
// etcd write publishes them all (the paper's Figure 4: a failover changes
// the leaders of many partitions at once; one write per partition would
// make etcd the bottleneck).
const leadershipBatch = 50 * time.Millisecond

// Registration keeps a node's key alive under a lease and publishes the
// partitions it leads, and their Raft configurations, under the same lease,
// so all disappear when the node dies. If the lease is lost (etcd unreachable past the TTL), a new one is
// granted and both keys are written again.
type Registration struct {
	cli    *clientv3.Client
	prefix string
	node   Node
	ttl    time.Duration
	log    *slog.Logger

	mu      sync.Mutex
	leads   Leaderships
	groups  Groups
	dirty   chan struct{}
	cancel  context.CancelFunc
	done    chan struct{}
	leaseMu sync.Mutex
	lease   clientv3.LeaseID

	closeOnce sync.Once
	closeErr  error
}

// Register writes node's key and keeps it alive until Close. It returns
// once the key is written.
func Register(ctx context.Context, cli *clientv3.Client, prefix string, node Node, ttl time.Duration, log *slog.Logger) (*Registration, error) {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	r := &Registration{
		cli: cli, prefix: prefix, node: node, ttl: ttl, log: log.With("component", "membership"),
		leads: Leaderships{}, groups: Groups{}, dirty: make(chan struct{}, 1), done: make(chan struct{}),
	}
	ka, err := r.grant(ctx)
	if err != nil {
		return nil, err
	}
	bg, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go r.run(bg, ka)
	return r, nil
}

// grant takes a new lease, writes the node key and the leaderships under
// it (deleting the node's death record) and starts keeping it alive.
func (r *Registration) grant(ctx context.Context) (<-chan *clientv3.LeaseKeepAliveResponse, error) {
	secs := int64((r.ttl + time.Second - 1) / time.Second)
	lg, err := r.cli.Grant(ctx, secs)
	if err != nil {
		return nil, err
	}
	r.leaseMu.Lock()
	val, _ := json.Marshal(r.node) // Leave changes it under leaseMu
	r.leaseMu.Unlock()
	// The node is back: its death record (if a controller wrote one) goes
	// in the same transaction.
	if _, err := r.cli.Txn(ctx).Then(
		clientv3.OpPut(r.prefix+NodesDir+r.node.ID, string(val), clientv3.WithLease(lg.ID)),
		clientv3.OpDelete(r.prefix+DeathsDir+r.node.ID),
	).Commit(); err != nil {
		return nil, err
	}
	r.leaseMu.Lock()
	r.lease = lg.ID
	r.leaseMu.Unlock()
	if err := r.publish(ctx); err != nil {
		return nil, err
	}
	// The keep-alive stream lives as long as the registration, not ctx.
	return r.cli.KeepAlive(context.WithoutCancel(ctx), lg.ID)
}

func (r *Registration) run(ctx context.Context, ka <-chan *clientv3.LeaseKeepAliveResponse) {
	defer close(r.done)
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-ka:
			if ok {
				continue
			}
			r.log.Warn("node lease lost; registering again")
			for ctx.Err() == nil {
				var err error
				if ka, err = r.grant(ctx); err == nil {
					break
				}
				r.log.Warn("register node", "err", err)
				select {
				case <-ctx.Done():
				case <-time.After(500 * time.Millisecond):
				}
			}
		case <-r.dirty:
			// Coalesce: everything that changes within the batch window
			// goes out in one write.
			select {
			case <-ctx.Done():
				return
			case <-time.After(leadershipBatch):
			}
			if err := r.publish(ctx); err != nil && ctx.Err() == nil {
				r.log.Warn("publish leaderships", "err", err)
				r.markDirty()
			}
		}
	}
}

func (r *Registration) markDirty() {
	select {
	case r.dirty <- struct{}{}:
	default:
	}
}

// publish writes the current leaderships and group reports under the
// current lease, in one transaction.
func (r *Registration) publish(ctx context.Context) error {
	r.mu.Lock()
	leads, _ := json.Marshal(r.leads)
	groups, _ := json.Marshal(r.groups)
	r.mu.Unlock()
	r.leaseMu.Lock()
	lease := r.lease
	r.leaseMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := r.cli.Txn(ctx).Then(
		clientv3.OpPut(r.prefix+LeadersDir+r.node.ID, string(leads), clientv3.WithLease(lease)),
		clientv3.OpPut(r.prefix+GroupsDir+r.node.ID, string(groups), clientv3.WithLease(lease)),
	).Commit()
	return err
}

// SetGroup records the Raft configuration of partition p of db, which this
// node leads, or forgets it (nil) when this node no longer leads it. It
// never blocks: changes are written in batches, with the leaderships.
func (r *Registration) SetGroup(db string, p int, g *GroupReport) {
	r.mu.Lock()
	ps := r.groups[db]
	if g == nil {
		if _, ok := ps[p]; !ok {
			r.mu.Unlock()
			return
		}
		delete(ps, p)
		if len(ps) == 0 {
			delete(r.groups, db)
		}
	} else {
		if old, ok := ps[p]; ok && old.equal(*g) {
			r.mu.Unlock()
			return
		}
		if ps == nil {
			ps = map[int]GroupReport{}
			r.groups[db] = ps
		}
		ps[p] = GroupReport{Term: g.Term, Voters: slices.Clone(g.Voters), Learners: slices.Clone(g.Learners)}
	}
	r.mu.Unlock()
	r.markDirty()
}

// SetLeader records that this node leads (term > 0) or no longer leads
// (term 0) partition p of db. It never blocks: changes are written in
// batches.
func (r *Registration) SetLeader(db string, p int, term uint64) {
	r.mu.Lock()
	ps := r.leads[db]
	if term == 0 {
		if _, ok := ps[p]; !ok {
			r.mu.Unlock()
			return
		}
		delete(ps, p)
		if len(ps) == 0 {
			delete(r.leads, db)
		}
	} else {
		if ps == nil {
			ps = map[int]uint64{}
			r.leads[db] = ps
		}
		if ps[p] == term {
			r.mu.Unlock()
			return
		}
		ps[p] = term
	}
	r.mu.Unlock()
	r.markDirty()
}

// Leaderships returns what this node publishes.
func (r *Registration) Leaderships() Leaderships {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(Leaderships, len(r.leads))
	for db, ps := range r.leads {
		out[db] = maps.Clone(ps)
	}
	return out
}

// Leave marks the node as leaving (Node.Leaving): it is shutting down and
// hands its leaderships over, and peers must not hand them back.
func (r *Registration) Leave(ctx context.Context) error {
	r.leaseMu.Lock()
	defer r.leaseMu.Unlock()
	r.node.Leaving = true
	val, _ := json.Marshal(r.node)
	_, err := r.cli.Put(ctx, r.prefix+NodesDir+r.node.ID, string(val), clientv3.WithLease(r.lease))
	return err
}

// Close stops keeping the registration alive and revokes the lease, so the
// node is seen gone at once rather than after the TTL.
// Closing again does nothing.
func (r *Registration) Close() error {
	r.closeOnce.Do(func() { r.closeErr = r.close() })
	return r.closeErr
}

func (r *Registration) close() error {
	r.cancel()
	<-r.done
	r.leaseMu.Lock()
	lease := r.lease
	r.leaseMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := r.cli.Revoke(ctx, lease)
	return err
}
