package replication

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/problem"
)

var _ partition.Replicator = (*Member)(nil)

// errNotLeader says a request needs the leader and this member is not it
// (or not yet ready to act as it), naming the leader it knows. The request
// was not applied (not even appended to the log, or superseded), so it may
// run again at the leader.
func errNotLeader(lead, term uint64, detail string) *partition.NotAppliedError {
	return &partition.NotAppliedError{Reason: partition.NotLeader, Leader: lead, Term: term, Detail: detail}
}

// outcomeUnknown is the error of a write that was appended to the log but
// whose fate this replica could not learn (deadline, snapshot, shutdown):
// it must not be run again blindly.
func outcomeUnknown(format string, args ...any) *problem.Error {
	return problem.New(problem.Indeterminate, format, args...)
}

func unavailable(format string, args ...any) *problem.Error {
	e := problem.New(problem.Unavailable, format, args...)
	e.RetryAfter = 1
	return e
}

// Partition is the key prefix of the replicated partition.
func (g *Member) Partition() keys.Partition { return g.prefix }

// Applied implements partition.Replicator: the SCN of the last write set
// applied on this replica.
func (g *Member) Applied() partition.SCN { return g.info.Load().applied }

// Changed returns a channel that is closed at the next change of the
// replica's view of leadership (leader, term, readiness, a transfer, its
// removal): a request waiting for a leader can wake then.
func (g *Member) Changed() <-chan struct{} { return g.info.Load().changed }

// Removed reports whether the replica no longer takes part in its Raft group
// (it applied its own removal, or the node stopped hosting it).
func (g *Member) Removed() bool { return g.info.Load().removed }

// Leader returns the leader this replica knows of (0 if none) and whether
// it is this replica, ready to take writes.
func (g *Member) Leader() (leader uint64, leading bool) {
	inf := g.info.Load()
	return inf.lead, inf.leader && inf.ready
}

// electionWait bounds how long Lead waits for an election to finish.
func (g *Member) electionWait() time.Duration {
	return 3 * time.Duration(g.host.cfg.ElectionTicks) * g.host.cfg.TickInterval
}

// Lead implements partition.Replicator. It returns nil when this replica
// leads and has applied everything committed before its term, so that an
// evaluation sees every earlier write. While an election is in progress
// or a leadership transfer it waits (bounded by ctx and a few election
// timeouts); if another node leads it returns a NotLeader *partition.NotAppliedError naming it.
func (g *Member) Lead(ctx context.Context) error {
	var timeout <-chan time.Time
	for {
		inf := g.info.Load()
		switch {
		case inf.removed:
			return errNotLeader(inf.lead, inf.term, fmt.Sprintf("the replica of %x was removed from this node", []byte(g.prefix)))
		case inf.leader && inf.ready && !inf.transferring:
			return nil
		case !inf.leader && inf.lead != 0:
			return errNotLeader(inf.lead, inf.term, "")
		}
		if timeout == nil {
			t := time.NewTimer(g.electionWait())
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-inf.changed:
		case <-ctx.Done():
			return errNotLeader(inf.lead, inf.term, "no leader ready before the request's deadline")
		case <-timeout:
			return errNotLeader(inf.lead, inf.term, "no leader elected yet")
		}
	}
}

// Replicate implements partition.Replicator: it proposes ws to the Raft group
// and returns its SCN once the entry is committed and applied on this
// replica. Only the ready leader accepts proposals (see Lead). If
// leadership is lost first, or ctx ends, it fails with a
// problem.Unavailable error; the write may then still be applied later
// (the outcome is unknown), unless the error says it was superseded.
func (g *Member) Replicate(ctx context.Context, ws *partition.WriteSet) (partition.SCN, error) {
	return g.propose(ctx, func(id proposalID) []byte { return encodeEntry(id, ws) })
}

// ReplicateRestore implements partition.RestoreReplicator: like
// Replicate, for a restore step.
func (g *Member) ReplicateRestore(ctx context.Context, s *partition.RestoreStep) error {
	_, err := g.propose(ctx, func(id proposalID) []byte { return frameEntry(entryRestoreFormat, id, s.Encode()) })
	return err
}

