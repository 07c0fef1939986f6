package lifecycle

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/doppio-db/doppio/internal/replication"
)

const (
	// maxMoves bounds the membership changes (add, promote, transfer,
	// remove) one node drives at once, as the leader of their partitions.
	maxMoves = 4
	// reconcileEvery re-checks placement even without a change in etcd:
	// learners catching up and leaders becoming ready are not etcd events.
	reconcileEvery = time.Second
	// moveTimeout bounds one membership change.
	moveTimeout = 10 * time.Second
	// learnerRecheck is how soon the loop runs again while a learner is
	// catching up on a partition led here.
	learnerRecheck = 100 * time.Millisecond
	// startWorkers bounds the replicas a node starts at once.
	startWorkers = 32
)

// Partition names one partition of one database: DB is the database's
// name, P the partition's index.
type Partition struct {
	DB string
	P  int
}

// Placed is one partition's placement as the loop reads it.
type Placed struct {
	Partition
	// Replicas are the Raft ids of the placed replicas; Preferred is the
	// preferred leader's (0: none).
	Replicas  []uint64
	Preferred uint64
}

// Replica is a running replica of a partition on this node, as the loop
// drives it (*replication.Member).
type Replica interface {
	Leader() (leader uint64, leading bool)
	Removed() bool
	Status() (replication.Status, error)
	Rebuilding(node uint64) bool
	AddLearner(ctx context.Context, node uint64) error
	Promote(ctx context.Context, node uint64) error
	TransferLeadership(ctx context.Context, node uint64) error
	RemoveReplica(ctx context.Context, node uint64) error
}

// Host is the node's side of the loop: what it reads of the cluster and
// the replicas it holds, and the I/O each step needs.
type Host interface {
	// Placements lists the placements of the partitions the catalog knows.
	Placements() []Placed
	// PlacedReplicas are the Raft ids placed on p (ok false: no placement
	// of p), whether or not the catalog knows it.
	PlacedReplicas(p Partition) (replicas []uint64, ok bool)
	// Hosted is p's replica running here, if any.
	Hosted(p Partition) (Replica, bool)
	// RestartingEmpty: p's replica here is being rebuilt on its leader's
	// word; the loop must leave it alone.
	RestartingEmpty(p Partition) bool
	// Report is the group configuration p's leader last published (nil:
	// none).
	Report(p Partition) *Report
	// Nodes are the live nodes, by Raft id.
	Nodes() map[uint64]Node
	// NodeName is a Raft member's node id (its number if unknown).
	NodeName(raft uint64) string
	// OnDisk are the partitions with Raft state on disk here that no
	// running replica holds, with their last Raft term.
	OnDisk() map[Partition]uint64

	// Start starts p's replica here and opens it for requests.
	Start(ctx context.Context, p Partition) (Replica, error)
	// RestartEmpty restarts p's replica here without its data.
	RestartEmpty(ctx context.Context, p Partition) error
	// Drop stops p's replica here, deletes its data and clears what this
	// node publishes of it (leadership, group report); the error is the
	// data's deletion's, the rest is done regardless.
	Drop(p Partition) error
	// DropOrphan deletes the data of p's replica left on disk here.
	DropOrphan(p Partition) error
}

// Loop carries out, partition by partition, the steps Next decides (see
// the package doc). Reconcile and FindOrphans must not run concurrently
// with each other or with Run.
type Loop struct {
	host Host
	self uint64
	log  *slog.Logger

	// changing holds the partitions whose membership a goroutine is
	// changing; moves limits how many run at once.
	changing sync.Map // Partition -> struct{}
	moves    chan struct{}
	// learning: a partition led here had a learner at the last look (the
	// loop then looks again soon).
	learning atomic.Bool
	// orphans are replicas with state on disk that no placement puts here
	// (the node was dead while they moved away): deleted once their group
	// no longer lists this node. stale records since when a replica has
	// looked removed, so that a lagging watch cannot delete a member.
	orphans map[Partition]uint64 // -> the replica's last Raft term
	stale   map[Partition]time.Time
}

// NewLoop returns the loop of the node whose Raft id is self.
func NewLoop(host Host, self uint64, log *slog.Logger) *Loop {
	return &Loop{host: host, self: self, log: log, moves: make(chan struct{}, maxMoves), orphans: map[Partition]uint64{}, stale: map[Partition]time.Time{}}
}

