package bulkload

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/doppio-db/doppio/client/wire"
	"github.com/doppio-db/doppio/internal/audit"
	"github.com/doppio-db/doppio/internal/bulk"
	"github.com/doppio-db/doppio/internal/etcdloop"
	"github.com/doppio-db/doppio/internal/problem"
)

// Config configures a Manager.
type Config struct {
	Client   *clientv3.Client
	Prefix   string // etcd prefix, e.g. "/doppio"
	Node     string // this node's id
	Catalog  Catalog
	Replicas Replicas
	// Staging holds the copies of files fetched over http(s).
	Staging string
	// Throttle bounds the bytes per second this node's drivers apply,
	// all loads together (0: unbounded); a load's own throttle bounds it
	// further.
	Throttle int64
	// Parallel is how many partitions this node loads at once (default
	// DefaultParallel).
	Parallel int
	// ChunkBytes is the documents' bytes a chunk holds at most (default
	// DefaultChunkBytes).
	ChunkBytes int
	// Interval is how often the manager looks for partitions to drive
	// besides etcd's notifications (default 1 s): leaderships move
	// without one.
	Interval time.Duration
	// HTTP fetches http(s) builds (default http.DefaultClient).
	HTTP *http.Client
	// Registry receives the metrics (nil: not registered).
	Registry prometheus.Registerer
	// Audit records each load's end.
	Audit  *audit.Log
	Logger *slog.Logger
}

// Defaults of Config.
const (
	DefaultParallel   = 2
	DefaultChunkBytes = 1 << 20
)

// Manager runs this node's side of every bulk load and answers the
// /_bulk API from etcd.
type Manager struct {
	cfg     Config
	metrics *metrics
	node    *limiter // nil: unthrottled
	sema    chan struct{}
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu       sync.Mutex
	running  map[partKey]bool
	retryAt  map[partKey]time.Time
	verified map[partKey]string // files verified by this process, by path
	loads    map[string]*limiter
	cleaned  map[string]bool
	// discarding holds the partitions whose staging this node is deleting.
	discarding map[partKey]bool
}

// partKey names one partition of one run of a load.
type partKey struct {
	id   string
	run  int
	part int
}

