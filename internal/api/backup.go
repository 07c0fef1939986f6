package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/objstorage"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/doppio-db/doppio/client/wire"
	"github.com/doppio-db/doppio/internal/backup"
	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/replicas"
)

// Transfer is one partition backup or restore step running on this node,
// as /_cluster reports it.
type Transfer = wire.Transfer

type transfer struct {
	Transfer
	bytes atomic.Int64
}

// transfers tracks the running transfers of a node and their metrics.
type transfers struct {
	mu      sync.Mutex
	running map[*transfer]struct{}

	bytes   *prometheus.CounterVec
	done    *prometheus.CounterVec
	current *prometheus.GaugeVec
}

func newTransfers(reg *prometheus.Registry) *transfers {
	t := &transfers{
		running: map[*transfer]struct{}{},
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "doppio_backup_bytes_total", Help: "Bytes of partition backups streamed (kind=backup) and restored (kind=restore) by this node.",
		}, []string{"kind"}),
		done: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "doppio_backup_partitions_total", Help: "Partition backups and restore steps finished on this node, by outcome.",
		}, []string{"kind", "outcome"}),
		current: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "doppio_backup_running", Help: "Partition backups and restore steps running on this node.",
		}, []string{"kind"}),
	}
	reg.MustRegister(t.bytes, t.done, t.current)
	return t
}

func (t *transfers) start(kind, db string, p int, session string) *transfer {
	x := &transfer{Transfer: Transfer{Kind: kind, DB: db, Partition: p, Session: session, Started: time.Now().UTC()}}
	t.mu.Lock()
	t.running[x] = struct{}{}
	t.mu.Unlock()
	t.current.WithLabelValues(kind).Inc()
	return x
}

func (t *transfers) add(x *transfer, n int64) {
	x.bytes.Add(n)
	t.bytes.WithLabelValues(x.Kind).Add(float64(n))
}

func (t *transfers) end(x *transfer, err error) {
	t.mu.Lock()
	delete(t.running, x)
	t.mu.Unlock()
	t.current.WithLabelValues(x.Kind).Dec()
	outcome := "ok"
	if err != nil {
		outcome = "failed"
	}
	t.done.WithLabelValues(x.Kind, outcome).Inc()
}

// Transfers lists the partition backups and restore steps running on this
// node, oldest first (for /_cluster).
func (s *Server) Transfers() []Transfer {
	t := s.transfers
	t.mu.Lock()
	out := make([]Transfer, 0, len(t.running))
	for x := range t.running {
		v := x.Transfer
		v.Bytes = x.bytes.Load()
		out = append(out, v)
	}
	t.mu.Unlock()
	slices.SortFunc(out, func(a, b Transfer) int { return a.Started.Compare(b.Started) })
	return out
}

// restoreStepTimeout bounds one restore step on the leader.
const restoreStepTimeout = 2 * time.Minute

func partitionNumber(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, problem.Field(problem.Malformed, "partition", "partition %q is not a partition number", v)
	}
	return n, nil
}

// routeLeader finds the partition's leader replica here, or the
// Elsewhere error that forwards the request to it.
func (s *Server) routeLeader(r *http.Request, p params, a replicas.Access) (*partition.Replica, int, error) {
	d, err := s.database(r.Context(), p.db)
	if err != nil {
		return nil, 0, err
	}
	pi, err := partitionNumber(p.partition)
	if err != nil {
		return nil, 0, err
	}
	rep, err := s.registry.Route(r.Context(), d, pi, a)
	return rep, pi, err
}

var _ objstorage.Writable = countingTable{}

// countingTable counts the bytes of a streamed table.
type countingTable struct {
	*backup.TableWriter
	s *Server
	x *transfer
}

func (c countingTable) Write(p []byte) error {
	c.s.transfers.add(c.x, int64(len(p)))
	return c.TableWriter.Write(p)
}

// backupPartition streams one partition's backup from its leader, as of a
// linearizable point (GET /_cluster/backup/{db}/{partition}[?since=g:s]).
func (s *Server) backupPartition(w http.ResponseWriter, r *http.Request, p params) (err error) {
	var since *partition.BackupPoint
	// Present but empty is a mistake (a script's unset variable), not a
	// request for a full backup.
	if v, ok := r.URL.Query()["since"]; ok {
		scn, err := partition.ParseSCN(v[0])
		if err != nil {
			return problem.Field(problem.Malformed, "since", "%v", err)
		}
		since = &partition.BackupPoint{SCN: scn, Entry: r.URL.Query().Get("sinceEntry")}
	}
	rep, pi, err := s.routeLeader(r, p, replicas.Access{Read: true})
	if err != nil {
		return err
	}
	// An index still being built has only part of its entries; a backup
	// of them would restore as a complete, wrong index.
	for _, t := range s.catalog.Tables(p.db) {
		for _, ix := range t.Indexes() {
			field := strings.Join(ix.Path, ".")
			if st := rep.IndexState(t.Def.Name, field); !st.Ready {
				return problem.Field(problem.Conflict, field, "the index on %s.%s is being built (%.0f%% of partition %d done); back up once it is ready", t.Def.Name, field, st.Progress()*100, pi)
			}
		}
	}
	x := s.transfers.start("backup", p.db, pi, "")
	defer func() { s.transfers.end(x, err) }()
	fw := backup.NewFrameWriter(w)
	err = rep.Backup(since, func(i partition.BackupInfo) error {
		w.Header().Set("Content-Type", "application/vnd.doppio.backup")
		info := backup.PartitionInfo{SCN: i.SCN.String(), Entry: i.Entry, Incremental: i.Incremental, FullReason: i.FullReason}
		if i.Incremental {
			info.Since = i.Since.SCN.String()
		}
		return fw.Info(info)
	}, func() (objstorage.Writable, error) {
		return countingTable{TableWriter: fw.TableWriter(), s: s, x: x}, nil
	})
	if err == nil {
		err = fw.Frame(backup.FrameDone, nil)
	}
	if err != nil && !errors.Is(err, r.Context().Err()) {
		s.log.Warn("partition backup failed", "db", p.db, "partition", pi, "err", err)
	}
	return err
}

