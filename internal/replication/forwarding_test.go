package replication

import (
	"errors"
	"testing"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// TestProposalAfterAnUnnoticedStepDownIsDropped is the race the fault suite
// found: a leader paused past an election timeout resumes, evaluates a
// $inc against its stale state and proposes it just after raft stepped
// down on a message of the new term, before the group's view (isLeader)
// caught up. Raft forwarded such a proposal to the new leader, which
// committed it: the change log showed a write set of the new term whose
// pre-image was the stale value, overwriting a write the new leader had
// acknowledged. A proposal made by a replica that is no longer leader must
// be dropped (not applied: the API runs the request again at the leader).
func TestProposalAfterAnUnnoticedStepDownIsDropped(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	p := testPartition(0)
	c.startGroup(p, []uint64{1, 2, 3})
	lead := c.leader(p, 5*time.Second)
	other := lead%3 + 1
	g := c.host(lead).Group(p)
	var wasLeader bool
	var err error
	if cerr := c.host(lead).call(func() {
		wasLeader = g.isLeader
		term := g.rn.Status().GetTerm() + 1
		_ = g.rn.Step(&raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), To: new(lead), From: new(other), Term: new(term)})
		err = g.rn.Propose(encodeEntry(proposalID{node: lead, seq: 1}, writeSet(7).Encode()))
	}); cerr != nil {
		t.Fatal(cerr)
	}
	if !wasLeader {
		t.Fatal("the group did not see itself as leader before the step-down")
	}
	if !errors.Is(err, raft.ErrProposalDropped) {
		t.Fatalf("a proposal after raft stepped down answered %v, want raft.ErrProposalDropped (never forwarded)", err)
	}
}
