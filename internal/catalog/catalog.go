// Package catalog is Doppio's schema catalog: database and table definitions
// stored in etcd under a key prefix, cached in memory and kept current by a
// watch, so every node answers schema lookups locally and sees changes made
// through any other node within the watch latency.
//
// Layout under the prefix:
//
//	{prefix}/db/{name}           JSON schema.Database
//	{prefix}/table/{db}/{table}  JSON schema.TableDef (every version in one value)
//	{prefix}/drop/...            drops under way and done (see drop.go)
//
// Writes are compare-and-swap transactions on the key's ModRevision, retried
// on contention, so concurrent writers on several nodes never lose a version
// nor number two versions alike.
package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/doppio-db/doppio/internal/notify"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/schema"
)

const (
	// maxAttempts bounds compare-and-swap retries. Each failed attempt means
	// another writer succeeded, so this is only reached under a storm of
	// schema changes; the caller gets Unavailable and may retry.
	maxAttempts = 64
	// retryBackoff is the pause before re-establishing a failed watch.
	retryBackoff = 500 * time.Millisecond
)

// Catalog is the cached, watched schema catalog. Safe for concurrent use.
type Catalog struct {
	cli    *clientv3.Client
	prefix string // without trailing slash
	logger *slog.Logger

	mu     sync.RWMutex
	dbs    map[string]schema.Database
	tables map[string]map[string]*schema.Table // db -> table -> compiled
	// revs holds, per etcd key, the revision of the write (or delete) the
	// cache reflects. Puts apply their own writes directly and the watch
	// later delivers the same event; comparing revisions makes applying
	// idempotent and keeps an old event from overwriting a newer value.
	revs map[string]int64
	// held is the newest database entry and the newest table entry in the
	// cache, however they came (see Revision); complete is, per watch
	// stream, the revision up to which the watch (or a full load) has
	// delivered every event of that kind (see LookupTableSince). The watch
	// resumes after the lower of the two.
	held, complete Position
	// events counts the watch events applied (tests).
	events int

	changed notify.Notifier

	cancel context.CancelFunc
	done   chan struct{}
}

// Open loads every database and table under prefix, compiling each table
// with schema.Compile, and starts a watch that keeps the cache current until
// Close. A stored table that does not compile is logged and left out.
func Open(ctx context.Context, cli *clientv3.Client, prefix string) (*Catalog, error) {
	c := newCatalog(cli, prefix)
	if err := c.load(ctx); err != nil {
		return nil, fmt.Errorf("catalog: load: %w", err)
	}
	c.start()
	return c, nil
}

func newCatalog(cli *clientv3.Client, prefix string) *Catalog {
	return &Catalog{
		cli:    cli,
		prefix: strings.TrimSuffix(prefix, "/"),
		logger: slog.Default().With("component", "catalog"),
		dbs:    map[string]schema.Database{},
		tables: map[string]map[string]*schema.Table{},
		revs:   map[string]int64{},
	}
}

func (c *Catalog) start() {
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.done = make(chan struct{})
	go c.watch(ctx)
}

// Close stops the watch. The cache keeps its last state; subscriber
// channels are not closed (subscribers stop on their own cancel).
func (c *Catalog) Close() {
	c.cancel()
	<-c.done
}

// Database returns the named database's definition.
func (c *Catalog) Database(name string) (schema.Database, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	d, ok := c.dbs[name]
	return d, ok
}

// LookupDatabase is Database for a request: when the cache does not hold
// the database yet, it reads etcd (a linearizable read) before answering
// "no". A database created through another node, or through a router
// that forwarded the PUT, is therefore usable here as soon as its creation
// was acknowledged, without waiting for the watch to deliver it. Only a
// miss costs the round trip; an error reading etcd answers the cached "no".
func (c *Catalog) LookupDatabase(ctx context.Context, name string) (schema.Database, bool) {
	if d, ok := c.Database(name); ok {
		return d, true
	}
	c.refresh(ctx, c.dbKey(name))
	return c.Database(name)
}

