package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/storage"
)

// Config configures a Host.
type Config struct {
	// NodeID identifies this node in every Raft group; non-zero, never reused by
	// another node.
	NodeID uint64
	// Engine is the node's store; the Host does not close it.
	Engine *storage.Engine
	// Resolve returns the gRPC address of a node. It is called whenever a
	// connection to the node is (re)established, so it may follow
	// membership changes.
	Resolve func(node uint64) (string, error)
	// Listener, when set, is where the Host serves its gRPC service (it
	// closes it on Close); otherwise the caller registers the service with
	// Register. A node passes its peer listener's gRPC side (peer.Mux).
	Listener net.Listener
	// TLS, when set, secures the node-to-node links with mutual TLS
	// (secure mode); nil: plaintext.
	TLS *TLS

	// TickInterval is Raft's clock (default 50ms). ElectionTicks (default 10)
	// and HeartbeatTicks (default 2) count in ticks.
	TickInterval   time.Duration
	ElectionTicks  int
	HeartbeatTicks int
	// DeadAfter is how long a node may stay silent before the Raft groups it leads
	// elect a new leader (default an election timeout). A broken stream (a
	// process that died) counts at once; the delay only serves silent
	// failures, and a shorter one made CPU-starved nodes declare each other
	// dead while they were busy electing.
	DeadAfter time.Duration

	// LeaseTicks is how long a quorum's confirmation of leadership lets a
	// leader serve linearizable reads without another round (default 3
	// ticks; negative: no leases, every read takes a round). A new leader
	// holds its appends, so commits nothing, for this long plus a drift
	// margin after winning (see lease.go). It must be the same on every
	// node, as TickInterval must.
	LeaseTicks int

	// LogRetain is how many applied entries a replica keeps in its Raft
	// log at most for followers that lag (default 10,000): a follower that
	// needs older entries gets a snapshot. Every CompactInterval (default
	// 1s) each log is truncated to what no replica needs (Member.unneeded):
	// on a leader, up to the oldest entry a follower lacks; on a follower,
	// as far as its leader truncated.
	LogRetain       uint64
	CompactInterval time.Duration

	// OnLeadership, if set, is called (from the host's loop: it must not
	// block) whenever a Raft group's known leader or term changes.
	OnLeadership func(p keys.Partition, leader, term uint64)

	// CheckBytesPerSecond throttles the reads of consistency checks on
	// this node (default DefaultCheckBytesPerSecond).
	CheckBytesPerSecond int64
	// OnRebuild, if set, replaces the default restart of a replica its
	// leader rebuilds (StartRebuilt): the node uses it to reopen the
	// replica for requests too. It must call StartRebuilt.
	OnRebuild func(ctx context.Context, p keys.Partition) error
	// OnCommit, if set, is told how long each write proposed here took
	// from its proposal to its application on this replica (the log syncs
	// of a quorum, the messages between them, the apply), on the
	// proposer's goroutine.
	OnCommit func(time.Duration)
	// OnApply, if set, is told how long each Raft group's committed
	// entries of one Ready took to apply, from building their batches to
	// committing them to the store; it may be called concurrently.
	OnApply func(time.Duration)

	Logger *slog.Logger

	// Knobs, when not nil, change how snapshots are cut and handled
	// (tests).
	Knobs *TestingKnobs
}

