package main

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/doppio-db/doppio/internal/catalog"
	"github.com/doppio-db/doppio/internal/membership"
)

// hosts stands in for the storage nodes: each is a real registration
// (its lease, leaderships and group reports in etcd, written by
// membership.Registration as a node writes them), and every partition's
// Raft group follows its placement at once: the placed replicas are its
// voters, the preferred leader leads when alive, else the first live
// replica. No partition data exists.
type hosts struct {
	cli    *clientv3.Client
	prefix string
	log    *slog.Logger

	mu    sync.Mutex
	regs  map[string]*membership.Registration // live nodes
	zones map[string]string
	led   map[partition]group
	// down is the node killed last: converged waits until it is nobody's
	// preferred leader.
	down string
}

type partition struct {
	db    string
	index int
}

// group is what the harness last published for a partition.
type group struct {
	leader string
	term   uint64
	voters []string
}

func newHosts(cli *clientv3.Client, prefix string, log *slog.Logger) *hosts {
	return &hosts{cli: cli, prefix: prefix, log: log,
		regs: map[string]*membership.Registration{}, zones: map[string]string{}, led: map[partition]group{}}
}

// start registers node id in zone.
func (h *hosts) start(ctx context.Context, id, zone string) error {
	var r *membership.Registration
	err := retry(ctx, func() (err error) {
		r, err = membership.Register(ctx, h.cli, h.prefix, membership.Node{ID: id, Zone: zone, HTTP: id + ":1", GRPC: id + ":2"}, 3*time.Second, h.log)
		return err
	})
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.regs[id], h.zones[id] = r, zone
	h.mu.Unlock()
	return nil
}

// kill ends node id's registration as a crash does: its lease is revoked,
// so its keys go at once rather than after the TTL, and the groups it led
// elect a live replica.
func (h *hosts) kill(id string, placements map[string]membership.PlacementRecord) error {
	h.mu.Lock()
	r := h.regs[id]
	delete(h.regs, id)
	h.mu.Unlock()
	err := r.Close()
	h.follow(placements)
	return err
}

func (h *hosts) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.regs {
		r.Close()
	}
}

// follow makes every partition's group match its placement, publishing
// only what changed.
func (h *hosts) follow(placements map[string]membership.PlacementRecord) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for db, rec := range placements {
		for i, pp := range rec.Partitions {
			leader := pp.Leader
			if h.regs[leader] == nil {
				leader = ""
				for _, r := range pp.Replicas {
					if h.regs[r] != nil {
						leader = r
						break
					}
				}
			}
			if leader == "" {
				continue
			}
			p := partition{db, i}
			cur := h.led[p]
			if cur.leader == leader && slices.Equal(cur.voters, pp.Replicas) {
				continue
			}
			next := group{leader: leader, term: cur.term, voters: slices.Clone(pp.Replicas)}
			if cur.leader != leader {
				next.term++
				if old := h.regs[cur.leader]; old != nil {
					old.SetLeader(db, i, 0)
					old.SetGroup(db, i, nil)
				}
			}
			r := h.regs[leader]
			r.SetLeader(db, i, next.term)
			r.SetGroup(db, i, &membership.GroupReport{Term: next.term, Voters: next.voters})
			h.led[p] = next
		}
	}
}

// retry calls f until it succeeds, fails otherwise than by etcd's
// back-pressure (its apply falling behind under the writes measured), or
// a minute has passed.
func retry(ctx context.Context, f func() error) error {
	deadline := time.Now().Add(time.Minute)
	for {
		err := f()
		if err == nil || !(errors.Is(err, rpctypes.ErrTooManyRequests) || strings.Contains(err.Error(), "too many requests")) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// converged reports whether every database is placed, every partition's
// group follows its placement led by its preferred leader (or, while that
// one is down, a live replica), no preferred leader is down and the
// controller has no rebalance under way.
func (h *hosts) converged(ctx context.Context, cat *catalog.Catalog, view *membership.View) bool {
	if rb, ok, err := membership.ReadRebalance(ctx, h.cli, h.prefix); err != nil || (ok && rb.Remaining > 0) {
		return false
	}
	ps := view.Placements()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, db := range cat.Databases() {
		rec, ok := ps[db.Name]
		if !ok || len(rec.Partitions) != db.Partitions {
			return false
		}
		for i, pp := range rec.Partitions {
			g := h.led[partition{db.Name, i}]
			if pp.Leader == h.down || g.leader == "" || h.regs[g.leader] == nil || !slices.Equal(g.voters, pp.Replicas) {
				return false
			}
			if h.regs[pp.Leader] != nil && g.leader != pp.Leader {
				return false
			}
		}
	}
	return true
}
