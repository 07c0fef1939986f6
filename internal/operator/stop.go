package operator

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/doppio-db/doppio/internal/lifecycle"
	"github.com/doppio-db/doppio/internal/membership"
	"github.com/doppio-db/doppio/internal/replication"
)

// HandOff hands every leadership of this node to a caught-up voter before
// the node stops, so that requests do not wait for an election (a rolling
// restart). The node first marks itself leaving, so that no peer hands a
// leadership back. It gives up on what is not done within timeout: those
// partitions elect a leader once the node is gone, as after a crash.
func (o *Operator) HandOff(timeout time.Duration) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := o.cfg.Registration.Leave(ctx); err != nil {
		o.cfg.Logger.Warn("mark node leaving", "err", err)
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	var handed, tried atomic.Int64
	for p, g := range o.cfg.Hosted() {
		st, err := g.Status()
		if err != nil || st.Role != replication.RoleLeader {
			continue
		}
		to, ok := successor(st, p, o.cfg.Self, o.cfg.Cluster.NodeByRaft)
		if !ok {
			continue
		}
		wg.Add(1)
		tried.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := g.TransferLeadership(ctx, to); err == nil {
				handed.Add(1)
			}
		}()
	}
	wg.Wait()
	if handed.Load() > 0 || tried.Load() > 0 {
		o.cfg.Logger.Info("leaderships handed over before stopping", "count", handed.Load(), "of", tried.Load(), "took", time.Since(start).Round(time.Millisecond))
	}
}

// successor picks the voter to hand partition p's leadership to: a
// caught-up, live voter other than self that is not leaving, spread by
// partition number.
func successor(st replication.Status, p int, self uint64, node func(raft uint64) (membership.Node, bool)) (uint64, bool) {
	var cands []uint64
	for _, v := range st.Voters {
		f, ok := st.Followers[v]
		if v == self || !ok || !f.Active || f.Lag > lifecycle.CaughtUp {
			continue
		}
		if nd, alive := node(v); !alive || nd.Leaving {
			continue
		}
		cands = append(cands, v)
	}
	if len(cands) == 0 {
		return 0, false
	}
	slices.Sort(cands)
	return cands[p%len(cands)], true
}

// DrainPeriod is how long a stopping node of a cluster keeps answering
// (each answer closing its connection) after it left the routing table,
// before it closes its listener and idle connections: routers and smart
// clients move to other nodes meanwhile (their routing tables follow etcd
// within about a second).
const DrainPeriod = time.Second

// Drain leaves the cluster's routing (the registration's lease is
// revoked: routers and peers see the node gone) and answers for d more
// with "Connection: close", when other nodes could take the node's
// clients; a node alone stops at once.
func (o *Operator) Drain(d time.Duration) {
	if len(o.cfg.Cluster.Nodes()) < 2 {
		return
	}
	o.cfg.Server.Drain()
	if err := o.cfg.Registration.Close(); err != nil {
		o.cfg.Logger.Warn("leave the cluster", "err", err)
	}
	time.Sleep(d)
}
