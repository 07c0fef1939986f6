package node

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/doppio-db/doppio/client/wire"

	"github.com/doppio-db/doppio/internal/lifecycle"
	"github.com/doppio-db/doppio/internal/membership"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/replication"
	"github.com/prometheus/client_golang/prometheus"
)

// SetNodeIntent records what the operator wants of node id: "add" makes
// it active (it takes replicas), "drain" moves everything off it, "remove"
// takes a drained node out of the cluster for good. It refuses a drain
// that would leave a database fewer active nodes than its replicas, and a
// removal while the node still holds replicas.
func (c clusterView) SetNodeIntent(ctx context.Context, id, verb string) (wire.NodeIntent, error) {
	n := c.n
	if n.view == nil {
		return wire.NodeIntent{}, problem.New(problem.Unavailable, "node %s is starting; retry", n.cfg.ID)
	}
	var st membership.IntentState
	switch verb {
	case "add":
		st = membership.IntentActive
	case "drain":
		st = membership.IntentDraining
	case "remove":
		st = membership.IntentRemoved
	default:
		return wire.NodeIntent{}, problem.New(problem.NotFound, "unknown node operation %q (want add, drain or remove)", verb)
	}
	_, alive := n.view.Node(id)
	intents, err := membership.ReadIntents(ctx, n.client, etcdPrefix)
	if err != nil {
		return wire.NodeIntent{}, err
	}
	_, hasIntent := intents.ByNode[id]
	held := n.replicasHeld(id)
	if !alive && !hasIntent && held == 0 {
		return wire.NodeIntent{}, problem.Field(problem.NotFound, "node", "node %q is not part of the cluster: not registered, no intent recorded, no replica placed on it", id)
	}
	cur := intents.State(id)
	guard := []string{id}
	switch st {
	case membership.IntentDraining:
		if cur == membership.IntentRemoved {
			return wire.NodeIntent{}, problem.Field(problem.Conflict, "node", "node %q was removed; add it again first", id)
		}
		// Two drains at once must not both pass the check: the write
		// requires every live node's intent unchanged since read.
		if guard, err = n.checkDrain(id, intents); err != nil {
			return wire.NodeIntent{}, err
		}
	case membership.IntentRemoved:
		if held > 0 {
			return wire.NodeIntent{}, problem.Field(problem.Conflict, "node", "node %q still holds %d replica(s); drain it first (doppio cluster drain %s) and remove it once it holds none", id, held, id)
		}
	}
	in, recorded := intents.ByNode[id]
	if !recorded || cur != st {
		if in, err = membership.SetIntent(ctx, n.client, etcdPrefix, id, st, intents, guard); err != nil {
			if errors.Is(err, membership.ErrIntentsChanged) {
				return wire.NodeIntent{}, problem.New(problem.Conflict, "another node's state changed while %s was being applied to %q; retry", verb, id)
			}
			return wire.NodeIntent{}, err
		}
	}
	return wire.NodeIntent{Node: id, Alive: alive, State: string(in.State), Since: in.Since, Replicas: held}, nil
}

// checkDrain refuses draining id when some database would be left with
// fewer live, active nodes than its replication factor: its replicas on id
// could go nowhere and the drain would never end. It returns the nodes
// whose intents the decision read.
func (n *Node) checkDrain(id string, intents membership.Intents) ([]string, error) {
	active := 0
	read := []string{id}
	for _, nd := range n.view.Nodes() {
		if nd.ID == id {
			continue
		}
		read = append(read, nd.ID)
		if intents.State(nd.ID).TakesReplicas() {
			active++
		}
	}
	for _, d := range n.catalog.Databases() {
		if rf := max(d.Replicas, 1); active < rf {
			return nil, problem.Field(problem.Conflict, "node",
				"draining %q would leave %d live active node(s) for database %q, which keeps %d replicas of each partition; add a node first", id, active, d.Name, rf)
		}
	}
	return read, nil
}