// LookupTable is Table with the same read-through on a miss as
// LookupDatabase.
func (c *Catalog) LookupTable(ctx context.Context, db, table string) (*schema.Table, bool) {
	if t, ok := c.Table(db, table); ok {
		return t, true
	}
	c.refresh(ctx, c.tableKey(db, table))
	return c.Table(db, table)
}

// Position is a revision per kind of catalog entry: databases and tables.
type Position struct{ DB, Table int64 }

// String renders p as the X-Doppio-Catalog-Revision header carries it:
// "<databases>/<tables>".
func (p Position) String() string {
	return strconv.FormatInt(p.DB, 10) + "/" + strconv.FormatInt(p.Table, 10)
}

// ParsePosition parses what String renders. A single number (what nodes
// sent before positions had two parts) stands for both kinds.
func ParsePosition(s string) (Position, bool) {
	db, table, two := strings.Cut(s, "/")
	if !two {
		table = db
	}
	d, err1 := strconv.ParseInt(db, 10, 64)
	t, err2 := strconv.ParseInt(table, 10, 64)
	if err1 != nil || err2 != nil || d < 0 || t < 0 {
		return Position{}, false
	}
	return Position{d, t}, true
}

// Revision is the revision of the newest database entry and of the newest
// table entry this catalog holds. A node forwarding a request sends it
// along, so that the node serving it can tell whether it may be behind
// (LookupTableSince).
func (c *Catalog) Revision() Position {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.held
}

// LookupTableSince is LookupTable for a request forwarded by a node whose
// catalog held entries as recent as since: if this catalog's watch has
// not delivered every database (table) entry up to since.DB (since.Table),
// it may lack a change the other node made or saw (a schema version
// registered there just before the request), so the table's database
// (table) entry is read from etcd first. Without it, a write sent right
// after a new schema version through another node could be refused by the
// leader as not matching the older one it knew. Each kind is compared
// with the position of its own watch stream, so a newer entry of the
// other kind, or of another table read through, cannot hide that the
// table stream is behind.
func (c *Catalog) LookupTableSince(ctx context.Context, db, table string, since Position) (*schema.Table, bool) {
	c.mu.RLock()
	at := c.complete
	c.mu.RUnlock()
	if since.DB > at.DB {
		c.refresh(ctx, c.dbKey(db))
	}
	if since.Table > at.Table {
		c.refresh(ctx, c.tableKey(db, table))
	}
	return c.LookupTable(ctx, db, table)
}

// refresh reads one key from etcd and applies it to the cache (revisions
// keep it from undoing anything newer the watch brought meanwhile).
func (c *Catalog) refresh(ctx context.Context, key string) {
	resp, err := c.cli.Get(ctx, key)
	if err != nil {
		c.logger.Debug("catalog read-through failed", "key", key, "err", err)
		return
	}
	for _, kv := range resp.Kvs {
		if _, err := c.applyKV(string(kv.Key), kv.Value, kv.ModRevision); err != nil {
			c.logger.Warn("ignoring unusable catalog entry", "key", string(kv.Key), "err", err)
		}
	}
}

// Databases returns every database, sorted by name.
func (c *Catalog) Databases() []schema.Database {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]schema.Database, 0, len(c.dbs))
	for _, name := range slices.Sorted(maps.Keys(c.dbs)) {
		out = append(out, c.dbs[name])
	}
	return out
}

// Table returns the compiled table; it is immutable and may be kept, a newer
// version replaces it in the cache with a new *schema.Table.
func (c *Catalog) Table(db, table string) (*schema.Table, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	t, ok := c.tables[db][table]
	return t, ok
}

// Tables returns the tables of db, sorted by name (none if db is unknown).
func (c *Catalog) Tables(db string) []*schema.Table {
	c.mu.RLock()
	defer c.mu.RUnlock()
	ts := c.tables[db]
	out := make([]*schema.Table, 0, len(ts))
	for _, name := range slices.Sorted(maps.Keys(ts)) {
		out = append(out, ts[name])
	}
	return out
}