func (c Config) withDefaults() Config {
	if c.TickInterval <= 0 {
		c.TickInterval = 50 * time.Millisecond
	}
	if c.ElectionTicks <= 0 {
		c.ElectionTicks = 10
	}
	if c.HeartbeatTicks <= 0 {
		c.HeartbeatTicks = 2
	}
	if c.LeaseTicks == 0 {
		c.LeaseTicks = 3
	}
	if c.DeadAfter <= 0 {
		c.DeadAfter = time.Duration(c.ElectionTicks) * c.TickInterval
	}
	if c.LogRetain == 0 {
		c.LogRetain = 10000
	}
	if c.CompactInterval <= 0 {
		c.CompactInterval = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Host holds this node's replicas of many partitions' Raft groups and
// drives them all from one loop over one transport.
type Host struct {
	cfg       Config
	log       *slog.Logger
	engine    *storage.Engine
	transport *transport
	raftLog   raft.Logger

	// lease is how long a leadership confirmation lets reads skip a round
	// (0: never); hold how long a new leader holds its appends.
	lease, hold time.Duration
	// How linearizable reads were confirmed (see Reads).
	leaseReads, roundReads, soleReads atomic.Uint64

	// Snapshots this node sent in full, and the sstable bytes it streamed
	// (failed attempts included): what replica moves cost.
	snapshotsSent, snapshotBytes atomic.Uint64
	// leaderChanges counts the leaders replicas here learned of (Health).
	leaderChanges atomic.Uint64

	mu      sync.Mutex
	queue   []func()
	members map[string]*Member // by string(prefix); written by the loop under mu
	closed  bool

	wake chan struct{}
	stop chan struct{}
	done chan struct{}

	propSeq atomic.Uint64

	checker   *checker
	rebuildMu sync.Mutex
	rebuilds  map[rebuildKey]time.Time // replicas rebuilt here as leader (zero: until done) or about to be

	// Owned by the loop.
	dirty        map[*Member]struct{}
	active       map[*Member]struct{} // not quiesced: ticked
	readGroups   map[*Member]struct{} // with reads to issue
	ticks        uint64
	readSeq      uint64
	compactTicks uint64
	snapshots    map[*Member]struct{} // Raft groups holding an incoming snapshot
	staging      string               // where received snapshots are staged
	later        []func()             // run once the current Readies are handled
}

// SnapshotsSent returns how many snapshots this node streamed to other
// replicas in full, and how many sstable bytes it sent doing so.
func (h *Host) SnapshotsSent() (count, bytes uint64) {
	return h.snapshotsSent.Load(), h.snapshotBytes.Load()
}

// NewHost starts the host's loop and transport. With cfg.Listener set it
// also serves gRPC there (see Addr).
func NewHost(cfg Config) (*Host, error) {
	if cfg.NodeID == 0 {
		return nil, errors.New("replication: node id must be non-zero")
	}
	if cfg.Engine == nil || cfg.Resolve == nil {
		return nil, errors.New("replication: engine and resolver are required")
	}
	cfg = cfg.withDefaults()
	h := &Host{
		cfg:        cfg,
		log:        cfg.Logger.With("component", "replication", "node", cfg.NodeID),
		engine:     cfg.Engine,
		members:    map[string]*Member{},
		wake:       make(chan struct{}, 1),
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
		dirty:      map[*Member]struct{}{},
		active:     map[*Member]struct{}{},
		readGroups: map[*Member]struct{}{},
		snapshots:  map[*Member]struct{}{},
		rebuilds:   map[rebuildKey]time.Time{},
	}
	if cfg.LeaseTicks > 0 {
		h.lease = time.Duration(cfg.LeaseTicks) * cfg.TickInterval
		h.hold = h.lease + h.lease/leaseDriftDivisor
	}
	h.checker = newChecker(h)
	h.raftLog = raftLogger{h.log}
	// Snapshots a crash interrupted are discarded: raft asks again.
	staging, err := cfg.Engine.StagingDir("snapshots")
	if err != nil {
		return nil, err
	}
	h.staging = staging
	h.compactTicks = uint64(cfg.CompactInterval / cfg.TickInterval)
	if h.compactTicks == 0 {
		h.compactTicks = 1
	}
	h.propSeq.Store(uint64(time.Now().UnixNano()))
	h.transport = newTransport(h)
	if cfg.Listener != nil {
		h.transport.serve(cfg.Listener)
	}
	go h.run()
	go h.checker.run(h.stop)
	return h, nil
}

// Addr is the address the host serves on (with Config.Listener).
func (h *Host) Addr() string { return h.transport.addr() }

// Register adds the replication service to a gRPC server the caller runs.
// The server must accept messages of at least MaxMessageBytes.
func (h *Host) Register(s grpc.ServiceRegistrar) { s.RegisterService(&serviceDesc, h.transport) }

// MaxMessageBytes bounds one transport message (a batch of Raft messages or
// a snapshot chunk); servers passed to Register need
// grpc.MaxRecvMsgSize(MaxMessageBytes).
const MaxMessageBytes = 256 << 20

// NodeID is this host's node id.
func (h *Host) NodeID() uint64 { return h.cfg.NodeID }

// Close stops the loop and the transport. Pending proposals and reads fail
// with an Unavailable error. The engine stays open.
func (h *Host) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	h.mu.Unlock()
	close(h.stop)
	<-h.done
	h.checker.close() // no iterator outlives the host (the engine may close next)
	h.transport.close()
	for _, g := range h.members {
		g.failAll(unavailable("replica of %s closed", g.name()))
	}
	return nil
}

// enqueue runs fn on the loop. It reports false when the host is closed.
func (h *Host) enqueue(fn func()) bool {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return false
	}
	h.queue = append(h.queue, fn)
	h.mu.Unlock()
	select {
	case h.wake <- struct{}{}:
	default:
	}
	return true
}