// replicasHeld counts the partitions that place a replica on id or whose
// leader reports id as a member.
func (n *Node) replicasHeld(id string) int {
	type key struct {
		db string
		p  int
	}
	held := map[key]bool{}
	for db, rec := range n.view.Placements() {
		for p, pp := range rec.Partitions {
			if slices.Contains(pp.Replicas, id) {
				held[key{db, p}] = true
			}
		}
	}
	for _, gs := range n.view.Groups() {
		for db, ps := range gs {
			for p, g := range ps {
				if g.Has(id) {
					held[key{db, p}] = true
				}
			}
		}
	}
	return len(held)
}

// rebalanceMetrics exports the rebalance progress this node's controller
// reports while it is the active one.
func rebalanceMetrics(reg prometheus.Registerer) func(membership.Rebalance) {
	g := func(name, help string) prometheus.Gauge {
		m := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
		reg.MustRegister(m)
		return m
	}
	active := g("doppio_rebalance_active", "1 while the controller on this node has replica moves to make.")
	total := g("doppio_rebalance_moves", "Moves of the current (or last) rebalance, done and remaining.")
	done := g("doppio_rebalance_moves_done", "Moves of the current (or last) rebalance completed.")
	remaining := g("doppio_rebalance_moves_remaining", "Moves of the current rebalance in flight or not started.")
	inFlight := g("doppio_rebalance_moves_in_flight", "Replicas being added (learners receiving a snapshot or catching up).")
	return func(r membership.Rebalance) {
		a := 0.0
		if r.Active {
			a = 1
		}
		active.Set(a)
		total.Set(float64(r.Total))
		done.Set(float64(r.Done))
		remaining.Set(float64(r.Remaining))
		inFlight.Set(float64(r.InFlight))
	}
}

// handOff hands every leadership of this node to a caught-up voter before
// the node stops, so that requests do not wait for an election (a rolling
// restart). The node first marks itself leaving, so that no peer hands a
// leadership back. It gives up on what is not done within timeout: those
// partitions elect a leader once the node is gone, as after a crash.
func (n *Node) handOff(timeout time.Duration) {
	if n.reg == nil || n.router == nil {
		return
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := n.reg.Leave(ctx); err != nil {
		n.log.Warn("mark node leaving", "err", err)
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	var handed, tried atomic.Int64
	for ref, g := range n.hosted() {
		st, err := g.Status()
		if err != nil || st.Role != replication.RoleLeader {
			continue
		}
		to, ok := n.successor(st, ref.p)
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
		n.log.Info("leaderships handed over before stopping", "count", handed.Load(), "of", tried.Load(), "took", time.Since(start).Round(time.Millisecond))
	}
}

// successor picks the voter to hand a partition's leadership to: a
// caught-up, live voter that is not leaving, spread by partition number.
func (n *Node) successor(st replication.Status, p int) (uint64, bool) {
	var cands []uint64
	for _, v := range st.Voters {
		f, ok := st.Followers[v]
		if v == n.self || !ok || !f.Active || f.Lag > lifecycle.CaughtUp {
			continue
		}
		if nd, alive := n.view.NodeByRaft(v); !alive || nd.Leaving {
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

// drainPeriod is how long a stopping node of a cluster keeps answering
// (each answer closing its connection) after it left the routing table,
// before it closes its listener and idle connections: routers and smart
// clients move to other nodes meanwhile (their routing tables follow etcd
// within about a second).
const drainPeriod = time.Second

// drain leaves the cluster's routing (the registration's lease is
// revoked: routers and peers see the node gone) and answers for d more
// with "Connection: close", when other nodes could take the node's
// clients; a node alone stops at once.
func (n *Node) drain(d time.Duration) {
	if n.reg == nil || n.view == nil || len(n.view.Nodes()) < 2 {
		return
	}
	n.api.Drain()
	if err := n.reg.Close(); err != nil {
		n.log.Warn("leave the cluster", "err", err)
	}
	time.Sleep(d)
}
