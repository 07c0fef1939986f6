package replication

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/storage"
)

// Member is this node's member of one partition's Raft group: it proposes
// write sets, replicates them with the other members and applies the
// committed ones to the partition's replica. It implements
// partition.Replicator.
type Member struct {
	host   *Host
	prefix keys.Partition

	// info is what other goroutines may read; the loop publishes it.
	info atomic.Pointer[memberInfo]

	// Everything below is owned by the host's loop.
	rn *raft.RawNode
	st *raftStorage

	lead, term   uint64
	isLeader     bool
	ready        bool // leader that has applied an entry of its own term
	transferring bool // leader handing leadership over (proposals are dropped)
	quiesced     bool
	removed      bool
	appliedAt    time.Time
	// freshAt is the last contact with the leader after which this
	// follower had applied everything the leader then had committed.
	// latest is the last contact, pending the earliest one not yet caught
	// up with (zero when none): once applied reaches pending.commit,
	// freshAt moves to pending.at even while later contacts keep ahead.
	freshAt         time.Time
	latest, pending contact

	proposals map[proposalID]*proposal
	// byIndex holds this node's appended proposals by log index until an
	// entry is applied there: theirs (success) or another (superseded).
	// More than one when a new leader overwrote an uncommitted entry and
	// this node later appended another at the same index.
	byIndex      map[uint64][]*proposal
	justProposed []*proposal

	readsNew      []*readWaiter
	readsInflight map[uint64]*readBatch
	readsWaiting  []*readWaiter

	// Leader lease (lease.go): reads need no round before leaseUntil, earned
	// in leaseTerm (0: not leading). A new leader holds its appends (held)
	// while holding, until holdUntil. renew asks issueReads for a round
	// without readers; renewing, set by readers, is true from that request
	// until the round ends.
	leaseUntil time.Time
	leaseTerm  uint64
	holding    bool
	holdUntil  time.Time
	held       []*raftpb.Message
	renew      bool
	renewing   atomic.Bool

	incoming *incomingSnapshot
	notified [2]uint64 // leader and term last reported to OnLeadership
	// campaignUntil: this replica was chosen to replace a leader seen dead
	// and campaigns on every tick until then while no leader is known.
	campaignUntil uint64
	// leaderTrunc is the highest log truncation a leader has told this
	// replica of (see unneeded).
	leaderTrunc uint64
	// released is the term in which this replica, leading, gave up its
	// lease to transfer leadership; skipHold a term this replica may lead
	// without holding its appends, its predecessor having done so (see
	// lease.go).
	released, skipHold uint64
	// noVote: restarted empty by a rebuild (Host.StartRebuilt); grants no
	// vote until it applies a configuration listing it (see mayVote).
	noVote bool
}

// memberInfo is a consistent view of a Raft group for readers outside the loop.
type memberInfo struct {
	lead, term   uint64
	leader       bool
	ready        bool
	transferring bool
	quiesced     bool
	removed      bool
	// soleVoter: the applied configuration's only voter is this replica
	// (no joint configuration), so no other replica can be elected.
	soleVoter    bool
	applied      partition.SCN
	appliedIndex uint64
	appliedAt    time.Time
	freshAt      time.Time
	// leaderCommit is the leader's committed index as last heard from it.
	leaderCommit uint64
	leaseUntil   time.Time
	// changed is closed when lead, term, leader, ready, transferring or
	// removed change.
	changed chan struct{}
}

// contact is a message from the leader: when it came, and the leader's
// committed index it carried.
type contact struct {
	at     time.Time
	commit uint64
}

type proposal struct {
	id    proposalID
	index uint64 // log index once appended
	term  uint64 // term of its entry once appended
	done  chan proposalResult
}

type proposalResult struct {
	scn   partition.SCN
	index uint64
	err   error
}

func (p *proposal) finish(r proposalResult) {
	select {
	case p.done <- r:
	default:
	}
}

type readWaiter struct {
	index uint64
	done  chan error
}

func (r *readWaiter) finish(err error) {
	select {
	case r.done <- err:
	default:
	}
}

