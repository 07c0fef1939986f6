package partition

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/doppio-db/doppio/internal/index"
	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/schema"
	"github.com/doppio-db/doppio/internal/storage"
)

// ErrSchemaChanged fails a request evaluated against a table version older
// than one this partition has started to build indexes for; the caller
// resolves the table again and retries. It keeps a request that read the
// catalog before an index was added from writing a document the backfill
// has already passed without that index's entries.
var ErrSchemaChanged = &problem.Error{Kind: problem.Unavailable, Detail: "the table's schema changed during the request; retry", Operation: -1, RetryAfter: 1}

// IndexState is how far one index is built in this partition.
type IndexState struct {
	Ready    bool
	Building bool // a backfill is running (false and !Ready: not known yet)
	Done     int64
	Total    int64
}

// Progress is the built fraction, 0 to 1.
func (s IndexState) Progress() float64 {
	if s.Ready {
		return 1
	}
	if s.Total == 0 {
		return 0
	}
	return float64(s.Done) / float64(s.Total)
}

// DefaultBackfillRate is Limits.BackfillRate when it is zero: documents
// per second an index backfill indexes in one partition.
const DefaultBackfillRate = 20000

// build is the state of one index of one table in this partition.
type build struct {
	sig     string // what is indexed: kind, type, array
	ready   atomic.Bool
	running atomic.Bool // a backfill job is at work on it
	done    atomic.Int64
	total   atomic.Int64
	cancel  context.CancelFunc
}

type indexes struct {
	mu     sync.Mutex
	loaded bool
	builds map[string]*build // by table "\x00" path
	// epoch: requests hold it shared; SyncIndexes takes it exclusively to
	// raise minVersion once no request of an older version is in flight.
	epoch      sync.RWMutex
	minVersion map[string]int
	// tables are the tables of the last SyncIndexes, by name (under
	// epoch): what a load names its table by.
	tables map[string]*schema.Table
	jobs   sync.WaitGroup
	// ctx is the context of the background jobs, from the first
	// SyncIndexes.
	ctx context.Context
}

// jobContext is the context background jobs run under.
func (r *Replica) jobContext() context.Context {
	r.idx.mu.Lock()
	defer r.idx.mu.Unlock()
	if r.idx.ctx == nil {
		return context.Background()
	}
	return r.idx.ctx
}

// WaitIndexJobs waits for the background index jobs to end (after the
// context given to SyncIndexes is cancelled).
func (r *Replica) WaitIndexJobs() { r.idx.jobs.Wait() }

func (r *Replica) spawn(job func()) {
	r.idx.jobs.Add(1)
	go func() {
		defer r.idx.jobs.Done()
		job()
	}()
}

func buildKey(table, path string) string { return table + "\x00" + path }

func signature(ix schema.Index) string {
	sig := ix.Kind + "/" + ix.Type + "/" + ix.Logical
	if ix.Array {
		sig += "/array"
	}
	return sig
}

const metaIndexPrefix = "index\x00"

// IndexState reports the state of the index on field (dotted path) of table.
func (r *Replica) IndexState(table, field string) IndexState {
	key := buildKey(table, field)
	r.idx.mu.Lock()
	b := r.idx.builds[key]
	r.idx.mu.Unlock()
	if b != nil && b.ready.Load() {
		return IndexState{Ready: true, Done: b.done.Load(), Total: b.total.Load()}
	}
	// The build may have finished on another replica (the leader): its
	// ready marker arrives through replication.
	if v, err := r.engine.Get(r.prefix.Meta(metaIndexPrefix + key)); err == nil {
		sig, state, _ := strings.Cut(string(v), "\x00")
		if state == "ready" && (b == nil || b.sig == sig) {
			if b != nil {
				b.done.Store(b.total.Load())
				b.ready.Store(true)
			}
			return IndexState{Ready: true}
		}
	}
	if b == nil {
		return IndexState{}
	}
	return IndexState{Building: true, Done: b.done.Load(), Total: b.total.Load()}
}

