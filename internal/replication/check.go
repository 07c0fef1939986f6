package replication

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/storage"
)

// Consistency checks (the Espresso paper, 5.4; CockroachDB's design).
//
// The leader proposes a check marker, a Raft entry that changes nothing.
// Every replica that applies it commits its application batch up to the
// marker and opens an iterator there, so all replicas sum the same log
// position however their apply batches were cut, while writes go on. A
// background worker per node sums the pinned state (partition.
// ComputeChecksums), one partition at a time and throttled to
// Config.CheckBytesPerSecond, and keeps the result for checkResultTTL. The
// leader then asks every voter for its result (the Checksum RPC waits for
// it) and compares each follower's with its own range by range.
//
// Repair: see rebuild.go.

const (
	checkFormat byte = 3 // after entryFormat and entryRestoreFormat (member.go)
	// checkResultTTL is how long a replica keeps a check's result for its
	// leader to collect.
	checkResultTTL = 10 * time.Minute
	// checkMarkerWait bounds the wait for a check marker to be applied.
	checkMarkerWait = 30 * time.Second
	// checkFollowerSlack is how much longer than twice the leader's own
	// checksum the leader waits for its followers'.
	checkFollowerSlack = time.Minute
	// DefaultCheckBytesPerSecond throttles checksum reads when
	// Config.CheckBytesPerSecond is unset.
	DefaultCheckBytesPerSecond = 32 << 20
)

const (
	methodChecksum    = "/" + serviceName + "/Checksum"
	methodRebuild     = "/" + serviceName + "/Rebuild"
	methodSuspect     = "/" + serviceName + "/Suspect"
	methodRebuildPeer = "/" + serviceName + "/RebuildPeer"
)

// encodeCheckEntry frames a check marker as the data of a normal entry.
func encodeCheckEntry(id proposalID) []byte {
	b := make([]byte, 0, 17)
	b = append(b, checkFormat)
	b = binary.BigEndian.AppendUint64(b, id.node)
	return binary.BigEndian.AppendUint64(b, id.seq)
}

func decodeCheckEntry(b []byte) (proposalID, bool) {
	if len(b) != 17 || b[0] != checkFormat {
		return proposalID{}, false
	}
	return proposalID{binary.BigEndian.Uint64(b[1:]), binary.BigEndian.Uint64(b[9:])}, true
}

// checkKey names one replica's result of one check: the partition and the
// marker's proposal id (unique: node and sequence of the proposer).
type checkKey struct {
	part string
	id   proposalID
}

// capture is a check marker applied at index: the state to sum once the
// application batch up to it is committed.
type capture struct {
	key   checkKey
	index uint64
	scn   partition.SCN
}

type checkResult struct {
	done  chan struct{}
	index uint64
	scn   partition.SCN
	sums  partition.Checksums
	err   error
	at    time.Time
}

type checkJob struct {
	c  capture
	it *storage.Iter
}

// checker sums captured states in the background, one at a time.
type checker struct {
	h    *Host
	rate int64

	mu      sync.Mutex
	results map[checkKey]*checkResult
	jobs    []checkJob
	wake    chan struct{}

	counters checkCounters
	// current is the state being summed and how far (for progress).
	current      atomic.Pointer[checkKey]
	currentBytes atomic.Uint64
	done         chan struct{} // closed when run returns
}

type checkCounters struct{ runs, mismatches, repairs, bytes atomic.Uint64 }

// CheckCounters are a node's consistency-check totals since it started.
type CheckCounters struct {
	Checks     uint64 // checks this node ran as leader
	Mismatches uint64 // replicas found to differ (from the leader, or from the majority when the leader was the odd one out)
	Repairs    uint64 // replicas rebuilt after a mismatch
	Bytes      uint64 // bytes this node summed (as leader or follower)
}

// CheckCounters returns the node's consistency-check totals.
func (h *Host) CheckCounters() CheckCounters {
	c := &h.checker.counters
	return CheckCounters{Checks: c.runs.Load(), Mismatches: c.mismatches.Load(), Repairs: c.repairs.Load(), Bytes: c.bytes.Load()}
}

