package lifecycle

import (
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/replication"
)

// Raft ids of the nodes in the tests; self is this node.
const (
	self = 1
	b    = 2
	c    = 3
	d    = 4
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// live are nodes alive and not leaving.
func live(ids ...uint64) map[uint64]Node {
	out := map[uint64]Node{}
	for _, id := range ids {
		out[id] = Node{}
	}
	return out
}

// caughtUp is a leader's view of followers that have caught up.
func caughtUp(ids ...uint64) map[uint64]Follower {
	out := map[uint64]Follower{}
	for _, id := range ids {
		out[id] = Follower{Match: 100, Lag: 0, Active: true}
	}
	return out
}

// leading is the state of a replica leading a group of voters (and
// learners) with the followers' progress given.
func leading(placed []uint64, voters, learners []uint64, followers map[uint64]Follower) State {
	return State{
		Self: self, Placed: placed, Local: Hosted, Leading: true, Nodes: live(self, b, c, d), Now: t0,
		Status: &Status{Role: replication.RoleLeader, Term: 5, AppliedIndex: 100, Voters: voters, Learners: learners, Followers: followers},
	}
}

func with(s State, f func(*State)) State {
	f(&s)
	return s
}

func TestNext(t *testing.T) {
	ids := func(v ...uint64) []uint64 { return v }
	follower := func(placed []uint64, st *Status) State {
		return State{Self: self, Placed: placed, Local: Hosted, Status: st, Nodes: live(self, b, c, d), Now: t0}
	}
	listedBy := func(term uint64, lists bool) *Report { return &Report{Term: term, Lists: lists} }
	member := &Status{Role: replication.RoleFollower, Term: 5, AppliedIndex: 100, Voters: ids(self, b, c)}
	for _, tc := range []struct {
		name string
		in   State
		want Step
	}{
		// A replica placed here starts; one that is not is left alone.
		{"placed, absent: start", State{Self: self, Placed: ids(self, b, c)}, Step{Kind: Start}},
		{"not placed, absent: nothing", State{Self: self, Placed: ids(b, c, d)}, Step{}},
		{"being rebuilt: left alone", State{Self: self, Placed: ids(self, b, c), RestartingEmpty: true}, Step{}},
		{"being rebuilt, hosted: left alone", with(follower(ids(b, c, d), nil), func(s *State) { s.RestartingEmpty = true }), Step{}},

		// A follower placed here stays, unless removed from its group.
		{"placed follower: nothing, mark cleared", follower(ids(self, b, c), nil), Step{Mark: Clear}},
		{"placed but removed from its group: restart empty", with(follower(ids(self, b, c), nil), func(s *State) { s.Removed = true }), Step{Kind: RestartEmpty, Mark: Clear}},

		// A follower not placed here is dropped once its group no longer
		// counts it.
		{"not placed follower: read status first", follower(ids(b, c, d), nil), Step{Kind: ReadStatus}},
		{"not placed, removed role: drop", follower(ids(b, c, d), &Status{Role: replication.RoleRemoved, Term: 5}), Step{Kind: Drop, Mark: Clear}},
		{"not placed, own configuration lacks it: drop", follower(ids(b, c, d), &Status{Role: replication.RoleFollower, Term: 5, AppliedIndex: 7, Voters: ids(b, c, d)}), Step{Kind: Drop, Mark: Clear}},
		{"not placed, own configuration lacks it before applying anything: wait", follower(ids(b, c, d), &Status{Role: replication.RoleFollower, Term: 5, Voters: ids(b, c, d)}), Step{Mark: Clear}},
		{"not placed, still a member, no report: wait", follower(ids(b, c, d), member), Step{Mark: Clear}},
		{"not placed, leader's report lists it: wait", with(follower(ids(b, c, d), member), func(s *State) { s.Report = listedBy(5, true) }), Step{Mark: Clear}},
		{"not placed, older leader's report: wait", with(follower(ids(b, c, d), member), func(s *State) { s.Report = listedBy(4, false) }), Step{Mark: Clear}},
		{"not placed, unlisted first seen: mark", with(follower(ids(b, c, d), member), func(s *State) { s.Report = listedBy(5, false) }), Step{Mark: Set}},
		{"not placed, unlisted for less than StaleAfter: wait", with(follower(ids(b, c, d), member), func(s *State) {
			s.Report, s.UnlistedSince = listedBy(6, false), t0.Add(-StaleAfter+time.Millisecond)
		}), Step{}},
		{"not placed, unlisted for StaleAfter: drop", with(follower(ids(b, c, d), member), func(s *State) {
			s.Report, s.UnlistedSince = listedBy(6, false), t0.Add(-StaleAfter)
		}), Step{Kind: Drop, Mark: Clear}},

		// Orphans: state on disk, placed elsewhere.
		{"orphan placed here again: forget it", State{Self: self, Placed: ids(self, b, c), Local: Orphan, OrphanTerm: 3}, Step{Kind: ForgetOrphan, Mark: Clear}},
		{"orphan, no report: keep", State{Self: self, Placed: ids(b, c, d), Local: Orphan, OrphanTerm: 3}, Step{Mark: Clear}},
		{"orphan, report older than its term: keep", State{Self: self, Local: Orphan, OrphanTerm: 3, Report: listedBy(2, false)}, Step{Mark: Clear}},
		{"orphan unlisted, first seen: mark", State{Self: self, Local: Orphan, OrphanTerm: 3, Report: listedBy(3, false), Now: t0}, Step{Mark: Set}},
		{"orphan unlisted for StaleAfter: drop, mark kept until deleted", State{Self: self, Local: Orphan, OrphanTerm: 3, Report: listedBy(3, false), Now: t0, UnlistedSince: t0.Add(-StaleAfter)}, Step{Kind: DropOrphan}},

		// The leader moves its group one step towards the placement.
		{"leader: read status first", with(leading(ids(self, b, c), nil, nil, nil), func(s *State) { s.Status = nil }), Step{Kind: ReadStatus}},
		{"leader busy changing: nothing", with(leading(ids(self, b, c), nil, nil, nil), func(s *State) { s.Status, s.Changing = nil, true }), Step{}},
		{"leader, empty placement: nothing", leading(nil, ids(self, b, c), nil, caughtUp(b, c)), Step{}},
		{"no longer leader by status: nothing", with(leading(ids(self, b, d), ids(self, b, c), nil, nil), func(s *State) { s.Status.Role = replication.RoleFollower }), Step{}},
		{"in line: nothing", leading(ids(self, b, c), ids(self, b, c), nil, caughtUp(b, c)), Step{}},
		{"placed replica missing: add learner", leading(ids(self, b, d), ids(self, b, c), nil, caughtUp(b, c)), Step{Kind: AddLearner, Replica: d}},
		{"placed replica missing on a dead node: not added", with(leading(ids(self, b, d), ids(self, b, c), nil, caughtUp(b, c)), func(s *State) { s.Nodes = live(self, b, c) }), Step{}},
		{"placed replica being repaired: not added", with(leading(ids(self, b, d), ids(self, b, c), nil, caughtUp(b, c)), func(s *State) { s.Repairing = map[uint64]bool{d: true} }), Step{}},
		{"learner catching up: wait, soon", leading(ids(self, b, d), ids(self, b, c), ids(d), with2(caughtUp(b, c), d, Follower{Match: 10, Lag: 500, Active: true})), Step{Soon: true}},
		{"learner within CaughtUp: promote", leading(ids(self, b, d), ids(self, b, c), ids(d), with2(caughtUp(b, c), d, Follower{Match: 10, Lag: CaughtUp, Active: true})), Step{Kind: Promote, Replica: d, Soon: true}},
		{"learner that matched nothing: not promoted", leading(ids(self, b, d), ids(self, b, c), ids(d), with2(caughtUp(b, c), d, Follower{Active: true})), Step{Soon: true}},
		{"learner on an inactive node: not promoted", leading(ids(self, b, d), ids(self, b, c), ids(d), with2(caughtUp(b, c), d, Follower{Match: 10, Active: false})), Step{Soon: true}},
		{"learner being repaired: not promoted", with(leading(ids(self, b, d), ids(self, b, c), ids(d), caughtUp(b, c, d)), func(s *State) { s.Repairing = map[uint64]bool{d: true} }), Step{Soon: true}},
		{"unplaced learner: removed at once", leading(ids(self, b, c), ids(self, b, c), ids(d), caughtUp(b, c)), Step{Kind: Remove, Replica: d, Soon: true}},
		{"unplaced voter once the placed voters are enough: removed", leading(ids(self, b, d), ids(self, b, c, d), nil, caughtUp(b, c, d)), Step{Kind: Remove, Replica: c}},
		{"unplaced voter before its replacement votes: kept", leading(ids(self, b, d, 5), ids(self, b, c, d), nil, caughtUp(b, c, d)), Step{}},
		{"leader not placed: hands leadership to a placed voter", leading(ids(b, c, d), ids(self, b, c, d), nil, caughtUp(b, c, d)), Step{Kind: TransferLeadership, Replica: b}},
		{"leader not placed: hands leadership to the preferred leader first", with(leading(ids(b, c, d), ids(self, b, c, d), nil, caughtUp(b, c, d)), func(s *State) { s.Preferred = c }), Step{Kind: TransferLeadership, Replica: c}},
		{"leader not placed: skips a leaving node", with(leading(ids(b, c, d), ids(self, b, c, d), nil, caughtUp(b, c, d)), func(s *State) { s.Nodes[b] = Node{Leaving: true} }), Step{Kind: TransferLeadership, Replica: c}},
		{"leader not placed: skips a lagging voter", leading(ids(b, c, d), ids(self, b, c, d), nil, with2(caughtUp(c, d), b, Follower{Match: 1, Lag: CaughtUp + 1, Active: true})), Step{Kind: TransferLeadership, Replica: c}},
		{"leader not placed, no voter to take over: removes another unplaced member", leading(ids(b, c), ids(self, b, c, d), nil, with2(caughtUp(), b, Follower{})), Step{Kind: Remove, Replica: d}},
		{"preferred leader a caught-up voter: hand leadership", with(leading(ids(self, b, c), ids(self, b, c), nil, caughtUp(b, c)), func(s *State) { s.Preferred = b }), Step{Kind: TransferLeadership, Replica: b}},
		{"preferred leader is self: nothing", with(leading(ids(self, b, c), ids(self, b, c), nil, caughtUp(b, c)), func(s *State) { s.Preferred = self }), Step{}},
		{"preferred leader leaving: nothing", with(leading(ids(self, b, c), ids(self, b, c), nil, caughtUp(b, c)), func(s *State) { s.Preferred, s.Nodes[b] = b, Node{Leaving: true} }), Step{}},
		{"preferred leader dead: nothing", with(leading(ids(self, b, c), ids(self, b, c), nil, caughtUp(b, c)), func(s *State) { s.Preferred, s.Nodes = b, live(self, c) }), Step{}},
		{"preferred leader a learner: promoted first", with(leading(ids(self, b, c), ids(self, c), ids(b), caughtUp(b, c)), func(s *State) { s.Preferred = b }), Step{Kind: Promote, Replica: b, Soon: true}},
		{"preferred leader being repaired: nothing", with(leading(ids(self, b, c), ids(self, b, c), nil, caughtUp(b, c)), func(s *State) {
			s.Preferred, s.Repairing = b, map[uint64]bool{b: true}
		}), Step{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Next(tc.in); got != tc.want {
				t.Errorf("Next = %+v (%v), want %+v (%v)", got, got.Kind, tc.want, tc.want.Kind)
			}
		})
	}
}

// with2 is followers with id's progress set to f.
func with2(followers map[uint64]Follower, id uint64, f Follower) map[uint64]Follower {
	followers[id] = f
	return followers
}

// TestNextDoesNotChangeItsInput guards the purity the caller relies on
// when it decides again after ReadStatus.
func TestNextDoesNotChangeItsInput(t *testing.T) {
	s := leading([]uint64{self, b, d}, []uint64{self, b, c}, []uint64{5}, caughtUp(b, c, 5))
	voters := append([]uint64(nil), s.Status.Voters...)
	Next(s)
	Next(s)
	if len(s.Status.Voters) != len(voters) || s.Status.Voters[2] != voters[2] {
		t.Fatalf("voters changed: %v, were %v", s.Status.Voters, voters)
	}
}