// checkVersions refuses operations resolved against a table version older
// than the partition's minimum (see ErrSchemaChanged). Called with the
// epoch held shared.
func (r *Replica) checkVersions(ops []Operation) error {
	for _, op := range ops {
		if op.Table.Latest() < r.idx.minVersion[op.Table.Def.Name] {
			return ErrSchemaChanged
		}
	}
	return nil
}

// SyncIndexes reconciles the partition's indexes with the tables' current
// index sets: an index that is new (or whose type changed) is built by an
// online, throttled backfill; one that disappeared has its entries removed
// in the background. Jobs run until done or until ctx ends.
func (r *Replica) SyncIndexes(ctx context.Context, tables []*schema.Table, log *slog.Logger) error {
	r.idx.epoch.Lock()
	if r.idx.minVersion == nil {
		r.idx.minVersion = map[string]int{}
	}
	r.idx.tables = make(map[string]*schema.Table, len(tables))
	for _, t := range tables {
		r.idx.minVersion[t.Def.Name] = max(r.idx.minVersion[t.Def.Name], t.Latest())
		r.idx.tables[t.Def.Name] = t
	}
	r.idx.epoch.Unlock()

	r.idx.mu.Lock()
	defer r.idx.mu.Unlock()
	if r.idx.ctx == nil {
		r.idx.ctx = ctx
	}
	if !r.idx.loaded {
		if err := r.loadIndexStates(); err != nil {
			return err
		}
		r.idx.loaded = true
	}
	for _, t := range tables {
		name := t.Def.Name
		want := map[string]schema.Index{}
		for _, ix := range t.Indexes() {
			want[strings.Join(ix.Path, ".")] = ix
		}
		for key, b := range r.idx.builds {
			table, path, _ := strings.Cut(key, "\x00")
			if table != name {
				continue
			}
			if ix, ok := want[path]; ok && signature(ix) == b.sig {
				continue
			}
			// Dropped or retyped: stop any build and clear its entries.
			if b.cancel != nil {
				b.cancel()
			}
			delete(r.idx.builds, key)
			if err := r.engine.Commit(r.deleteStateBatch(key)); err != nil {
				return err
			}
			r.spawn(func() { r.dropIndex(ctx, name, path, log) })
		}
		// New indexes, and builds whose job stopped before the end (this
		// replica was not, or stopped being, the leader).
		var fresh []schema.Index
		for path, ix := range want {
			b, ok := r.idx.builds[buildKey(name, path)]
			if !ok || (!b.ready.Load() && !b.running.Load()) {
				fresh = append(fresh, ix)
			}
		}
		if len(fresh) == 0 {
			continue
		}
		empty, err := r.tableEmpty(name)
		if err != nil {
			return err
		}
		var bs []*build
		for _, ix := range fresh {
			b := &build{sig: signature(ix)}
			r.idx.builds[buildKey(name, strings.Join(ix.Path, "."))] = b
			bs = append(bs, b)
		}
		if empty {
			// Nothing to backfill: ready at once, so a new table's
			// queries never wait.
			for i, b := range bs {
				if err := r.markReady(name, fresh[i], b); err != nil {
					return err
				}
			}
			continue
		}
		jobCtx, cancel := context.WithCancel(ctx)
		for _, b := range bs {
			b.cancel = cancel
			b.running.Store(true)
		}
		r.spawn(func() {
			defer func() {
				cancel()
				for _, b := range bs {
					b.running.Store(false)
				}
			}()
			r.backfill(jobCtx, t, fresh, bs, log)
		})
	}
	return nil
}

func (r *Replica) tableEmpty(table string) (bool, error) {
	lower := r.prefix.Table(table)
	it, err := r.engine.NewIter(lower, keys.PrefixEnd(lower))
	if err != nil {
		return false, err
	}
	defer it.Close()
	return !it.First(), it.Error()
}