// call runs fn on the loop and waits for it.
func (h *Host) call(fn func()) error {
	done := make(chan struct{})
	if !h.enqueue(func() { fn(); close(done) }) {
		return unavailable("node %d is shutting down", h.cfg.NodeID)
	}
	select {
	case <-done:
		return nil
	case <-h.done:
		select {
		case <-done:
			return nil
		default:
		}
		return unavailable("node %d is shutting down", h.cfg.NodeID)
	}
}

// Member returns the hosted replica of partition p, or nil.
func (h *Host) Member(p keys.Partition) *Member {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.members[string(p)]
}

func (h *Host) lookup(name string) *Member {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.members[name]
}

// Start begins hosting this node's replica of partition p and returns it;
// it returns the existing replica if p is already hosted. A replica with
// Raft state on disk resumes from it. A replica without state bootstraps
// the Raft group when voters is non-empty (every initial voter must be started
// with the same list; the first one campaigns at once), and otherwise
// starts empty: it joins when the leader adds it (AddLearner) and sends it
// a snapshot.
func (h *Host) Start(p keys.Partition, voters []uint64) (*Member, error) {
	if g := h.Member(p); g != nil {
		return g, nil
	}
	st, err := loadStorage(h.engine, p)
	if err != nil {
		return nil, fmt.Errorf("partition %x: %w", []byte(p), err)
	}
	// A replica restarted empty by a rebuild waits for its snapshot: it
	// never bootstraps, and votes for no one (Member.mayVote).
	_, err = h.engine.Get(p.RaftRebuilt())
	rebuilt := err == nil
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return nil, err
	}
	campaign := false
	if st.empty() && len(voters) > 0 && !rebuilt {
		b := h.engine.NewBatch()
		st.bootstrap(b, voters)
		if err := h.engine.Commit(b); err != nil {
			return nil, err
		}
		campaign = voters[0] == h.cfg.NodeID
	}
	rn, err := raft.NewRawNode(&raft.Config{
		ID:           h.cfg.NodeID,
		ElectionTick: h.cfg.ElectionTicks,
		// A leader that has not heard from a quorum for an election
		// timeout steps down, so a partitioned leader stops taking
		// requests (its reads already need a quorum: ReadOnlySafe).
		CheckQuorum:               true,
		HeartbeatTick:             h.cfg.HeartbeatTicks,
		Storage:                   st,
		Applied:                   st.applied.Index,
		MaxSizePerMsg:             1 << 20,
		MaxCommittedSizePerReady:  64 << 20,
		MaxUncommittedEntriesSize: 1 << 30,
		MaxInflightMsgs:           256,
		PreVote:                   true,
		ReadOnlyOption:            raft.ReadOnlySafe,
		StepDownOnRemoval:         true,
		// A proposal is made only by a replica that believes it leads, and
		// a write set is valid only against the state of the leader that
		// evaluated it. If Raft stepped down since (a message of a newer
		// term), the proposal must fail, not travel to the new leader: there
		// it would be committed over writes the new leader acknowledged, and
		// Replicate, never seeing the entry in this log, would answer "not
		// applied" so the request would run twice.
		DisableProposalForwarding: true,
		Logger:                    h.raftLog,
	})
	if err != nil {
		return nil, fmt.Errorf("partition %x: %w", []byte(p), err)
	}
	g := newMember(h, append(keys.Partition(nil), p...), rn, st)
	g.noVote = rebuilt
	var out *Member
	err = h.call(func() {
		if existing := h.members[string(p)]; existing != nil {
			out = existing
			return
		}
		h.mu.Lock()
		h.members[string(p)] = g
		h.mu.Unlock()
		out = g
		for _, id := range g.members() {
			h.transport.connect(id)
		}
		if campaign {
			_ = rn.Campaign()
		}
		g.wakeUp()
		h.dirty[g] = struct{}{}
		g.publish()
	})
	return out, err
}

