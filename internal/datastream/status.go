package datastream

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/problem"
)

// Status is the body of GET /_datastreams/{name}/status.
type Status struct {
	Name     string `json:"name"`
	Database string `json:"database"`
	// State is "paused" when the whole stream is, else "running".
	State      string            `json:"state"`
	Partitions []PartitionStatus `json:"partitions"`
}

// PartitionStatus is one partition's task as its owner last published it
// (about once a second), joined with its durable state.
type PartitionStatus struct {
	Partition int `json:"partition"`
	// State: running, paused (by a user), auto-paused (see
	// AutoPausedUntil) or unassigned (no live node holds a replica, or the
	// task is moving).
	State  string `json:"state"`
	Owner  string `json:"owner,omitempty"`
	Source string `json:"source,omitempty"` // the replica read, node/role
	// Checkpoint is the SCN up to which the sink acknowledged everything;
	// Latest the partition's last SCN on the replica read.
	Checkpoint string `json:"checkpoint,omitempty"`
	Latest     string `json:"latest,omitempty"`
	Lag        Lag    `json:"lag"`
	// Throughput is events/s delivered over the last few seconds.
	Throughput      float64    `json:"throughput"`
	Delivered       uint64     `json:"delivered"` // events delivered since the owner took the task
	AutoPausedUntil *time.Time `json:"autoPausedUntil,omitempty"`
	Failures        int        `json:"failures"` // consecutive
	LastError       *Failure   `json:"lastError,omitempty"`
	// Detail says why an owned task is not reading ("no replica of the
	// partition on this node yet").
	Detail   string     `json:"detail,omitempty"`
	Reported *time.Time `json:"reported,omitempty"` // when the owner published this
	// Cache is a Redis sink's progress: the partition's watermark and its
	// bootstraps.
	Cache *CacheProgress `json:"cache,omitempty"`
	// Snapshot is present while a "from":"snapshot" partition delivers
	// its snapshot.
	Snapshot *SnapshotStatus `json:"snapshot,omitempty"`
}

// Lag is how far a partition's task is behind its partition.
type Lag struct {
	// Transactions committed after the checkpoint.
	Transactions uint64 `json:"transactions"`
	// Seconds since the oldest undelivered transaction committed; 0 when
	// caught up, null when unknown (no owner, no local replica).
	Seconds *float64 `json:"seconds"`
}

// Failure is a task's last error.
type Failure struct {
	Message string    `json:"message"`
	At      time.Time `json:"at"`
}

// statusLoop publishes the state of the tasks running here under this
// node's lease, when it changed, at most once per StatusInterval.
func (m *Manager) statusLoop() {
	defer m.wg.Done()
	t := time.NewTicker(m.cfg.StatusInterval)
	defer t.Stop()
	var last []byte
	var lastLease clientv3.LeaseID
	gauges := map[string]bool{}
	leadCache := map[PartitionRef]LeaderState{}
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		ns := NodeStatus{Node: m.node, Streams: map[string]map[int]TaskState{}}
		lag := map[string]float64{}
		for _, tk := range m.running() {
			st := tk.snapshot(now)
			ps := ns.Streams[tk.id.Stream]
			if ps == nil {
				ps = map[int]TaskState{}
				ns.Streams[tk.id.Stream] = ps
			}
			ps[tk.id.Partition] = st
			l := 0.0
			if st.Pending > 0 {
				l = max(0, now.Sub(time.UnixMilli(st.Pending)).Seconds())
			}
			lag[tk.id.Stream] = max(lag[tk.id.Stream], l)
		}
		for s, l := range lag {
			m.metrics.lag.WithLabelValues(s).Set(l)
			gauges[s] = true
		}
		for s := range gauges {
			if _, ok := lag[s]; !ok {
				m.metrics.lag.DeleteLabelValues(s)
				delete(gauges, s)
			}
		}
		ns.Leads = m.leads(leadCache)
		body, _ := json.Marshal(ns)
		lease, err := m.lease(m.ctx)
		if err != nil {
			continue
		}
		if string(body) == string(last) && lease == lastLease {
			continue
		}
		ns.At = now.UnixMilli()
		val, _ := json.Marshal(ns)
		ctx, cancel := context.WithTimeout(m.ctx, 2*time.Second)
		if len(ns.Streams) == 0 && len(ns.Leads) == 0 {
			_, err = m.cli.Delete(ctx, m.statusKey(m.node))
		} else {
			_, err = m.cli.Put(ctx, m.statusKey(m.node), string(val), clientv3.WithLease(lease))
		}
		cancel()
		if err == nil {
			last, lastLease = body, lease
		}
	}
}