type readBatch struct {
	waiters []*readWaiter
	issued  uint64    // host tick
	at      time.Time // when it was issued, for the lease it earns
	term    uint64    // the term it was issued in
	renew   bool      // asked for by a lease renewal
}

// proposalID names a proposal: the proposing node and a sequence of it.
type proposalID struct{ node, seq uint64 }

// Formats of a normal Raft entry's data: a write set, or a restore step
// (partition.RestoreStep, which consumes no SCN).
const (
	entryFormat        byte = 1
	entryRestoreFormat byte = 2
)

// encodeEntry frames a write set as the data of a normal Raft entry,
// encoding it straight after the header.
func encodeEntry(id proposalID, ws *partition.WriteSet) []byte {
	return ws.AppendEncoding(entryHeader(entryFormat, id, ws.Size()))
}

func frameEntry(format byte, id proposalID, data []byte) []byte {
	return append(entryHeader(format, id, len(data)), data...)
}

// entryHeader is an entry's 17-byte header, in a slice with room for size
// more bytes of payload.
func entryHeader(format byte, id proposalID, size int) []byte {
	b := make([]byte, 0, 17+size)
	b = append(b, format)
	b = binary.BigEndian.AppendUint64(b, id.node)
	return binary.BigEndian.AppendUint64(b, id.seq)
}

var errCorruptEntry = errors.New("corrupt raft entry")

// decodeEntry returns the proposal, format and payload of an entry's data.
func decodeEntry(b []byte) (proposalID, byte, []byte, error) {
	if len(b) < 17 || (b[0] != entryFormat && b[0] != entryRestoreFormat) {
		return proposalID{}, 0, nil, errCorruptEntry
	}
	return proposalID{binary.BigEndian.Uint64(b[1:]), binary.BigEndian.Uint64(b[9:])}, b[0], b[17:], nil
}

func (id proposalID) bytes() []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, id.node), id.seq)
}

func proposalIDOf(b []byte) (proposalID, bool) {
	if len(b) != 16 {
		return proposalID{}, false
	}
	return proposalID{binary.BigEndian.Uint64(b), binary.BigEndian.Uint64(b[8:])}, true
}

func newMember(h *Host, p keys.Partition, rn *raft.RawNode, st *raftStorage) *Member {
	g := &Member{
		host:          h,
		prefix:        p,
		rn:            rn,
		st:            st,
		term:          st.hard.GetTerm(),
		proposals:     map[proposalID]*proposal{},
		byIndex:       map[uint64][]*proposal{},
		readsInflight: map[uint64]*readBatch{},
	}
	g.publish()
	return g
}

func (g *Member) name() string { return string(g.prefix) }

