package bulkload

import (
	"cmp"
	"slices"
	"strconv"
	"time"

	"github.com/doppio-db/doppio/client/wire"
	"github.com/doppio-db/doppio/internal/bulk"
)

// Key directories under {prefix}/bulk/.
const (
	dirLoads    = "/bulk/loads/"
	dirProgress = "/bulk/progress/"
)

// Record is a load as stored in etcd. Every change is a compare-and-swap
// on the key's ModRevision, so a driver that starts a partition can make
// its start conditional on the load not having been cancelled since.
type Record struct {
	ID       string `json:"id"`
	Source   string `json:"source"`
	Mode     string `json:"mode"`
	Throttle int64  `json:"throttle,omitempty"`
	Database string `json:"database"`
	Table    string `json:"table"`
	// Into, when set, is the stored table the documents go to instead of
	// Table: a derived table's version (docs/design/derived.md).
	Into          string      `json:"into,omitempty"`
	SchemaVersion int         `json:"schemaVersion"`
	Files         []bulk.File `json:"files"`
	State         string      `json:"state"`
	Error         string      `json:"error,omitempty"`
	Cancelled     bool        `json:"cancelled,omitempty"`
	Created       time.Time   `json:"created"`
	Ended         time.Time   `json:"ended,omitzero"`
	// Run counts the load's starts: POSTing a cancelled or failed build
	// again starts run 2, and progress of an earlier run is not this one's.
	Run int `json:"run"`
}

// target is the stored table the load's chunks write.
func (r *Record) target() string { return cmp.Or(r.Into, r.Table) }

// ended reports whether the load is over: nothing will change its data.
func (r *Record) ended() bool {
	return r.State == wire.LoadDone || r.State == wire.LoadCancelled || r.State == wire.LoadFailed
}

// Progress is one partition's state in a load, written by the driver of
// the node leading it. The partition's own load mark is the truth on
// what is applied; Progress is its report, plus the verification and
// start steps that happen before anything is applied.
type Progress struct {
	Run     int    `json:"run"`
	State   string `json:"state"`
	Bytes   uint64 `json:"bytes"`
	Records uint64 `json:"records"`
	Node    string `json:"node,omitempty"`
	Error   string `json:"error,omitempty"`
	// Staging is, once a replace load ended without the partition's swap,
	// how far its leader got deleting what it staged: wire.StagingDiscarding,
	// wire.StagingDiscarded, or stagingNone.
	Staging string `json:"staging,omitempty"`
}

// stagingNone is a Progress.Staging: the partition's leader found
// nothing staged.
const stagingNone = "none"

// current returns partition p's progress in rec's run: pending when it
// has none of this run.
func current(rec Record, progress map[int]Progress, p int) Progress {
	pr, ok := progress[p]
	if !ok || pr.Run != rec.Run {
		return Progress{State: wire.PartPending}
	}
	return pr
}

// started reports whether a partition may have applied a chunk: a
// cancellation lets it finish.
func (p Progress) started() bool { return p.State == wire.PartLoading || p.State == wire.PartDone }

func (m *Manager) loadKey(id string) string            { return m.cfg.Prefix + dirLoads + id }
func (m *Manager) progressDir(id string) string        { return m.cfg.Prefix + dirProgress + id + "/" }
func (m *Manager) progressKey(id string, p int) string { return m.progressDir(id) + strconv.Itoa(p) }

// view renders a load with its partitions' progress for the API.
func view(r Record, progress map[int]Progress, withPartitions bool) wire.Load {
	l := wire.Load{
		ID: r.ID, Source: r.Source, Mode: r.Mode, Throttle: r.Throttle, Database: r.Database, Table: r.Table,
		SchemaVersion: r.SchemaVersion, State: r.State, Error: r.Error, Created: r.Created, Ended: r.Ended, Cancelled: r.Cancelled,
		TotalPartitions: len(r.Files),
	}
	for _, f := range r.Files {
		p := current(r, progress, f.Partition)
		if r.Cancelled && !p.started() && p.State != wire.PartFailed {
			p.State = wire.PartSkipped
		}
		lp := wire.LoadPartition{
			Partition: f.Partition, State: p.State, Bytes: p.Bytes, TotalBytes: uint64(f.Bytes),
			Records: p.Records, TotalRecords: uint64(f.Records), Node: p.Node, Error: p.Error,
		}
		if p.Staging != stagingNone {
			lp.Staging = p.Staging
		}
		if stagingLeft(r, p) {
			l.Discarding++
		}
		if p.State == wire.PartDone {
			lp.Bytes, lp.Records = lp.TotalBytes, lp.TotalRecords
			l.PartitionsDone++
		}
		l.Bytes += lp.Bytes
		l.Records += lp.Records
		l.TotalBytes += lp.TotalBytes
		l.TotalRecords += lp.TotalRecords
		if withPartitions {
			l.Partitions = append(l.Partitions, lp)
		}
	}
	slices.SortFunc(l.Partitions, func(a, b wire.LoadPartition) int { return a.Partition - b.Partition })
	return l
}
