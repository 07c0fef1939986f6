package replication

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/doppio-db/doppio/internal/keys"
)

// Repair after a consistency check rebuilds a replica from a snapshot. The
// majority's state is the reference: a follower is rebuilt by its leader
// when the leader and the followers equal to it are a majority of the
// voters; a leader that differs from a majority of agreeing followers hands
// leadership to one of them, which rebuilds it (Check, handOverForRebuild).
//
// Rebuild removes the replica from the Raft group (its progress at the leader
// starts again from nothing, so raft sends a snapshot: a replica whose
// state vanished under a kept progress would be refused appends forever,
// raft ignoring rejections below its match index), has its node delete it
// and start it again empty (Host.StartRebuilt), adds it back as a learner,
// and promotes it once the snapshot has caught it up. The restarted
// replica is marked on disk until its snapshot: it never bootstraps and
// grants no vote, since a candidate whose configuration still counts it
// could otherwise win with the vote of a replica that forgot its log.

// rebuildRequest asks a replica's node to delete it and start it empty.
type rebuildRequest struct {
	Partition []byte `json:"partition"`
	Leader    uint64 `json:"leader"`
	Term      uint64 `json:"term"`
}

func (t *transport) serveRebuild(ctx context.Context, dec func(any) error) (any, error) {
	var in wrapperspb.BytesValue
	if err := dec(&in); err != nil {
		return nil, err
	}
	var req rebuildRequest
	if err := json.Unmarshal(in.GetValue(), &req); err != nil {
		return nil, err
	}
	if err := t.host.rebuild(ctx, keys.Partition(req.Partition), req.Leader, req.Term); err != nil {
		return nil, err
	}
	return wrapperspb.Bytes(nil), nil
}

// Rebuild replaces node's replica of the partition with a snapshot of this
// leader's state (see the top of this file). It returns once the replica is
// a caught-up voter again. It refuses when removing the replica for the
// rebuild would leave the Raft group without a live quorum.
func (g *Member) Rebuild(ctx context.Context, node uint64) error {
	h := g.host
	if node == h.cfg.NodeID {
		return errors.New("the leader cannot rebuild its own replica; transfer leadership first")
	}
	st, err := g.Status()
	if err != nil {
		return err
	}
	wasVoter := slices.Contains(st.Voters, node)
	if !wasVoter && !slices.Contains(st.Learners, node) {
		return fmt.Errorf("node %d holds no replica of %x", node, []byte(g.prefix))
	}
	live := 0
	for _, v := range st.Voters {
		if v != node && (v == h.cfg.NodeID || h.transport.alive(v)) {
			live++
		}
	}
	rest := len(st.Voters)
	if wasVoter {
		rest--
	}
	if live*2 <= rest {
		return fmt.Errorf("only %d of the other %d voters are alive: removing node %d for a rebuild would stop the group", live, rest, node)
	}
	g.rebuilding(node, true, time.Time{})
	defer g.rebuilding(node, false, time.Time{})
	ctx, cancel := context.WithTimeout(ctx, rebuildTimeout)
	defer cancel()
	if err := g.RemoveReplica(ctx, node); err != nil {
		return fmt.Errorf("removing the replica: %w", err)
	}
	term := g.info.Load().term
	if _, err := h.transport.invoke(ctx, node, methodRebuild, rebuildRequest{Partition: g.prefix, Leader: h.cfg.NodeID, Term: term}); err != nil {
		return fmt.Errorf("asking node %d to delete its replica: %w", node, err)
	}
	if err := g.AddLearner(ctx, node); err != nil {
		return fmt.Errorf("adding the emptied replica back: %w", err)
	}
	target := g.info.Load().appliedIndex
	tick := time.NewTicker(h.cfg.TickInterval)
	defer tick.Stop()
	for {
		st, err := g.Status()
		if err != nil {
			return err
		}
		if f, ok := st.Followers[node]; ok && f.Match >= target {
			break
		}
		if st.Role != RoleLeader {
			return errNotLeader(st.Leader, st.Term, "leadership lost during the rebuild; the new leader's placement reconciliation finishes it")
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return unavailable("replica on node %d not caught up from its snapshot before the deadline", node)
		}
	}
	if !wasVoter {
		return nil
	}
	if err := g.Promote(ctx, node); err != nil {
		return fmt.Errorf("promoting the rebuilt replica: %w", err)
	}
	return nil
}

// CheckProgress reports whether this node is summing its replica of the
// partition for a check now, and how many bytes it has summed so far.
func (g *Member) CheckProgress() (summing bool, bytes uint64) {
	c := g.host.checker
	if k := c.current.Load(); k != nil && k.part == string(g.prefix) {
		return true, c.currentBytes.Load()
	}
	return false, 0
}

