package datastream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/doppio-db/doppio/internal/changes"
	"github.com/doppio-db/doppio/internal/schema"
)

// Schemas is what the manager needs of the catalog.
type Schemas interface {
	Catalog
	Database(name string) (schema.Database, bool)
	Table(db, table string) (*schema.Table, bool)
	// Tables lists a database's tables (a snapshot reads them all; the
	// Redis sink keeps the cacheable ones).
	Tables(db string) []*schema.Table
}

// Cluster is the manager's view of the cluster, from membership.
type Cluster interface {
	// Shape returns the live nodes and every database's placement.
	Shape() Shape
	// Subscribe signals (coalesced) any change of the shape.
	Subscribe() (<-chan struct{}, func())
}

// Replicas finds the partition replicas hosted on this node.
type Replicas interface {
	// Local returns this node's replica of partition p of db and its Raft
	// role, if it hosts one.
	Local(db string, p int) (l changes.Log, role string, ok bool)
}

// Config configures a Manager.
type Config struct {
	Client   *clientv3.Client
	Prefix   string // etcd prefix, e.g. "/doppio"
	Node     string // this node's id
	Schemas  Schemas
	Cluster  Cluster
	Replicas Replicas
	// Registry receives the metrics (nil: not registered).
	Registry prometheus.Registerer
	Logger   *slog.Logger
	// CheckpointInterval batches checkpoint writes (default 250 ms);
	// StatusInterval paces status publication (default 1 s); LeaseTTL is
	// the ownership lease's (default 3 s, the node registration's).
	CheckpointInterval time.Duration
	StatusInterval     time.Duration
	LeaseTTL           time.Duration
}

// Manager runs the datastream tasks assigned to this node and answers
// the datastream API. Safe for concurrent use.
type Manager struct {
	cfg      Config
	cli      *clientv3.Client
	prefix   string
	node     string
	schemas  Schemas
	cluster  Cluster
	replicas Replicas
	log      *slog.Logger
	metrics  metrics

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	records map[string]*Record // watched definitions
	tasks   map[TaskID]*task
	sinks   map[string]*sharedSink
	changed chan struct{} // closed and replaced when records change
	wake    chan struct{}
	// stopping holds stopped tasks until they have given up their keys.
	stopping map[TaskID]*task

	sessMu  sync.Mutex
	session *concurrency.Session
}

// Open loads the datastreams and starts running this node's tasks.
func Open(ctx context.Context, cfg Config) (*Manager, error) {
	if cfg.CheckpointInterval <= 0 {
		cfg.CheckpointInterval = 250 * time.Millisecond
	}
	if cfg.StatusInterval <= 0 {
		cfg.StatusInterval = time.Second
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 3 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	bg, cancel := context.WithCancel(context.Background())
	m := &Manager{
		cfg: cfg, cli: cfg.Client, prefix: strings.TrimSuffix(cfg.Prefix, "/"), node: cfg.Node,
		schemas: cfg.Schemas, cluster: cfg.Cluster, replicas: cfg.Replicas,
		log: cfg.Logger.With("component", "datastream"), metrics: newMetrics(),
		ctx: bg, cancel: cancel,
		records: map[string]*Record{}, tasks: map[TaskID]*task{}, sinks: map[string]*sharedSink{},
		changed: make(chan struct{}), wake: make(chan struct{}, 1), stopping: map[TaskID]*task{},
	}
	if cfg.Registry != nil {
		if err := m.metrics.register(cfg.Registry); err != nil {
			cancel()
			return nil, err
		}
	}
	rev, err := m.load(ctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("datastreams: load: %w", err)
	}
	m.wg.Add(4)
	go m.watch(rev)
	go m.run()
	go m.flushLoop()
	go m.statusLoop()
	return m, nil
}

// Close stops this node's tasks (each writes its checkpoint and gives its
// ownership up) and the background work.
func (m *Manager) Close() {
	m.cancel()
	m.wg.Wait() // no task starts after this
	m.mu.Lock()
	tasks := make([]*task, 0, len(m.tasks)+len(m.stopping))
	for _, t := range m.tasks {
		tasks = append(tasks, t)
	}
	for _, t := range m.stopping {
		tasks = append(tasks, t) // still giving up their keys
	}
	m.mu.Unlock()
	for _, t := range tasks {
		<-t.done
	}
	m.sessMu.Lock()
	if m.session != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, _ = m.cli.Revoke(ctx, m.session.Lease())
		cancel()
		m.session.Orphan()
	}
	m.sessMu.Unlock()
}

