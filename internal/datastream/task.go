package datastream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/doppio-db/doppio/internal/backoff"
	"github.com/doppio-db/doppio/internal/changes"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/schema"
)

// Task states as published.
const (
	StateRunning    = "running"
	StatePaused     = "paused"
	StateAutoPaused = "auto-paused"
	StateUnassigned = "unassigned"
	stateWaiting    = "waiting" // owned, but not reading (acquiring, no local replica yet)
)

const (
	// pollEvery bounds how long a task waits before it looks at its
	// pause state, ownership and replica again.
	pollEvery = 250 * time.Millisecond
	// rateWindow is what throughput is averaged over.
	rateWindow = 5 * time.Second
	// readBatch bounds the transactions produced in one round (one wait
	// for Kafka's acknowledgement, one checkpoint move).
	readBatch = 128
)

// task runs one (datastream, partition) on this node.
type task struct {
	m      *Manager
	id     TaskID
	def    Definition
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	ownRev  int64      // CreateRevision of our owner key; 0 until acquired
	rec     TaskRecord // durable state as of now
	flushed TaskRecord // as last written to etcd
	state   string
	waiting string
	source  string
	log     changes.Log
	since   time.Time
	// delivered counts events acknowledged here; samples hold
	// (time, delivered) once a second for the throughput.
	delivered uint64
	samples   []sample
	sink      sink // once running
}

type sample struct {
	at time.Time
	n  uint64
}

func newTask(m *Manager, id TaskID, def Definition) *task {
	ctx, cancel := context.WithCancel(m.ctx)
	return &task{m: m, id: id, def: def, ctx: ctx, cancel: cancel, done: make(chan struct{}), state: stateWaiting, waiting: "acquiring ownership"}
}

func (t *task) stop() { t.cancel() }

// run owns the task until it is stopped or loses its ownership.
func (t *task) run() {
	defer close(t.done)
	if !t.acquire() {
		return
	}
	t.mu.Lock()
	t.since = time.Now()
	t.mu.Unlock()
	t.m.log.Info("datastream task started", "datastream", t.id.Stream, "partition", t.id.Partition)
	defer t.release()
	sink, err := t.m.acquireSink(t.def)
	if err != nil {
		t.m.log.Error("datastream sink", "datastream", t.id.Stream, "err", err)
		t.setWaiting("sink: " + err.Error())
		<-t.ctx.Done()
		return
	}
	defer t.m.releaseSink(t.id.Stream, sink)
	t.mu.Lock()
	t.sink = sink.sink
	t.mu.Unlock()
	if ss, ok := sink.sink.(statusSink); ok {
		defer ss.forget(t.id.Partition)
	}
	t.loop(sink.sink)
}

// acquire takes the task's owner key under this node's lease, waiting
// while another node holds it. It reports false if the task was stopped
// first.
func (t *task) acquire() bool {
	m := t.m
	okey, tkey, dkey := m.ownerKey(t.id), m.taskKey(t.id), m.defKey(t.id.Stream)
	for {
		lease, err := m.lease(t.ctx)
		if err != nil {
			return false
		}
		ctx, cancel := context.WithTimeout(t.ctx, 5*time.Second)
		resp, err := m.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(okey), "=", 0), clientv3.Compare(clientv3.CreateRevision(dkey), ">", 0)).
			Then(clientv3.OpPut(okey, m.node, clientv3.WithLease(lease)), clientv3.OpGet(tkey)).
			Else(clientv3.OpGet(okey)).
			Commit()
		cancel()
		switch {
		case err != nil:
			if t.ctx.Err() != nil {
				// The transaction may have committed: leave no key behind
				// that would hold the task here.
				m.dropOwnerKey(okey, lease)
				return false
			}
			t.setWaiting("acquiring ownership: " + err.Error())
		case resp.Succeeded:
			var rec TaskRecord
			if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) > 0 {
				if err := json.Unmarshal(kvs[0].Value, &rec); err != nil {
					m.log.Error("datastream task record unreadable; starting afresh", "key", tkey, "err", err)
					rec = TaskRecord{}
				}
			}
			t.mu.Lock()
			t.ownRev = resp.Header.Revision
			t.rec, t.flushed = rec, rec
			t.mu.Unlock()
			return true
		default:
			kvs := resp.Responses[0].GetResponseRange().Kvs
			if len(kvs) > 0 && string(kvs[0].Value) == m.node && clientv3.LeaseID(kvs[0].Lease) == lease {
				// Ours already: an earlier attempt committed but its answer
				// was lost.
				if t.adopt(kvs[0].CreateRevision, tkey) {
					return true
				}
				continue
			}
			if len(kvs) > 0 && string(kvs[0].Value) == m.node && clientv3.LeaseID(kvs[0].Lease) != lease {
				// Our own key from a lost lease or an earlier process of
				// this node: that holder is gone.
				dctx, dcancel := context.WithTimeout(t.ctx, 5*time.Second)
				_, err := m.cli.Txn(dctx).If(clientv3.Compare(clientv3.CreateRevision(okey), "=", kvs[0].CreateRevision)).Then(clientv3.OpDelete(okey)).Commit()
				dcancel()
				if err == nil {
					continue
				}
			}
			if len(kvs) > 0 {
				t.setWaiting("taking over from node " + string(kvs[0].Value))
			} else {
				t.setWaiting("the datastream is being deleted")
			}
		}
		select {
		case <-t.ctx.Done():
			return false
		case <-time.After(pollEvery):
		}
	}
}