// loadIndexStates reads the persisted states: ready indexes stay ready; a
// build interrupted by a restart starts again (its writes are idempotent).
func (r *Replica) loadIndexStates() error {
	r.idx.builds = map[string]*build{}
	mp := r.prefix.MetaPrefix()
	it, err := r.engine.NewIter(mp, keys.PrefixEnd(mp))
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		v, _, err := keys.DecodeOne(it.Key()[len(mp):])
		name, _ := v.(string)
		if err != nil || !strings.HasPrefix(name, metaIndexPrefix) {
			continue
		}
		sig, ready, _ := strings.Cut(string(it.Value()), "\x00")
		if ready != "ready" {
			continue
		}
		b := &build{sig: sig}
		b.ready.Store(true)
		r.idx.builds[strings.TrimPrefix(name, metaIndexPrefix)] = b
	}
	return it.Error()
}

func (r *Replica) indexStateKey(table string, ix schema.Index) []byte {
	return r.prefix.Meta(metaIndexPrefix + buildKey(table, strings.Join(ix.Path, ".")))
}

// markReady records locally that an index of an empty table is complete.
func (r *Replica) markReady(table string, ix schema.Index, b *build) error {
	batch := r.engine.NewBatch()
	batch.Set(r.indexStateKey(table, ix), []byte(b.sig+"\x00ready"))
	if err := r.engine.Commit(batch); err != nil {
		return err
	}
	b.done.Store(b.total.Load())
	b.ready.Store(true)
	return nil
}

func (r *Replica) deleteStateBatch(key string) *storage.Batch {
	b := r.engine.NewBatch()
	b.Delete(r.prefix.Meta(metaIndexPrefix + key))
	return b
}

// backfill indexes every document of t already in the partition for the
// fields fresh, one document group at a time under the group's latch, so a
// concurrent write of the group is either seen by the backfill or indexes
// itself (it runs at the new schema version).
func (r *Replica) backfill(ctx context.Context, t *schema.Table, fresh []schema.Index, bs []*build, log *slog.Logger) {
	name := t.Def.Name
	// Only the leader builds; its writes replicate. A replica that becomes
	// leader later is asked to SyncIndexes again and takes over.
	lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err := r.repl.Lead(lctx)
	cancel()
	if err != nil {
		log.Debug("index backfill waits for leadership", "db", r.DB, "partition", r.ID, "table", name)
		return
	}
	tp := r.prefix.Table(name)
	total, err := r.countDocs(tp)
	if err != nil {
		log.Error("index backfill", "db", r.DB, "partition", r.ID, "table", name, "err", err)
		return
	}
	for _, b := range bs {
		b.total.Store(total)
	}
	start := time.Now()
	var done int64
	next := tp
	for {
		group, err := r.nextGroup(next, keys.PrefixEnd(tp), len(tp))
		if err != nil || group == nil {
			if err != nil && ctx.Err() == nil {
				log.Error("index backfill", "db", r.DB, "partition", r.ID, "table", name, "err", err)
				return
			}
			break
		}
		n, err := r.backfillGroup(ctx, t, fresh, group)
		if err != nil {
			if ctx.Err() == nil {
				log.Error("index backfill", "db", r.DB, "partition", r.ID, "table", name, "err", err)
			}
			return
		}
		done += int64(n)
		for _, b := range bs {
			b.done.Store(min(done, total))
		}
		next = keys.PrefixEnd(append(append([]byte(nil), tp...), group...))
		// Throttle: stay under Limits.BackfillRate documents per second.
		if ahead := time.Duration(float64(done)/float64(r.limits.BackfillRate)*float64(time.Second)) - time.Since(start); ahead > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(ahead):
			}
		}
	}
	if ctx.Err() != nil {
		return
	}
	// The ready markers are replicated, so every replica (and a future
	// leader) knows the index is complete.
	var marks IndexWrites
	for i, b := range bs {
		marks.Puts = append(marks.Puts, IndexEntry{Key: r.indexStateKey(name, fresh[i]), Value: []byte(b.sig + "\x00ready")})
	}
	if _, err := r.repl.Replicate(ctx, &WriteSet{Mtime: time.Now().UnixMilli(), Index: marks}); err != nil {
		log.Error("index backfill", "db", r.DB, "partition", r.ID, "table", name, "err", err)
		return
	}
	for _, b := range bs {
		b.done.Store(b.total.Load())
		b.ready.Store(true)
	}
	log.Info("index built", "db", r.DB, "partition", r.ID, "table", name, "documents", done, "took", time.Since(start).Round(time.Millisecond))
}

