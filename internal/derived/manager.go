package derived

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/doppio-db/doppio/client/wire"
	"github.com/doppio-db/doppio/internal/etcdloop"
	"github.com/doppio-db/doppio/internal/notify"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/schema"
)

// Key directories under the prefix.
const (
	dirTables  = "/derived/tables/"
	dirReports = "/derived/reports/"
)

// Catalog is what the manager needs of the schemas (*catalog.Catalog).
type Catalog interface {
	Table(db, table string) (*schema.Table, bool)
}

// Loads starts and reads the bulk loads that fetch versions
// (*bulkload.Manager).
type Loads interface {
	StartInto(ctx context.Context, req wire.LoadRequest, into string) (wire.Load, bool, error)
	Get(ctx context.Context, id string) (wire.Load, error)
}

// Replica is this node's replica of one partition, as versions are
// checked and deleted in it.
type Replica interface {
	Partition() int
	// Leading reports whether this node leads the partition now.
	Leading() bool
	// LoadDone reports whether the replica has applied load's whole file.
	LoadDone(load string) (bool, error)
	// TableEmpty reports whether the replica holds nothing of table.
	TableEmpty(table string) (bool, error)
	// DropTable deletes table from every replica of the partition.
	DropTable(ctx context.Context, table string) error
}

// Config configures a Manager.
type Config struct {
	Client  *clientv3.Client
	Prefix  string // etcd prefix, e.g. "/doppio"
	Node    string // this node's ID
	Catalog Catalog
	Loads   Loads
	// Hosted lists this node's replicas of db's partitions.
	Hosted func(db string) []Replica
	// Placement lists the replicas (node IDs) of each partition of db.
	Placement func(db string) [][]string
	// Live lists the nodes alive now.
	Live func() []string
	// Interval is how often the manager looks again besides etcd's
	// notifications (default 1 s): loads and replicas move without one.
	Interval time.Duration
	// AnnounceWait bounds how long a swap waits for every live node to
	// serve it (default 5 s).
	AnnounceWait time.Duration
	// ReadGrace is how long a read that picked a version may still take
	// (the longest request deadline, and a margin). A retired version's
	// data is deleted only ReadGrace after this node has seen every live
	// node serve a record that retires it (default 6 s), so that no read
	// answers from a version emptied under it.
	ReadGrace time.Duration
	// MaxLag is how long ago etcd must have confirmed this node's view of
	// the records for the node to pick versions for reads (default 2 s).
	// It must stay below the nodes' registration TTL (3 s): a node cut off
	// from etcd stops answering before the others count it dead and
	// announce a swap without it, so no read anywhere answers a version
	// older than an announced one.
	MaxLag   time.Duration
	Registry prometheus.Registerer
	Logger   *slog.Logger
}

// Manager runs this node's side of every derived table: it keeps the
// tables' records in memory for reads, moves them with Next, reports this
// node's replicas, deletes expired versions where it leads, and answers
// the /_derived API.
type Manager struct {
	cfg     Config
	metrics *metrics
	changed notify.Notifier
	cancel  context.CancelFunc
	done    chan struct{}

	mu       sync.RWMutex
	stores   map[string]stored        // by db/table
	clones   map[string]*schema.Table // a version's stored table, by its name and the logical table's pointer
	reported map[string][]byte        // the last report written, by db/table
	// retired is when this node first saw every live node serve a record
	// in which a version is being deleted, by db/table/version (see drop).
	retired map[string]time.Time
	// confirmed is when (unix nanos) the last read of the records from
	// etcd that succeeded began: the cache is at least that current.
	confirmed  atomic.Int64
	confirming sync.WaitGroup // confirmLoop, waited for by Close
}

// stored is a record with its ModRevision.
type stored struct {
	s   Store
	rev int64
}

func tableKey(db, table string) string { return db + "/" + table }