// Remove stops hosting partition p and deletes everything stored under its
// prefix (data and Raft state). Used when placement moved the replica away.
func (h *Host) Remove(p keys.Partition) error {
	var g *Member
	err := h.call(func() {
		g = h.members[string(p)]
		if g == nil {
			return
		}
		h.mu.Lock()
		delete(h.members, string(p))
		h.mu.Unlock()
		delete(h.active, g)
		delete(h.dirty, g)
		delete(h.readGroups, g)
		delete(h.snapshots, g)
		g.incoming.discard()
		g.incoming = nil
		g.removed = true
		g.publish()
	})
	if err != nil || g == nil {
		return err
	}
	g.failAll(unavailable("replica of %s removed from node %d", g.name(), h.cfg.NodeID))
	b := h.engine.NewBatch()
	b.DeleteRange(p, p.End())
	return h.engine.Commit(b)
}

// StartRebuilt deletes this node's replica of p (Remove) and starts it
// again empty, marked on disk so that it never bootstraps and grants no
// vote until a snapshot from its leader replaces the mark: it was a voter,
// and a candidate whose configuration still counts it must not win with
// the vote of a replica that forgot its log. A leader's rebuild asks for
// it (Config.OnRebuild must call it).
func (h *Host) StartRebuilt(p keys.Partition) (*Member, error) {
	if err := h.Remove(p); err != nil {
		return nil, err
	}
	b := h.engine.NewBatch()
	b.DeleteRange(p, p.End())
	b.Set(p.RaftRebuilt(), nil)
	if err := h.engine.Commit(b); err != nil {
		return nil, err
	}
	return h.Start(p, nil)
}

// run is the loop: the only goroutine that touches RawNodes and their
// storage.
func (h *Host) run() {
	defer close(h.done)
	ticker := time.NewTicker(h.cfg.TickInterval)
	defer ticker.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-ticker.C:
			h.tick()
		case <-h.wake:
		}
		h.drain()
		h.issueReads()
		h.processReady()
		if len(h.later) > 0 {
			later := h.later
			h.later = nil
			for _, fn := range later {
				fn()
			}
			h.processReady()
		}
	}
}

func (h *Host) drain() {
	for {
		h.mu.Lock()
		q := h.queue
		h.queue = nil
		h.mu.Unlock()
		if len(q) == 0 {
			return
		}
		for _, fn := range q {
			fn()
		}
	}
}

func (h *Host) tick() {
	h.ticks++
	for g := range h.active {
		g.rn.Tick()
		h.dirty[g] = struct{}{}
		if g.campaignUntil > h.ticks && g.lead == 0 && !g.removed && g.rn.BasicStatus().RaftState == raft.StateFollower {
			_ = g.rn.Campaign()
		}
		g.retryReads()
		if g.isLeader {
			if g.transferring && g.rn.BasicStatus().LeadTransferee == 0 {
				// Raft abandoned the transfer on a tick, with no Ready.
				g.transferring = false
				g.publish()
			}
			g.maybeQuiesce()
		}
	}
	if h.ticks%h.compactTicks == 0 {
		h.compact(h.cfg.LogRetain)
	}
}