func (r *Replica) countDocs(tp []byte) (int64, error) {
	it, err := r.engine.NewIter(tp, keys.PrefixEnd(tp))
	if err != nil {
		return 0, err
	}
	defer it.Close()
	var n int64
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	return n, it.Error()
}

// nextGroup returns the encoded partition key of the first document at or
// after lower, or nil.
func (r *Replica) nextGroup(lower, upper []byte, tpLen int) ([]byte, error) {
	it, err := r.engine.NewIter(lower, upper)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	if !it.First() {
		return nil, it.Error()
	}
	key := it.Key()[tpLen:]
	_, rest, err := keys.DecodeOne(key)
	if err != nil {
		return nil, err
	}
	return append([]byte(nil), key[:len(key)-len(rest)]...), nil
}

// backfillGroup indexes the documents of one group, a chunk per write set,
// and returns how many.
func (r *Replica) backfillGroup(ctx context.Context, t *schema.Table, fresh []schema.Index, group []byte) (int, error) {
	release, err := r.latch.acquire(ctx, string(group))
	if err != nil {
		return 0, err
	}
	held := true
	defer func() {
		if held {
			release()
		}
	}()
	const chunk = 512
	n := 0
	var after []byte
	for {
		entries, more, err := r.Scan(t.Def.Name, group, after, chunk)
		if err != nil {
			return n, err
		}
		var x IndexWrites
		for _, e := range entries {
			doc, err := t.Decode(e.Record.Avro, int(e.Record.Version), t.Latest())
			if err != nil {
				return n, err
			}
			for _, en := range index.Entries(fresh, r.prefix, t.Def.Name, group, e.Key[len(group):], doc) {
				x.Puts = append(x.Puts, IndexEntry{Key: en.Key, Value: en.Value})
			}
		}
		if !x.empty() {
			if _, err := r.repl.Replicate(ctx, &WriteSet{Mtime: time.Now().UnixMilli(), Index: x}); err != nil {
				held = !releaseWhenSettled(err, release)
				return n, err
			}
		}
		n += len(entries)
		if !more {
			return n, nil
		}
		after = entries[len(entries)-1].Key
	}
}

// dropIndex removes every entry of the index on path of table, in chunks.
func (r *Replica) dropIndex(ctx context.Context, table, path string, log *slog.Logger) {
	// A fold that read this index among the text ones ends first (see
	// folding.drop); later ones no longer see it.
	r.folds.drop.Lock()
	r.folds.drop.Unlock()
	start := r.prefix.IndexTable(table)
	end := keys.PrefixEnd(start)
	for ctx.Err() == nil {
		x, more, err := r.collectField(start, end, path, 4096)
		if err == nil && !x.empty() {
			_, err = r.repl.Replicate(ctx, &WriteSet{Mtime: time.Now().UnixMilli(), Index: x})
		}
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, context.Canceled) {
				log.Error("drop index", "db", r.DB, "partition", r.ID, "table", table, "field", path, "err", err)
			}
			return
		}
		if !more {
			return
		}
	}
}

// collectField gathers up to limit index keys of field path.
func (r *Replica) collectField(start, end []byte, path string, limit int) (IndexWrites, bool, error) {
	var x IndexWrites
	it, err := r.engine.NewIter(start, end)
	if err != nil {
		return x, false, err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()[len(start):]
		_, rest, err := keys.DecodeOne(k) // the group
		if err != nil {
			continue
		}
		f, _, err := keys.DecodeOne(rest)
		if err != nil || f != path {
			continue
		}
		x.Deletes = append(x.Deletes, append([]byte(nil), it.Key()...))
		if len(x.Deletes) == limit {
			return x, true, it.Error()
		}
	}
	return x, false, it.Error()
}
