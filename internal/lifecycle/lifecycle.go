package lifecycle

import (
	"slices"
	"time"

	"github.com/doppio-db/doppio/internal/replication"
)

const (
	// CaughtUp is how far behind the leader's log a learner may be when it
	// is promoted, or a voter when it is handed leadership.
	CaughtUp = 64
	// StaleAfter is how long a replica must look unlisted in its leader's
	// report before it is dropped (see the package doc).
	StaleAfter = 2 * time.Second
)

// Local is what this node holds of the partition.
type Local int

const (
	// Absent: no replica runs here and none is known on disk.
	Absent Local = iota
	// Hosted: a replica runs here.
	Hosted
	// Orphan: a replica's state is on disk, not running: it was placed
	// elsewhere while this node was down.
	Orphan
)

// State is this node's view of one partition.
type State struct {
	// Self is this node's Raft id.
	Self uint64
	// Placed are the Raft ids of the replicas the placement puts on the
	// partition; Preferred is its preferred leader (0: none).
	Placed    []uint64
	Preferred uint64

	Local Local
	// RestartingEmpty: the local replica is being rebuilt on its leader's
	// word; nothing else may touch it meanwhile.
	RestartingEmpty bool
	// Leading: the local replica leads and is ready for writes.
	Leading bool
	// Changing: a membership change of this partition driven by this node
	// is already under way.
	Changing bool
	// Removed: the local replica applied its own removal from the group.
	Removed bool
	// Status is the local replica's Raft status; nil until read (Next asks
	// for it with ReadStatus when it needs it).
	Status *Status
	// OrphanTerm is an orphan's last Raft term on disk.
	OrphanTerm uint64

	// Report is the group configuration the partition's leader last
	// published (nil: none). UnlistedSince is when this replica first
	// looked left out of it (zero: it does not), kept by the caller as
	// Step.Mark says; Now is the caller's clock.
	Report        *Report
	UnlistedSince time.Time
	Now           time.Time

	// Nodes are the live nodes, by Raft id.
	Nodes map[uint64]Node
	// Repairing are the members the leader is rebuilding from a snapshot
	// (a consistency repair re-adds and promotes them).
	Repairing map[uint64]bool
}

// Status is the Raft status of the local replica, as it sees its group.
type Status struct {
	Role         replication.Role
	Term         uint64
	AppliedIndex uint64
	Voters       []uint64
	Learners     []uint64
	// Followers is the leader's view of the other members (leader only).
	Followers map[uint64]Follower
}

// Follower is a leader's view of one follower's replication.
type Follower struct {
	Match  uint64
	Lag    uint64
	Active bool // its node is alive
}

// Report is the group configuration a partition's leader published.
type Report struct {
	Term uint64
	// Lists: the configuration counts this node, as voter or learner.
	Lists bool
}

// Node is a live node.
type Node struct {
	// Leaving: the node is shutting down and hands its leaderships over.
	Leaving bool
}

// Kind is what a Step does.
type Kind int

const (
	// None: nothing to do in this pass.
	None Kind = iota
	// ReadStatus: read the local replica's Raft status into State.Status
	// and decide again.
	ReadStatus
	// Start the local replica (resuming its state, bootstrapping the group,
	// or empty until its leader adds it) and open it for requests.
	Start
	// RestartEmpty restarts the local replica without its data: it was
	// removed from its group yet is placed here, and would ignore its
	// leader forever; the leader adds it back and sends a snapshot.
	RestartEmpty
	// Drop stops the local replica and deletes its data.
	Drop
	// ForgetOrphan: the orphan is placed here again; it is started as any
	// placed replica (it resumes from its state).
	ForgetOrphan
	// DropOrphan deletes an orphan's data; once deleted, the caller
	// forgets the orphan and clears its mark.
	DropOrphan
	// AddLearner adds Step.Replica to the group as a learner.
	AddLearner
	// Promote makes learner Step.Replica a voter.
	Promote
	// TransferLeadership hands the group's leadership to Step.Replica.
	TransferLeadership
	// Remove takes Step.Replica out of the group.
	Remove
)