// Run reconciles on every receive from placement (the placement, the
// nodes) or catalog, every reconcileEvery, and sooner while a learner
// catches up, until ctx ends.
func (l *Loop) Run(ctx context.Context, placement, catalog <-chan struct{}) {
	t := time.NewTicker(reconcileEvery)
	defer t.Stop()
	for {
		// While a learner of a partition led here catches up, look again
		// soon: its promotion (and the next move of a throttled
		// rebalance) waits for this pass, not for an etcd event.
		var soon <-chan time.Time
		if l.learning.Swap(false) {
			soon = time.After(learnerRecheck)
		}
		select {
		case <-ctx.Done():
			return
		case <-placement:
		case <-catalog:
		case <-t.C:
		case <-soon:
		}
		l.Reconcile(ctx)
	}
}

// Reconcile does one pass over every placement, taking for each partition
// the step Next decides:
//   - a replica placed here is started (Raft group) and opened (router);
//   - on the leader of a partition, the group's membership moves one step
//     towards the placement (see changeMembership);
//   - a replica not placed here that its group no longer counts is removed
//     with its data, hosted or left on disk from before a restart.
func (l *Loop) Reconcile(ctx context.Context) {
	l.removeOrphans()
	l.startPlaced(ctx)
	for _, pp := range l.host.Placements() {
		l.reconcilePartition(ctx, pp)
	}
}

// FindOrphans records the replicas with Raft state on disk that the first
// pass did not start: placed elsewhere while this node was down.
func (l *Loop) FindOrphans() {
	for p, term := range l.host.OnDisk() {
		l.orphans[p] = term
	}
	if len(l.orphans) > 0 {
		l.log.Info("replicas on disk not placed here; deleted once their groups no longer list this node", "count", len(l.orphans))
	}
}

// placedState is the lifecycle state of pp as far as its placement and
// this node's local flags tell; the rest is read when a step needs it.
func (l *Loop) placedState(pp Placed) State {
	return State{Self: l.self, Placed: pp.Replicas, Preferred: pp.Preferred, Now: time.Now(), UnlistedSince: l.stale[pp.Partition], RestartingEmpty: l.host.RestartingEmpty(pp.Partition)}
}

// mark keeps p's unlisted-since time as the step says.
func (l *Loop) mark(p Partition, step Step, now time.Time) {
	switch step.Mark {
	case Clear:
		delete(l.stale, p)
	case Set:
		l.stale[p] = now
	}
}

// startPlaced starts the replicas placed here and not hosted yet,
// startWorkers at a time: each start commits the replica's bootstrap state
// and waits for a round of the replication loop, so concurrent starts
// share fsyncs and rounds.
func (l *Loop) startPlaced(ctx context.Context) {
	var todo []Partition
	for _, pp := range l.host.Placements() {
		if _, hosted := l.host.Hosted(pp.Partition); !hosted && Next(l.placedState(pp)).Kind == Start {
			todo = append(todo, pp.Partition)
		}
	}
	if len(todo) == 0 {
		return
	}
	work := make(chan Partition)
	var wg sync.WaitGroup
	for range min(startWorkers, len(todo)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				if _, err := l.host.Start(ctx, p); err != nil {
					l.log.Error("start replica", "db", p.DB, "partition", p.P, "err", err)
				}
			}
		}()
	}
	for _, p := range todo {
		work <- p
	}
	close(work)
	wg.Wait()
}

