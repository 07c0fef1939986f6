package node

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/lifecycle"
	"github.com/doppio-db/doppio/internal/membership"
	"github.com/doppio-db/doppio/internal/replication"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

const (
	// maxMoves bounds the membership changes (add, promote, transfer,
	// remove) this node drives at once, as the leader of their partitions.
	maxMoves = 4
	// reconcileEvery re-checks placement even without a change in etcd:
	// learners catching up and leaders becoming ready are not etcd events.
	reconcileEvery = time.Second
	// moveTimeout bounds one membership change.
	moveTimeout = 10 * time.Second
	// learnerRecheck is how soon the reconcile loop runs again while a
	// learner is catching up on a partition led here.
	learnerRecheck = 100 * time.Millisecond
)

// partRef names one partition of one database.
type partRef struct {
	db string
	p  int
}

// reconcileLoop brings the replicas hosted here in line with the placement
// whenever the placement, the nodes or the catalog change, and every
// reconcileEvery.
func (n *Node) reconcileLoop() {
	defer n.wg.Done()
	changes, cancel := n.view.Subscribe()
	defer cancel()
	schemas, cancelSchemas := n.catalog.Subscribe()
	defer cancelSchemas()
	t := time.NewTicker(reconcileEvery)
	defer t.Stop()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		<-n.stop
		stop()
	}()
	for {
		// While a learner of a partition led here catches up, look again
		// soon: its promotion (and the next move of a throttled
		// rebalance) waits for this pass, not for an etcd event.
		var soon <-chan time.Time
		if n.learning.Swap(false) {
			soon = time.After(learnerRecheck)
		}
		select {
		case <-n.stop:
			return
		case <-changes:
		case <-schemas:
		case <-t.C:
		case <-soon:
		}
		n.reconcile(ctx)
	}
}

// reconcile does one pass over every placement, taking for each partition
// the step lifecycle.Next decides:
//   - a replica placed here is started (Raft group) and opened (router);
//   - on the leader of a partition, the group's membership moves one step
//     towards the placement (see changeMembership);
//   - a replica not placed here that its group no longer counts is removed
//     with its data, hosted or left on disk from before a restart.
//
// Placements (of new databases too) are the controller's (internal/controller).
func (n *Node) reconcile(ctx context.Context) {
	n.removeOrphans()
	n.startPlaced(ctx)
	for db, rec := range n.view.Placements() {
		d, ok := n.catalog.Database(db)
		if !ok {
			continue // catalog not caught up yet, or the database is gone
		}
		for p, pp := range rec.Partitions {
			if p >= d.Partitions {
				break
			}
			n.reconcilePartition(ctx, partRef{db, p}, pp)
		}
	}
}

// placedState is the lifecycle state of ref as far as its placement and
// this node's local flags tell; the rest is read when a step needs it.
func (n *Node) placedState(ref partRef, pp membership.PartitionPlacement) lifecycle.State {
	s := lifecycle.State{Self: n.self, Placed: raftIDs(pp.Replicas), Now: time.Now(), UnlistedSince: n.stale[ref]}
	if pp.Leader != "" {
		s.Preferred = membership.RaftID(pp.Leader)
	}
	_, s.RestartingEmpty = n.rebuildingHere.Load(ref)
	return s
}

// mark keeps ref's unlisted-since time as the lifecycle step says.
func (n *Node) mark(ref partRef, step lifecycle.Step, now time.Time) {
	switch step.Mark {
	case lifecycle.Clear:
		delete(n.stale, ref)
	case lifecycle.Set:
		n.stale[ref] = now
	}
}

// report is the group configuration the leader of ref last published, as
// lifecycle reads it (nil if none).
func (n *Node) report(ref partRef) *lifecycle.Report {
	g, _, ok := n.view.Group(ref.db, ref.p)
	if !ok {
		return nil
	}
	return &lifecycle.Report{Term: g.Term, Lists: g.Has(n.cfg.ID)}
}

// startWorkers bounds the replicas a node starts at once.
const startWorkers = 32

// startPlaced starts the replicas placed here and not hosted yet,
// startWorkers at a time: each start commits the replica's bootstrap state
// and waits for a round of the replication loop, so concurrent starts share
// fsyncs and rounds; one at a time, a node placed thousands of replicas
// was slow to start them.
func (n *Node) startPlaced(ctx context.Context) {
	var todo []partRef
	for db, rec := range n.view.Placements() {
		d, ok := n.catalog.Database(db)
		if !ok {
			continue
		}
		for p, pp := range rec.Partitions {
			if p >= d.Partitions {
				break
			}
			ref := partRef{db, p}
			if _, _, hosted := n.router.Hosted(db, p); !hosted && lifecycle.Next(n.placedState(ref, pp)).Kind == lifecycle.Start {
				todo = append(todo, ref)
			}
		}
	}
	if len(todo) == 0 {
		return
	}
	work := make(chan partRef)
	var wg sync.WaitGroup
	for range min(startWorkers, len(todo)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ref := range work {
				if _, err := n.startReplica(ctx, ref); err != nil {
					n.log.Error("start replica", "db", ref.db, "partition", ref.p, "err", err)
				}
			}
		}()
	}
	for _, ref := range todo {
		work <- ref
	}
	close(work)
	wg.Wait()
}