// Subscribe returns a channel that receives a value after every change
// applied to the cache, for components that must react to new databases or
// tables. Notifications coalesce (the channel buffers one): on receipt,
// re-read the catalog. cancel stops delivery; it does not close the channel.
func (c *Catalog) Subscribe() (<-chan struct{}, func()) {
	return c.changed.Subscribe()
}

// PutDatabase creates the database (created=true) or updates what may
// change: replicas. Partitions and partitioner are immutable: a different
// value is a Conflict naming the field. On update, zero fields mean "keep the
// current value", so a client may send only what it changes. The definition
// is validated (and defaults filled) with schema.ValidateDatabase; an update
// that changes nothing writes nothing.
func (c *Catalog) PutDatabase(ctx context.Context, d schema.Database) (out schema.Database, created bool, err error) {
	key, marker := c.dbKey(d.Name), c.dbDropKey(d.Name)
	for range maxAttempts {
		tresp, err := c.cli.Txn(ctx).Then(clientv3.OpGet(key), clientv3.OpGet(marker)).Commit()
		if err != nil {
			return schema.Database{}, false, storeError(ctx, err)
		}
		resp, mkvs := tresp.Responses[0].GetResponseRange(), tresp.Responses[1].GetResponseRange().Kvs
		next := d
		cmps := []clientv3.Cmp{}
		ops := []clientv3.Op{}
		if len(resp.Kvs) == 0 {
			var dropped *DatabaseDrop
			if len(mkvs) > 0 {
				dropped = &DatabaseDrop{}
				if err := json.Unmarshal(mkvs[0].Value, dropped); err != nil {
					return schema.Database{}, false, fmt.Errorf("catalog: stored drop of %q: %w", d.Name, err)
				}
				if !dropped.Done {
					return schema.Database{}, false, dropUnderWay("database "+strconv.Quote(d.Name), "/_schemas/"+d.Name)
				}
				if next.Partitions == 0 {
					next.Partitions = dropped.Database.Partitions
				}
				if next.Partitioner == "" {
					next.Partitioner = dropped.Database.Partitioner
				}
				cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(marker), "=", mkvs[0].ModRevision))
				ops = append(ops, clientv3.OpDelete(marker))
			}
			if err := schema.ValidateDatabase(&next); err != nil {
				return schema.Database{}, false, err
			}
			if dropped != nil {
				// The dropped database's partitions, Raft groups and
				// placements live on: a database of the name is made of them.
				if next.Partitions != dropped.Database.Partitions {
					return schema.Database{}, false, problem.Field(problem.Conflict, "partitions",
						"database %q was dropped with %d partitions, which it keeps when created again (requested %d)", d.Name, dropped.Database.Partitions, next.Partitions)
				}
				if next.Partitioner != dropped.Database.Partitioner {
					return schema.Database{}, false, problem.Field(problem.Conflict, "partitioner",
						"database %q was dropped with partitioner %q, which it keeps when created again (requested %q)", d.Name, dropped.Database.Partitioner, next.Partitioner)
				}
			}
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(key), "=", 0))
		} else {
			kv := resp.Kvs[0]
			var cur schema.Database
			if err := json.Unmarshal(kv.Value, &cur); err != nil {
				return schema.Database{}, false, fmt.Errorf("catalog: stored database %q: %w", d.Name, err)
			}
			if next.Partitions == 0 {
				next.Partitions = cur.Partitions
			}
			if next.Replicas == 0 {
				next.Replicas = cur.Replicas
			}
			if next.Partitioner == "" {
				next.Partitioner = cur.Partitioner
			}
			if err := schema.ValidateDatabase(&next); err != nil {
				return schema.Database{}, false, err
			}
			if next.Partitions != cur.Partitions {
				return schema.Database{}, false, problem.Field(problem.Conflict, "partitions",
					"the partition count of database %q cannot change (%d, requested %d)", d.Name, cur.Partitions, next.Partitions)
			}
			if next.Partitioner != cur.Partitioner {
				return schema.Database{}, false, problem.Field(problem.Conflict, "partitioner",
					"the partitioner of database %q cannot change (%q, requested %q)", d.Name, cur.Partitioner, next.Partitioner)
			}
			if next == cur {
				c.applyKV(key, kv.Value, kv.ModRevision)
				return cur, false, nil
			}
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision))
		}
		val, err := json.Marshal(next)
		if err != nil {
			return schema.Database{}, false, err
		}
		tr, err := c.cli.Txn(ctx).If(cmps...).Then(append(ops, clientv3.OpPut(key, string(val)))...).Commit()
		if err != nil {
			return schema.Database{}, false, storeError(ctx, err)
		}
		if tr.Succeeded {
			c.applyKV(key, val, tr.Header.Revision)
			return next, len(resp.Kvs) == 0, nil
		}
		// Someone else wrote the database in between: decide again on
		// what they wrote.
	}
	return schema.Database{}, false, contended()
}