// reconcilePartition takes pp's next step. The leader's membership change
// runs in a goroutine of its own (changeMembership).
func (l *Loop) reconcilePartition(ctx context.Context, pp Placed) {
	ref := pp.Partition
	s := l.placedState(pp)
	g, hosted := l.host.Hosted(ref)
	if hosted {
		s.Local = Hosted
	}
	var err error
	for {
		if g != nil {
			_, s.Leading = g.Leader()
			_, s.Changing = l.changing.Load(ref)
			s.Removed = g.Removed()
		}
		step := Next(s)
		l.mark(ref, step, s.Now)
		switch step.Kind {
		case Start:
			if g, err = l.host.Start(ctx, ref); err != nil {
				l.log.Error("start replica", "db", ref.DB, "partition", ref.P, "err", err)
				return
			}
			s.Local = Hosted
			continue
		case ReadStatus:
			if s.Leading {
				l.changing.Store(ref, struct{}{})
				go func() {
					defer l.changing.Delete(ref)
					l.changeMembership(ctx, ref, g, s)
				}()
				return
			}
			st, err := g.Status()
			if err != nil {
				return
			}
			s.Status, s.Report = statusOf(st), l.host.Report(ref)
			continue
		case RestartEmpty:
			// Removed from its group (a consistency repair whose rebuild
			// request never arrived) yet placed here: it would ignore its
			// leader forever.
			l.log.Warn("replica removed from its group but placed here: restarting it empty", "db", ref.DB, "partition", ref.P)
			if err := l.host.RestartEmpty(ctx, ref); err != nil {
				l.log.Error("restart removed replica", "db", ref.DB, "partition", ref.P, "err", err)
			}
		case Drop:
			l.log.Info("removing replica moved away", "db", ref.DB, "partition", ref.P)
			if err := l.host.Drop(ref); err != nil {
				l.log.Error("remove replica", "db", ref.DB, "partition", ref.P, "err", err)
			}
		}
		return
	}
}

// statusOf is what Next reads of a replica's Raft status.
func statusOf(st replication.Status) *Status {
	out := &Status{Role: st.Role, Term: st.Term, AppliedIndex: st.AppliedIndex, Voters: st.Voters, Learners: st.Learners}
	if len(st.Followers) > 0 {
		out.Followers = make(map[uint64]Follower, len(st.Followers))
		for id, f := range st.Followers {
			out.Followers[id] = Follower{Match: f.Match, Lag: f.Lag, Active: f.Active}
		}
	}
	return out
}

// removeOrphans deletes the data of orphans whose group no longer lists
// this node. An orphan placed here again is started as usual (it resumes
// from its state, and the leader brings it up to date).
func (l *Loop) removeOrphans() {
	for ref, term := range l.orphans {
		s := State{Self: l.self, Local: Orphan, OrphanTerm: term, Report: l.host.Report(ref), Now: time.Now(), UnlistedSince: l.stale[ref]}
		if placed, ok := l.host.PlacedReplicas(ref); ok {
			s.Placed = placed
		}
		step := Next(s)
		l.mark(ref, step, s.Now)
		switch step.Kind {
		case ForgetOrphan:
			delete(l.orphans, ref)
		case DropOrphan:
			if err := l.host.DropOrphan(ref); err != nil {
				l.log.Error("remove stale replica", "db", ref.DB, "partition", ref.P, "err", err)
				continue
			}
			l.log.Info("removed stale replica", "db", ref.DB, "partition", ref.P)
			delete(l.orphans, ref)
			delete(l.stale, ref)
		}
	}
}

// changeMembership runs on the leader of a partition and takes the step
// Next decides from the group's status, at most maxMoves at once on this
// node (one beyond that is left to a later pass).
func (l *Loop) changeMembership(ctx context.Context, ref Partition, g Replica, s State) {
	st, err := g.Status()
	if err != nil {
		return
	}
	s.Status = statusOf(st)
	s.Nodes = l.host.Nodes()
	s.Repairing = map[uint64]bool{}
	for _, id := range slices.Concat(s.Placed, st.Voters, st.Learners) {
		if g.Rebuilding(id) {
			s.Repairing[id] = true
		}
	}
	step := Next(s)
	if step.Soon {
		l.learning.Store(true)
	}
	var change func(context.Context, uint64) error
	switch step.Kind {
	case AddLearner:
		change = g.AddLearner
	case Promote:
		change = g.Promote
	case TransferLeadership:
		change = g.TransferLeadership
	case Remove:
		change = g.RemoveReplica
	default:
		return
	}
	select {
	case l.moves <- struct{}{}:
	default:
		return // enough in flight; the next pass retries
	}
	defer func() { <-l.moves }()
	mctx, cancel := context.WithTimeout(ctx, moveTimeout)
	defer cancel()
	name := l.host.NodeName(step.Replica)
	if err := change(mctx, step.Replica); err != nil {
		l.log.Warn("membership change failed", "db", ref.DB, "partition", ref.P, "change", step.Kind.String(), "node", name, "err", err)
		return
	}
	l.log.Info("membership changed", "db", ref.DB, "partition", ref.P, "change", step.Kind.String(), "node", name)
}
