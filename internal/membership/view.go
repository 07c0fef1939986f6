package membership

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/doppio-db/doppio/internal/notify"
)

// View is a watched, cached copy of the nodes, placements, leaderships and
// group reports in etcd. Safe for concurrent use.
type View struct {
	cli    *clientv3.Client
	prefix string
	log    *slog.Logger

	mu         sync.RWMutex
	nodes      map[string]Node
	byRaft     map[uint64]string
	placements placements
	initial    map[initialKey]Placement // databases' first placements, read once
	leaders    map[string]Leaderships   // by node id
	groups     map[string]Groups        // by node id
	intents    map[string]Intent        // by node id

	changed notify.Notifier

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// PlacementRecord is a placement with the etcd revisions of its keys.
type PlacementRecord struct {
	Placement
	// CreateRevision is the revision from which etcd held the whole
	// placement: the placement as of that revision is the database's
	// initial placement.
	CreateRevision int64
	// ModRevision is the latest revision that wrote any of its keys.
	ModRevision int64
	// Revisions is the ModRevision of each chunk's key (PlacementKey), or
	// nil for a placement in the older one-key form.
	Revisions []int64
}

// Open loads the current state and watches it until Close.
func Open(ctx context.Context, cli *clientv3.Client, prefix string, log *slog.Logger) (*View, error) {
	v := &View{
		cli: cli, prefix: prefix, log: log.With("component", "membership"),
		nodes: map[string]Node{}, byRaft: map[uint64]string{},
		placements: newPlacements(), leaders: map[string]Leaderships{}, groups: map[string]Groups{},
		intents: map[string]Intent{},
		initial: map[initialKey]Placement{},
	}
	bg, cancel := context.WithCancel(context.Background())
	v.cancel = cancel
	for _, dir := range []string{NodesDir, PlacementDir, LeadersDir, GroupsDir, IntentsDir} {
		rev, err := v.load(ctx, dir)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("membership: load %s: %w", dir, err)
		}
		v.wg.Add(1)
		go v.watch(bg, dir, rev)
	}
	return v, nil
}

// Close stops the watches.
func (v *View) Close() {
	v.cancel()
	v.wg.Wait()
}

// Subscribe returns a channel that receives a value (coalesced) after any
// change, and a function that ends the subscription (callable more than
// once).
func (v *View) Subscribe() (<-chan struct{}, func()) {
	return v.changed.Subscribe()
}

// load replaces the cache of dir with what etcd holds and returns the
// revision read.
func (v *View) load(ctx context.Context, dir string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := v.cli.Get(ctx, v.prefix+dir, clientv3.WithPrefix())
	if err != nil {
		return 0, err
	}
	v.mu.Lock()
	switch dir {
	case NodesDir:
		clear(v.nodes)
		clear(v.byRaft)
	case PlacementDir:
		v.placements.clear()
	case LeadersDir:
		clear(v.leaders)
	case GroupsDir:
		clear(v.groups)
	case IntentsDir:
		clear(v.intents)
	}
	for _, kv := range resp.Kvs {
		v.applyLocked(dir, mvccpb.PUT, kv)
	}
	v.mu.Unlock()
	v.changed.Notify()
	return resp.Header.Revision, nil
}