// TableOptions are the parts of a table's definition besides its key and
// document schema.
type TableOptions struct {
	// Kind is "" for a table written through the document API, or
	// schema.KindDerived; it never changes.
	Kind string

	// SetCache replaces the table's cache settings with Cache (nil turns
	// the tier off for the table); without it they are kept.
	SetCache bool
	Cache    *schema.CacheSettings
}

// PutTable creates the table (version 1) or registers the next document-schema
// version via schema.NextVersion. The key and the kind are immutable: a
// different one is a Conflict naming it. An incompatible schema is the Conflict from
// NextVersion and nothing is stored. A schema equal to the latest version
// returns the current table with created=false, changed=false, unless
// opts change its cache settings. A nil avroSchema changes only what opts
// say, of a table that must exist. The database must exist (NotFound).
// A created table's cache generation is above every revision etcd has
// given out, so a re-created table never meets its predecessor's entries.
func (c *Catalog) PutTable(ctx context.Context, db, table string, key []schema.KeyPart, avroSchema json.RawMessage, opts TableOptions) (t *schema.Table, created, changed bool, err error) {
	if opts.Kind != "" && opts.Kind != schema.KindDerived {
		return nil, false, false, problem.Field(problem.Malformed, "kind", "kind %q is not a table kind (%q, or none)", opts.Kind, schema.KindDerived)
	}
	dbKey, tableKey, marker := c.dbKey(db), c.tableKey(db, table), c.tableDropKey(db, table)
	for range maxAttempts {
		// Read both keys at one revision, so "the database exists" and
		// "the table is at this revision" hold together.
		resp, err := c.cli.Txn(ctx).Then(clientv3.OpGet(dbKey), clientv3.OpGet(tableKey), clientv3.OpGet(marker)).Commit()
		if err != nil {
			return nil, false, false, storeError(ctx, err)
		}
		if len(resp.Responses[0].GetResponseRange().Kvs) == 0 {
			return nil, false, false, problem.New(problem.NotFound, "database %q not found", db)
		}
		if len(resp.Responses[2].GetResponseRange().Kvs) > 0 {
			return nil, false, false, dropUnderWay("table "+strconv.Quote(table), "/_schemas/"+db+"/"+table)
		}
		var (
			cur   schema.TableDef
			conds = []clientv3.Cmp{
				clientv3.Compare(clientv3.CreateRevision(dbKey), ">", 0),
				clientv3.Compare(clientv3.CreateRevision(marker), "=", 0),
			}
		)
		tkvs := resp.Responses[1].GetResponseRange().Kvs
		if len(tkvs) == 0 {
			if avroSchema == nil {
				return nil, false, false, problem.New(problem.NotFound, "table %q does not exist in database %q", table, db)
			}
			cur = schema.TableDef{Database: db, Name: table, Key: key, Kind: opts.Kind, CacheGeneration: resp.Header.Revision + 1}
			conds = append(conds, clientv3.Compare(clientv3.CreateRevision(tableKey), "=", 0))
		} else {
			kv := tkvs[0]
			if err := json.Unmarshal(kv.Value, &cur); err != nil {
				return nil, false, false, fmt.Errorf("catalog: stored table %s.%s: %w", db, table, err)
			}
			if (avroSchema != nil || key != nil) && !slices.Equal(cur.Key, key) {
				return nil, false, false, problem.Field(problem.Conflict, "key", "key cannot change")
			}
			if cur.Kind != opts.Kind && avroSchema != nil {
				return nil, false, false, problem.Field(problem.Conflict, "kind", "the kind of table %s.%s cannot change (%q, requested %q)", db, table, cur.Kind, opts.Kind)
			}
			conds = append(conds, clientv3.Compare(clientv3.ModRevision(tableKey), "=", kv.ModRevision))
		}
		next, ch := cur, false
		if avroSchema != nil {
			if next, ch, err = schema.NextVersion(cur, avroSchema); err != nil {
				return nil, false, false, err
			}
		}
		if opts.SetCache && !sameCache(cur.Cache, opts.Cache) {
			if cur.Cache == nil && len(tkvs) > 0 {
				// Entries left from an earlier cacheable time missed
				// every change since: a new generation never meets them.
				next.CacheGeneration = resp.Header.Revision + 1
			}
			next.Cache, ch = opts.Cache, true
		}
		if !ch {
			if len(tkvs) == 0 {
				// NextVersion always appends to a definition without
				// versions; anything else is a bug worth surfacing.
				return nil, false, false, fmt.Errorf("catalog: table %s.%s: no first version produced", db, table)
			}
			t, err := c.applyKV(tableKey, tkvs[0].Value, tkvs[0].ModRevision)
			return t, false, false, err
		}
		// Compile before storing: a definition that does not compile
		// (bad names, key parts, index annotations) must never reach etcd,
		// where every node would have to skip it.
		if _, err := schema.Compile(next); err != nil {
			return nil, false, false, err
		}
		val, err := json.Marshal(next)
		if err != nil {
			return nil, false, false, err
		}
		tr, err := c.cli.Txn(ctx).If(conds...).Then(clientv3.OpPut(tableKey, string(val))).Commit()
		if err != nil {
			return nil, false, false, storeError(ctx, err)
		}
		if tr.Succeeded {
			t, err := c.applyKV(tableKey, val, tr.Header.Revision)
			return t, len(tkvs) == 0, true, err
		}
		// Another writer registered a version (or created the table) in
		// between: check compatibility again against what it wrote.
	}
	return nil, false, false, contended()
}

