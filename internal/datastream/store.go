package datastream

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/doppio-db/doppio/internal/partition"
)

// Key directories under {prefix}/datastreams/.
const (
	dirDefs   = "/datastreams/defs/"
	dirOwners = "/datastreams/owners/"
	dirTasks  = "/datastreams/tasks/"
	dirStatus = "/datastreams/status/"
)

// Record is a datastream as stored: its definition and the state users
// set. Every change is a compare-and-swap on the key's ModRevision.
type Record struct {
	Definition
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	// Since holds, for partitions an update added to the stream, when
	// they joined (Unix ms): "from":"now" starts them there, not at
	// Created.
	Since map[int]int64 `json:"since,omitempty"`
	// Paused pauses every partition; PausedPartitions pauses some.
	Paused           bool  `json:"paused,omitempty"`
	PausedPartitions []int `json:"pausedPartitions,omitempty"`
	// Resumes counts resume requests; ResumedAll and ResumedPartitions
	// hold the count at the last resume of the whole stream or of a
	// partition, so a task auto-paused before that resume runs again.
	Resumes           uint64         `json:"resumes,omitempty"`
	ResumedAll        uint64         `json:"resumedAll,omitempty"`
	ResumedPartitions map[int]uint64 `json:"resumedPartitions,omitempty"`
}

// PartitionPaused reports whether a user paused partition p.
func (r *Record) PartitionPaused(p int) bool {
	return r.Paused || slices.Contains(r.PausedPartitions, p)
}

// resumedSince reports whether partition p was resumed after the resume
// count was at.
func (r *Record) resumedSince(p int, at uint64) bool {
	return r.ResumedAll > at || r.ResumedPartitions[p] > at
}

// startTime is when partition p joined the stream, for "from":"now".
func (r *Record) startTime(p int) time.Time {
	if ms, ok := r.Since[p]; ok {
		return time.UnixMilli(ms)
	}
	return r.Created
}

// TaskRecord is a task's durable state, written by its owner only.
type TaskRecord struct {
	// SCN: the partition's transactions up to it are delivered. The
	// sequence is exact; the generation is that of the next transaction
	// when the task started mid-timeline (see startPosition).
	SCN partition.SCN `json:"-"`
	// Commit time (Unix ms) of the transaction at SCN, 0 if unknown.
	Mtime int64 `json:"mtime,omitempty"`
	// Started: SCN is meaningful (else the task has not started yet).
	Started bool `json:"started"`
	// PausedUntil (Unix ms) is set while the task is auto-paused;
	// PausedAt is the record's resume count then.
	PausedUntil int64  `json:"pausedUntil,omitempty"`
	PausedAt    uint64 `json:"pausedAt,omitempty"`
	Failures    int    `json:"failures,omitempty"`
	Error       string `json:"error,omitempty"`
	ErrorAt     int64  `json:"errorAt,omitempty"`
	// Snapshot is a "from":"snapshot" task's progress until its snapshot
	// is delivered (then Started).
	Snapshot *SnapshotState `json:"snapshot,omitempty"`
}

// MarshalJSON writes the SCN as "g:s".
func (t TaskRecord) MarshalJSON() ([]byte, error) {
	type plain TaskRecord
	return json.Marshal(struct {
		SCN string `json:"scn"`
		plain
	}{t.SCN.String(), plain(t)})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (t *TaskRecord) UnmarshalJSON(b []byte) error {
	type plain TaskRecord
	var v struct {
		SCN string `json:"scn"`
		plain
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*t = TaskRecord(v.plain)
	if v.SCN != "" {
		s, err := partition.ParseSCN(v.SCN)
		if err != nil {
			return err
		}
		t.SCN = s
	}
	return nil
}

// NodeStatus is what a node publishes about the tasks it runs, and about
// the partitions read by datastreams that it leads (so the status compares
// checkpoints with the partition's latest transaction, not with what a
// lagging follower has).
type NodeStatus struct {
	Node    string                         `json:"node"`
	At      int64                          `json:"at"` // Unix ms of the snapshot
	Streams map[string]map[int]TaskState   `json:"streams"`
	Leads   map[string]map[int]LeaderState `json:"leads,omitempty"`
}

// LeaderState is a led partition's last transaction.
type LeaderState struct {
	SCN   string `json:"scn"`
	Mtime int64  `json:"mtime"` // its commit time, Unix ms
}

// TaskState is a running task's live state.
type TaskState struct {
	State       string  `json:"state"` // running, paused, auto-paused, waiting
	Checkpoint  string  `json:"checkpoint"`
	Latest      string  `json:"latest"`
	Pending     int64   `json:"pending"`     // commit time (ms) of the oldest undelivered transaction, 0 when caught up
	Throughput  float64 `json:"throughput"`  // events/s over the last seconds
	Delivered   uint64  `json:"delivered"`   // events acknowledged since the task started here
	PausedUntil int64   `json:"pausedUntil"` // auto-pause end (ms)
	Failures    int     `json:"failures"`    // consecutive
	Error       string  `json:"error"`       // last error
	ErrorAt     int64   `json:"errorAt"`     // its time (ms)
	Waiting     string  `json:"waiting"`     // why a task is not reading (no local replica yet)
	LagTxns     uint64  `json:"lagTxns"`     // transactions after the checkpoint on this replica
	Since       int64   `json:"since"`       // when this node took the task (ms)
	Source      string  `json:"source"`      // the replica read: node/role
	// Cache is a Redis sink's watermark and bootstrap progress.
	Cache *CacheProgress `json:"cache,omitempty"`
	// Snapshot is the progress of a "from":"snapshot" task's snapshot.
	Snapshot *SnapshotStatus `json:"snapshot,omitempty"`
}

// SnapshotStatus is how far a partition's snapshot is delivered.
type SnapshotStatus struct {
	SCN       string `json:"scn"`       // the view's SCN (it moves if the task moved during the snapshot)
	Documents uint64 `json:"documents"` // documents delivered so far
}

func (m *Manager) defKey(name string) string     { return m.prefix + dirDefs + name }
func (m *Manager) ownersDir(name string) string  { return m.prefix + dirOwners + name + "/" }
func (m *Manager) tasksDir(name string) string   { return m.prefix + dirTasks + name + "/" }
func (m *Manager) statusKey(node string) string  { return m.prefix + dirStatus + node }
func (m *Manager) ownerKey(t TaskID) string      { return m.ownersDir(t.Stream) + strconv.Itoa(t.Partition) }
func (m *Manager) taskKey(t TaskID) string       { return m.tasksDir(t.Stream) + strconv.Itoa(t.Partition) }
func partitionOfKey(key, dir string) (int, bool) { return atoiOK(strings.TrimPrefix(key, dir)) }

func atoiOK(s string) (int, bool) {
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 0
}