// restoreState answers whether a partition may be restored into: its
// applied SCN (with the digest of its log entry there) and any unfinished
// restore (GET /_cluster/restore/{db}/{partition}).
func (s *Server) restoreState(w http.ResponseWriter, r *http.Request, p params) error {
	rep, pi, err := s.routeLeader(r, p, replicas.Access{Read: true})
	if err != nil {
		return err
	}
	session, err := rep.RestoreSession()
	if err != nil {
		return err
	}
	pt, err := rep.AppliedPoint()
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"partition": pi, "scn": pt.SCN.String(), "entry": pt.Entry, "restoring": session})
}

// restorePartition runs one step of a partition's restore on its leader
// (POST /_cluster/restore/{db}/{partition}?step=begin|load|finish).
func (s *Server) restorePartition(w http.ResponseWriter, r *http.Request, p params) (err error) {
	q := r.URL.Query()
	session := q.Get("session")
	if session == "" || len(session) > 200 {
		return problem.Field(problem.Malformed, "session", "session must name the backup being restored (1 to 200 characters)")
	}
	step := q.Get("step")
	var scn partition.SCN
	var from string
	var sum []byte
	switch step {
	case "begin":
	case "load":
		if from = q.Get("from"); from == "" {
			return problem.Field(problem.Malformed, "from", "a load step names the backup's database (from)")
		}
		if sum, err = hex.DecodeString(q.Get("sha256")); err != nil || len(sum) != sha256.Size {
			return problem.Field(problem.Malformed, "sha256", "a load step carries the table's SHA-256 (64 hex digits)")
		}
	case "finish":
		if scn, err = partition.ParseSCN(q.Get("scn")); err != nil {
			return problem.Field(problem.Malformed, "scn", "a finish step carries the backup's SCN: %v", err)
		}
	default:
		return problem.Field(problem.Malformed, "step", "step %q is not begin, load or finish", step)
	}
	var body []byte
	if step == "load" {
		// call has read the body already (at most MaxRequestBytes).
		if body, err = io.ReadAll(r.Body); err != nil {
			return err
		}
		if got := sha256.Sum256(body); !slices.Equal(got[:], sum) {
			return problem.Field(problem.Invalid, "sha256", "the table's SHA-256 is %x, not %x: the file is corrupt", got, sum)
		}
	}
	rep, pi, err := s.routeLeader(r, p, replicas.Access{})
	if err != nil {
		return err
	}
	x := s.transfers.start("restore", p.db, pi, session)
	defer func() { s.transfers.end(x, err) }()
	// A step of a lost leader may wait for its entry's fate; bound it (the
	// route has no request deadline: a load carries megabytes).
	ctx, cancel := context.WithTimeout(r.Context(), restoreStepTimeout)
	defer cancel()
	out := map[string]any{"partition": pi, "step": step, "session": session}
	switch step {
	case "begin":
		err = rep.BeginRestore(ctx, session)
	case "load":
		var n partition.Loaded
		n, err = rep.LoadRestoreTable(ctx, session, keys.PartitionPrefix(from, pi), body)
		s.transfers.add(x, int64(len(body)))
		out["keys"], out["ranges"], out["bytes"] = n.Keys, n.Ranges, n.Bytes
	case "finish":
		err = rep.FinishRestore(ctx, session, scn)
		out["scn"] = scn.String()
		if err == nil {
			err = s.raiseCacheGenerations(ctx, p.db)
		}
	}
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, out)
}

// raiseCacheGenerations orphans every entry the cache tier holds of db's
// tables: a restore replaces documents without a change-log entry per
// document. Repeating it (a retried finish step) only orphans again.
func (s *Server) raiseCacheGenerations(ctx context.Context, db string) error {
	var names []string
	for _, t := range s.catalog.Tables(db) {
		// Every table, not only cacheable ones: one made cacheable again
		// must not meet entries from before the restore.
		names = append(names, t.Def.Name)
	}
	return s.catalog.RaiseCacheGeneration(ctx, db, names...)
}