// adopt takes an owner key this node already holds: it reads the task
// record, fenced on the key.
func (t *task) adopt(rev int64, tkey string) bool {
	ctx, cancel := context.WithTimeout(t.ctx, 5*time.Second)
	defer cancel()
	okey := t.m.ownerKey(t.id)
	resp, err := t.m.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(okey), "=", rev)).Then(clientv3.OpGet(tkey)).Commit()
	if err != nil || !resp.Succeeded {
		return false
	}
	var rec TaskRecord
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
		if err := json.Unmarshal(kvs[0].Value, &rec); err != nil {
			rec = TaskRecord{}
		}
	}
	t.mu.Lock()
	t.ownRev = rev
	t.rec, t.flushed = rec, rec
	t.mu.Unlock()
	return true
}

// release writes the last checkpoint and gives the owner key up, both
// fenced on still owning it.
func (t *task) release() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = t.m.flush(ctx, []*task{t})
	t.mu.Lock()
	rev := t.ownRev
	t.mu.Unlock()
	okey := t.m.ownerKey(t.id)
	if _, err := t.m.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(okey), "=", rev)).Then(clientv3.OpDelete(okey)).Commit(); err != nil {
		t.m.log.Warn("datastream task: release ownership", "datastream", t.id.Stream, "partition", t.id.Partition, "err", err)
	}
	t.m.log.Info("datastream task stopped", "datastream", t.id.Stream, "partition", t.id.Partition)
}

func (t *task) setWaiting(why string) {
	t.mu.Lock()
	t.state, t.waiting = stateWaiting, why
	t.mu.Unlock()
}

func (t *task) setState(s string) {
	t.mu.Lock()
	t.state, t.waiting = s, ""
	t.mu.Unlock()
}

// sleep waits d or until the task stops; it reports false on stop.
func (t *task) sleep(d time.Duration) bool {
	return backoff.Sleep(t.ctx, d) == nil
}

// retryBackoff paces a failing task's retries.
func retryBackoff() backoff.Backoff {
	return backoff.Backoff{First: 200 * time.Millisecond, Max: 5 * time.Second}
}

