package replication

import (
	"errors"
	"testing"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// TestProposalAfterAnUnnoticedStepDownIsRefusedNotForwarded: Replicate
// checks g.isLeader, which follows Raft only once a Ready is handled, so a
// replica whose Raft has just stepped down (a message of a newer term came
// earlier in the same loop turn) still proposes. Raft must then refuse the
// proposal: were it forwarded to the new leader, the entry would never
// appear in this replica's Ready, Replicate would answer "not applied"
// (safe to run again), and the new leader would apply it too, so the
// request ran twice (found by the fault suite: a create-only PUT answered
// 412 "exists" after its own first run had created the document). Worse,
// the write set was evaluated against the deposed leader's stale state: the
// suite also saw a $inc of the new term whose pre-image was a stale value,
// committed over a write the new leader had acknowledged.
func TestProposalAfterAnUnnoticedStepDownIsRefusedNotForwarded(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	p := testPartition(0)
	c.startRaftGroup(p, []uint64{1, 2, 3})
	lead := c.leader(p, 5*time.Second)
	var other uint64
	for _, id := range []uint64{1, 2, 3} {
		if id != lead {
			other = id
			break
		}
	}
	g := c.host(lead).Member(p)
	var stale bool
	var proposeErr error
	if err := c.host(lead).call(func() {
		term := g.rn.BasicStatus().HardState.GetTerm()
		// A heartbeat of a newer term from another node: Raft follows it
		// at once (lead = other); the group notices at the next Ready.
		g.rn.Step(&raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), From: new(other), To: new(lead), Term: new(term + 1)})
		stale = g.isLeader && g.rn.BasicStatus().RaftState == raft.StateFollower
		proposeErr = g.rn.Propose(encodeEntry(proposalID{node: lead, seq: 1 << 40}, writeSet(1)))
	}); err != nil {
		t.Fatal(err)
	}
	if !stale {
		t.Fatal("the step-down was noticed before the next Ready; the window this test guards did not open")
	}
	if !errors.Is(proposeErr, raft.ErrProposalDropped) {
		t.Fatalf("a proposal on a replica that just stepped down returned %v, want raft.ErrProposalDropped (it must not be forwarded)", proposeErr)
	}
}