// Open reads every derived table's record and starts the loop; Close
// stops it.
func Open(ctx context.Context, cfg Config) (*Manager, error) {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.AnnounceWait <= 0 {
		cfg.AnnounceWait = 5 * time.Second
	}
	if cfg.ReadGrace <= 0 {
		cfg.ReadGrace = 6 * time.Second
	}
	if cfg.MaxLag <= 0 {
		cfg.MaxLag = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m := &Manager{cfg: cfg, metrics: newMetrics(cfg.Registry), stores: map[string]stored{}, clones: map[string]*schema.Table{},
		reported: map[string][]byte{}, retired: map[string]time.Time{}, done: make(chan struct{})}
	if _, _, err := m.read(ctx); err != nil {
		return nil, fmt.Errorf("derived tables: %w", err)
	}
	lctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	m.confirming.Add(1)
	go m.loop(lctx)
	go m.confirmLoop(lctx)
	return m, nil
}

// Close stops the loop.
func (m *Manager) Close() {
	m.cancel()
	<-m.done
	m.confirming.Wait()
}

// Subscribe returns a channel that receives a value whenever the versions
// whose tables the partitions must know (Tables) may have changed.
func (m *Manager) Subscribe() (<-chan struct{}, func()) { return m.changed.Subscribe() }

// Tables returns tables (a database's, from the catalog) with, for each
// derived one, the stored table of each of its versions being fetched or
// readable: what the database's partitions must know.
func (m *Manager) Tables(db string, tables []*schema.Table) []*schema.Table {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := slices.Clone(tables)
	for _, t := range tables {
		if !t.Derived() {
			continue
		}
		st := m.stores[tableKey(db, t.Def.Name)]
		for _, v := range st.s.Versions {
			if st.s.Stored(v.Version) {
				out = append(out, m.cloneLocked(t, v.Version))
			}
		}
	}
	return out
}

// cloneLocked returns version v of t as stored, reusing the one made
// for the same compiled table.
func (m *Manager) cloneLocked(t *schema.Table, v int) *schema.Table {
	name := schema.VersionTable(t.Def.Name, v)
	k := t.Def.Database + "/" + name + "/" + fmt.Sprintf("%p", t)
	c, ok := m.clones[k]
	if !ok {
		c = t.StoredAs(name)
		m.clones[k] = c
	}
	return c
}

// Resolve picks the version a read of derived table t answers from and
// returns it with the table it is stored as: the version the read names
// (pinned, when not 0) if it is readable, else the current one. A
// pinned version this node does not know is looked up in etcd first: the
// node that forwarded the read may have seen a newer record.
func (m *Manager) Resolve(ctx context.Context, t *schema.Table, pinned int) (int, *schema.Table, error) {
	db, name := t.Def.Database, t.Def.Name
	if lag := m.lag(); lag > m.cfg.MaxLag {
		return 0, nil, &problem.Error{Kind: problem.Unavailable, Operation: -1, RetryAfter: 1,
			Detail: fmt.Sprintf("this node has not reached etcd for %v: it cannot tell which version of %s.%s is current", lag.Round(time.Millisecond), db, name)}
	}
	m.mu.RLock()
	st := m.stores[tableKey(db, name)]
	m.mu.RUnlock()
	if pinned != 0 && !st.s.Readable(pinned) && pinned <= st.s.Last+1 {
		if s, ok, err := m.refresh(ctx, db, name); err == nil && ok {
			st = s
		}
	}
	v := pinned
	switch {
	case v == 0:
		if v = st.s.Current(); v == 0 {
			return 0, nil, problem.New(problem.Conflict, "derived table %s.%s has no current version yet: push one (doppio derived push %s/%s --from DIR)", db, name, db, name)
		}
	case !st.s.Readable(v):
		state := st.s.state(v)
		kind := problem.NotFound
		switch {
		case state == "" && v <= st.s.Last:
			state, kind = "gone", problem.Gone
		case state == "":
			state = "unknown"
		case st.s.Dropping(v):
			kind = problem.Gone
		}
		return 0, nil, problem.Field(kind, "X-Doppio-Version", "version %d of %s.%s cannot be read (%s): the readable versions are the staged, current and backup ones", v, db, name, state)
	}
	m.mu.Lock()
	c := m.cloneLocked(t, v)
	m.mu.Unlock()
	return v, c, nil
}

// refresh reads one table's record from etcd into the cache.
func (m *Manager) refresh(ctx context.Context, db, table string) (stored, bool, error) {
	resp, err := m.cfg.Client.Get(ctx, m.cfg.Prefix+dirTables+tableKey(db, table))
	if err != nil || len(resp.Kvs) == 0 {
		return stored{}, false, err
	}
	var s Store
	if err := json.Unmarshal(resp.Kvs[0].Value, &s); err != nil {
		return stored{}, false, err
	}
	st := stored{s, resp.Kvs[0].ModRevision}
	m.mu.Lock()
	if cur, ok := m.stores[tableKey(db, table)]; !ok || cur.rev < st.rev {
		m.stores[tableKey(db, table)] = st
	}
	m.mu.Unlock()
	m.changed.Notify()
	return st, true, nil
}

// snapshot is the derived state read from etcd at one revision.
type snapshot struct {
	stores  map[string]stored
	reports map[string]map[string]Report // db/table → node → report
}

// read reads every record and report, and updates the cache; it returns
// the snapshot and whether the cached records changed.
func (m *Manager) read(ctx context.Context) (snapshot, bool, error) {
	start := time.Now()
	resp, err := m.cfg.Client.Get(ctx, m.cfg.Prefix+"/derived/", clientv3.WithPrefix())
	if err != nil {
		return snapshot{}, false, err
	}
	defer m.confirm(start)
	snap := snapshot{stores: map[string]stored{}, reports: map[string]map[string]Report{}}
	for _, kv := range resp.Kvs {
		k := string(kv.Key)
		switch {
		case strings.HasPrefix(k, m.cfg.Prefix+dirTables):
			if err := m.parseRecord(snap.stores, kv); err != nil {
				m.cfg.Logger.Warn("derived tables: unreadable record", "key", k, "err", err)
			}
		case strings.HasPrefix(k, m.cfg.Prefix+dirReports):
			rest := strings.TrimPrefix(k, m.cfg.Prefix+dirReports)
			i := strings.LastIndexByte(rest, '/')
			if i < 0 {
				continue
			}
			var r Report
			if err := json.Unmarshal(kv.Value, &r); err != nil {
				continue
			}
			if snap.reports[rest[:i]] == nil {
				snap.reports[rest[:i]] = map[string]Report{}
			}
			snap.reports[rest[:i]][rest[i+1:]] = r
		}
	}
	return snap, m.merge(snap.stores), nil
}

// parseRecord adds the table record kv holds to stores, by db/table.
func (m *Manager) parseRecord(stores map[string]stored, kv *mvccpb.KeyValue) error {
	var s Store
	if err := json.Unmarshal(kv.Value, &s); err != nil {
		return err
	}
	stores[strings.TrimPrefix(string(kv.Key), m.cfg.Prefix+dirTables)] = stored{s, kv.ModRevision}
	return nil
}

// merge puts the records read into the cache and reports whether any
// changed.
func (m *Manager) merge(stores map[string]stored) bool {
	m.mu.Lock()
	changed := false
	for k, st := range stores {
		// A record this node wrote after the read began stays.
		if cur, ok := m.stores[k]; !ok || cur.rev < st.rev {
			m.stores[k] = st
			changed = true
		}
	}
	m.mu.Unlock()
	if changed {
		m.changed.Notify()
	}
	return changed
}

// confirm records that a read of the records that began at start
// succeeded.
func (m *Manager) confirm(start time.Time) {
	for {
		old := m.confirmed.Load()
		if start.UnixNano() <= old || m.confirmed.CompareAndSwap(old, start.UnixNano()) {
			return
		}
	}
}

// confirmLoop reads the records (not the reports) every quarter of
// MaxLag, apart from the reconcile loop, whose turns may wait on Raft.
func (m *Manager) confirmLoop(ctx context.Context) {
	defer m.confirming.Done()
	t := time.NewTicker(m.cfg.MaxLag / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		rctx, cancel := context.WithTimeout(ctx, m.cfg.MaxLag)
		resp, err := m.cfg.Client.Get(rctx, m.cfg.Prefix+dirTables, clientv3.WithPrefix())
		cancel()
		if err != nil {
			continue
		}
		stores := map[string]stored{}
		for _, kv := range resp.Kvs {
			_ = m.parseRecord(stores, kv) // read warns of it every turn
		}
		m.merge(stores)
		m.confirm(start)
	}
}

// lag returns how long ago etcd last confirmed this node's records.
func (m *Manager) lag() time.Duration {
	return time.Since(time.Unix(0, m.confirmed.Load()))
}

// loop follows the records: on every change in etcd and every Interval.
func (m *Manager) loop(ctx context.Context) {
	defer close(m.done)
	etcdloop.Run(ctx, m.cfg.Client, m.cfg.Prefix+"/derived/", m.cfg.Interval, m.reconcile)
}

// reconcile moves each table with Next, deletes expired versions in the
// partitions led here, and writes this node's reports.
func (m *Manager) reconcile(ctx context.Context) {
	snap, _, err := m.read(ctx)
	if err != nil {
		if ctx.Err() == nil {
			m.cfg.Logger.Warn("derived tables: read", "err", err)
		}
		return
	}
	var views []wire.DerivedTable
	for k, st := range snap.stores {
		in := m.inputs(ctx, st.s, snap.reports[k])
		views = append(views, m.view(ctx, st, in, snap.reports[k], false))
		if next, moved := Next(st.s, in); moved {
			if ok, err := m.put(ctx, next, st.rev); err == nil && ok {
				m.cfg.Logger.Info("derived table", "db", next.Database, "table", next.Table, "current", next.Current(), "versions", summary(next))
			}
			continue
		}
		m.drop(ctx, st.s, m.announced(st, snap.reports[k]))
		m.forgetRetired(st.s)
		m.report(ctx, st)
	}
	m.metrics.observe(views)
}

// inputs gathers what Next needs of st beyond the record.
func (m *Manager) inputs(ctx context.Context, s Store, reports map[string]Report) Inputs {
	in := Inputs{Loads: map[string]LoadState{}, Placement: m.cfg.Placement(s.Database), Reports: reports, Now: time.Now()}
	for _, v := range s.Versions {
		if v.Load == "" || v.State != wire.VersionFetching {
			continue
		}
		l, err := m.cfg.Loads.Get(ctx, v.Load)
		if err != nil {
			continue
		}
		in.Loads[v.Load] = LoadState{State: l.State, Error: l.Error}
	}
	return in
}

func retiredKey(s Store, v int) string {
	return fmt.Sprintf("%s/%d", tableKey(s.Database, s.Table), v)
}

// forgetRetired drops what drop remembers of s's versions no longer
// being deleted (gone).
func (m *Manager) forgetRetired(s Store) {
	prefix := tableKey(s.Database, s.Table) + "/"
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.retired {
		if rest, ok := strings.CutPrefix(k, prefix); ok && !strings.Contains(rest, "/") {
			if v, err := strconv.Atoi(rest); err == nil && !s.Dropping(v) {
				delete(m.retired, k)
			}
		}
	}
}

// announced reports whether every live node serves st (or a later record).
func (m *Manager) announced(st stored, reports map[string]Report) bool {
	for _, n := range m.cfg.Live() {
		if r, ok := reports[n]; !ok || r.Seen < st.rev {
			return false
		}
	}
	return true
}

// drop deletes, in each partition led here, the versions being deleted,
// once they are safe to: ReadGrace after every live node was seen serving
// a record that retires them (announced: s, which retires them, is
// served everywhere). A node stops picking a version for reads before it
// reports the record that retires it, so by then the reads that picked
// it have ended. A failed version was never readable and goes at once.
func (m *Manager) drop(ctx context.Context, s Store, announced bool) {
	now := time.Now()
	for _, v := range s.Versions {
		if !s.Dropping(v.Version) {
			continue
		}
		if v.State != wire.VersionFailed {
			k := retiredKey(s, v.Version)
			m.mu.Lock()
			at, ok := m.retired[k]
			if !ok && announced {
				m.retired[k] = now
			}
			m.mu.Unlock()
			if !ok || now.Sub(at) < m.cfg.ReadGrace {
				continue
			}
		}
		name := schema.VersionTable(s.Table, v.Version)
		for _, r := range m.cfg.Hosted(s.Database) {
			if !r.Leading() {
				continue
			}
			if empty, err := r.TableEmpty(name); err != nil || empty {
				continue
			}
			if err := r.DropTable(ctx, name); err != nil && ctx.Err() == nil {
				m.cfg.Logger.Warn("derived table: delete version", "db", s.Database, "table", s.Table, "version", v.Version, "partition", r.Partition(), "err", err)
			}
		}
	}
}

// report writes what this node's replicas hold of st's versions being
// fetched or deleted, and the record's revision it serves, when that
// changed since it last wrote it.
func (m *Manager) report(ctx context.Context, st stored) {
	s := st.s
	r := Report{Seen: st.rev, Held: map[int][]int{}, Gone: map[int][]int{}}
	hosted := m.cfg.Hosted(s.Database)
	for _, v := range s.Versions {
		name := schema.VersionTable(s.Table, v.Version)
		for _, rep := range hosted {
			switch {
			case v.State == wire.VersionFetching && v.Load != "":
				if done, err := rep.LoadDone(v.Load); err == nil && done {
					r.Held[v.Version] = append(r.Held[v.Version], rep.Partition())
				}
			case s.Dropping(v.Version):
				if empty, err := rep.TableEmpty(name); err == nil && empty {
					r.Gone[v.Version] = append(r.Gone[v.Version], rep.Partition())
				}
			}
		}
		slices.Sort(r.Held[v.Version])
		slices.Sort(r.Gone[v.Version])
	}
	b, err := json.Marshal(r)
	if err != nil {
		return
	}
	k := tableKey(s.Database, s.Table)
	m.mu.RLock()
	same := bytes.Equal(m.reported[k], b)
	m.mu.RUnlock()
	if same {
		return
	}
	if _, err := m.cfg.Client.Put(ctx, m.cfg.Prefix+dirReports+k+"/"+m.cfg.Node, string(b)); err != nil {
		return
	}
	m.mu.Lock()
	m.reported[k] = b
	m.mu.Unlock()
}

// put writes s if its key is still at rev (0: absent).
func (m *Manager) put(ctx context.Context, s Store, rev int64) (bool, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return false, err
	}
	key := m.cfg.Prefix + dirTables + tableKey(s.Database, s.Table)
	resp, err := m.cfg.Client.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
		Then(clientv3.OpPut(key, string(b))).Commit()
	if err != nil {
		return false, err
	}
	if resp.Succeeded {
		m.mu.Lock()
		if cur, ok := m.stores[tableKey(s.Database, s.Table)]; !ok || cur.rev < resp.Header.Revision {
			m.stores[tableKey(s.Database, s.Table)] = stored{s, resp.Header.Revision}
		}
		m.mu.Unlock()
		m.changed.Notify()
	}
	return resp.Succeeded, nil
}

// get reads one table's record from etcd: the zero record (with its
// names and the default retention) when none is written yet.
func (m *Manager) get(ctx context.Context, db, table string) (stored, error) {
	resp, err := m.cfg.Client.Get(ctx, m.cfg.Prefix+dirTables+tableKey(db, table))
	if err != nil {
		return stored{}, err
	}
	if len(resp.Kvs) == 0 {
		return stored{s: Store{Database: db, Table: table, Retain: DefaultRetain}}, nil
	}
	var s Store
	if err := json.Unmarshal(resp.Kvs[0].Value, &s); err != nil {
		return stored{}, fmt.Errorf("derived table %s.%s: %w", db, table, err)
	}
	return stored{s, resp.Kvs[0].ModRevision}, nil
}

func summary(s Store) string {
	parts := make([]string, 0, len(s.Versions))
	for _, v := range s.Versions {
		parts = append(parts, strconv.Itoa(v.Version)+":"+v.State)
	}
	return strings.Join(parts, " ")
}