// compact truncates every Raft group's log to what no replica needs (see
// Member.unneeded; keep bounds what is kept for lagging followers), once at
// least truncateMin entries can go. Run every second, so that on a leader
// whose followers keep up (and on a single voter) an entry is deleted while
// still in the memtable, and its flush drops it: the log is written to the
// WAL and the memtable, never to an sstable that compactions rewrite.
func (h *Host) compact(keep uint64) {
	b := h.engine.NewBatch()
	n := 0
	for _, g := range h.members {
		if idx := g.unneeded(keep); idx >= g.st.trunc.Index+truncateMin && g.truncateTo(b, idx) {
			n++
		}
	}
	if n == 0 {
		b.Close()
		return
	}
	if err := h.engine.Commit(b); err != nil {
		h.log.Error("log truncation failed", "err", err)
	}
}

// truncateMin is the fewest entries compact truncates from a Raft group's log:
// each truncation is a range deletion, and the memtable's range deletions
// are fragmented again by every read after one is added.
const truncateMin = 256

// processReady handles the Ready of every dirty Raft group, all Raft groups' writes
// in one synced batch, until no Raft group has more.
func (h *Host) processReady() {
	for len(h.dirty) > 0 {
		type ready struct {
			g    *Member
			rd   raft.Ready
			sent bool // its messages went out before the sync
		}
		var rds []ready
		for g := range h.dirty {
			if g.rn.HasReady() {
				rds = append(rds, ready{g: g, rd: g.rn.Ready()})
			}
		}
		clear(h.dirty)
		if len(rds) == 0 {
			break
		}
		b := h.engine.NewBatch()
		write, sync := false, false
		var after []func()
		var applies []applied
		now := time.Now()
		for _, r := range rds {
			if r.g.persist(b, r.rd) {
				write = true
			}
			// Log entries, term and vote must be durable before the
			// messages that rely on them go out; a snapshot is ingested
			// already.
			sync = sync || r.rd.MustSync || !raft.IsEmptySnap(r.rd.Snapshot)
			if len(r.rd.CommittedEntries) == 0 {
				continue
			}
			// Each Raft group's committed entries go in a batch of their own,
			// written after the log (so after a crash the log holds every
			// entry whose effects survived) and without a sync: the
			// entries are durable in the logs of a quorum, and a crash
			// that loses the batch re-applies them on restart,
			// deterministically, from the applied index stored with it.
			began := time.Now()
			segs, fns, wrote := r.g.apply(r.rd.CommittedEntries, now)
			if wrote {
				applies = append(applies, applied{segs, began})
			} else {
				after = append(after, fns...)
			}
		}
		// The log batch goes into the WAL first and its sync runs while the
		// committed entries are applied: they were committed by a quorum's
		// durable logs already, so their proposers need not wait for this
		// Ready's sync, only for their apply. The WAL keeps order, so an
		// apply batch that survives a crash has the log batch before it.
		var syncing *storage.Batch
		var err error
		switch {
		case write && sync:
			err, syncing = h.engine.Enqueue(b), b
		case write:
			err = h.engine.CommitNoSync(b)
		default:
			b.Close()
		}
		if err != nil {
			// The log and the state machine can no longer be trusted to
			// match what Raft believes; stop rather than diverge.
			panic(fmt.Sprintf("replication: node %d: persisting raft state: %v", h.cfg.NodeID, err))
		}
		// A leader's messages (appends, heartbeats) go out now, so that the
		// followers' syncs run alongside the leader's own (Raft thesis
		// 10.2.1): raft counts the leader's append towards a commit only
		// once it is persisted (its self-acknowledgement is stepped at
		// Advance, after the sync), so an entry commits only when durable
		// on a quorum either way. Every other message (acknowledgements,
		// votes) vouches for this node's log, term or vote, and waits.
		for i, r := range rds {
			leader := r.g.isLeader
			if r.rd.SoftState != nil {
				leader = r.rd.SoftState.RaftState == raft.StateLeader
			}
			r.g.leadership(leader, now)
			if leader || syncing == nil {
				r.g.send(r.rd.Messages, now)
				rds[i].sent = true
			}
		}
		h.commitApplies(applies)
		if syncing != nil {
			if err := syncing.Wait(); err != nil {
				panic(fmt.Sprintf("replication: node %d: syncing raft state: %v", h.cfg.NodeID, err))
			}
		}
		for _, r := range rds {
			if !r.sent {
				r.g.send(r.rd.Messages, now)
			}
		}
		for _, fn := range after {
			fn()
		}
		for _, r := range rds {
			r.g.afterReady(r.rd, now)
			r.g.rn.Advance(r.rd)
			h.dirty[r.g] = struct{}{}
		}
	}
	for g := range h.snapshots {
		// Not installed (raft found it stale): its files go.
		g.incoming.discard()
		g.incoming = nil
	}
	clear(h.snapshots)
}