func newChecker(h *Host) *checker {
	c := &checker{h: h, rate: h.cfg.CheckBytesPerSecond, results: map[checkKey]*checkResult{}, wake: make(chan struct{}, 1), done: make(chan struct{})}
	if c.rate <= 0 {
		c.rate = DefaultCheckBytesPerSecond
	}
	return c
}

// result returns the (possibly not yet captured) result of k.
func (c *checker) result(k checkKey) *checkResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	for key, r := range c.results {
		if now.Sub(r.at) > checkResultTTL {
			delete(c.results, key)
		}
	}
	r := c.results[k]
	if r == nil {
		r = &checkResult{done: make(chan struct{}), at: now}
		c.results[k] = r
	}
	return r
}

// captured queues the state it pins for summing; called right after the
// batch that applied the marker is committed, before anything later.
func (c *checker) captured(cp capture) {
	it, err := c.h.engine.NewIter(keys.Partition(cp.key.part), keys.Partition(cp.key.part).End())
	if err != nil {
		c.finish(cp, partition.Checksums{}, err)
		return
	}
	c.mu.Lock()
	c.jobs = append(c.jobs, checkJob{cp, it})
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *checker) finish(cp capture, sums partition.Checksums, err error) {
	r := c.result(cp.key)
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-r.done:
		return
	default:
	}
	r.index, r.scn, r.sums, r.err, r.at = cp.index, cp.scn, sums, err, time.Now()
	close(r.done)
}