// reconcilePartition takes ref's next lifecycle step. The leader's
// membership change runs in a goroutine of its own (changeMembership).
func (n *Node) reconcilePartition(ctx context.Context, ref partRef, pp membership.PartitionPlacement) {
	s := n.placedState(ref, pp)
	_, g, hosted := n.router.Hosted(ref.db, ref.p)
	if hosted {
		s.Local = lifecycle.Hosted
	}
	var err error
	for {
		if g != nil {
			_, s.Leading = g.Leader()
			_, s.Changing = n.changing.Load(ref)
			s.Removed = g.Removed()
		}
		step := lifecycle.Next(s)
		n.mark(ref, step, s.Now)
		switch step.Kind {
		case lifecycle.Start:
			if g, err = n.startReplica(ctx, ref); err != nil {
				n.log.Error("start replica", "db", ref.db, "partition", ref.p, "err", err)
				return
			}
			s.Local = lifecycle.Hosted
			continue
		case lifecycle.ReadStatus:
			if s.Leading {
				n.changing.Store(ref, struct{}{})
				go func() {
					defer n.changing.Delete(ref)
					n.changeMembership(ctx, ref, g, s)
				}()
				return
			}
			st, err := g.Status()
			if err != nil {
				return
			}
			s.Status, s.Report = lifecycleStatus(st), n.report(ref)
			continue
		case lifecycle.RestartEmpty:
			// Removed from its group (a consistency repair whose rebuild
			// request never arrived) yet placed here: it would ignore its
			// leader forever.
			n.log.Warn("replica removed from its group but placed here: restarting it empty", "db", ref.db, "partition", ref.p)
			if err := n.rebuildReplica(ctx, keys.PartitionPrefix(ref.db, ref.p)); err != nil {
				n.log.Error("restart removed replica", "db", ref.db, "partition", ref.p, "err", err)
			}
		case lifecycle.Drop:
			n.log.Info("removing replica moved away", "db", ref.db, "partition", ref.p)
			n.router.Drop(ref.db, ref.p)
			if err := n.host.Remove(keys.PartitionPrefix(ref.db, ref.p)); err != nil {
				n.log.Error("remove replica", "db", ref.db, "partition", ref.p, "err", err)
			}
			n.parts.Delete(string(keys.PartitionPrefix(ref.db, ref.p)))
			n.reg.SetLeader(ref.db, ref.p, 0)
			n.reg.SetGroup(ref.db, ref.p, nil)
		}
		return
	}
}

// lifecycleStatus is what lifecycle reads of a replica's Raft status.
func lifecycleStatus(st replication.Status) *lifecycle.Status {
	out := &lifecycle.Status{Role: st.Role, Term: st.Term, AppliedIndex: st.AppliedIndex, Voters: st.Voters, Learners: st.Learners}
	if len(st.Followers) > 0 {
		out.Followers = make(map[uint64]lifecycle.Follower, len(st.Followers))
		for id, f := range st.Followers {
			out.Followers[id] = lifecycle.Follower{Match: f.Match, Lag: f.Lag, Active: f.Active}
		}
	}
	return out
}

func raftIDs(ids []string) []uint64 {
	out := make([]uint64, len(ids))
	for i, id := range ids {
		out[i] = membership.RaftID(id)
	}
	return out
}

// findOrphans records the replicas with Raft state on disk that the first
// reconcile pass did not start: placed elsewhere while this node was down.
func (n *Node) findOrphans() {
	for _, d := range n.catalog.Databases() {
		for p := range d.Partitions {
			if _, _, hosted := n.router.Hosted(d.Name, p); hosted {
				continue
			}
			v, err := n.engine.Get(keys.PartitionPrefix(d.Name, p).RaftHardState())
			if err != nil {
				continue // no state (or unreadable: left alone)
			}
			var hs raftpb.HardState
			if err := proto.Unmarshal(v, &hs); err != nil {
				continue
			}
			n.orphans[partRef{d.Name, p}] = hs.GetTerm()
		}
	}
	if len(n.orphans) > 0 {
		n.log.Info("replicas on disk not placed here; deleted once their groups no longer list this node", "count", len(n.orphans))
	}
}