func (g *Member) propose(ctx context.Context, encode func(proposalID) []byte) (partition.SCN, error) {
	h := g.host
	start := time.Now()
	p := &proposal{
		id:   proposalID{node: h.cfg.NodeID, seq: h.propSeq.Add(1)},
		done: make(chan proposalResult, 1),
	}
	data := encode(p.id)
	ok := h.enqueue(func() {
		if !g.isLeader || !g.ready || g.removed {
			p.finish(proposalResult{err: errNotLeader(g.lead, g.term, "")})
			return
		}
		if !g.quorumVisible() {
			// Appended now, it could neither commit nor be known not to:
			// refuse it while it is surely not applied.
			p.finish(proposalResult{err: errNotLeader(g.lead, g.term, "this leader cannot reach a quorum of its replicas; the write was not applied")})
			return
		}
		if err := g.rn.Propose(data); err != nil {
			p.finish(proposalResult{err: errNotLeader(g.lead, g.term, "proposal dropped: "+err.Error())})
			return
		}
		g.proposals[p.id] = p
		g.justProposed = append(g.justProposed, p)
		g.wakeUp()
		h.dirty[g] = struct{}{}
	})
	if !ok {
		return partition.SCN{}, unavailable("node %d is shutting down", h.cfg.NodeID)
	}
	select {
	case r := <-p.done:
		if r.err == nil && h.cfg.OnCommit != nil {
			h.cfg.OnCommit(time.Since(start))
		}
		return r.scn, r.err
	case <-ctx.Done():
		// The proposal stays registered: its fate (applied at its index,
		// superseded there, dropped before it was appended) still finishes
		// it, and the caller holds its document group until then.
		settled := make(chan struct{})
		go func() {
			<-p.done
			close(settled)
		}()
		return partition.SCN{}, &partition.InFlightError{
			Err:     outcomeUnknown("write to %x not applied before the deadline; it may still be applied", []byte(g.prefix)),
			Settled: settled,
		}
	}
}

// ReadIndex implements partition.Replicator: it returns once this replica
// has applied everything committed when the call began, confirmed by a
// quorum (Raft ReadIndex), so a read that follows is linearizable. It works
// on followers too (the leader confirms). Concurrent callers share one
// quorum round. Without a known leader it fails at once with
// NotLeader *partition.NotAppliedError. The ready leader that is its Raft
// group's sole voter, or that holds a lease, answers without a round; the
// package doc ("Reads") says why that stays linearizable.
func (g *Member) ReadIndex(ctx context.Context) error {
	h := g.host
	inf := g.info.Load()
	if inf.leader && inf.ready && inf.soleVoter && !inf.removed {
		h.soleReads.Add(1)
		return nil
	}
	if g.leased(inf) {
		h.leaseReads.Add(1)
		return nil
	}
	h.roundReads.Add(1)
	w := &readWaiter{done: make(chan error, 1)}
	ok := h.enqueue(func() {
		if g.removed {
			w.finish(errNotLeader(g.lead, g.term, fmt.Sprintf("the replica of %x was removed from this node", []byte(g.prefix))))
			return
		}
		if g.lead == 0 {
			w.finish(errNotLeader(0, g.term, ""))
			return
		}
		g.readsNew = append(g.readsNew, w)
		h.readGroups[g] = struct{}{}
	})
	if !ok {
		return unavailable("node %d is shutting down", h.cfg.NodeID)
	}
	select {
	case err := <-w.done:
		return err
	case <-ctx.Done():
		return unavailable("read of %x not confirmed by a quorum before the deadline", []byte(g.prefix))
	}
}

// AppliesDurableWrites implements partition.DurableApplier: an entry is
// applied only once committed, and committed only once durable in the
// logs of a quorum, this replica's included for its own writes.
func (g *Member) AppliesDurableWrites() bool { return true }

// FreshAt returns a time at which this replica had applied everything its
// leader had committed: now for the ready leader; for a follower, the last
// contact with the leader after which it had applied all the leader had
// committed by then, as the leader's message told (for a quiesced Raft
// group, the latest moment the leader's node has shown it was past: a
// leader that commits anything first sends it to every follower). A follower may serve a read that tolerates staleness d when
// time.Since(FreshAt()) <= d. The zero time means never.
func (g *Member) FreshAt() time.Time {
	inf := g.info.Load()
	if inf.leader && inf.ready {
		return time.Now()
	}
	if inf.quiesced && inf.lead != 0 && inf.appliedIndex >= inf.leaderCommit && g.host.transport.alive(inf.lead) {
		if t := g.host.transport.echoed(inf.lead); t.After(inf.freshAt) {
			return t
		}
	}
	return inf.freshAt
}