func sameCache(a, b *schema.CacheSettings) bool {
	return a == b || (a != nil && b != nil && *a == *b)
}

// RaiseCacheGeneration gives each named table of db a cache generation
// above every revision etcd has given out, orphaning every entry the
// cache tier holds for it: the caller has changed its documents without a
// change-log entry per document (a bulk load's commit, a restore). A
// table that does not exist (any more) is skipped.
func (c *Catalog) RaiseCacheGeneration(ctx context.Context, db string, tables ...string) error {
	for _, table := range tables {
		if err := c.raiseCacheGeneration(ctx, db, table); err != nil {
			return err
		}
	}
	return nil
}

func (c *Catalog) raiseCacheGeneration(ctx context.Context, db, table string) error {
	key := c.tableKey(db, table)
	for range maxAttempts {
		resp, err := c.cli.Get(ctx, key)
		if err != nil {
			return storeError(ctx, err)
		}
		if len(resp.Kvs) == 0 {
			return nil
		}
		kv := resp.Kvs[0]
		var def schema.TableDef
		if err := json.Unmarshal(kv.Value, &def); err != nil {
			return fmt.Errorf("catalog: stored table %s.%s: %w", db, table, err)
		}
		def.CacheGeneration = resp.Header.Revision + 1
		val, err := json.Marshal(def)
		if err != nil {
			return err
		}
		tr, err := c.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
			Then(clientv3.OpPut(key, string(val))).Commit()
		if err != nil {
			return storeError(ctx, err)
		}
		if tr.Succeeded {
			_, err := c.applyKV(key, val, tr.Header.Revision)
			return err
		}
	}
	return contended()
}

func (c *Catalog) dbKey(name string) string { return c.prefix + "/db/" + name }

func (c *Catalog) tableKey(db, table string) string {
	return c.prefix + "/table/" + db + "/" + table
}