// removeOrphans deletes the data of orphans whose group no longer lists
// this node. An orphan placed here again is started as usual (it resumes
// from its state, and the leader brings it up to date).
func (n *Node) removeOrphans() {
	for ref, term := range n.orphans {
		s := lifecycle.State{Self: n.self, Local: lifecycle.Orphan, OrphanTerm: term, Report: n.report(ref), Now: time.Now(), UnlistedSince: n.stale[ref]}
		if rec, ok := n.view.Placement(ref.db); ok && ref.p < len(rec.Partitions) {
			s.Placed = raftIDs(rec.Partitions[ref.p].Replicas)
		}
		step := lifecycle.Next(s)
		n.mark(ref, step, s.Now)
		switch step.Kind {
		case lifecycle.ForgetOrphan:
			delete(n.orphans, ref)
		case lifecycle.DropOrphan:
			prefix := keys.PartitionPrefix(ref.db, ref.p)
			b := n.engine.NewBatch()
			b.DeleteRange(prefix, prefix.End())
			if err := n.engine.Commit(b); err != nil {
				n.log.Error("remove stale replica", "db", ref.db, "partition", ref.p, "err", err)
				continue
			}
			n.log.Info("removed stale replica", "db", ref.db, "partition", ref.p)
			delete(n.orphans, ref)
			delete(n.stale, ref)
		}
	}
}

// startReplica starts this node's Raft replica of ref and opens it for
// requests. A replica with state on disk resumes. A new one bootstraps the
// group with the database's initial placement when this node is one of
// the initial replicas and nobody leads the partition yet; otherwise it
// starts empty and waits for the leader to add it and send a snapshot.
func (n *Node) startReplica(ctx context.Context, ref partRef) (*replication.Member, error) {
	prefix := keys.PartitionPrefix(ref.db, ref.p)
	var voters []uint64
	if _, _, led := n.view.Leader(ref.db, ref.p); !led {
		ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
		initial, ok, err := n.view.InitialPlacement(ictx, ref.db)
		cancel()
		if err != nil {
			return nil, err
		}
		if ok && ref.p < len(initial.Partitions) {
			voters = initialVoters(initial.Partitions[ref.p], n.cfg.ID)
		}
	}
	n.parts.Store(string(prefix), ref)
	g, err := n.host.Start(prefix, voters)
	if err != nil {
		return nil, err
	}
	if _, err := n.router.Open(ref.db, ref.p, g); err != nil {
		return nil, err
	}
	return g, nil
}

// initialVoters are the Raft ids of an initial placement's replicas, the
// preferred leader first (it campaigns at once), or nil if self is not
// among them.
func initialVoters(pp membership.PartitionPlacement, self string) []uint64 {
	if !slices.Contains(pp.Replicas, self) {
		return nil
	}
	var out []uint64
	if slices.Contains(pp.Replicas, pp.Leader) {
		out = append(out, membership.RaftID(pp.Leader))
	}
	for _, r := range pp.Replicas {
		if r != pp.Leader {
			out = append(out, membership.RaftID(r))
		}
	}
	return out
}

// changeMembership runs on the leader of a partition and takes the step
// lifecycle.Next decides from the group's status, at most maxMoves at once
// on this node (one beyond that is left to a later pass).
func (n *Node) changeMembership(ctx context.Context, ref partRef, g *replication.Member, s lifecycle.State) {
	st, err := g.Status()
	if err != nil {
		return
	}
	s.Status = lifecycleStatus(st)
	s.Nodes = map[uint64]lifecycle.Node{}
	for _, nd := range n.view.Nodes() {
		s.Nodes[membership.RaftID(nd.ID)] = lifecycle.Node{Leaving: nd.Leaving}
	}
	s.Repairing = map[uint64]bool{}
	for _, id := range slices.Concat(s.Placed, st.Voters, st.Learners) {
		if g.Rebuilding(id) {
			s.Repairing[id] = true
		}
	}
	step := lifecycle.Next(s)
	if step.Soon {
		n.learning.Store(true)
	}
	var change func(context.Context, uint64) error
	switch step.Kind {
	case lifecycle.AddLearner:
		change = g.AddLearner
	case lifecycle.Promote:
		change = g.Promote
	case lifecycle.TransferLeadership:
		change = g.TransferLeadership
	case lifecycle.Remove:
		change = g.RemoveReplica
	default:
		return
	}
	select {
	case n.moves <- struct{}{}:
	default:
		return // enough in flight; the next pass retries
	}
	defer func() { <-n.moves }()
	mctx, cancel := context.WithTimeout(ctx, moveTimeout)
	defer cancel()
	name := n.nodeName(step.Replica)
	if err := change(mctx, step.Replica); err != nil {
		n.log.Warn("membership change failed", "db", ref.db, "partition", ref.p, "change", step.Kind.String(), "node", name, "err", err)
		return
	}
	n.log.Info("membership changed", "db", ref.db, "partition", ref.p, "change", step.Kind.String(), "node", name)
}

// nodeName returns the node id of a Raft member (its number if unknown).
func (n *Node) nodeName(raft uint64) string {
	if raft == n.self {
		return n.cfg.ID
	}
	if nd, ok := n.view.NodeByRaft(raft); ok {
		return nd.ID
	}
	for _, rec := range n.view.Placements() {
		for _, pp := range rec.Partitions {
			for _, r := range pp.Replicas {
				if membership.RaftID(r) == raft {
					return r
				}
			}
		}
	}
	return "raft:" + uintString(raft)
}