// AppliedAt is when this replica last applied an entry.
func (g *Member) AppliedAt() time.Time { return g.info.Load().appliedAt }

// Status describes a replica for /_cluster and cluster status.
type Status struct {
	Node         uint64 // this replica's node
	Leader       uint64 // 0 when none is known
	Term         uint64 // current term
	Role         Role
	Applied      partition.SCN // last applied SCN
	AppliedIndex uint64
	Commit       uint64
	LastIndex    uint64
	FirstIndex   uint64
	Voters       []uint64
	Learners     []uint64
	Quiesced     bool
	// Followers is known on the leader only: each other replica's
	// replication progress.
	Followers map[uint64]FollowerStatus
}

// FollowerStatus is the leader's view of one follower.
type FollowerStatus struct {
	Match   uint64 // highest log index known to be replicated there
	Lag     uint64 // leader's last index - Match
	State   string // probe, replicate or snapshot
	Learner bool
	Active  bool // its node is alive
}

// Status returns the replica's current status.
func (g *Member) Status() (Status, error) {
	var s Status
	err := g.host.call(func() {
		bs := g.rn.BasicStatus()
		cs := g.st.applied.conf()
		s = Status{
			Node: g.host.cfg.NodeID, Leader: bs.Lead, Term: bs.HardState.GetTerm(),
			Role:    roleOf(bs.RaftState),
			Applied: g.st.applied.SCN, AppliedIndex: g.st.applied.Index,
			Commit: bs.HardState.GetCommit(), LastIndex: g.st.last, FirstIndex: g.st.trunc.Index + 1,
			Voters: slices.Clone(cs.GetVoters()), Learners: slices.Clone(cs.GetLearners()),
			Quiesced: g.quiesced,
		}
		if slices.Contains(cs.GetLearners(), s.Node) {
			s.Role = RoleLearner
		}
		if g.removed {
			s.Role = RoleRemoved
		}
		if bs.RaftState != raft.StateLeader {
			return
		}
		s.Followers = map[uint64]FollowerStatus{}
		g.rn.WithProgress(func(id uint64, typ raft.ProgressType, pr tracker.Progress) {
			if id == s.Node {
				return
			}
			f := FollowerStatus{Match: pr.Match, State: pr.State.String(), Learner: typ == raft.ProgressTypeLearner, Active: g.host.transport.alive(id)}
			if g.st.last > pr.Match {
				f.Lag = g.st.last - pr.Match
			}
			s.Followers[id] = f
		})
	})
	return s, err
}

// Role is what a replica is in its Raft group. Its String (and JSON) form
// is the lower-case word /_cluster shows.
type Role uint8

const (
	RoleFollower Role = iota
	RoleCandidate
	RolePreCandidate
	RoleLeader
	// RoleLearner is a non-voting replica catching up.
	RoleLearner
	// RoleRemoved is a replica its Raft group no longer counts as a member.
	RoleRemoved
)

var roleNames = [...]string{
	RoleFollower:     "follower",
	RoleCandidate:    "candidate",
	RolePreCandidate: "pre-candidate",
	RoleLeader:       "leader",
	RoleLearner:      "learner",
	RoleRemoved:      "removed",
}