func (g *Member) members() []uint64 {
	cs := g.st.applied.conf()
	var out []uint64
	for _, set := range [][]uint64{cs.GetVoters(), cs.GetLearners(), cs.GetVotersOutgoing(), cs.GetLearnersNext()} {
		for _, id := range set {
			if !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
	}
	return out
}

func (g *Member) hasMember(id uint64) bool { return slices.Contains(g.members(), id) }

// soleVoter reports whether this replica is the only voter of the applied
// configuration, outside any joint configuration.
func (g *Member) soleVoter() bool {
	cs := g.st.applied.conf()
	v := cs.GetVoters()
	return len(v) == 1 && v[0] == g.host.cfg.NodeID && len(cs.GetVotersOutgoing()) == 0
}

// publish makes the loop's view of the Raft group visible to other goroutines.
func (g *Member) publish() {
	old := g.info.Load()
	inf := &memberInfo{
		lead: g.lead, term: g.term, leader: g.isLeader, ready: g.ready,
		transferring: g.transferring, quiesced: g.quiesced, removed: g.removed,
		soleVoter: g.soleVoter(),
		applied:   g.st.applied.SCN, appliedIndex: g.st.applied.Index,
		appliedAt: g.appliedAt, freshAt: g.freshAt, leaseUntil: g.leaseUntil,
		leaderCommit: g.latest.commit,
	}
	if old != nil && old.lead == inf.lead && old.term == inf.term && old.leader == inf.leader &&
		old.ready == inf.ready && old.removed == inf.removed && old.transferring == inf.transferring {
		inf.changed = old.changed
	} else {
		inf.changed = make(chan struct{})
		if old != nil {
			close(old.changed)
		}
	}
	g.info.Store(inf)
}

// wakeUp makes the Raft group tick again.
func (g *Member) wakeUp() {
	if g.removed {
		return
	}
	if g.quiesced {
		g.quiesced = false
		g.publish()
	}
	g.host.active[g] = struct{}{}
}

func (g *Member) quiesce() {
	if !g.quiesced {
		g.quiesced = true
		delete(g.host.active, g)
		g.publish()
	}
}

// step hands a received message to raft. Any message but a heartbeat
// response (and the leader's quiesce heartbeat) wakes the Raft group.
func (g *Member) step(m inbound, now time.Time) {
	h := g.host
	if isVote(m.msg) && !g.mayVote() {
		return
	}
	if err := g.rn.Step(m.msg); err != nil {
		return
	}
	h.dirty[g] = struct{}{}
	if m.commit > 0 && !m.since.IsZero() {
		g.contacted(m)
	}
	if m.trunc > g.leaderTrunc {
		g.leaderTrunc = m.trunc
	}
	if m.released && m.msg.GetType() == raftpb.MsgTimeoutNow {
		g.skipHold = m.msg.GetTerm() + 1
	}
	switch {
	case m.quiesce:
		bs := g.rn.BasicStatus()
		if bs.Lead == m.msg.GetFrom() && bs.HardState.GetTerm() == m.msg.GetTerm() {
			g.quiesce()
		} else {
			g.wakeUp()
		}
	case m.msg.GetType() != raftpb.MsgHeartbeatResp:
		g.wakeUp()
	}
}

// contacted records a message from the leader of this replica's term
// that told its committed index. Raft's own heartbeat Commit will not do:
// the leader caps it at what it knows the follower holds, so a follower
// far behind (restarted, or starved of appends) would count itself
// caught up with a leader it is not. Nor will the time the message came:
// it may have waited in a queue or on the wire; m.since, a moment before
// the leader created it, by this node's clock, is what it vouches for.
func (g *Member) contacted(m inbound) {
	bs := g.rn.BasicStatus()
	if bs.Lead != m.msg.GetFrom() || bs.HardState.GetTerm() != m.msg.GetTerm() || bs.RaftState == raft.StateLeader {
		return
	}
	g.latest = contact{at: m.since, commit: m.commit}
	if g.pending.at.IsZero() {
		g.pending = g.latest
	}
}

// catchUp moves freshAt to the latest contact with the leader whose
// committed index this follower has applied.
func (g *Member) catchUp() {
	applied := g.st.applied.Index
	switch {
	case g.latest.at.IsZero():
	case applied >= g.latest.commit:
		if g.latest.at.After(g.freshAt) {
			g.freshAt = g.latest.at
		}
		g.pending = contact{}
	case applied >= g.pending.commit:
		if g.pending.at.After(g.freshAt) {
			g.freshAt = g.pending.at
		}
		g.pending = g.latest
	}
}

// maybeQuiesce stops a leader's ticking, and tells its followers to stop
// theirs, when nothing is in flight: everything is committed, applied and
// replicated to every follower whose node is alive. A follower on a dead
// node is caught up when its node comes back (Host.peerUp).
func (g *Member) maybeQuiesce() {
	if g.quiesced || len(g.proposals) > 0 || len(g.readsNew) > 0 || len(g.readsInflight) > 0 || len(g.readsWaiting) > 0 {
		return
	}
	if g.rn.HasReady() {
		return
	}
	bs := g.rn.BasicStatus()
	if bs.RaftState != raft.StateLeader || bs.LeadTransferee != 0 {
		return
	}
	commit := bs.HardState.GetCommit()
	if bs.Applied != commit || g.st.last != commit || g.st.applied.Index != commit {
		return
	}
	self := g.host.cfg.NodeID
	ok := true
	var followers []uint64
	g.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		switch {
		case id == self:
		case pr.Match == commit:
			followers = append(followers, id)
		case g.host.transport.alive(id):
			ok = false
		}
	})
	if !ok {
		return
	}
	// A leader that cannot see a quorum keeps ticking, so that CheckQuorum
	// makes it step down rather than lead, quiesced, a Raft group that has
	// elected another leader.
	if !g.quorumVisible() {
		return
	}
	term := bs.HardState.GetTerm()
	for _, id := range followers {
		if !g.host.transport.alive(id) {
			continue
		}
		m := &raftpb.Message{
			Type: raftpb.MsgHeartbeat.Enum(), To: new(id), From: new(self),
			Term: new(term), Commit: new(commit),
		}
		h := g.hints(m)
		h.quiesce = true
		g.host.transport.send(id, g.name(), h, m)
	}
	g.quiesce()
}