// lease returns this node's datastream lease, granting a new one if the
// last expired (the node was cut off from etcd, or etcd restarted).
func (m *Manager) lease(ctx context.Context) (clientv3.LeaseID, error) {
	m.sessMu.Lock()
	defer m.sessMu.Unlock()
	if m.session != nil {
		select {
		case <-m.session.Done():
			m.log.Warn("datastream lease lost; tasks stop and are taken again")
			m.session = nil
			m.kick()
		default:
			return m.session.Lease(), nil
		}
	}
	s, err := concurrency.NewSession(m.cli, concurrency.WithTTL(int((m.cfg.LeaseTTL+time.Second-1)/time.Second)), concurrency.WithContext(m.ctx))
	if err != nil {
		return 0, err
	}
	m.session = s
	return s.Lease(), nil
}

// sessionDone is closed when the current lease is lost (nil: none yet).
func (m *Manager) sessionDone() <-chan struct{} {
	m.sessMu.Lock()
	defer m.sessMu.Unlock()
	if m.session == nil {
		return nil
	}
	return m.session.Done()
}

func (m *Manager) kick() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// record returns the watched record of a datastream.
func (m *Manager) record(name string) (*Record, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.records[name]
	return r, ok
}

// waitChange waits until some record changes, d passes, or ctx ends.
func (m *Manager) waitChange(ctx context.Context, d time.Duration) {
	m.mu.Lock()
	ch := m.changed
	m.mu.Unlock()
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	case <-ctx.Done():
	}
}

func (m *Manager) load(ctx context.Context) (int64, error) {
	resp, err := m.cli.Get(ctx, m.prefix+dirDefs, clientv3.WithPrefix())
	if err != nil {
		return 0, err
	}
	m.mu.Lock()
	clear(m.records)
	for _, kv := range resp.Kvs {
		m.applyLocked(mvccpb.PUT, kv)
	}
	m.notifyLocked()
	m.mu.Unlock()
	return resp.Header.Revision, nil
}

func (m *Manager) applyLocked(typ mvccpb.Event_EventType, kv *mvccpb.KeyValue) {
	name := strings.TrimPrefix(string(kv.Key), m.prefix+dirDefs)
	if typ == mvccpb.DELETE {
		delete(m.records, name)
		return
	}
	var r Record
	if err := json.Unmarshal(kv.Value, &r); err != nil {
		m.log.Warn("ignoring malformed datastream", "key", string(kv.Key), "err", err)
		return
	}
	m.records[name] = &r
}