// applied is one Raft group's application of committed entries: its batches,
// in order, and the answers to give once each is committed.
type applied struct {
	segs  []applySeg
	began time.Time // when building its batches began
}

// applySeg is a run of committed entries applied in one batch. A segment
// ends at a check marker: once its batch is committed, the state the
// marker checks is captured before any later entry is written. An entry
// applied by ingestion is a segment of its own, with no batch.
type applySeg struct {
	b       *storage.Batch
	ingest  func() error
	after   []func()
	capture *capture
}

// commitApplies commits the Raft groups' application batches, concurrently when
// there are several (their keys are disjoint; inserting into the memtable
// is most of a write's CPU in the loop, and the cores are otherwise idle
// while every writer waits for it), and answers each Raft group's proposers as
// soon as its batch is in.
func (h *Host) commitApplies(applies []applied) {
	commit := func(a applied) {
		for _, s := range a.segs {
			var err error
			if s.ingest != nil {
				err = s.ingest()
			} else {
				err = h.engine.CommitNoSync(s.b)
			}
			if err != nil {
				panic(fmt.Sprintf("replication: node %d: applying committed entries: %v", h.cfg.NodeID, err))
			}
			if s.capture != nil {
				h.checker.captured(*s.capture)
			}
			for _, fn := range s.after {
				fn()
			}
		}
		if h.cfg.OnApply != nil {
			h.cfg.OnApply(time.Since(a.began))
		}
	}
	switch len(applies) {
	case 0:
		return
	case 1:
		commit(applies[0])
		return
	}
	var wg sync.WaitGroup
	for _, a := range applies[1:] {
		wg.Go(func() { commit(a) })
	}
	commit(applies[0])
	wg.Wait()
}

func (h *Host) issueReads() {
	for g := range h.readGroups {
		g.issueReads()
	}
	clear(h.readGroups)
}

// deliver steps messages received from node from, then calls after.
func (h *Host) deliver(from uint64, msgs []inbound, after func()) {
	h.enqueue(func() {
		defer after()
		now := time.Now()
		for _, m := range msgs {
			g := h.members[m.group]
			if g == nil || g.removed {
				continue
			}
			if m.msg.GetType() == raftpb.MsgTimeoutNow {
				// Leadership transfer: the commit that came in the same
				// batch may carry a configuration change, and raft refuses
				// to campaign before it is applied; step it after.
				h.later = append(h.later, func() {
					if !g.removed {
						g.step(m, now)
					}
				})
				continue
			}
			g.step(m, now)
		}
	})
}

// peerDown wakes the Raft groups led by node id so that they elect a new leader
// within a few ticks instead of a full election timeout, and the Raft groups
// this node leads with a replica there, so that a leader cut off from its
// quorum notices (CheckQuorum) and steps down even if it was quiesced.
func (h *Host) peerDown(id uint64) {
	h.enqueue(func() {
		n := 0
		for _, g := range h.members {
			if g.isLeader && !g.removed && g.hasMember(id) {
				g.wakeUp()
				h.dirty[g] = struct{}{}
				continue
			}
			if g.lead != id || g.isLeader || g.removed {
				continue
			}
			_ = g.rn.ForgetLeader()
			g.wakeUp()
			if g.successor(id) == h.cfg.NodeID {
				// The chosen successor campaigns now (PreVote first, so a
				// refusal, e.g. from a peer that has not yet seen the
				// leader die, costs nothing) and again each tick for an
				// election timeout while no leader is known.
				_ = g.rn.Campaign()
				g.campaignUntil = h.ticks + uint64(h.cfg.ElectionTicks)
			} else {
				// Spend most of the election timeout at once: the
				// randomized remainder still separates the candidates.
				for i := 0; i < h.cfg.ElectionTicks-1; i++ {
					g.rn.Tick()
				}
			}
			h.dirty[g] = struct{}{}
			n++
		}
		if n > 0 {
			h.log.Info("node down: electing new leaders", "peer", id, "groups", n)
		}
	})
}