// successor is the replica that campaigns at once when the leader's node
// dead is seen down: among the other voters this node sees alive, the one
// a hash of the partition picks, so that a dead node's leaderships spread
// over the survivors and every survivor picks the same one (if views
// differ, the others' election timeouts still elect someone).
func (g *Member) successor(dead uint64) uint64 {
	var alive []uint64
	for _, id := range g.st.applied.conf().GetVoters() {
		if id != dead && (id == g.host.cfg.NodeID || g.host.transport.alive(id)) {
			alive = append(alive, id)
		}
	}
	if len(alive) == 0 {
		return 0
	}
	slices.Sort(alive)
	h := fnv.New64a()
	h.Write(g.prefix)
	return alive[h.Sum64()%uint64(len(alive))]
}

// quorumVisible reports whether the transport sees a quorum of the
// Raft group's voters (this node included) alive.
func (g *Member) quorumVisible() bool {
	voters := g.st.applied.conf().GetVoters()
	seen := 0
	for _, id := range voters {
		if id == g.host.cfg.NodeID || g.host.transport.alive(id) {
			seen++
		}
	}
	return seen > len(voters)/2
}

// persist writes a Ready's snapshot, entries and hard state to b, and
// notes the log position of this node's new proposals. It reports whether
// it wrote anything.
func (g *Member) persist(b *storage.Batch, rd raft.Ready) bool {
	wrote := false
	if !raft.IsEmptySnap(rd.Snapshot) {
		snap := g.incoming
		idx := rd.Snapshot.GetMetadata().GetIndex()
		if snap == nil || snap.applied.Index != idx {
			panic("replication: raft installs a snapshot whose data is not staged")
		}
		hs := g.st.hard
		if !raft.IsEmptyHardState(rd.HardState) {
			hs = rd.HardState
		}
		if err := g.st.installSnapshot(g.host.cfg.Knobs, snap, hs); err != nil {
			// Raft believes the snapshot installed; it is not. Stop rather
			// than diverge (a restart asks for it again).
			panic(fmt.Sprintf("replication: partition %x: installing snapshot: %v", []byte(g.prefix), err))
		}
		snap.discard()
		g.incoming = nil
		wrote = true
		// The snapshot covers the indexes of these proposals without telling
		// whose entries were committed there.
		for i, ps := range g.byIndex {
			if i > idx {
				continue
			}
			for _, p := range ps {
				delete(g.proposals, p.id)
				p.finish(proposalResult{err: outcomeUnknown("write to %x overtaken by a snapshot; it may have been applied", []byte(g.prefix))})
			}
			delete(g.byIndex, i)
		}
	}
	if len(rd.Entries) > 0 {
		g.st.append(b, rd.Entries)
		wrote = true
		g.noteProposals(rd.Entries)
	}
	if len(g.justProposed) > 0 {
		for _, p := range g.justProposed {
			if p.index == 0 {
				delete(g.proposals, p.id)
				p.finish(proposalResult{err: errNotLeader(g.lead, g.term, "proposal dropped (membership change in progress or leadership lost); it was not applied")})
			}
		}
		g.justProposed = g.justProposed[:0]
	}
	if !raft.IsEmptyHardState(rd.HardState) {
		g.st.setHardState(b, rd.HardState)
		g.term = rd.HardState.GetTerm()
		wrote = true
	}
	return wrote
}