// Rebuilding reports whether this node is rebuilding node's replica, or
// about to (its leader found itself the odd one out and hands leadership
// here for that): the placement reconciliation leaves that replica alone
// meanwhile, and hands it no leadership.
func (g *Member) Rebuilding(node uint64) bool {
	g.host.rebuildMu.Lock()
	defer g.host.rebuildMu.Unlock()
	until, ok := g.host.rebuilds[rebuildKey{string(g.prefix), node}]
	return ok && (until.IsZero() || time.Now().Before(until))
}

// rebuilding marks (until it is unmarked, or until a non-zero time) or
// unmarks node's replica as being rebuilt.
func (g *Member) rebuilding(node uint64, on bool, until time.Time) {
	h := g.host
	h.rebuildMu.Lock()
	defer h.rebuildMu.Unlock()
	if on {
		h.rebuilds[rebuildKey{string(g.prefix), node}] = until
	} else {
		delete(h.rebuilds, rebuildKey{string(g.prefix), node})
	}
}

// rebuildTimeout bounds one rebuild (a snapshot of a large partition).
const rebuildTimeout = 10 * time.Minute

// suspectHold is how long a follower told that its leader differs from
// the majority holds off handing leadership back to it, waiting for the
// request to rebuild it.
const suspectHold = time.Minute

// peerRequest names a replica of a partition, asked about by a leader of
// a term.
type peerRequest struct {
	Partition []byte `json:"partition"`
	Node      uint64 `json:"node"`
	Term      uint64 `json:"term"`
}

func (t *transport) serveSuspect(ctx context.Context, dec func(any) error) (any, error) {
	var req peerRequest
	if err := decodeJSON(dec, &req); err != nil {
		return nil, err
	}
	g, err := t.host.hosted(keys.Partition(req.Partition))
	if err != nil {
		return nil, err
	}
	g.rebuilding(req.Node, true, time.Now().Add(suspectHold))
	return wrapperspb.Bytes(nil), nil
}

// serveRebuildPeer rebuilds the replica of the node that asks, once this
// replica leads (the asker hands leadership over first).
func (t *transport) serveRebuildPeer(ctx context.Context, dec func(any) error) (any, error) {
	var req peerRequest
	if err := decodeJSON(dec, &req); err != nil {
		return nil, err
	}
	g, err := t.host.hosted(keys.Partition(req.Partition))
	if err != nil {
		return nil, err
	}
	if err := g.Lead(ctx); err != nil {
		return nil, err
	}
	if err := g.Rebuild(ctx, req.Node); err != nil {
		return nil, err
	}
	return wrapperspb.Bytes(nil), nil
}

// hosted returns this node's member of p, or an error naming the
// partition and the node when the node does not host it.
func (h *Host) hosted(p keys.Partition) (*Member, error) {
	g := h.Member(p)
	if g == nil {
		return nil, fmt.Errorf("partition %x not hosted on node %d", []byte(p), h.cfg.NodeID)
	}
	return g, nil
}

func decodeJSON(dec func(any) error, v any) error {
	var in wrapperspb.BytesValue
	if err := dec(&in); err != nil {
		return err
	}
	return json.Unmarshal(in.GetValue(), v)
}

type rebuildKey struct {
	part string
	node uint64
}

// rebuild deletes this node's replica of p and starts it again empty, on
// the word of its leader (which has removed it from the Raft group).
func (h *Host) rebuild(ctx context.Context, p keys.Partition, leader, term uint64) error {
	g, err := h.hosted(p)
	if err != nil {
		return err
	}
	inf := g.info.Load()
	if inf.leader {
		return fmt.Errorf("node %d leads %x: a leader is not rebuilt", h.cfg.NodeID, []byte(p))
	}
	if term < inf.term {
		return fmt.Errorf("rebuild of %x asked by node %d in term %d, but this replica is in term %d", []byte(p), leader, term, inf.term)
	}
	if h.cfg.OnRebuild != nil {
		return h.cfg.OnRebuild(ctx, p)
	}
	_, err = h.StartRebuilt(p)
	return err
}

// mayVote reports whether the replica may answer a vote request: not a
// replica restarted empty by a rebuild (Host.StartRebuilt) before it
// applies a configuration that lists it. Called on the loop.
func (g *Member) mayVote() bool {
	if !g.noVote {
		return true
	}
	if g.hasMember(g.host.cfg.NodeID) {
		// Only a snapshot makes it a member (its log starts past the
		// Raft group's first entries), and installing one deleted the mark.
		g.noVote = false
		return true
	}
	return false
}

// isVote reports whether m asks for a vote.
func isVote(m *raftpb.Message) bool {
	t := m.GetType()
	return t == raftpb.MsgVote || t == raftpb.MsgPreVote
}