func (v *View) watch(ctx context.Context, dir string, rev int64) {
	defer v.wg.Done()
	for ctx.Err() == nil {
		wch := v.cli.Watch(clientv3.WithRequireLeader(ctx), v.prefix+dir, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
		for resp := range wch {
			if err := resp.Err(); err != nil {
				break
			}
			v.mu.Lock()
			for _, ev := range resp.Events {
				v.applyLocked(dir, ev.Type, ev.Kv)
			}
			v.mu.Unlock()
			rev = resp.Header.Revision
			v.changed.Notify()
		}
		if ctx.Err() != nil {
			return
		}
		// Compacted or broken: reload, then watch again from there.
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
		if r, err := v.load(ctx, dir); err == nil {
			rev = r
		} else if ctx.Err() == nil {
			v.log.Warn("reload after watch failure", "dir", dir, "err", err)
		}
	}
}

func (v *View) applyLocked(dir string, typ mvccpb.Event_EventType, kv *mvccpb.KeyValue) {
	name := strings.TrimPrefix(string(kv.Key), v.prefix+dir)
	del := typ == mvccpb.DELETE
	switch dir {
	case NodesDir:
		if old, ok := v.nodes[name]; ok {
			delete(v.byRaft, RaftID(old.ID))
		}
		delete(v.nodes, name)
		if del {
			return
		}
		n, err := decode[Node](kv.Value)
		if err != nil || n.ID != name {
			v.log.Warn("ignoring malformed node key", "key", string(kv.Key), "err", err)
			return
		}
		v.nodes[name] = n
		v.byRaft[RaftID(name)] = name
	case PlacementDir:
		value := kv.Value
		if del {
			value = nil
		} else if value == nil {
			value = []byte{}
		}
		if err := v.placements.apply(name, value, kv.CreateRevision, kv.ModRevision); err != nil {
			v.log.Warn("ignoring malformed placement", "key", string(kv.Key), "err", err)
		}
	case LeadersDir:
		delete(v.leaders, name)
		if del {
			return
		}
		l, err := decode[Leaderships](kv.Value)
		if err != nil {
			v.log.Warn("ignoring malformed leaderships", "key", string(kv.Key), "err", err)
			return
		}
		v.leaders[name] = l
	case GroupsDir:
		delete(v.groups, name)
		if del {
			return
		}
		g, err := decode[Groups](kv.Value)
		if err != nil {
			v.log.Warn("ignoring malformed group reports", "key", string(kv.Key), "err", err)
			return
		}
		v.groups[name] = g
	case IntentsDir:
		delete(v.intents, name)
		if del {
			return
		}
		in, err := decode[Intent](kv.Value)
		if err != nil {
			v.log.Warn("ignoring malformed node intent", "key", string(kv.Key), "err", err)
			return
		}
		v.intents[name] = in
	}
}

// Intent returns the operator's intent for node id (IntentActive when
// none was recorded).
func (v *View) Intent(id string) Intent {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if in, ok := v.intents[id]; ok {
		return in
	}
	return Intent{State: IntentActive}
}

// Intents returns every recorded intent by node id.
func (v *View) Intents() map[string]Intent {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make(map[string]Intent, len(v.intents))
	for id, in := range v.intents {
		out[id] = in
	}
	return out
}

// Nodes returns the live nodes, sorted by id.
func (v *View) Nodes() []Node {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make([]Node, 0, len(v.nodes))
	for _, n := range v.nodes {
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b Node) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Node returns the registration of the live node id.
func (v *View) Node(id string) (Node, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	n, ok := v.nodes[id]
	return n, ok
}

// NodeByRaft returns the live node whose Raft id is raft.
func (v *View) NodeByRaft(raft uint64) (Node, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	n, ok := v.nodes[v.byRaft[raft]]
	return n, ok
}

// Placement returns the placement of db.
func (v *View) Placement(db string) (PlacementRecord, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	p, ok := v.placements.assembled[db]
	return p, ok
}

// Placements returns every database's placement.
func (v *View) Placements() map[string]PlacementRecord {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make(map[string]PlacementRecord, len(v.placements.assembled))
	for k, p := range v.placements.assembled {
		out[k] = p
	}
	return out
}

// Leader returns the live node that publishes the highest term as leader
// of partition p of db.
func (v *View) Leader(db string, p int) (node string, term uint64, ok bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	for id, l := range v.leaders {
		if _, alive := v.nodes[id]; !alive {
			continue
		}
		if t, has := l[db][p]; has && (t > term || (t == term && id < node)) {
			node, term, ok = id, t, true
		}
	}
	return node, term, ok
}

// Leaderships returns what each live node publishes.
func (v *View) Leaderships() map[string]Leaderships {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make(map[string]Leaderships, len(v.leaders))
	for id, l := range v.leaders {
		out[id] = l
	}
	return out
}

// Group returns the Raft configuration of partition p of db as the live
// node publishing it with the highest term (its leader) reports it.
func (v *View) Group(db string, p int) (g GroupReport, leader string, ok bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	for id, gs := range v.groups {
		if _, alive := v.nodes[id]; !alive {
			continue
		}
		if r, has := gs[db][p]; has && (!ok || r.Term > g.Term || (r.Term == g.Term && id < leader)) {
			g, leader, ok = r, id, true
		}
	}
	return g, leader, ok
}

// Groups returns the group reports of every live node, by node id. The
// maps are shared: do not modify them.
func (v *View) Groups() map[string]Groups {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make(map[string]Groups, len(v.groups))
	for id, g := range v.groups {
		if _, alive := v.nodes[id]; alive {
			out[id] = g
		}
	}
	return out
}

// InitialPlacement returns the first version of db's placement (the one
// its Raft groups were bootstrapped with), or false when etcd no longer
// holds that revision.
func (v *View) InitialPlacement(ctx context.Context, db string) (Placement, bool, error) {
	rec, ok := v.Placement(db)
	if !ok {
		return Placement{}, false, nil
	}
	if rec.CreateRevision == rec.ModRevision {
		return rec.Placement, true, nil
	}
	// A revision's value never changes: one read per database (not per
	// partition: a node starting thousands of replicas asks once).
	key := initialKey{db, rec.CreateRevision}
	v.mu.RLock()
	p, cached := v.initial[key]
	v.mu.RUnlock()
	if cached {
		return p, true, nil
	}
	p, ok, err := v.readInitial(ctx, db, rec.CreateRevision)
	if ok {
		v.mu.Lock()
		v.initial[key] = p
		v.mu.Unlock()
	}
	return p, ok, err
}

type initialKey struct {
	db  string
	rev int64
}

func (v *View) readInitial(ctx context.Context, db string, rev int64) (Placement, bool, error) {
	rec, ok, err := ReadPlacement(ctx, v.cli, v.prefix, db, rev)
	if err != nil {
		if strings.Contains(err.Error(), "compacted") {
			return Placement{}, false, nil
		}
		return Placement{}, false, err
	}
	return rec.Placement, ok, nil
}

// CreatePlacement writes db's placement if it has none and reports whether
// it did.
func CreatePlacement(ctx context.Context, cli *clientv3.Client, prefix, db string, p Placement) (bool, error) {
	vals, err := EncodePlacement(Placement{}, p)
	if err != nil {
		return false, err
	}
	// Chunks are written together, so chunk 0 stands for them all.
	cmps := []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(prefix+PlacementDir+db), "=", 0),
		clientv3.Compare(clientv3.CreateRevision(PlacementKey(prefix, db, 0)), "=", 0),
	}
	var ops []clientv3.Op
	for n := range Chunks(len(p.Partitions)) {
		ops = append(ops, clientv3.OpPut(PlacementKey(prefix, db, n), vals[n]))
	}
	resp, err := cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}