// noteProposals finds this node's proposals among newly appended entries.
func (g *Member) noteProposals(ents []*raftpb.Entry) {
	if len(g.proposals) == 0 {
		return
	}
	self := g.host.cfg.NodeID
	for _, e := range ents {
		var id proposalID
		switch e.GetType() {
		case raftpb.EntryNormal:
			pid, _, _, err := decodeEntry(e.GetData())
			if err != nil {
				var ok bool
				if pid, ok = decodeCheckEntry(e.GetData()); !ok {
					continue
				}
			}
			if pid.node != self {
				continue
			}
			id = pid
		case raftpb.EntryConfChangeV2:
			var cc raftpb.ConfChangeV2
			if proto.Unmarshal(e.GetData(), &cc) != nil {
				continue
			}
			pid, ok := proposalIDOf(cc.GetContext())
			if !ok || pid.node != self {
				continue
			}
			id = pid
		default:
			continue
		}
		if p := g.proposals[id]; p != nil {
			p.index, p.term = e.GetIndex(), e.GetTerm()
			g.byIndex[p.index] = append(g.byIndex[p.index], p)
		}
	}
}

// apply writes the effects of committed entries to batches: one, or one
// more after each check marker (its segment's capture names the state the
// marker checks). Entries at or below the applied index are skipped, so
// re-delivery after a restart is harmless. The answers to proposers run
// once their segment is committed; when nothing was written (wrote false)
// they are returned in fns instead.
func (g *Member) apply(ents []*raftpb.Entry, now time.Time) (segs []applySeg, fns []func(), wrote bool) {
	a := g.st.applied
	b := g.host.engine.NewBatch()
	var after []func()
	var marks map[string]partition.LoadMark // recorded by chunks in this run
	changed := false
	for _, e := range ents {
		idx := e.GetIndex()
		if idx <= a.Index {
			continue
		}
		var id proposalID
		var scn partition.SCN
		var marker *capture
		var ingest func(appliedState) error
		var refused error
		switch e.GetType() {
		case raftpb.EntryNormal:
			if len(e.GetData()) == 0 {
				break
			}
			if cid, ok := decodeCheckEntry(e.GetData()); ok {
				id, scn = cid, a.SCN
				marker = &capture{key: checkKey{string(g.prefix), cid}, index: idx, scn: a.SCN}
				break
			}
			pid, format, wsb, err := decodeEntry(e.GetData())
			if err != nil {
				// Every replica sees the same bytes, so skipping is deterministic.
				g.host.log.Error("skipping undecodable entry", "partition", g.name(), "index", idx)
				break
			}
			if format == entryRestoreFormat {
				step, err := partition.DecodeRestoreStep(wsb)
				if err != nil {
					g.host.log.Error("skipping undecodable restore step", "partition", g.name(), "index", idx)
					break
				}
				if final := partition.ApplyRestore(b, g.prefix, step); final != nil {
					a.SCN = *final
				}
				scn, id = a.SCN, pid
				break
			}
			ws, err := partition.DecodeWriteSet(wsb)
			if err != nil {
				g.host.log.Error("skipping undecodable write set", "partition", g.name(), "index", idx)
				break
			}
			id = pid
			if ws.Load != nil {
				if marks == nil {
					marks = map[string]partition.LoadMark{}
				}
				ok, err := partition.Applies(g.host.engine, g.prefix, ws, marks)
				if err != nil {
					panic(fmt.Sprintf("replication: node %d: reading the mark of load %q: %v", g.host.cfg.NodeID, ws.Load.From.Load, err))
				}
				if !ok {
					// Another chunk recorded its mark first: this one is a
					// no-op on every replica, and its proposer learns why.
					refused = ws.Load.Refusal(marks[ws.Load.From.Load])
					break
				}
			}
			// The generation is the entry's term, but never below the last
			// one applied: a restored partition continues the backup's
			// timeline, whose generations may be ahead of this Raft group's terms.
			scn = partition.SCN{Generation: max(e.GetTerm(), a.SCN.Generation), Sequence: a.SCN.Sequence + 1}
			if ws.Ingest {
				// What is batched so far is committed first, the table
				// after it (see commitApplies).
				g.st.setApplied(b, a)
				segs = append(segs, applySeg{b: b, after: after})
				b, after = g.host.engine.NewBatch(), nil
				ingest = g.ingestion(ws, wsb, scn)
			} else {
				partition.Apply(b, g.prefix, ws, wsb, scn)
			}
			a.SCN = scn
		case raftpb.EntryConfChange:
			var cc raftpb.ConfChange
			if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
				panic(err)
			}
			a.Conf = g.rn.ApplyConfChange(&cc)
		case raftpb.EntryConfChangeV2:
			var cc raftpb.ConfChangeV2
			if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
				panic(err)
			}
			a.Conf = g.rn.ApplyConfChange(&cc)
			id, _ = proposalIDOf(cc.GetContext())
			for _, m := range g.members() {
				g.host.transport.connect(m)
			}
		}
		a.Index, a.Term = idx, e.GetTerm()
		changed = true
		for _, p := range g.byIndex[idx] {
			delete(g.proposals, p.id)
			if p.id == id {
				res := proposalResult{scn: scn, index: idx, err: refused}
				after = append(after, func() { p.finish(res) })
			} else {
				// Another entry is committed at the index this proposal had:
				// it can never be applied, so the request may run again.
				err := errNotLeader(g.lead, g.term, "the write was superseded by a new leader's log and not applied")
				after = append(after, func() { p.finish(proposalResult{err: err}) })
			}
		}
		delete(g.byIndex, idx)
		if ingest != nil {
			// The table holds the applied state with the chunk, so the
			// chunk and the applied index land together.
			g.st.noteApplied(a)
			segs = append(segs, applySeg{ingest: func() error { return ingest(a) }, after: after})
			after = nil
		}
		if marker != nil {
			// The state to check is the one with everything up to the
			// marker applied, and nothing after.
			g.st.setApplied(b, a)
			segs = append(segs, applySeg{b: b, after: after, capture: marker})
			b, after = g.host.engine.NewBatch(), nil
		}
	}
	if !changed {
		b.Close()
		return nil, after, false
	}
	after = g.supersedeBeyond(a.Index, a.Term, after)
	g.st.setApplied(b, a)
	segs = append(segs, applySeg{b: b, after: after})
	g.appliedAt = now
	if !slices.Contains(g.members(), g.host.cfg.NodeID) && !g.removed {
		// This replica applied its own removal: it stops taking part; the
		// placement driver deletes it with Host.Remove.
		g.removed = true
		delete(g.host.active, g)
	}
	return segs, nil, true
}