var kindNames = [...]string{"none", "read status", "start", "restart empty", "drop", "forget orphan", "drop orphan", "add learner", "promote", "transfer leadership", "remove"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// Mark is what the caller does with State.UnlistedSince after a step.
type Mark int

const (
	// Keep it as it is.
	Keep Mark = iota
	// Clear it: the replica is listed, placed or gone.
	Clear
	// Set it to Now: the replica looks unlisted from now on.
	Set
)

// Step is the next thing to do for the partition.
type Step struct {
	Kind Kind
	// Replica is the member a membership step is about.
	Replica uint64
	// Mark updates State.UnlistedSince.
	Mark Mark
	// Soon: a learner is catching up on a group led here; its promotion
	// waits for the next pass, so the caller should not wait long for it.
	Soon bool
}

// Next decides the next step of the partition s describes.
func Next(s State) Step {
	if s.RestartingEmpty {
		return Step{}
	}
	placed := slices.Contains(s.Placed, s.Self)
	switch s.Local {
	case Absent:
		if placed {
			return Step{Kind: Start}
		}
		return Step{}
	case Orphan:
		if placed {
			return Step{Kind: ForgetOrphan, Mark: Clear}
		}
		step := unlisted(s, s.OrphanTerm, DropOrphan)
		if step.Kind == DropOrphan {
			// Forgotten with its mark once its data is deleted: a failed
			// deletion is tried again at once in the next pass.
			step.Mark = Keep
		}
		return step
	}
	if s.Leading {
		if s.Changing || len(s.Placed) == 0 {
			return Step{}
		}
		if s.Status == nil {
			return Step{Kind: ReadStatus}
		}
		return membership(s)
	}
	if placed {
		if s.Removed {
			return Step{Kind: RestartEmpty, Mark: Clear}
		}
		return Step{Mark: Clear}
	}
	if s.Status == nil {
		return Step{Kind: ReadStatus}
	}
	st := s.Status
	// A replica removed while it was down or cut off never applies its
	// removal: its own configuration still lists it, and its leader's
	// report tells.
	if st.Role == replication.RoleRemoved || (!slices.Contains(st.Voters, s.Self) && !slices.Contains(st.Learners, s.Self) && st.AppliedIndex > 0) {
		return Step{Kind: Drop, Mark: Clear}
	}
	return unlisted(s, st.Term, Drop)
}

// unlisted takes drop once the leader's report, in a term at least term,
// has left this replica out for StaleAfter.
func unlisted(s State, term uint64, drop Kind) Step {
	if s.Report == nil || s.Report.Term < term || s.Report.Lists {
		return Step{Mark: Clear}
	}
	if s.UnlistedSince.IsZero() {
		return Step{Mark: Set}
	}
	if s.Now.Sub(s.UnlistedSince) >= StaleAfter {
		return Step{Kind: drop, Mark: Clear}
	}
	return Step{}
}

// membership is the leader's next change of its group towards the
// placement (see the package doc).
func membership(s State) Step {
	st := s.Status
	if st.Role != replication.RoleLeader {
		return Step{}
	}
	soon := len(st.Learners) > 0
	step := func(k Kind, id uint64) Step { return Step{Kind: k, Replica: id, Soon: soon} }
	members := append(slices.Clone(st.Voters), st.Learners...)
	caught := func(id uint64) bool {
		f, ok := st.Followers[id]
		return ok && f.Active && f.Match > 0 && f.Lag <= CaughtUp
	}
	for _, t := range s.Placed {
		if s.Repairing[t] {
			continue
		}
		if _, alive := s.Nodes[t]; alive && !slices.Contains(members, t) {
			return step(AddLearner, t)
		}
	}
	for _, l := range st.Learners {
		if slices.Contains(s.Placed, l) && caught(l) && !s.Repairing[l] {
			return step(Promote, l)
		}
	}
	// handTo: a caught-up voter on a live node that is not leaving.
	handTo := func(id uint64) bool {
		nd, alive := s.Nodes[id]
		return alive && !nd.Leaving && slices.Contains(st.Voters, id) && caught(id) && !s.Repairing[id]
	}
	placedVoters := 0
	for _, v := range st.Voters {
		if slices.Contains(s.Placed, v) {
			placedVoters++
		}
	}
	for _, m := range members {
		if slices.Contains(s.Placed, m) {
			continue
		}
		if !slices.Contains(st.Learners, m) && placedVoters < len(s.Placed) {
			continue // its replacement is not a voter yet
		}
		if m != s.Self {
			return step(Remove, m)
		}
		// Hand leadership to a placed voter first; the new leader removes
		// this replica.
		for _, t := range preferFirst(s.Placed, s.Preferred) {
			if handTo(t) {
				return step(TransferLeadership, t)
			}
		}
	}
	if s.Preferred != 0 && s.Preferred != s.Self && handTo(s.Preferred) {
		return step(TransferLeadership, s.Preferred)
	}
	return Step{Soon: soon}
}

// preferFirst is ids with first, if among them, moved to the front.
func preferFirst(ids []uint64, first uint64) []uint64 {
	out := make([]uint64, 0, len(ids))
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