// Open starts the manager's loop; Close stops it.
func Open(cfg Config) *Manager {
	if cfg.Parallel <= 0 {
		cfg.Parallel = DefaultParallel
	}
	if cfg.ChunkBytes <= 0 {
		cfg.ChunkBytes = DefaultChunkBytes
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.HTTP == nil {
		cfg.HTTP = http.DefaultClient
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m := &Manager{
		cfg: cfg, metrics: newMetrics(cfg.Registry), node: newLimiter(cfg.Throttle, cfg.ChunkBytes),
		sema: make(chan struct{}, cfg.Parallel), running: map[partKey]bool{}, retryAt: map[partKey]time.Time{},
		verified: map[partKey]string{}, loads: map[string]*limiter{}, cleaned: map[string]bool{},
		discarding: map[partKey]bool{},
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	m.wg.Add(1)
	go m.loop(ctx)
	return m
}

// Close stops the drivers: a chunk in flight is applied or not, and the
// partition's next leader (or this node, restarted) goes on from its mark.
func (m *Manager) Close() {
	m.cancel()
	m.wg.Wait()
}

// Start records the load of the build at req.Source once it has checked
// the build against the catalog, and returns it with whether it was
// started (or restarted, after a cancel or a failure) by this call. The
// same build (the same manifest bytes) is the same load: starting it
// again while it runs, or after it is done, returns it as it is.
func (m *Manager) Start(ctx context.Context, req wire.LoadRequest) (wire.Load, bool, error) {
	return m.start(ctx, req, "")
}

// StartInto is Start for a load whose documents go to the stored table
// into rather than the build's table (a derived table's version, see
// schema.VersionTable); the same build into another table is another
// load.
func (m *Manager) StartInto(ctx context.Context, req wire.LoadRequest, into string) (wire.Load, bool, error) {
	return m.start(ctx, req, into)
}

func (m *Manager) start(ctx context.Context, req wire.LoadRequest, into string) (wire.Load, bool, error) {
	mode, err := checkMode(req.Mode, into)
	if err != nil {
		return wire.Load{}, false, err
	}
	if req.Throttle < 0 {
		return wire.Load{}, false, problem.Field(problem.Malformed, "throttle", "throttle %d is negative", req.Throttle)
	}
	src, err := parseSource(req.Source, m.cfg.HTTP)
	if err != nil {
		return wire.Load{}, false, err
	}
	raw, err := src.manifest(ctx)
	if err != nil {
		return wire.Load{}, false, problem.Field(problem.Invalid, "source", "%s: %v", src, err)
	}
	man, err := bulk.ParseManifest(raw)
	if err != nil {
		return wire.Load{}, false, problem.Field(problem.Invalid, "manifest", "%s: %v", src, err)
	}
	if err := checkBuild(man, m.cfg.Catalog, into); err != nil {
		return wire.Load{}, false, err
	}
	rec := Record{
		ID: LoadID(raw, mode, into), Source: src.String(), Mode: mode, Throttle: req.Throttle,
		Database: man.Database, Table: man.Table, Into: into, SchemaVersion: man.SchemaVersion, Files: man.Files,
		State: wire.LoadVerifying, Created: time.Now().UTC(), Run: 1,
	}
	key := m.loadKey(rec.ID)
	for {
		cur, rev, ok, err := m.record(ctx, rec.ID)
		if err != nil {
			return wire.Load{}, false, err
		}
		next := rec
		switch {
		case !ok:
		case cur.State == wire.LoadCancelled || cur.State == wire.LoadFailed:
			next.Run = cur.Run + 1
		default:
			l, err := m.Get(ctx, rec.ID)
			return l, false, err
		}
		b, err := json.Marshal(next)
		if err != nil {
			return wire.Load{}, false, err
		}
		resp, err := m.cfg.Client.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
			Then(clientv3.OpPut(key, string(b))).Commit()
		if err != nil {
			return wire.Load{}, false, err
		}
		if resp.Succeeded {
			return view(next, nil, true), true, nil
		}
	}
}

// Cancel stops a load: partitions that have not started never will, and
// those loading finish, so each ends fully loaded or untouched.
func (m *Manager) Cancel(ctx context.Context, id string) (wire.Load, error) {
	for {
		rec, rev, ok, err := m.record(ctx, id)
		if err != nil {
			return wire.Load{}, err
		}
		if !ok {
			return wire.Load{}, notFound(id)
		}
		if rec.ended() {
			return wire.Load{}, problem.New(problem.Conflict, "load %s has ended (%s): there is nothing to cancel", id, rec.State)
		}
		if !rec.Cancelled {
			rec.Cancelled = true
			ok, err := m.swap(ctx, rec, rev)
			if err != nil {
				return wire.Load{}, err
			}
			if !ok {
				continue
			}
		}
		return m.Get(ctx, id)
	}
}

// Get returns load id with its partitions' progress.
func (m *Manager) Get(ctx context.Context, id string) (wire.Load, error) {
	if !validID(id) {
		return wire.Load{}, notFound(id)
	}
	loads, err := m.read(ctx, id)
	if err != nil {
		return wire.Load{}, err
	}
	if len(loads) == 0 {
		return wire.Load{}, notFound(id)
	}
	return view(loads[0].rec, loads[0].progress, true), nil
}

// List returns every load, oldest first, with totals only.
func (m *Manager) List(ctx context.Context) ([]wire.Load, error) {
	loads, err := m.read(ctx, "")
	if err != nil {
		return nil, err
	}
	out := make([]wire.Load, 0, len(loads))
	for _, l := range loads {
		out = append(out, view(l.rec, l.progress, false))
	}
	return out, nil
}

// Active returns the loads that have not ended, with totals only: the
// loads section of GET /_cluster.
func (m *Manager) Active(ctx context.Context) []wire.Load {
	all, err := m.List(ctx)
	if err != nil {
		return nil
	}
	return slices.DeleteFunc(all, func(l wire.Load) bool {
		return l.State == wire.LoadDone || l.State == wire.LoadCancelled || l.State == wire.LoadFailed
	})
}

// LoadID is the ID of the load of the build whose manifest is manifest
// in mode into stored table into ("" for the build's own table). A merge
// and a replace of one build are two loads.
func LoadID(manifest []byte, mode, into string) string {
	h := sha256.New()
	h.Write(manifest)
	if mode == ModeReplace {
		h.Write([]byte("\x00replace"))
	}
	if into != "" {
		h.Write([]byte("\x00into\x00" + into))
	}
	return hex.EncodeToString(h.Sum(nil))
}

func notFound(id string) error { return problem.New(problem.NotFound, "no load %s", id) }

// validID reports whether id can be a load's: a hex SHA-256.
func validID(id string) bool {
	if len(id) != 64 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil && strings.ToLower(id) == id
}

// loaded is a load as read from etcd.
type loaded struct {
	rec      Record
	rev      int64
	progress map[int]Progress
}

// read reads load id ("" every load) and its progress, in one revision.
func (m *Manager) read(ctx context.Context, id string) ([]loaded, error) {
	resp, err := m.cfg.Client.Get(ctx, m.cfg.Prefix+"/bulk/", clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	byID := map[string]*loaded{}
	progress := map[string]map[int]Progress{}
	for _, kv := range resp.Kvs {
		k := string(kv.Key)
		switch {
		case strings.HasPrefix(k, m.cfg.Prefix+dirLoads):
			lid := strings.TrimPrefix(k, m.cfg.Prefix+dirLoads)
			if id != "" && lid != id {
				continue
			}
			l := &loaded{rev: kv.ModRevision}
			if err := json.Unmarshal(kv.Value, &l.rec); err != nil {
				return nil, fmt.Errorf("load %s: %w", lid, err)
			}
			byID[lid] = l
		case strings.HasPrefix(k, m.cfg.Prefix+dirProgress):
			lid, ps, _ := strings.Cut(strings.TrimPrefix(k, m.cfg.Prefix+dirProgress), "/")
			p, err := strconv.Atoi(ps)
			if err != nil || (id != "" && lid != id) {
				continue
			}
			var pr Progress
			if err := json.Unmarshal(kv.Value, &pr); err != nil {
				return nil, fmt.Errorf("load %s partition %d: %w", lid, p, err)
			}
			if progress[lid] == nil {
				progress[lid] = map[int]Progress{}
			}
			progress[lid][p] = pr
		}
	}
	out := make([]loaded, 0, len(byID))
	for lid, l := range byID {
		l.progress = progress[lid]
		if l.progress == nil {
			l.progress = map[int]Progress{}
		}
		out = append(out, *l)
	}
	slices.SortFunc(out, func(a, b loaded) int {
		return cmp.Or(a.rec.Created.Compare(b.rec.Created), strings.Compare(a.rec.ID, b.rec.ID))
	})
	return out, nil
}

// record reads one load's record and its ModRevision (0 when absent).
func (m *Manager) record(ctx context.Context, id string) (Record, int64, bool, error) {
	resp, err := m.cfg.Client.Get(ctx, m.loadKey(id))
	if err != nil || len(resp.Kvs) == 0 {
		return Record{}, 0, false, err
	}
	var r Record
	if err := json.Unmarshal(resp.Kvs[0].Value, &r); err != nil {
		return Record{}, 0, false, fmt.Errorf("load %s: %w", id, err)
	}
	return r, resp.Kvs[0].ModRevision, true, nil
}

// swap writes rec if its key is still at rev.
func (m *Manager) swap(ctx context.Context, rec Record, rev int64) (bool, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return false, err
	}
	key := m.loadKey(rec.ID)
	resp, err := m.cfg.Client.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
		Then(clientv3.OpPut(key, string(b))).Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

// putProgress writes partition p's progress; when rev is not zero, only
// if the load's record is still at rev (a partition starts only if the
// load was not cancelled meanwhile).
func (m *Manager) putProgress(ctx context.Context, rec Record, rev int64, p int, pr Progress) (bool, error) {
	pr.Run, pr.Node = rec.Run, m.cfg.Node
	b, err := json.Marshal(pr)
	if err != nil {
		return false, err
	}
	txn := m.cfg.Client.Txn(ctx)
	if rev != 0 {
		txn = txn.If(clientv3.Compare(clientv3.ModRevision(m.loadKey(rec.ID)), "=", rev))
	}
	resp, err := txn.Then(clientv3.OpPut(m.progressKey(rec.ID, p), string(b))).Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

// loop follows the loads: on every change in etcd, and every Interval
// for leaderships that moved, it advances each load's state and starts a
// driver for each unfinished partition this node leads.
func (m *Manager) loop(ctx context.Context) {
	defer m.wg.Done()
	etcdloop.Run(ctx, m.cfg.Client, m.cfg.Prefix+"/bulk/", m.cfg.Interval, m.reconcile)
}

func (m *Manager) reconcile(ctx context.Context) {
	loads, err := m.read(ctx, "")
	if err != nil {
		if ctx.Err() == nil {
			m.cfg.Logger.Warn("bulk loads: read", "err", err)
		}
		return
	}
	m.metrics.observe(loads)
	for _, l := range loads {
		if l.rec.ended() {
			m.cleanup(l.rec)
			m.discard(ctx, l)
			continue
		}
		if !m.advance(ctx, l) {
			m.drive(ctx, l)
		}
	}
}

// advance moves a load to the state Next gives, recording its end in the
// audit log if this node's swap ended it; it reports whether it moved.
func (m *Manager) advance(ctx context.Context, l loaded) bool {
	state, msg := Next(l.rec, l.progress)
	if state == l.rec.State {
		return false
	}
	rec := l.rec
	rec.State, rec.Error = state, msg
	if rec.ended() {
		rec.Ended = time.Now().UTC()
	}
	ok, err := m.swap(ctx, rec, l.rev)
	if err != nil || !ok {
		return false
	}
	m.cfg.Logger.Info("bulk load", "id", rec.ID, "db", rec.Database, "table", rec.Table, "state", state, "err", msg)
	if rec.ended() {
		// Whatever the cache tier holds of the table may predate the
		// loaded documents.
		if err := m.cfg.Catalog.RaiseCacheGeneration(ctx, rec.Database, rec.Table); err != nil {
			m.cfg.Logger.Warn("bulk load: raise the table's cache generation", "id", rec.ID, "err", err)
		}
		v := view(rec, l.progress, false)
		e := audit.Event{Node: true, Action: "bulk.load.end", Target: rec.ID, Outcome: audit.Success,
			Detail: fmt.Sprintf("%s into %s.%s: %s, %d records in %d of %d partitions", rec.Source, rec.Database, rec.Table, state, v.Records, v.PartitionsDone, len(rec.Files))}
		if state != wire.LoadDone {
			e.Outcome = audit.Failure
			if msg != "" {
				e.Detail += ": " + msg
			}
		}
		_ = m.cfg.Audit.Record(e)
	}
	return true
}

// cleanup removes an ended load's staged files, once per process.
func (m *Manager) cleanup(rec Record) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cleaned[rec.ID] {
		return
	}
	m.cleaned[rec.ID] = true
	delete(m.loads, rec.ID)
	for k := range m.verified {
		if k.id == rec.ID {
			delete(m.verified, k)
		}
	}
	if m.cfg.Staging != "" {
		_ = os.RemoveAll(m.stagingDir(rec.ID))
	}
}

func (m *Manager) stagingDir(id string) string { return filepath.Join(m.cfg.Staging, id) }