// ingestion returns the application of the chunk ws at scn by ingestion,
// with the Raft applied state it is given.
func (g *Member) ingestion(ws *partition.WriteSet, encoded []byte, scn partition.SCN) func(appliedState) error {
	return func(a appliedState) error {
		return partition.ApplyIngest(g.host.engine, g.prefix, ws, encoded, scn,
			partition.IndexEntry{Key: g.prefix.RaftApplied(), Value: a.encode()})
	}
}

// supersedeBeyond settles the proposals appended past index (the last
// applied) at a term older than term (the last applied entry's). Terms never
// decrease along a Raft log and the committed log is a prefix of every
// later leader's, so the committed entry at any later index has a term of
// at least term: an entry of an older term there can never be committed.
// Without this, a deposed leader's proposals past the new leader's log
// (their entries truncated when it followed) would settle only once enough
// later writes filled their indexes, keeping their document groups latched
// meanwhile, forever on an idle partition (found by the fault suite:
// delay nemesis, a set's final read timed out on a latched document group).
func (g *Member) supersedeBeyond(index, term uint64, after []func()) []func() {
	for i, ps := range g.byIndex {
		if i <= index {
			continue
		}
		kept := ps[:0]
		for _, p := range ps {
			if p.term >= term {
				kept = append(kept, p)
				continue
			}
			delete(g.proposals, p.id)
			err := errNotLeader(g.lead, g.term, "the write was superseded by a new leader's log and not applied")
			after = append(after, func() { p.finish(proposalResult{err: err}) })
		}
		if len(kept) == 0 {
			delete(g.byIndex, i)
		} else {
			g.byIndex[i] = kept
		}
	}
	return after
}