// peerUp wakes the Raft groups this node leads that have a replica on node id,
// so the leader catches it up.
func (h *Host) peerUp(id uint64) {
	h.enqueue(func() {
		for _, g := range h.members {
			if g.isLeader && g.hasMember(id) {
				g.wakeUp()
				h.dirty[g] = struct{}{}
			}
		}
	})
}

// reportUnreachable tells the Raft groups whose messages to node id were lost.
func (h *Host) reportUnreachable(id uint64, groups []string) {
	h.enqueue(func() {
		for _, name := range groups {
			if g := h.members[name]; g != nil && !g.removed {
				g.rn.ReportUnreachable(id)
				h.dirty[g] = struct{}{}
			}
		}
	})
}

// reportSnapshot tells the Raft group whether its snapshot to node id arrived.
func (h *Host) reportSnapshot(name string, id uint64, ok bool) {
	h.enqueue(func() {
		g := h.members[name]
		if g == nil || g.removed {
			return
		}
		status := raft.SnapshotFinish
		if !ok {
			status = raft.SnapshotFailure
		}
		g.rn.ReportSnapshot(id, status)
		g.wakeUp()
		h.dirty[g] = struct{}{}
	})
}

// receiveSnapshot steps a snapshot message with its data staged, so that
// the Ready that installs it finds the data.
func (h *Host) receiveSnapshot(name string, m *raftpb.Message, snap *incomingSnapshot) error {
	var err error
	cerr := h.call(func() {
		g := h.members[name]
		if g == nil || g.removed {
			err = fmt.Errorf("partition %x not hosted on node %d", name, h.cfg.NodeID)
			return
		}
		if g.incoming != nil {
			g.incoming.discard()
		}
		g.incoming = snap
		h.snapshots[g] = struct{}{}
		g.wakeUp()
		if e := g.rn.Step(m); e != nil {
			err = e
		}
		h.dirty[g] = struct{}{}
	})
	if cerr != nil {
		snap.discard()
		return cerr
	}
	if err != nil {
		snap.discard()
	}
	return err
}

// raftLogger sends raft's own logging to slog, keeping only warnings and
// errors.
type raftLogger struct{ l *slog.Logger }

func (r raftLogger) Debug(...any)          {}
func (r raftLogger) Debugf(string, ...any) {}
func (r raftLogger) Info(...any)           {}
func (r raftLogger) Infof(string, ...any)  {}
func (r raftLogger) Warning(v ...any)      { r.l.Warn(fmt.Sprint(v...), "component", "raft") }
func (r raftLogger) Warningf(f string, v ...any) {
	r.l.Warn(fmt.Sprintf(f, v...), "component", "raft")
}
func (r raftLogger) Error(v ...any) { r.l.Error(fmt.Sprint(v...), "component", "raft") }
func (r raftLogger) Errorf(f string, v ...any) {
	r.l.Error(fmt.Sprintf(f, v...), "component", "raft")
}
func (r raftLogger) Fatal(v ...any) { panic(fmt.Sprint(v...)) }
func (r raftLogger) Fatalf(f string, v ...any) {
	panic(fmt.Sprintf(f, v...))
}
func (r raftLogger) Panic(v ...any) { panic(fmt.Sprint(v...)) }
func (r raftLogger) Panicf(f string, v ...any) {
	panic(fmt.Sprintf(f, v...))
}