// leads returns the last transaction of each partition this node leads
// that a datastream reads; cache keeps commit times already read.
func (m *Manager) leads(cache map[PartitionRef]LeaderState) map[string]map[int]LeaderState {
	_, recs := m.allTasks()
	out := map[string]map[int]LeaderState{}
	seen := map[PartitionRef]bool{}
	for _, r := range recs {
		db, ok := m.schemas.Database(r.Database)
		if !ok {
			continue
		}
		for _, p := range r.PartitionList(db.Partitions) {
			ref := PartitionRef{r.Database, p}
			if seen[ref] {
				continue
			}
			seen[ref] = true
			l, role, ok := m.replicas.Local(r.Database, p)
			if !ok || role != "leader" {
				continue
			}
			applied := l.Applied()
			st, ok := cache[ref]
			if !ok || st.SCN != applied.String() {
				st = LeaderState{SCN: applied.String()}
				if applied.Sequence > 0 {
					prev := partition.SCN{Generation: applied.Generation, Sequence: applied.Sequence - 1}
					if ents, err := l.ReadLog(prev, 1); err == nil && len(ents) > 0 && ents[0].SCN == applied {
						st.Mtime = ents[0].Mtime
					}
				}
				cache[ref] = st
			}
			if out[r.Database] == nil {
				out[r.Database] = map[int]LeaderState{}
			}
			out[r.Database][p] = st
		}
	}
	for ref := range cache {
		if !seen[ref] {
			delete(cache, ref)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Status answers GET /_datastreams/{name}/status from etcd (one
// consistent read of the definition, owners, task records and the owners'
// published status), so any node answers alike.
func (m *Manager) Status(ctx context.Context, name string) (Status, error) {
	resp, err := m.cli.Txn(ctx).Then(
		clientv3.OpGet(m.defKey(name)),
		clientv3.OpGet(m.ownersDir(name), clientv3.WithPrefix()),
		clientv3.OpGet(m.tasksDir(name), clientv3.WithPrefix()),
		clientv3.OpGet(m.prefix+dirStatus, clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return Status{}, err
	}
	defs := resp.Responses[0].GetResponseRange().Kvs
	if len(defs) == 0 {
		return Status{}, notFound(name)
	}
	var rec Record
	if err := json.Unmarshal(defs[0].Value, &rec); err != nil {
		return Status{}, err
	}
	owners := map[int]string{}
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		if p, ok := partitionOfKey(string(kv.Key), m.ownersDir(name)); ok {
			owners[p] = string(kv.Value)
		}
	}
	records := map[int]TaskRecord{}
	for _, kv := range resp.Responses[2].GetResponseRange().Kvs {
		var tr TaskRecord
		if p, ok := partitionOfKey(string(kv.Key), m.tasksDir(name)); ok && json.Unmarshal(kv.Value, &tr) == nil {
			records[p] = tr
		}
	}
	nodes := map[string]NodeStatus{}
	for _, kv := range resp.Responses[3].GetResponseRange().Kvs {
		var ns NodeStatus
		if json.Unmarshal(kv.Value, &ns) == nil {
			nodes[strings.TrimPrefix(string(kv.Key), m.prefix+dirStatus)] = ns
		}
	}
	// The partition's latest transaction, as its leader reports it.
	leaders := map[int]LeaderState{}
	for _, ns := range nodes {
		for p, ls := range ns.Leads[rec.Database] {
			if cur, ok := leaders[p]; !ok || seqOf(ls.SCN) > seqOf(cur.SCN) {
				leaders[p] = ls
			}
		}
	}
	out := Status{Name: name, Database: rec.Database, State: StateRunning, Partitions: []PartitionStatus{}}
	if rec.Paused {
		out.State = StatePaused
	}
	db, ok := m.schemas.Database(rec.Database)
	if !ok {
		return out, nil
	}
	now := time.Now()
	for _, p := range rec.PartitionList(db.Partitions) {
		out.Partitions = append(out.Partitions, m.partitionStatus(&rec, p, owners[p], records[p], nodes, leaders[p], now))
	}
	return out, nil
}

func (m *Manager) partitionStatus(rec *Record, p int, owner string, tr TaskRecord, nodes map[string]NodeStatus, leader LeaderState, now time.Time) PartitionStatus {
	ps := PartitionStatus{Partition: p, Owner: owner, Failures: tr.Failures}
	if tr.Started {
		ps.Checkpoint = tr.SCN.String()
	}
	if tr.Error != "" {
		ps.LastError = &Failure{Message: tr.Error, At: time.UnixMilli(tr.ErrorAt).UTC()}
	}
	pausedUntil := tr.PausedUntil
	var pending int64
	live, reported := TaskState{}, false
	var reportedAt time.Time
	if ns, ok := nodes[owner]; ok && owner != "" {
		live, reported = ns.Streams[rec.Name][p]
		if reported {
			reportedAt = time.UnixMilli(ns.At).UTC()
			ps.Reported = &reportedAt
		}
	}
	if reported {
		ps.Source, ps.Latest, ps.Throughput, ps.Delivered, ps.Failures = live.Source, live.Latest, live.Throughput, live.Delivered, live.Failures
		ps.Cache = live.Cache
		if live.Checkpoint != "" {
			ps.Checkpoint = live.Checkpoint
		}
		if live.Error != "" {
			ps.LastError = &Failure{Message: live.Error, At: time.UnixMilli(live.ErrorAt).UTC()}
		}
		pausedUntil = live.PausedUntil
		pending = live.Pending
		ps.Detail = live.Waiting
		ps.Snapshot = live.Snapshot
		ps.Lag.Transactions = live.LagTxns
		// The owner publishes when its state changes and checks it every
		// StatusInterval: the oldest undelivered transaction was pending
		// when it reported and still at its last check, at most an
		// interval ago. Both are lower bounds of the lag now; measuring
		// from the time of reading instead made a healthy stream look up
		// to an interval behind.
		secs := 0.0
		if pending > 0 {
			since := time.UnixMilli(pending)
			secs = max(0, reportedAt.Sub(since).Seconds(), now.Add(-m.cfg.StatusInterval).Sub(since).Seconds())
		}
		ps.Lag.Seconds = &secs
	} else if l, _, ok := m.replicas.Local(rec.Database, p); ok {
		// Not reported by an owner: this node's replica tells the lag.
		latest := l.Applied()
		ps.Latest = latest.String()
		if tr.Started {
			secs := 0.0
			if latest.Sequence > tr.SCN.Sequence {
				ps.Lag.Transactions = latest.Sequence - tr.SCN.Sequence
				if ents, err := l.ReadLog(tr.SCN, 1); err == nil && len(ents) > 0 {
					secs = max(0, now.Sub(time.UnixMilli(ents[0].Mtime)).Seconds())
				}
			}
			ps.Lag.Seconds = &secs
		}
	}
	// A follower read may lag its leader: the leader's last transaction is
	// the partition's latest. When the replica read does not hold the next
	// transaction yet, the leader's last commit time bounds the lag from
	// below.
	if leader.SCN != "" && seqOf(leader.SCN) > seqOf(ps.Latest) {
		ps.Latest = leader.SCN
		if ps.Checkpoint != "" {
			ps.Lag.Transactions = seqOf(leader.SCN) - min(seqOf(ps.Checkpoint), seqOf(leader.SCN))
			if ps.Lag.Seconds != nil && *ps.Lag.Seconds == 0 && leader.Mtime > 0 {
				secs := max(0, now.Sub(time.UnixMilli(leader.Mtime)).Seconds())
				ps.Lag.Seconds = &secs
			}
		}
	}
	switch {
	case rec.PartitionPaused(p):
		ps.State = StatePaused
	case pausedUntil > now.UnixMilli():
		ps.State = StateAutoPaused
		at := time.UnixMilli(pausedUntil).UTC()
		ps.AutoPausedUntil = &at
	case owner == "":
		ps.State = StateUnassigned
	default:
		ps.State = StateRunning
	}
	return ps
}

func notFound(name string) error {
	return problem.New(problem.NotFound, "datastream %q does not exist", name)
}

// seqOf is the sequence of an SCN's text ("g:s"); 0 if empty or bad.
func seqOf(s string) uint64 {
	v, err := partition.ParseSCN(s)
	if err != nil {
		return 0
	}
	return v.Sequence
}