func (m *Manager) notifyLocked() {
	close(m.changed)
	m.changed = make(chan struct{})
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

func (m *Manager) watch(rev int64) {
	defer m.wg.Done()
	for m.ctx.Err() == nil {
		wch := m.cli.Watch(clientv3.WithRequireLeader(m.ctx), m.prefix+dirDefs, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
		for resp := range wch {
			if resp.Err() != nil {
				break
			}
			m.mu.Lock()
			for _, ev := range resp.Events {
				m.applyLocked(ev.Type, ev.Kv)
			}
			m.notifyLocked()
			m.mu.Unlock()
			rev = resp.Header.Revision
		}
		select {
		case <-m.ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
		if r, err := m.load(m.ctx); err == nil {
			rev = r
		} else if m.ctx.Err() == nil {
			m.log.Warn("datastreams: reload after watch failure", "err", err)
		}
	}
}

// run starts and stops this node's tasks as the datastreams, the nodes
// and the placement change, and at least every second.
func (m *Manager) run() {
	defer m.wg.Done()
	shape, cancel := m.cluster.Subscribe()
	defer cancel()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var swept time.Time
	for {
		m.reconcile()
		if time.Since(swept) > orphanSweep {
			m.dropOrphanKeys()
			swept = time.Now()
		}
		select {
		case <-m.ctx.Done():
			return
		case <-m.wake:
		case <-shape:
		case <-t.C:
		case <-m.sessionDone():
			// Lease lost: ownership keys are gone; tasks restart under a
			// new lease.
			m.stopAll()
			_, _ = m.lease(m.ctx)
		}
	}
}

// orphanSweep is how often a node looks for owner keys it holds for
// tasks it does not run.
const orphanSweep = 5 * time.Second

// Tasks lists the tasks of every datastream over the catalog's partitions.
func (m *Manager) allTasks() ([]TaskID, map[string]*Record) {
	m.mu.Lock()
	recs := make(map[string]*Record, len(m.records))
	for k, v := range m.records {
		recs[k] = v
	}
	m.mu.Unlock()
	var out []TaskID
	for name, r := range recs {
		db, ok := m.schemas.Database(r.Database)
		if !ok {
			continue
		}
		for _, p := range r.PartitionList(db.Partitions) {
			out = append(out, TaskID{Stream: name, DB: r.Database, Partition: p})
		}
	}
	return out, recs
}

func (m *Manager) reconcile() {
	if m.ctx.Err() != nil {
		return
	}
	ids, recs := m.allTasks()
	assigned := Assign(ids, m.cluster.Shape())
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, t := range m.tasks {
		r, ok := recs[id.Stream]
		select {
		case <-t.done:
			delete(m.tasks, id) // ended on its own (lost ownership)
			continue
		default:
		}
		if !ok || assigned[id] != m.node || !sameRun(r.Definition, t.def) {
			m.stopLocked(t)
		}
	}
	for _, id := range ids {
		if assigned[id] != m.node {
			continue
		}
		if _, running := m.tasks[id]; running {
			continue
		}
		if m.stoppingLocked(id) {
			continue // the previous run of this task is still giving up its key
		}
		t := newTask(m, id, recs[id.Stream].Definition)
		m.tasks[id] = t
		go t.run()
	}
}

// awaitStop tracks a stopped task until it has given up its key, so
// that the task's next run on this node does not race it.
func (m *Manager) awaitStop(t *task) {
	<-t.done
	m.mu.Lock()
	if m.stopping[t.id] == t {
		delete(m.stopping, t.id)
	}
	m.mu.Unlock()
	m.kick()
}

func (m *Manager) stoppingLocked(id TaskID) bool {
	_, ok := m.stopping[id]
	return ok
}

func (m *Manager) stopAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range m.tasks {
		m.stopLocked(t)
	}
}

// dropOwnerKey deletes okey if this node holds it under lease.
func (m *Manager) dropOwnerKey(okey string, lease clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = m.cli.Txn(ctx).If(clientv3.Compare(clientv3.Value(okey), "=", m.node), clientv3.Compare(clientv3.LeaseValue(okey), "=", lease)).
		Then(clientv3.OpDelete(okey)).Commit()
}

// dropOrphanKeys deletes owner keys this node holds for tasks it does not
// run (a release that failed, an acquisition answered too late): left
// alone they would keep the task from the node it is assigned to until
// this node's lease ends.
func (m *Manager) dropOrphanKeys() {
	ctx, cancel := context.WithTimeout(m.ctx, 5*time.Second)
	defer cancel()
	resp, err := m.cli.Get(ctx, m.prefix+dirOwners, clientv3.WithPrefix())
	if err != nil {
		return
	}
	for _, kv := range resp.Kvs {
		if string(kv.Value) != m.node {
			continue
		}
		rest := strings.TrimPrefix(string(kv.Key), m.prefix+dirOwners)
		name, ps, ok := strings.Cut(rest, "/")
		p, okp := atoiOK(ps)
		if !ok || !okp {
			continue
		}
		m.mu.Lock()
		held := false
		for id := range m.tasks {
			held = held || (id.Stream == name && id.Partition == p)
		}
		for id := range m.stopping {
			held = held || (id.Stream == name && id.Partition == p)
		}
		m.mu.Unlock()
		if held {
			continue
		}
		m.log.Warn("dropping an owner key no task here holds", "datastream", name, "partition", p)
		_, _ = m.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(string(kv.Key)), "=", kv.CreateRevision)).
			Then(clientv3.OpDelete(string(kv.Key))).Commit()
	}
}

func (m *Manager) stopLocked(t *task) {
	t.stop()
	delete(m.tasks, t.id)
	m.stopping[t.id] = t
	go m.awaitStop(t)
}