// storeError turns an etcd failure into what the caller should see: the
// context's own error when the caller gave up, else Unavailable (etcd is
// down or has no leader; retrying later can succeed).
func storeError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	e := problem.New(problem.Unavailable, "schema catalog unavailable: %v", err)
	e.RetryAfter = 1
	return e
}

func contended() error {
	e := problem.New(problem.Unavailable, "schema catalog busy: too many concurrent schema changes, retry")
	e.RetryAfter = 1
	return e
}

// load replaces the cache with everything under the prefix, at one revision.
// Entries the cache got from a newer direct write are kept (see revs).
func (c *Catalog) load(ctx context.Context) error {
	resp, err := c.cli.Get(ctx, c.prefix+"/", clientv3.WithPrefix())
	if err != nil {
		return err
	}
	rev := resp.Header.Revision
	seen := make(map[string]bool, len(resp.Kvs))
	changed := false
	c.mu.Lock()
	for _, kv := range resp.Kvs {
		seen[string(kv.Key)] = true
		ch, err := c.applyLocked(string(kv.Key), kv.Value, kv.ModRevision, false)
		if err != nil {
			c.logger.Warn("ignoring unusable catalog entry", "key", string(kv.Key), "err", err)
		}
		changed = changed || ch
	}
	// Keys that vanished while the watch could not tell us (it fell behind
	// a compaction) were deleted at some revision <= rev.
	for key := range c.revs {
		if !seen[key] {
			if ch, _ := c.applyLocked(key, nil, rev, true); ch {
				changed = true
			}
		}
	}
	c.complete = Position{max(c.complete.DB, rev), max(c.complete.Table, rev)}
	c.mu.Unlock()
	if changed {
		c.changed.Notify()
	}
	return nil
}