// send hands a Ready's messages to the transport.
func (g *Member) send(msgs []*raftpb.Message, now time.Time) {
	for _, m := range msgs {
		if m.GetType() == raftpb.MsgSnap {
			g.host.transport.sendSnapshot(g, m)
			continue
		}
		if g.holdBack(m, now) {
			continue
		}
		h := g.hints(m)
		if m.GetType() == raftpb.MsgTimeoutNow {
			h.released = g.renounceLease(now)
		}
		g.host.transport.send(m.GetTo(), g.name(), h, m)
	}
}

// hints are what a leader's append or heartbeat tells the follower of its
// log truncation (see unneeded) and, once it is ready, of its committed
// index (see contacted).
func (g *Member) hints(m *raftpb.Message) hints {
	if t := m.GetType(); g.isLeader && (t == raftpb.MsgApp || t == raftpb.MsgHeartbeat) {
		h := hints{trunc: g.st.trunc.Index}
		// A new leader's commit index may lag what its predecessor had
		// acknowledged until an entry of its own term commits: only then
		// does it vouch for freshness.
		if g.ready {
			h.commit = g.rn.BasicStatus().HardState.GetCommit()
		}
		return h
	}
	return hints{}
}

// afterReady updates leadership, reads and the published view once a
// Ready is durable and applied.
func (g *Member) afterReady(rd raft.Ready, now time.Time) {
	h := g.host
	leadChanged := false
	if rd.SoftState != nil {
		wasLeader := g.isLeader
		if rd.SoftState.Lead != g.lead {
			leadChanged = true
		}
		g.lead = rd.SoftState.Lead
		g.isLeader = rd.SoftState.RaftState == raft.StateLeader
		if wasLeader && !g.isLeader {
			// Proposals not in the log fail now (the request may run again
			// at the new leader); appended ones wait for the entry applied
			// at their index, which settles whether they were committed.
			for id, p := range g.proposals {
				if p.index == 0 {
					delete(g.proposals, id)
					p.finish(proposalResult{err: errNotLeader(g.lead, g.term, "leadership lost before the write was appended; it was not applied")})
				}
			}
			g.justProposed = g.justProposed[:0]
		}
		if leadChanged {
			for seq, rb := range g.readsInflight {
				g.requeue(seq, rb)
			}
			if len(g.readsNew) > 0 {
				h.readGroups[g] = struct{}{}
			}
		}
	}
	for _, rs := range rd.ReadStates {
		if len(rs.RequestCtx) != 8 {
			continue
		}
		seq := binary.BigEndian.Uint64(rs.RequestCtx)
		rb := g.readsInflight[seq]
		if rb == nil {
			continue
		}
		delete(g.readsInflight, seq)
		g.extendLease(rb)
		for _, w := range rb.waiters {
			w.index = rs.Index
			g.readsWaiting = append(g.readsWaiting, w)
		}
	}
	// Reads whose index is applied are answered after the publish below,
	// so that a reader sees the lease its round earned (a reader answered
	// first could read the view before it, and a test once did).
	var answered []*readWaiter
	if len(g.readsWaiting) > 0 {
		applied := g.st.applied.Index
		keep := g.readsWaiting[:0]
		for _, w := range g.readsWaiting {
			if w.index <= applied {
				answered = append(answered, w)
			} else {
				keep = append(keep, w)
			}
		}
		clear(g.readsWaiting[len(keep):])
		g.readsWaiting = keep
	}
	g.ready = g.isLeader && g.st.applied.Term == g.term
	g.transferring = g.isLeader && g.rn.BasicStatus().LeadTransferee != 0
	if !g.isLeader && g.lead != 0 {
		g.catchUp()
	}
	g.publish()
	for _, w := range answered {
		w.finish(nil)
	}
	if g.lead != g.notified[0] || g.term != g.notified[1] {
		if g.lead != 0 {
			h.leaderChanges.Add(1)
		}
		g.notified = [2]uint64{g.lead, g.term}
		if h.cfg.OnLeadership != nil {
			h.cfg.OnLeadership(g.prefix, g.lead, g.term)
		}
	}
}