// loop reads, produces and checkpoints until the task stops.
func (t *task) loop(sink sink) {
	var (
		rd     *changes.Reader
		rdLog  changes.Log
		bo     = retryBackoff()
		filter changes.Filter
	)
	if len(t.def.Tables) > 0 {
		filter.Tables = map[string]bool{}
		for _, name := range t.def.Tables {
			filter.Tables[name] = true
		}
	}
	// The catalog's current table, so images of a version it has just
	// learnt render at once.
	resolve := func(name string) (*schema.Table, error) {
		tb, ok := t.m.schemas.Table(t.id.DB, name)
		if !ok {
			return nil, fmt.Errorf("the change log names table %q, unknown to the catalog", name)
		}
		return tb, nil
	}
	for t.ctx.Err() == nil {
		rec, ok := t.m.record(t.id.Stream)
		if !ok {
			return
		}
		// Paused by a user: hold the position, keep the ownership.
		if rec.PartitionPaused(t.id.Partition) {
			t.setState(StatePaused)
			t.m.waitChange(t.ctx, pollEvery)
			continue
		}
		// Auto-paused: until its time, or a resume.
		t.mu.Lock()
		until, pausedAt := t.rec.PausedUntil, t.rec.PausedAt
		t.mu.Unlock()
		if until > 0 {
			if time.Now().UnixMilli() < until && !rec.resumedSince(t.id.Partition, pausedAt) {
				t.setState(StateAutoPaused)
				t.m.waitChange(t.ctx, min(pollEvery, time.Until(time.UnixMilli(until))))
				continue
			}
			t.mu.Lock()
			t.rec.PausedUntil, t.rec.PausedAt, t.rec.Failures = 0, 0, 0
			t.mu.Unlock()
			t.m.log.Info("datastream task resumes after its auto-pause", "datastream", t.id.Stream, "partition", t.id.Partition)
			if err := t.m.flush(t.ctx, []*task{t}); err != nil {
				continue
			}
		}
		l, role, ok := t.m.replicas.Local(t.id.DB, t.id.Partition)
		if !ok {
			t.setWaiting("no replica of the partition on this node yet")
			rd = nil
			t.sleep(pollEvery)
			continue
		}
		if rd == nil || l != rdLog {
			if role == "learner" && !t.started() {
				// A learner may still be installing its snapshot: where
				// "now" is cannot be told from its log yet.
				t.setWaiting("the replica on this node is still catching up")
				t.sleep(pollEvery)
				continue
			}
			if rec.From == FromSnapshot && !t.started() {
				t.mu.Lock()
				t.log, t.source = l, t.m.node+"/"+role
				t.mu.Unlock()
				t.setState(StateRunning)
				switch err := t.bootstrap(l, sink, filter, resolve); {
				case errors.Is(err, errSnapshotPaused):
					continue
				case errors.Is(err, errSnapshotBehind):
					t.setWaiting(err.Error())
					t.sleep(pollEvery)
					continue
				case err != nil:
					t.m.metrics.errors.WithLabelValues(t.id.Stream).Inc()
					if t.ctx.Err() != nil || !t.fail(err, &bo) {
						return
					}
					continue
				}
				bo.Reset()
			}
			pos, err := t.position(l, rec)
			if err == nil {
				rd, err = changes.NewReader(l, pos, filter)
			}
			if rd != nil {
				rd.Batch = readBatch
			}
			if err != nil {
				rd = nil
				if !t.fail(err, &bo) {
					return
				}
				continue
			}
			rdLog = l
			t.mu.Lock()
			t.log, t.source = l, t.m.node+"/"+role
			t.mu.Unlock()
		}
		t.setState(StateRunning)
		fresh := t.freshness(l)
		evs, err := rd.Next(t.ctx, pollEvery)
		if err != nil {
			rd = nil
			if t.ctx.Err() != nil || !t.fail(err, &bo) {
				return
			}
			continue
		}
		if len(evs) == 0 {
			// Transactions the filters leave out still move the position.
			if p := rd.Position(); p.SCN != t.checkpoint() {
				t.advance(p.SCN, 0, 0)
			}
			t.caughtUp(sink, l, rd.Position().SCN, fresh)
			continue
		}
		err = sink.deliver(t.ctx, t.id, evs, resolve)
		if err != nil {
			rd = nil // read again from the checkpoint
			t.m.metrics.errors.WithLabelValues(t.id.Stream).Inc()
			if t.ctx.Err() != nil || !t.fail(err, &bo) {
				return
			}
			continue
		}
		bo.Reset()
		last := evs[len(evs)-1]
		t.advance(rd.Position().SCN, last.Mtime, len(evs))
		t.m.metrics.produced.WithLabelValues(t.id.Stream).Add(float64(len(evs)))
		t.caughtUp(sink, l, rd.Position().SCN, fresh)
	}
}