// watch keeps the cache current until ctx ends, re-establishing the watch
// after errors and reloading everything when etcd compacted the revisions it
// still needed.
func (c *Catalog) watch(ctx context.Context) {
	defer close(c.done)
	for {
		err := c.watchOnce(ctx)
		if errors.Is(err, errReloaded) {
			continue // the reload succeeded: resume at once
		}
		if ctx.Err() == nil {
			c.logger.Warn("schema watch interrupted; resuming", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(retryBackoff):
		}
	}
}

// errReloaded ends a watch whose start revision was compacted away, after
// the cache was reloaded; the next watch starts after the reload.
var errReloaded = errors.New("watch revision compacted; catalog reloaded")

// watchOnce watches the two key ranges the catalog reads, {prefix}/db/
// and {prefix}/table/, not the whole prefix: the other components' keys
// under it (leaderships, the reports every leading node writes each
// second, checks) would otherwise reach every node, N² events a second
// across a cluster of N. Each stream delivers its events in revision
// order; c.complete holds each stream's position, and both resume after
// the lower of the two (applying is idempotent, so what one stream
// delivered twice changes nothing).
func (c *Catalog) watchOnce(ctx context.Context) error {
	// RequireLeader makes the watch fail rather than hang silently on a
	// member cut off from its cluster; clientv3 itself reconnects across
	// etcd restarts and resumes from the last revision it delivered.
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	c.mu.RLock()
	from := min(c.complete.DB, c.complete.Table) + 1
	c.mu.RUnlock()
	type event struct {
		stream int
		resp   clientv3.WatchResponse
	}
	events := make(chan event)
	closed := make(chan struct{}, 2)
	// Stream 0 is the databases', 1 the tables'.
	for i, dir := range []string{"/db/", "/table/"} {
		wch := c.cli.Watch(wctx, c.prefix+dir, clientv3.WithPrefix(), clientv3.WithRev(from), clientv3.WithProgressNotify())
		go func() {
			defer func() { closed <- struct{}{} }()
			for resp := range wch {
				select {
				case events <- event{i, resp}:
				case <-wctx.Done():
					return
				}
			}
		}()
	}
	for {
		var ev event
		select {
		case ev = <-events:
		case <-closed:
			if err := ctx.Err(); err != nil {
				return err
			}
			return errors.New("watch channel closed")
		}
		resp := ev.resp
		if resp.CompactRevision != 0 {
			if err := c.load(ctx); err != nil {
				return fmt.Errorf("reload after compaction: %w", err)
			}
			return errReloaded
		}
		if err := resp.Err(); err != nil {
			return err
		}
		c.applyEvents(resp)
		var at int64 // every event of this stream up to it is applied
		if n := len(resp.Events); n > 0 {
			at = resp.Events[n-1].Kv.ModRevision
		} else if resp.IsProgressNotify() {
			at = resp.Header.Revision
		}
		c.mu.Lock()
		if ev.stream == 0 {
			c.complete.DB = max(c.complete.DB, at)
		} else {
			c.complete.Table = max(c.complete.Table, at)
		}
		c.mu.Unlock()
	}
}

func (c *Catalog) applyEvents(resp clientv3.WatchResponse) {
	changed := false
	c.mu.Lock()
	for _, ev := range resp.Events {
		ch, err := c.applyLocked(string(ev.Kv.Key), ev.Kv.Value, ev.Kv.ModRevision, ev.Type == mvccpb.DELETE)
		if err != nil {
			c.logger.Warn("ignoring unusable catalog entry", "key", string(ev.Kv.Key), "err", err)
		}
		changed = changed || ch
	}
	c.events += len(resp.Events)
	c.mu.Unlock()
	if changed {
		c.changed.Notify()
	}
}

// applyKV applies a value this process read or wrote to the cache and, for a
// table key, returns the table as cached (a newer version if the watch
// already brought one).
func (c *Catalog) applyKV(key string, val []byte, rev int64) (*schema.Table, error) {
	c.mu.Lock()
	changed, err := c.applyLocked(key, val, rev, false)
	var t *schema.Table
	db, table, isTable := c.parseTableKey(key)
	if isTable {
		t = c.tables[db][table]
	}
	c.mu.Unlock()
	if changed {
		c.changed.Notify()
	}
	if err != nil || !isTable || t != nil {
		return t, err
	}
	// The cache holds a later deletion of this key: answer with the value
	// the caller wrote or read.
	return decodeTable(val)
}

// applyLocked sets key to val (or deletes it) as of revision rev, unless the
// cache already reflects that revision or a later one. It reports whether
// the visible catalog changed. A value that does not decode or compile
// removes the entry: the cache must never serve something other nodes
// reject.
func (c *Catalog) applyLocked(key string, val []byte, rev int64, deleted bool) (changed bool, err error) {
	if r, ok := c.revs[key]; ok && r >= rev {
		return false, nil
	}
	c.revs[key] = rev
	if db, table, ok := c.parseTableKey(key); ok {
		c.held.Table = max(c.held.Table, rev)
		_, had := c.tables[db][table]
		if !deleted {
			var t *schema.Table
			if t, err = decodeTable(val); err == nil {
				if c.tables[db] == nil {
					c.tables[db] = map[string]*schema.Table{}
				}
				c.tables[db][table] = t
				return true, nil
			}
		}
		delete(c.tables[db], table)
		if len(c.tables[db]) == 0 {
			delete(c.tables, db)
		}
		return had, err
	}
	if name, ok := strings.CutPrefix(key, c.prefix+"/db/"); ok {
		c.held.DB = max(c.held.DB, rev)
		cur, had := c.dbs[name]
		if !deleted {
			var d schema.Database
			if err = json.Unmarshal(val, &d); err == nil {
				c.dbs[name] = d
				return !had || cur != d, nil
			}
		}
		delete(c.dbs, name)
		return had, err
	}
	// Something else under the prefix (another component's keys): not ours.
	return false, nil
}

func (c *Catalog) parseTableKey(key string) (db, table string, ok bool) {
	rest, ok := strings.CutPrefix(key, c.prefix+"/table/")
	if !ok {
		return "", "", false
	}
	return strings.Cut(rest, "/")
}

func decodeTable(val []byte) (*schema.Table, error) {
	var def schema.TableDef
	if err := json.Unmarshal(val, &def); err != nil {
		return nil, err
	}
	return schema.Compile(def)
}