// issueReads starts one ReadIndex round for every read queued since the
// last one.
func (g *Member) issueReads() {
	if len(g.readsNew) == 0 && !g.renew {
		return
	}
	h := g.host
	h.readSeq++
	g.readsInflight[h.readSeq] = &readBatch{waiters: g.readsNew, issued: h.ticks, at: time.Now(), term: g.term, renew: g.renew}
	g.readsNew, g.renew = nil, false
	g.rn.ReadIndex(binary.BigEndian.AppendUint64(nil, h.readSeq))
	g.wakeUp()
	h.dirty[g] = struct{}{}
}

// retryReads re-issues ReadIndex rounds that raft dropped (no leader, lost
// messages).
func (g *Member) retryReads() {
	h := g.host
	for seq, rb := range g.readsInflight {
		if h.ticks-rb.issued >= uint64(h.cfg.ElectionTicks) {
			g.requeue(seq, rb)
			h.readGroups[g] = struct{}{}
		}
	}
}

// requeue gives up round seq: its readers wait for the next one, and a
// renewal may be asked for again.
func (g *Member) requeue(seq uint64, rb *readBatch) {
	delete(g.readsInflight, seq)
	if rb.renew {
		g.renewing.Store(false)
	}
	g.readsNew = append(g.readsNew, rb.waiters...)
}

// truncate removes log entries older than keep entries below the applied
// index.
func (g *Member) truncate(b *storage.Batch, keep uint64) bool {
	a := g.st.applied.Index
	if a <= keep {
		return false
	}
	return g.truncateTo(b, a-keep)
}

// truncateTo removes the log entries up to index, if any remain.
func (g *Member) truncateTo(b *storage.Batch, index uint64) bool {
	if index <= g.st.trunc.Index {
		return false
	}
	if err := g.st.truncate(b, index); err != nil {
		g.host.log.Error("log truncation failed", "partition", g.name(), "err", err)
		return false
	}
	return true
}

// unneeded returns the index up to which no replica needs this replica's
// log: the applied index, held back on a leader to the oldest entry a
// follower still lacks, but never more than keep entries below the applied
// index (a follower further behind gets a snapshot; a node down for a few
// seconds catches up from the log). A follower does not know what its
// peers lack, and may lead them after a failover: it truncates as far as a
// leader did (leaders tell in their appends and heartbeats; every follower
// then had those entries, or was keep entries behind, and entries up to a
// leader's applied index are committed, so nobody loses them), and keeps
// at most keep entries.
func (g *Member) unneeded(keep uint64) uint64 {
	a := g.st.applied.Index
	floor := uint64(0)
	if a > keep {
		floor = a - keep
	}
	if !g.isLeader {
		return max(floor, min(a, g.leaderTrunc))
	}
	need := a
	self := g.host.cfg.NodeID
	g.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if id != self && pr.Match < need {
			need = pr.Match
		}
	})
	return max(need, floor)
}

// failAll fails every waiter; only once the loop no longer runs the Raft group.
func (g *Member) failAll(err error) {
	for id, p := range g.proposals {
		delete(g.proposals, id)
		if p.index != 0 {
			p.finish(proposalResult{err: outcomeUnknown("%v before the write to %x was applied; it may still be applied", err, []byte(g.prefix))})
		} else {
			p.finish(proposalResult{err: err})
		}
	}
	clear(g.byIndex)
	g.justProposed = g.justProposed[:0]
	for _, w := range g.readsNew {
		w.finish(err)
	}
	for _, rb := range g.readsInflight {
		for _, w := range rb.waiters {
			w.finish(err)
		}
	}
	for _, w := range g.readsWaiting {
		w.finish(err)
	}
	g.readsNew, g.readsWaiting = nil, nil
	clear(g.readsInflight)
	g.renewing.Store(false)
}