// position is where the reader starts: the checkpoint, or for a task
// that never ran, where the definition says.
func (t *task) position(l changes.Log, rec *Record) (changes.Position, error) {
	t.mu.Lock()
	started, scn := t.rec.Started, t.rec.SCN
	t.mu.Unlock()
	if !started {
		var err error
		scn, err = startSCN(l, rec.From == FromEarliest, rec.startTime(t.id.Partition).UnixMilli())
		if err != nil {
			return changes.Position{}, err
		}
		t.mu.Lock()
		t.rec.SCN, t.rec.Started = scn, true
		t.mu.Unlock()
		t.m.log.Info("datastream task starts", "datastream", t.id.Stream, "partition", t.id.Partition, "after", scn.String(), "from", rec.From)
	}
	return changes.Position{Partition: t.id.Partition, SCN: scn}, nil
}

func (t *task) started() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rec.Started
}

func (t *task) checkpoint() partition.SCN {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rec.SCN
}

// advance records that everything up to scn is delivered (n events).
func (t *task) advance(scn partition.SCN, mtime int64, n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rec.SCN = scn
	if mtime > 0 {
		t.rec.Mtime = mtime
	}
	t.rec.Failures = 0
	t.delivered += uint64(n)
}

// fail records a failure and waits out the backoff, or auto-pauses the
// task after the policy's count of consecutive failures. It reports false
// if the task stopped meanwhile.
func (t *task) fail(err error, bo *backoff.Backoff) bool {
	if t.ctx.Err() != nil {
		return false
	}
	if errors.Is(err, context.Canceled) {
		return t.sleep(bo.Peek())
	}
	now := time.Now()
	rec, _ := t.m.record(t.id.Stream)
	t.mu.Lock()
	t.rec.Failures++
	t.rec.Error, t.rec.ErrorAt = err.Error(), now.UnixMilli()
	failures := t.rec.Failures
	pause := failures >= t.def.AutoPause.Failures
	if pause {
		t.rec.PausedUntil = now.Add(time.Duration(t.def.AutoPause.ResumeAfter)).UnixMilli()
		if rec != nil {
			t.rec.PausedAt = rec.Resumes
		}
	}
	t.mu.Unlock()
	if pause {
		t.m.log.Warn("datastream task auto-paused", "datastream", t.id.Stream, "partition", t.id.Partition,
			"failures", failures, "resumeAfter", time.Duration(t.def.AutoPause.ResumeAfter), "err", err)
		t.setState(StateAutoPaused)
		_ = t.m.flush(t.ctx, []*task{t})
		bo.Reset()
		return t.ctx.Err() == nil
	}
	t.m.log.Warn("datastream task failed; retrying", "datastream", t.id.Stream, "partition", t.id.Partition, "failures", failures, "err", err)
	return t.sleep(bo.Next())
}

// snapshot is the task's live state for the status.
func (t *task) snapshot(now time.Time) TaskState {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := TaskState{
		State: t.state, Checkpoint: t.rec.SCN.String(), Delivered: t.delivered, PausedUntil: t.rec.PausedUntil,
		Failures: t.rec.Failures, Error: t.rec.Error, ErrorAt: t.rec.ErrorAt, Waiting: t.waiting, Source: t.source,
		Since: t.since.UnixMilli(),
	}
	if s := t.rec.Snapshot; s != nil {
		st.Snapshot = &SnapshotStatus{SCN: s.SCN.String(), Documents: s.Documents}
	}
	if !t.rec.Started {
		st.Checkpoint = ""
	}
	// Throughput over the samples of the last window.
	t.samples = append(t.samples, sample{now, t.delivered})
	for len(t.samples) > 1 && now.Sub(t.samples[0].at) > rateWindow {
		t.samples = t.samples[1:]
	}
	if first := t.samples[0]; now.Sub(first.at) > 0 {
		st.Throughput = float64(t.delivered-first.n) / now.Sub(first.at).Seconds()
	}
	if t.log != nil {
		latest := t.log.Applied()
		st.Latest = latest.String()
		if t.rec.Started && latest.Sequence > t.rec.SCN.Sequence {
			st.LagTxns = latest.Sequence - t.rec.SCN.Sequence
			if ents, err := t.log.ReadLog(t.rec.SCN, 1); err == nil && len(ents) > 0 {
				st.Pending = ents[0].Mtime
			}
		}
	}
	if ss, ok := t.sink.(statusSink); ok {
		st.Cache = ss.progress(t.id.Partition, st.LagTxns)
	}
	return st
}
