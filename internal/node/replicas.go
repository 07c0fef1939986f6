package node

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/membership"
	"github.com/doppio-db/doppio/internal/replication"
	"github.com/doppio-db/doppio/internal/schema"
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
	// caughtUp is how far behind the leader's log a learner may be when it
	// is promoted, or a voter when it is handed leadership.
	caughtUp = 64
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

// reconcile does one pass over every placement:
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
			n.reconcilePartition(ctx, d, p, pp)
		}
	}
}

// startWorkers bounds the replicas a node starts at once.
const startWorkers = 32

// startPlaced starts the replicas placed here and not hosted yet,
// startWorkers at a time: each start commits the replica's bootstrap state
// and waits for a round of the replication loop, so concurrent starts share
// fsyncs and rounds (one at a time, a node placed 2,048 new replicas took
// minutes to start them on a loaded machine).
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
			if _, busy := n.rebuildingHere.Load(partRef{db, p}); busy {
				continue
			}
			if _, _, hosted := n.router.Hosted(db, p); !hosted && slices.Contains(pp.Replicas, n.cfg.ID) {
				todo = append(todo, partRef{db, p})
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

func (n *Node) reconcilePartition(ctx context.Context, d schema.Database, p int, pp membership.PartitionPlacement) {
	ref := partRef{d.Name, p}
	if _, busy := n.rebuildingHere.Load(ref); busy {
		return
	}
	placed := slices.Contains(pp.Replicas, n.cfg.ID)
	_, g, hosted := n.router.Hosted(d.Name, p)
	if !hosted {
		if !placed {
			return
		}
		var err error
		if g, err = n.startReplica(ctx, ref); err != nil {
			n.log.Error("start replica", "db", d.Name, "partition", p, "err", err)
			return
		}
	}
	if _, leading := g.Leader(); leading {
		if _, busy := n.changing.Load(ref); !busy {
			n.changing.Store(ref, struct{}{})
			go func() {
				defer n.changing.Delete(ref)
				n.changeMembership(ctx, ref, g, pp)
			}()
		}
		return
	}
	if placed {
		delete(n.stale, ref)
		if g.Removed() {
			// Removed from its group (a consistency repair whose rebuild
			// request never arrived) yet placed here: it would ignore its
			// leader forever. Start it again empty, without a vote until
			// its snapshot; the leader adds it back.
			n.log.Warn("replica removed from its group but placed here: restarting it empty", "db", d.Name, "partition", p)
			if err := n.rebuildReplica(ctx, keys.PartitionPrefix(d.Name, p)); err != nil {
				n.log.Error("restart removed replica", "db", d.Name, "partition", p, "err", err)
			}
		}
		return
	}
	// Not placed here and not leading: once the group no longer counts
	// this replica (the leader removed it), drop it and its data. While it
	// is still a member, deleting its state could let it vote with an
	// empty log, so it stays until then.
	st, err := g.Status()
	if err != nil {
		return
	}
	// A replica removed while it was down or cut off never applies its
	// removal: its own configuration still lists it. Its leader's report
	// (a term at least as recent) then tells.
	removed := st.Role == replication.RoleRemoved || (!slices.Contains(st.Voters, n.self) && !slices.Contains(st.Learners, n.self) && st.AppliedIndex > 0)
	if !removed && !n.removedByLeader(ref, st.Term) {
		return
	}
	n.log.Info("removing replica moved away", "db", d.Name, "partition", p)
	delete(n.stale, ref)
	n.router.Drop(d.Name, p)
	if err := n.host.Remove(keys.PartitionPrefix(d.Name, p)); err != nil {
		n.log.Error("remove replica", "db", d.Name, "partition", p, "err", err)
	}
	n.parts.Delete(string(keys.PartitionPrefix(d.Name, p)))
	n.reg.SetLeader(d.Name, p, 0)
	n.reg.SetGroup(d.Name, p, nil)
}

// staleAfter is how long a replica must look removed in its leader's
// report before it is deleted: the report and the placement arrive on
// different watches, and a replica placed here again must not be deleted
// on a report older than the placement.
const staleAfter = 2 * time.Second

// removedByLeader reports whether the leader of ref, in a term at least
// term, has published a configuration without this node, continuously for
// staleAfter.
func (n *Node) removedByLeader(ref partRef, term uint64) bool {
	g, _, ok := n.view.Group(ref.db, ref.p)
	if !ok || g.Term < term || g.Has(n.cfg.ID) {
		delete(n.stale, ref)
		return false
	}
	since, seen := n.stale[ref]
	if !seen {
		n.stale[ref] = time.Now()
		return false
	}
	return time.Since(since) >= staleAfter
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
		if rec, ok := n.view.Placement(ref.db); ok && ref.p < len(rec.Partitions) && slices.Contains(rec.Partitions[ref.p].Replicas, n.cfg.ID) {
			delete(n.orphans, ref)
			delete(n.stale, ref)
			continue
		}
		if !n.removedByLeader(ref, term) {
			continue
		}
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

// changeMembership runs on the leader of a partition and takes the next
// step from the group's configuration towards the placement, one change at
// a time and at most maxMoves at once on this node:
//  1. add a placed replica missing from the group as a learner;
//  2. promote a learner that has caught up;
//  3. remove a replica no longer placed (a learner at once; a voter only
//     once the placed voters alone reach the replication factor, so it
//     never drops during a move), handing leadership away first if the
//     replica to remove is this one;
//  4. hand leadership to the preferred leader once it is a caught-up voter.
func (n *Node) changeMembership(ctx context.Context, ref partRef, g *replication.Member, pp membership.PartitionPlacement) {
	if len(pp.Replicas) == 0 {
		return
	}
	st, err := g.Status()
	if err != nil || st.Role != replication.RoleLeader {
		return
	}
	if len(st.Learners) > 0 {
		n.learning.Store(true)
	}
	target := make([]uint64, len(pp.Replicas))
	for i, r := range pp.Replicas {
		target[i] = membership.RaftID(r)
	}
	members := append(slices.Clone(st.Voters), st.Learners...)
	step := func(what string, node uint64, fn func(context.Context) error) {
		select {
		case n.moves <- struct{}{}:
		default:
			return // enough in flight; the next pass retries
		}
		defer func() { <-n.moves }()
		mctx, cancel := context.WithTimeout(ctx, moveTimeout)
		defer cancel()
		name := n.nodeName(node)
		if err := fn(mctx); err != nil {
			n.log.Warn("membership change failed", "db", ref.db, "partition", ref.p, "change", what, "node", name, "err", err)
			return
		}
		n.log.Info("membership changed", "db", ref.db, "partition", ref.p, "change", what, "node", name)
	}
	caught := func(id uint64) bool {
		f, ok := st.Followers[id]
		return ok && f.Active && f.Match > 0 && f.Lag <= caughtUp
	}

	for _, t := range target {
		if g.Rebuilding(t) {
			continue // a consistency repair re-adds and promotes it
		}
		if !slices.Contains(members, t) {
			if _, alive := n.view.NodeByRaft(t); alive {
				step("add learner", t, func(c context.Context) error { return g.AddLearner(c, t) })
				return
			}
		}
	}
	for _, l := range st.Learners {
		if slices.Contains(target, l) && caught(l) && !g.Rebuilding(l) {
			step("promote", l, func(c context.Context) error { return g.Promote(c, l) })
			return
		}
	}
	placedVoters := 0
	for _, v := range st.Voters {
		if slices.Contains(target, v) {
			placedVoters++
		}
	}
	for _, m := range members {
		if slices.Contains(target, m) {
			continue
		}
		learner := slices.Contains(st.Learners, m)
		if !learner && placedVoters < len(target) {
			continue // its replacement is not a voter yet
		}
		if m == n.self {
			// Hand leadership to a placed voter first; the new leader
			// removes this replica.
			for _, t := range preferFirst(target, membership.RaftID(pp.Leader)) {
				if nd, alive := n.view.NodeByRaft(t); alive && !nd.Leaving && slices.Contains(st.Voters, t) && caught(t) && !g.Rebuilding(t) {
					step("transfer leadership", t, func(c context.Context) error { return g.TransferLeadership(c, t) })
					return
				}
			}
			continue
		}
		step("remove", m, func(c context.Context) error { return g.RemoveReplica(c, m) })
		return
	}
	if pp.Leader != "" && pp.Leader != n.cfg.ID {
		want := membership.RaftID(pp.Leader)
		// Not to a node shutting down (it hands its leaderships over).
		if nd, alive := n.view.Node(pp.Leader); alive && !nd.Leaving && slices.Contains(st.Voters, want) && caught(want) && !g.Rebuilding(want) {
			step("transfer leadership", want, func(c context.Context) error { return g.TransferLeadership(c, want) })
		}
	}
}

func preferFirst(ids []uint64, first uint64) []uint64 {
	out := []uint64{}
	if slices.Contains(ids, first) {
		out = append(out, first)
	}
	for _, id := range ids {
		if id != first {
			out = append(out, id)
		}
	}
	return out
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