// running returns the tasks running here.
func (m *Manager) running() []*task {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*task, 0, len(m.tasks))
	for _, t := range m.tasks {
		out = append(out, t)
	}
	return out
}

// acquireSink returns the shared sink of a datastream's definition.
func (m *Manager) acquireSink(def Definition) (*sharedSink, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sinks[def.Name]
	if ok && !sameRun(s.def, def) {
		ok = false // the old definition's tasks are stopping; they close it
	}
	if !ok {
		sk, err := m.newSink(def)
		if err != nil {
			return nil, err
		}
		s = &sharedSink{def: def, sink: sk}
		m.sinks[def.Name] = s
	}
	s.refs++
	return s, nil
}

func (m *Manager) releaseSink(name string, s *sharedSink) {
	m.mu.Lock()
	s.refs--
	last := s.refs == 0
	if last && m.sinks[name] == s {
		delete(m.sinks, name)
	}
	m.mu.Unlock()
	if last {
		s.sink.close()
	}
}

// flushLoop writes the moved checkpoints of every task here, in batches.
func (m *Manager) flushLoop() {
	defer m.wg.Done()
	t := time.NewTicker(m.cfg.CheckpointInterval)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(m.ctx, 5*time.Second)
		if err := m.flush(ctx, m.running()); err != nil && m.ctx.Err() == nil {
			m.log.Warn("datastream checkpoints", "err", err)
		}
		cancel()
	}
}

// maxTxnTasks bounds the tasks of one checkpoint transaction (etcd allows
// 128 operations per transaction by default; each task takes a compare
// and a put).
const maxTxnTasks = 60

// pending is a task record to write, fenced on the owner key's revision.
type pending struct {
	t   *task
	rec TaskRecord
	rev int64
}

// flush writes the task records that changed, each conditional on the
// task still owning its key: one transaction per batch, and task by task
// when a batch is refused, to find and stop the tasks that lost their
// ownership.
func (m *Manager) flush(ctx context.Context, tasks []*task) error {
	var todo []pending
	for _, t := range tasks {
		t.mu.Lock()
		if t.ownRev > 0 && t.rec != t.flushed {
			todo = append(todo, pending{t, t.rec, t.ownRev})
		}
		t.mu.Unlock()
	}
	var errs []error
	for len(todo) > 0 {
		n := min(len(todo), maxTxnTasks)
		batch := todo[:n]
		todo = todo[n:]
		ok, err := m.writeRecords(ctx, batch...)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok || len(batch) == 1 {
			if !ok {
				m.lost(batch[0].t)
			}
			continue
		}
		for _, p := range batch {
			ok, err := m.writeRecords(ctx, p)
			switch {
			case err != nil:
				errs = append(errs, err)
			case !ok:
				m.lost(p.t)
			}
		}
	}
	return errors.Join(errs...)
}

// writeRecords is one fenced transaction; it marks the records written.
func (m *Manager) writeRecords(ctx context.Context, ps ...pending) (bool, error) {
	var conds []clientv3.Cmp
	var ops []clientv3.Op
	for _, p := range ps {
		val, err := json.Marshal(p.rec)
		if err != nil {
			return false, err
		}
		conds = append(conds, clientv3.Compare(clientv3.CreateRevision(m.ownerKey(p.t.id)), "=", p.rev))
		ops = append(ops, clientv3.OpPut(m.taskKey(p.t.id), string(val)))
	}
	resp, err := m.cli.Txn(ctx).If(conds...).Then(ops...).Commit()
	if err != nil {
		return false, err
	}
	if resp.Succeeded {
		for _, p := range ps {
			p.t.mu.Lock()
			p.t.flushed = p.rec
			p.t.mu.Unlock()
		}
	}
	return resp.Succeeded, nil
}

// lost stops a task whose owner key is gone (lease expired, datastream
// deleted): another node may run it now.
func (m *Manager) lost(t *task) {
	select {
	case <-t.done:
		return
	default:
	}
	if _, ok := m.record(t.id.Stream); ok {
		m.log.Warn("datastream task lost its ownership; stopping", "datastream", t.id.Stream, "partition", t.id.Partition)
	}
	t.mu.Lock()
	t.ownRev = -1 // nothing more is written
	t.mu.Unlock()
	t.stop()
	m.kick()
}