// String returns the role's word: leader, follower, candidate,
// pre-candidate, learner or removed.
func (r Role) String() string {
	if int(r) < len(roleNames) {
		return roleNames[r]
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

// MarshalText makes the JSON form of a Role its word.
func (r Role) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

func roleOf(s raft.StateType) Role {
	switch s {
	case raft.StateLeader:
		return RoleLeader
	case raft.StateCandidate:
		return RoleCandidate
	case raft.StatePreCandidate:
		return RolePreCandidate
	}
	return RoleFollower
}

// AddLearner adds node as a non-voting replica; it must already host the
// partition (Host.Start with no voters). The leader sends it a snapshot.
// It returns once the change is applied on this (leader) replica.
func (g *Member) AddLearner(ctx context.Context, node uint64) error {
	return g.changeReplicas(ctx, raftpb.ConfChangeAddLearnerNode, node)
}

// Promote makes node (a learner, or a new replica) a voter. Promote a
// learner once it has caught up (Status().Followers[node].Lag small) so
// the quorum does not wait for it.
func (g *Member) Promote(ctx context.Context, node uint64) error {
	return g.changeReplicas(ctx, raftpb.ConfChangeAddNode, node)
}

// RemoveReplica removes node's replica from the Raft group. To remove the
// leader, transfer leadership first.
func (g *Member) RemoveReplica(ctx context.Context, node uint64) error {
	return g.changeReplicas(ctx, raftpb.ConfChangeRemoveNode, node)
}

func (g *Member) changeReplicas(ctx context.Context, typ raftpb.ConfChangeType, node uint64) error {
	if err := g.Lead(ctx); err != nil {
		return err
	}
	h := g.host
	p := &proposal{
		id:   proposalID{node: h.cfg.NodeID, seq: h.propSeq.Add(1)},
		done: make(chan proposalResult, 1),
	}
	cc := &raftpb.ConfChangeV2{
		Changes: []*raftpb.ConfChangeSingle{{Type: typ.Enum(), NodeId: new(node)}},
		Context: p.id.bytes(),
	}
	ok := h.enqueue(func() {
		if !g.isLeader || !g.ready {
			p.finish(proposalResult{err: errNotLeader(g.lead, g.term, "")})
			return
		}
		if err := g.rn.ProposeConfChange(cc); err != nil {
			p.finish(proposalResult{err: unavailable("membership change of %x refused: %v", []byte(g.prefix), err)})
			return
		}
		h.transport.connect(node)
		g.proposals[p.id] = p
		g.justProposed = append(g.justProposed, p)
		g.wakeUp()
		h.dirty[g] = struct{}{}
	})
	if !ok {
		return unavailable("node %d is shutting down", h.cfg.NodeID)
	}
	select {
	case r := <-p.done:
		return r.err
	case <-ctx.Done():
		return unavailable("membership change of %x not applied before the deadline", []byte(g.prefix))
	}
}

// TransferLeadership asks the leader (this replica) to hand leadership to
// node, and returns once node is the known leader. It fails if node does
// not take over within a few election timeouts (Raft aborts the transfer
// after one).
func (g *Member) TransferLeadership(ctx context.Context, node uint64) error {
	h := g.host
	// Raft abandons a transfer after an election timeout; try a few times.
	attempt := time.Duration(h.cfg.ElectionTicks+2) * h.cfg.TickInterval
	for range 3 {
		var notLeader error
		if err := h.call(func() {
			if !g.isLeader {
				notLeader = errNotLeader(g.lead, g.term, "")
				return
			}
			g.rn.TransferLeader(node)
			g.wakeUp()
			h.dirty[g] = struct{}{}
		}); err != nil {
			return err
		}
		if g.info.Load().lead == node {
			return nil
		}
		if notLeader != nil {
			return notLeader
		}
		if done, err := g.awaitLeader(ctx, node, attempt); done || err != nil {
			return err
		}
	}
	return unavailable("leadership of %x not transferred to node %d", []byte(g.prefix), node)
}

// awaitLeader waits up to d for node to be the known leader.
func (g *Member) awaitLeader(ctx context.Context, node uint64, d time.Duration) (bool, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		inf := g.info.Load()
		if inf.lead == node {
			return true, nil
		}
		select {
		case <-inf.changed:
		case <-ctx.Done():
			return false, unavailable("leadership of %x not transferred to node %d before the deadline", []byte(g.prefix), node)
		case <-t.C:
			return false, nil
		}
	}
}

// CompactLog truncates this replica's Raft log, keeping the last keep
// applied entries. Followers that need older entries get a snapshot.
func (g *Member) CompactLog(keep uint64) error {
	h := g.host
	var err error
	cerr := h.call(func() {
		b := h.engine.NewBatch()
		if g.truncate(b, keep) {
			err = h.engine.Commit(b)
		} else {
			b.Close()
		}
	})
	if cerr != nil {
		return cerr
	}
	return err
}