// run is the worker: it sums queued states one at a time until stop.
func (c *checker) run(stop <-chan struct{}) {
	defer close(c.done)
	for {
		select {
		case <-stop:
			return
		default:
		}
		c.mu.Lock()
		var job checkJob
		ok := len(c.jobs) > 0
		if ok {
			job = c.jobs[0]
			c.jobs = c.jobs[1:]
		}
		c.mu.Unlock()
		if !ok {
			select {
			case <-stop:
				return
			case <-c.wake:
				continue
			}
		}
		start, read := time.Now(), int64(0)
		c.currentBytes.Store(0)
		c.current.Store(&job.c.key)
		pace := func(n int) error {
			read += int64(n)
			c.currentBytes.Store(uint64(read))
			due := start.Add(time.Duration(float64(read) / float64(c.rate) * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				t := time.NewTimer(d)
				defer t.Stop()
				select {
				case <-t.C:
				case <-stop:
					return errors.New("node shutting down")
				}
			}
			return nil
		}
		sums, err := partition.ComputeChecksums(job.it, keys.Partition(job.c.key.part), pace)
		if cerr := job.it.Close(); err == nil {
			err = cerr
		}
		c.current.Store(nil)
		c.finish(job.c, sums, err)
		c.counters.bytes.Add(uint64(read))
	}
}

// close waits for the worker to stop (after the host's stop and loop) and
// closes the iterators of states never summed, so none outlives the host.
func (c *checker) close() {
	<-c.done
	c.mu.Lock()
	jobs := c.jobs
	c.jobs = nil
	c.mu.Unlock()
	for _, j := range jobs {
		j.it.Close()
		c.finish(j.c, partition.Checksums{}, errors.New("node shutting down"))
	}
}

// await waits for this node's result of k.
func (c *checker) await(ctx context.Context, k checkKey) (*checkResult, error) {
	r := c.result(k)
	select {
	case <-r.done:
		return r, r.err
	case <-ctx.Done():
		return nil, unavailable("checksum of %x not computed before the deadline", []byte(k.part))
	}
}

// checksumRequest asks a replica for its result of a check.
type checksumRequest struct {
	Partition []byte `json:"partition"`
	Node      uint64 `json:"node"`
	Seq       uint64 `json:"seq"`
}

type checksumReply struct {
	Index uint64              `json:"index"`
	SCN   partition.SCN       `json:"scn"`
	Sums  partition.Checksums `json:"sums"`
}

func (t *transport) serveChecksum(ctx context.Context, dec func(any) error) (any, error) {
	var in wrapperspb.BytesValue
	if err := dec(&in); err != nil {
		return nil, err
	}
	var req checksumRequest
	if err := json.Unmarshal(in.GetValue(), &req); err != nil {
		return nil, err
	}
	r, err := t.host.checker.await(ctx, checkKey{string(req.Partition), proposalID{req.Node, req.Seq}})
	if err != nil {
		return nil, err
	}
	out, err := json.Marshal(checksumReply{Index: r.index, SCN: r.scn, Sums: r.sums})
	if err != nil {
		return nil, err
	}
	return wrapperspb.Bytes(out), nil
}

// invoke calls a unary method of node to's transport.
func (t *transport) invoke(ctx context.Context, to uint64, method string, req any) ([]byte, error) {
	p := t.peer(to)
	if p == nil {
		return nil, errors.New("transport closed")
	}
	if t.isCut(to) {
		return nil, fmt.Errorf("node %d unreachable", to)
	}
	addr, err := t.host.cfg.Resolve(to)
	if err != nil {
		return nil, err
	}
	conn, err := p.client(addr)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var reply wrapperspb.BytesValue
	if err := conn.Invoke(ctx, method, wrapperspb.Bytes(b), &reply, grpc.MaxCallRecvMsgSize(MaxMessageBytes)); err != nil {
		return nil, err
	}
	return reply.GetValue(), nil
}

// CheckOptions tune one consistency check.
type CheckOptions struct {
	// Repair rebuilds the followers found to differ from the majority.
	Repair bool
}

// ReplicaCheck is one replica's outcome in a check.
type ReplicaCheck struct {
	Node uint64 `json:"node"`
	// Status: ok (equal to the leader's), mismatch, unavailable (no result
	// in time), or leader for the leader's own entry.
	Status string   `json:"status"`
	Ranges []string `json:"ranges,omitempty"` // ranges that differ from the leader's
	Error  string   `json:"error,omitempty"`
	// Repaired: rebuilt from a snapshot after the mismatch. RepairError
	// says why a repair failed or was not tried.
	Repaired    bool   `json:"repaired,omitempty"`
	RepairError string `json:"repairError,omitempty"`
}

// CheckReport is the outcome of one consistency check of a partition.
type CheckReport struct {
	Leader uint64        `json:"leader"`
	Index  uint64        `json:"index"` // log index of the marker
	SCN    partition.SCN `json:"scn"`   // applied SCN at the marker
	At     time.Time     `json:"at"`
	Keys   uint64        `json:"keys"`  // keys summed on the leader
	Bytes  uint64        `json:"bytes"` // bytes summed on the leader
	// Result: consistent; repaired (mismatches found and every one
	// rebuilt); inconsistent (a mismatch left unrepaired); incomplete
	// (no mismatch, but some replica gave no result).
	Result   string         `json:"result"`
	Replicas []ReplicaCheck `json:"replicas"`
	// HandedTo: the leader differed from a majority of agreeing followers
	// and handed leadership to this one, which rebuilt it (Replicas are
	// then stated against the majority's state).
	HandedTo uint64 `json:"handedTo,omitempty"`
}

// Mismatched returns the nodes whose state differed from the leader's.
func (r CheckReport) Mismatched() []uint64 {
	var out []uint64
	for _, rc := range r.Replicas {
		if rc.Status == "mismatch" {
			out = append(out, rc.Node)
		}
	}
	return out
}

// Check runs a consistency check of the partition from its leader (this
// replica): it proposes a marker, collects every voter's checksums at the
// marker and compares them with its own; with opts.Repair it rebuilds the
// followers that differ from the majority. It fails only if the marker
// cannot be committed (not the leader, no quorum) or the leader's own
// checksum fails; a follower without a result is reported unavailable.
func (g *Member) Check(ctx context.Context, opts CheckOptions) (CheckReport, error) {
	h := g.host
	if err := g.Lead(ctx); err != nil {
		return CheckReport{}, err
	}
	id := proposalID{node: h.cfg.NodeID, seq: h.propSeq.Add(1)}
	p := &proposal{id: id, done: make(chan proposalResult, 1)}
	var voters []uint64
	ok := h.enqueue(func() {
		if !g.isLeader || !g.ready || g.removed {
			p.finish(proposalResult{err: errNotLeader(g.lead, g.term, "")})
			return
		}
		if err := g.rn.Propose(encodeCheckEntry(id)); err != nil {
			p.finish(proposalResult{err: errNotLeader(g.lead, g.term, "check marker dropped: "+err.Error())})
			return
		}
		voters = slices.Clone(g.st.applied.conf().GetVoters())
		g.proposals[id] = p
		g.justProposed = append(g.justProposed, p)
		g.wakeUp()
		h.dirty[g] = struct{}{}
	})
	if !ok {
		return CheckReport{}, unavailable("node %d is shutting down", h.cfg.NodeID)
	}
	var res proposalResult
	markerWait := time.NewTimer(checkMarkerWait)
	defer markerWait.Stop()
	select {
	case res = <-p.done:
	case <-ctx.Done():
		return CheckReport{}, unavailable("check marker of %x not applied before the deadline", []byte(g.prefix))
	case <-markerWait.C:
		return CheckReport{}, unavailable("check marker of %x not applied within %v", []byte(g.prefix), checkMarkerWait)
	}
	if res.err != nil {
		return CheckReport{}, res.err
	}
	key := checkKey{string(g.prefix), id}
	began := time.Now()
	own, err := h.checker.await(ctx, key)
	if err != nil {
		return CheckReport{}, fmt.Errorf("checksum of %x on the leader: %w", []byte(g.prefix), err)
	}
	rep := CheckReport{Leader: h.cfg.NodeID, Index: own.index, SCN: own.scn, At: time.Now().UTC(), Result: "consistent"}
	for _, r := range own.sums.Ranges {
		rep.Keys += r.Keys
		rep.Bytes += r.Bytes
	}
	followers := slices.DeleteFunc(slices.Clone(voters), func(id uint64) bool { return id == h.cfg.NodeID })
	slices.Sort(followers)
	rep.Replicas = append(rep.Replicas, ReplicaCheck{Node: h.cfg.NodeID, Status: "leader"})
	// Followers summed from the same marker, each at its node's pace and
	// after its node's queued checks; one that takes far longer than the
	// leader did (or never applies the marker) is reported unavailable.
	fctx, cancel := context.WithTimeout(ctx, 2*time.Since(began)+checkFollowerSlack)
	defer cancel()
	out := make([]ReplicaCheck, len(followers))
	sums := make([]*partition.Checksums, len(followers))
	var wg sync.WaitGroup
	for i, f := range followers {
		wg.Go(func() {
			rc := ReplicaCheck{Node: f}
			b, err := h.transport.invoke(fctx, f, methodChecksum, checksumRequest{Partition: g.prefix, Node: id.node, Seq: id.seq})
			var reply checksumReply
			if err == nil {
				err = json.Unmarshal(b, &reply)
			}
			switch {
			case err != nil:
				rc.Status, rc.Error = "unavailable", err.Error()
			case reply.Index != own.index:
				rc.Status, rc.Error = "unavailable", fmt.Sprintf("summed at index %d, not %d", reply.Index, own.index)
			default:
				sums[i] = &reply.Sums
				if d := partition.Diff(own.sums, reply.Sums); len(d) > 0 {
					rc.Status, rc.Ranges = "mismatch", d
				} else {
					rc.Status = "ok"
				}
			}
			out[i] = rc
		})
	}
	wg.Wait()
	agree, unavail := 1, 0
	for _, rc := range out {
		switch rc.Status {
		case "ok":
			agree++
		case "unavailable":
			unavail++
		}
	}
	rep.Replicas = append(rep.Replicas, out...)
	h.checker.counters.runs.Add(1)
	defer func() { h.checker.counters.mismatches.Add(uint64(len(rep.Mismatched()))) }()
	if len(rep.Mismatched()) == 0 {
		if unavail > 0 {
			rep.Result = "incomplete"
		}
		return rep, nil
	}
	for _, rc := range rep.Replicas {
		if rc.Status == "mismatch" {
			h.log.Error("consistency check: replica differs from the leader", "partition", fmt.Sprintf("%x", []byte(g.prefix)),
				"follower", rc.Node, "index", rep.Index, "scn", rep.SCN.String(), "ranges", rc.Ranges)
		}
	}
	if opts.Repair && agree*2 <= len(voters) {
		if i := majorityFollower(sums, len(voters)); i >= 0 {
			rep = g.handOverForRebuild(ctx, rep, own.sums, followers, sums, i)
			return rep, nil
		}
	}
	rep.Result = "repaired"
	for i := range rep.Replicas {
		rc := &rep.Replicas[i]
		if rc.Status != "mismatch" {
			continue
		}
		switch {
		case !opts.Repair:
			rc.RepairError = "repair not requested"
		case agree*2 <= len(voters):
			rc.RepairError = fmt.Sprintf("only %d of %d voters agree with the leader, and no other majority agrees: not repaired", agree, len(voters))
		default:
			if err := g.Rebuild(ctx, rc.Node); err != nil {
				rc.RepairError = err.Error()
				h.log.Error("consistency check: rebuilding replica failed", "partition", fmt.Sprintf("%x", []byte(g.prefix)), "follower", rc.Node, "err", err)
			} else {
				rc.Repaired = true
				h.checker.counters.repairs.Add(1)
				h.log.Info("consistency check: replica rebuilt from a snapshot", "partition", fmt.Sprintf("%x", []byte(g.prefix)), "follower", rc.Node)
			}
		}
		if !rc.Repaired {
			rep.Result = "inconsistent"
		}
	}
	return rep, nil
}

// majorityFollower returns the index of a follower whose checksums equal
// those of enough followers to make a majority of the voters, or -1.
func majorityFollower(sums []*partition.Checksums, voters int) int {
	for i, si := range sums {
		if si == nil {
			continue
		}
		same := 0
		for _, sj := range sums {
			if sj != nil && len(partition.Diff(*si, *sj)) == 0 {
				same++
			}
		}
		if same*2 > voters {
			return i
		}
	}
	return -1
}

// handOverForRebuild repairs this leader's replica, which differs from a
// majority of agreeing followers: it hands leadership to followers[i], one
// of them, and asks it to rebuild this replica. The follower is first told
// to hold off handing leadership back (the placement prefers this node)
// until the rebuild. The report is restated against the majority's state.
func (g *Member) handOverForRebuild(ctx context.Context, rep CheckReport, own partition.Checksums, followers []uint64, sums []*partition.Checksums, i int) CheckReport {
	h := g.host
	to, ref := followers[i], *sums[i]
	part := fmt.Sprintf("%x", []byte(g.prefix))
	h.log.Error("consistency check: the leader's replica differs from a majority; handing leadership over for a rebuild", "partition", part, "to", to)
	self := ReplicaCheck{Node: h.cfg.NodeID, Status: "mismatch", Ranges: partition.Diff(ref, own)}
	req := peerRequest{Partition: g.prefix, Node: h.cfg.NodeID, Term: g.info.Load().term}
	_, err := h.transport.invoke(ctx, to, methodSuspect, req)
	if err == nil {
		err = g.TransferLeadership(ctx, to)
		if err == nil {
			rep.HandedTo = to
			_, err = h.transport.invoke(ctx, to, methodRebuildPeer, req)
		}
	}
	if err != nil {
		self.RepairError = fmt.Sprintf("rebuilding this replica through node %d: %v", to, err)
		h.log.Error("consistency check: rebuilding the leader's replica failed", "partition", part, "through", to, "err", err)
	} else {
		self.Repaired = true
		h.checker.counters.repairs.Add(1)
		h.log.Info("consistency check: the old leader's replica rebuilt from a snapshot", "partition", part, "by", to)
	}
	rep.Result = "repaired"
	if !self.Repaired {
		rep.Result = "inconsistent"
	}
	replicas := []ReplicaCheck{self}
	for j, f := range followers {
		rc := ReplicaCheck{Node: f, Status: "ok"}
		switch {
		case sums[j] == nil:
			rc = rep.Replicas[j+1] // unavailable, as reported
		case len(partition.Diff(ref, *sums[j])) > 0:
			rc.Status, rc.Ranges = "mismatch", partition.Diff(ref, *sums[j])
			rc.RepairError = "differs from the majority too; the next check repairs it"
			rep.Result = "inconsistent"
		}
		replicas = append(replicas, rc)
	}
	rep.Replicas = replicas
	return rep
}
