package partition

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/doppio-db/doppio/internal/index"
	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/schema"
	"github.com/doppio-db/doppio/internal/storage"
)

// OpKind is what one operation of a request does.
type OpKind uint8

const (
	// Put creates or replaces the document at a full key.
	Put OpKind = iota
	// Patch partially updates an existing document.
	Patch
	// Delete removes one existing document.
	Delete
	// DeleteCollection removes every document under leading key parts.
	DeleteCollection
	// Insert creates a document with the next auto-increment last key part
	// under the collection named by the leading key parts.
	Insert
)

func (k OpKind) String() string {
	return [...]string{"put", "patch", "delete", "delete collection", "insert"}[k]
}

// Condition is a write's precondition on the current document.
type Condition struct {
	// IfMatch: the document exists and its ETag is one of these ("*": any).
	IfMatch []string
	// IfNoneMatch: "*" means the document must not exist; ETags mean its
	// ETag must not be one of them.
	IfNoneMatch []string
	// IfUnmodifiedSince: the document was last modified at or before this
	// time (second precision, as HTTP dates are); ignored if it is absent.
	IfUnmodifiedSince time.Time
}

// Operation is one operation of a request.
type Operation struct {
	Kind  OpKind
	Table *schema.Table
	// Key is the full key (Put, Patch, Delete), the leading parts
	// (DeleteCollection) or all parts but the auto-increment one (Insert).
	Key   keys.Tuple
	Doc   schema.Document // Put, Insert
	Patch schema.Patch    // Patch
	Cond  Condition
}

// Request is a set of operations on one document group, applied atomically.
type Request struct {
	Ops []Operation
	// Now is the commit time; zero means time.Now().
	Now time.Time
	// Idempotency, when set, remembers the request's outcome with its
	// write, and answers it again to a request of the same scope (see
	// idempotency.go).
	Idempotency *Idempotency
}

// OpResult reports what one operation did.
type OpResult struct {
	Key     keys.Tuple // full key (with the generated part for Insert)
	ETag    string     // of the document after the operation; "" if deleted
	Version uint32     // schema version written
	Created bool
	Deleted int // documents removed
}

// Result of a request.
type Result struct {
	SCN     SCN
	Mtime   int64
	Ops     []OpResult
	Changed bool // false when nothing was written (no SCN consumed)
	// WriteSetBytes is the size of the write set replicated (see
	// WriteSet.Size), 0 when nothing was written: what quotas charge.
	WriteSetBytes int
	// Replayed: the outcome is a remembered one (Request.Idempotency);
	// nothing ran now.
	Replayed bool
}

// confirmLocal makes an answer computed from this replica's state alone (a
// refused condition, a write that changes nothing) linearizable. Lead only
// says this replica believed it led when the request began: a leader
// deposed without knowing it yet (paused past an election timeout) would
// refuse from a stale state (found by the fault suite: a compare-and-set
// from the committed value answered 412 by a resumed old leader). A quorum
// round (ReadIndex) shows the state evaluated was still current: nothing
// was applied since.
func (r *Replica) confirmLocal(ctx context.Context, before SCN) error {
	if err := r.repl.ReadIndex(ctx); err != nil {
		return err
	}
	if r.repl.Applied() != before {
		return ErrStaleEvaluation
	}
	return nil
}

// Execute evaluates req under its document group's latch, replicates the
// resulting write set and returns once it is applied and durable. Every
// operation must address the same partition key; a failed condition or
// validation fails the whole request with a *problem.Error whose Operation
// names the failing operation, and nothing is written.
func (r *Replica) Execute(ctx context.Context, req Request) (Result, error) {
	if len(req.Ops) == 0 {
		return Result{}, problem.New(problem.Malformed, "no operations")
	}
	var group []byte
	for i, op := range req.Ops {
		if len(op.Key) == 0 {
			return Result{}, problem.New(problem.Malformed, "operation %d has no key", i)
		}
		g, err := keys.EncodeTuple(op.Key[:1])
		if err != nil {
			return Result{}, problem.New(problem.Malformed, "operation %d: %v", i, err)
		}
		if group != nil && string(g) != string(group) {
			return Result{}, problem.New(problem.Malformed, "operation %d leaves the document group %s", i, req.Ops[0].Key[:1])
		}
		group = g
	}
	// Only a leader that has applied everything committed before its term
	// may evaluate: otherwise the evaluation could miss an earlier write.
	if err := r.repl.Lead(ctx); err != nil {
		return Result{}, err
	}
	if err := r.refuseWhileRestoring(); err != nil {
		return Result{}, err
	}
	r.idx.epoch.RLock()
	defer r.idx.epoch.RUnlock()
	if err := r.checkVersions(req.Ops); err != nil {
		return Result{}, err
	}
	var scope []byte
	var err error
	unclaim := func() {}
	if id := req.Idempotency; id != nil {
		scope = id.scope()
		if unclaim, err = r.claims.claim(id, scope); err != nil {
			return Result{}, err
		}
		at := req.Now
		if at.IsZero() {
			at = time.Now()
		}
		res, found, err := r.recall(id, scope, at.UnixMilli())
		if err != nil || found {
			unclaim()
			return res, err
		}
	}
	latched, err := r.lockFor(ctx, string(group), req.Ops)
	if err != nil {
		unclaim()
		return Result{}, problem.New(problem.Unavailable, "timed out waiting for document group: %v", err)
	}
	// The scope stays claimed as long as the latch is held: until the
	// write's fate is known, even past an "outcome unknown" answer.
	release := func() { latched(); unclaim() }
	held := true
	defer func() {
		if held {
			release()
		}
	}()
	before := r.repl.Applied()

	now := req.Now
	if now.IsZero() {
		now = time.Now()
	}
	ev := evaluation{r: r, now: now.UnixMilli(), docs: map[string]*pending{}, group: group}
	res := Result{Mtime: ev.now, Ops: make([]OpResult, len(req.Ops))}
	for i, op := range req.Ops {
		out, err := ev.operation(op)
		if err != nil {
			if cerr := r.confirmLocal(ctx, before); cerr != nil {
				return Result{}, cerr
			}
			if pe, ok := problem.As(err); ok && len(req.Ops) > 1 {
				cp := *pe
				cp.Operation = i
				cp.Detail = "operation " + strconv.Itoa(i) + " (" + op.Kind.String() + " " + op.Table.Def.Name + " " + op.Key.String() + "): " + pe.Detail
				return Result{}, &cp
			}
			return Result{}, err
		}
		res.Ops[i] = out
	}
	ws, err := ev.writeSet()
	if err != nil {
		return Result{}, err
	}
	if len(ws.Writes) == 0 && len(ws.Counters) == 0 {
		if err := r.confirmLocal(ctx, before); err != nil {
			return Result{}, err
		}
		res.SCN = r.repl.Applied()
		return res, nil
	}
	if id := req.Idempotency; id != nil {
		ws.Outcomes.Put = &Outcome{Scope: scope, Expires: ev.now + id.Retain.Milliseconds(), Fingerprint: id.Fingerprint, Ops: res.Ops}
	}
	scn, later, err := r.replicate(ctx, ws, "transaction", release)
	if err != nil {
		held = !later
		return Result{}, err
	}
	res.SCN, res.Changed, res.WriteSetBytes = scn, true, ws.Size()
	for table, n := range ev.pendingPuts {
		r.notePending(table, group, n)
	}
	return res, nil
}

// lockFor takes the latches a request needs (see latches): its group's
// shared and its documents' when it only puts, patches and deletes
// documents by their full keys, else its group's exclusively.
func (r *Replica) lockFor(ctx context.Context, group string, ops []Operation) (release func(), err error) {
	docs := make([]string, 0, len(ops))
	for _, op := range ops {
		switch op.Kind {
		case Put, Patch, Delete:
			if len(op.Key) == op.Table.Arity() {
				if enc, err := keys.EncodeTuple(op.Key); err == nil {
					docs = append(docs, string(r.prefix.Document(op.Table.Def.Name, enc)))
					continue
				}
			}
		}
		// Reads across the group (an auto-increment insert, a collection
		// delete), or malformed: it fails in evaluation, alone.
		return r.latch.acquire(ctx, group)
	}
	return r.latch.acquireDocs(ctx, group, docs)
}

// replicate replicates ws, which what names in the error when it is over
// the size limit. On failure, later says that release was taken over (see
// releaseWhenSettled).
func (r *Replica) replicate(ctx context.Context, ws *WriteSet, what string, release func()) (scn SCN, later bool, err error) {
	if ws.Size() > r.limits.MaxWriteSetBytes {
		return SCN{}, false, problem.New(problem.TooLarge, "%s writes %d bytes, more than the limit of %d", what, ws.Size(), r.limits.MaxWriteSetBytes)
	}
	scn, err = r.repl.Replicate(ctx, ws)
	if err != nil {
		return SCN{}, releaseWhenSettled(err, release), err
	}
	return scn, false, nil
}

// releaseWhenSettled takes over release when err says the write may still
// be applied: the document group stays latched until it is, or is known
// never to be. It reports whether it did.
func releaseWhenSettled(err error, release func()) bool {
	var inflight *InFlightError
	if !errors.As(err, &inflight) {
		return false
	}
	go func() {
		<-inflight.Settled
		release()
	}()
	return true
}

// pending is a document's state as seen inside one evaluation.
type pending struct {
	table    string
	key      []byte
	orig     *Record // state before the request; nil if absent
	cur      *Record // state after the operations so far; nil if absent
	sequence int     // first-touch order
	// schema and doc (normalized at the latest version) of cur, kept for
	// index maintenance; doc is nil when cur is nil or unchanged.
	schema *schema.Table
	doc    schema.Document
}

type evaluation struct {
	r        *Replica
	now      int64
	docs     map[string]*pending // by storage key
	touched  int
	counters []Counter
	// cleared are tables whose whole document group was deleted: their
	// index entries go with one range deletion.
	cleared map[string]*schema.Table
	group   []byte // encoded partition key of the request
	// pendingPuts counts, by table, the pending text entries written. In a
	// bulk write (see fold.go) they are gathered in bulkRefs and bulkValues
	// instead, and written as one segment.
	pendingPuts map[string]int
	bulk        bool
	bulkRefs    []index.PendingRef
	bulkValues  [][]byte
}

func (ev *evaluation) load(table string, key []byte) (*pending, error) {
	sk := string(ev.r.prefix.Document(table, key))
	if p, ok := ev.docs[sk]; ok {
		return p, nil
	}
	rec, found, err := ev.r.Get(table, key)
	if err != nil {
		return nil, err
	}
	p := &pending{table: table, key: key, sequence: ev.touched}
	ev.touched++
	if found {
		p.orig, p.cur = &rec, &rec
	}
	ev.docs[sk] = p
	return p, nil
}

// loadExisting loads the document a Patch or a Delete names and checks
// its preconditions; a missing document is NotFound for both.
func (ev *evaluation) loadExisting(op Operation, enc []byte) (*pending, error) {
	t := op.Table
	p, err := ev.load(t.Def.Name, enc)
	if err != nil {
		return nil, err
	}
	if p.cur == nil {
		return nil, problem.New(problem.NotFound, "document %s %s does not exist", t.Def.Name, op.Key)
	}
	if err := check(op.Cond, p.cur); err != nil {
		return nil, err
	}
	return p, nil
}

func (ev *evaluation) operation(op Operation) (OpResult, error) {
	t := op.Table
	switch op.Kind {
	case Put, Patch, Delete:
		if len(op.Key) != t.Arity() {
			return OpResult{}, problem.New(problem.Malformed, "%s needs all %d key parts of %s, got %d", op.Kind, t.Arity(), t.Def.Name, len(op.Key))
		}
	case DeleteCollection:
		if len(op.Key) == 0 || len(op.Key) > t.Arity() {
			return OpResult{}, problem.New(problem.Malformed, "collection of %s needs 1 to %d key parts, got %d", t.Def.Name, t.Arity(), len(op.Key))
		}
	case Insert:
		if !t.AutoIncrement() {
			return OpResult{}, problem.New(problem.Malformed, "table %s has no auto-increment key part", t.Def.Name)
		}
		if len(op.Key) != t.Arity()-1 {
			return OpResult{}, problem.New(problem.Malformed, "insert into %s needs the %d leading key parts, got %d", t.Def.Name, t.Arity()-1, len(op.Key))
		}
	}
	enc, err := keys.EncodeTuple(op.Key)
	if err != nil {
		return OpResult{}, problem.New(problem.Malformed, "%v", err)
	}
	switch op.Kind {
	case Put:
		return ev.put(op, enc, op.Key, op.Doc, false)
	case Insert:
		id, err := ev.nextID(t, enc)
		if err != nil {
			return OpResult{}, err
		}
		full := append(slices.Clone(op.Key), id)
		return ev.put(op, keys.AppendInt(enc, id), full, op.Doc, true)
	case Patch:
		p, err := ev.loadExisting(op, enc)
		if err != nil {
			return OpResult{}, err
		}
		doc, err := t.Decode(p.cur.Avro, int(p.cur.Version), t.Latest())
		if err != nil {
			return OpResult{}, err
		}
		doc, err = t.ApplyPatch(doc, op.Patch)
		if err != nil {
			return OpResult{}, err
		}
		return ev.write(p, t, op.Key, doc)
	case Delete:
		p, err := ev.loadExisting(op, enc)
		if err != nil {
			return OpResult{}, err
		}
		p.cur, p.schema, p.doc = nil, t, nil
		return OpResult{Key: op.Key, Deleted: 1}, nil
	case DeleteCollection:
		n, err := ev.deleteCollection(t, enc, len(op.Key) == 1)
		if err != nil {
			return OpResult{}, err
		}
		if n == 0 {
			return OpResult{}, problem.New(problem.NotFound, "collection %s %s is empty", t.Def.Name, op.Key)
		}
		return OpResult{Key: op.Key, Deleted: n}, nil
	}
	return OpResult{}, problem.New(problem.Malformed, "unknown operation %d", op.Kind)
}

func (ev *evaluation) put(op Operation, enc []byte, key keys.Tuple, doc schema.Document, insert bool) (OpResult, error) {
	p, err := ev.load(op.Table.Def.Name, enc)
	if err != nil {
		return OpResult{}, err
	}
	if insert && p.cur != nil {
		return OpResult{}, problem.New(problem.Conflict, "document %s %s already exists", op.Table.Def.Name, key)
	}
	if err := check(op.Cond, p.cur); err != nil {
		return OpResult{}, err
	}
	return ev.write(p, op.Table, key, doc)
}

func (ev *evaluation) write(p *pending, t *schema.Table, key keys.Tuple, doc schema.Document) (OpResult, error) {
	avro, err := t.Encode(doc)
	if err != nil {
		return OpResult{}, err
	}
	if len(avro) > ev.r.limits.MaxDocumentBytes {
		return OpResult{}, problem.New(problem.TooLarge, "document of %d bytes is larger than the limit of %d", len(avro), ev.r.limits.MaxDocumentBytes)
	}
	created := p.cur == nil
	rec := &Record{Version: uint32(t.Latest()), Mtime: ev.now, Avro: avro}
	p.cur, p.schema, p.doc = rec, t, doc
	return OpResult{Key: key, ETag: rec.ETag(), Version: rec.Version, Created: created}, nil
}

// deleteCollection marks every document under the encoded prefix deleted,
// those in storage and those created earlier in this request.
func (ev *evaluation) deleteCollection(t *schema.Table, prefix []byte, wholeGroup bool) (int, error) {
	table := t.Def.Name
	if wholeGroup && len(t.Indexes()) > 0 {
		if ev.cleared == nil {
			ev.cleared = map[string]*schema.Table{}
		}
		ev.cleared[table] = t
	}
	lower := ev.r.prefix.Document(table, prefix)
	it, err := ev.r.engine.NewIter(lower, keys.PrefixEnd(lower))
	if err != nil {
		return 0, err
	}
	tp := len(ev.r.prefix.Table(table))
	for ok := it.First(); ok; ok = it.Next() {
		if _, err := ev.load(table, append([]byte(nil), it.Key()[tp:]...)); err != nil {
			it.Close()
			return 0, err
		}
	}
	if err := it.Close(); err != nil {
		return 0, err
	}
	n := 0
	for sk, p := range ev.docs {
		if p.table == table && p.cur != nil && len(sk) >= len(lower) && sk[:len(lower)] == string(lower) {
			p.cur, p.schema, p.doc = nil, t, nil
			n++
		}
	}
	return n, nil
}

// nextID hands out the next auto-increment value of a collection: one more
// than both the collection's counter and its largest existing key, so it
// never reuses a deleted key nor collides with an explicitly put one.
func (ev *evaluation) nextID(t *schema.Table, collection []byte) (int64, error) {
	name := t.Def.Name
	var last int64
	found := false
	for i := range ev.counters {
		c := &ev.counters[i]
		if c.Table == name && string(c.Collection) == string(collection) {
			last, found = c.Value, true
		}
	}
	if !found {
		v, err := ev.r.engine.Get(ev.r.prefix.AutoIncrement(name, collection))
		switch {
		case errors.Is(err, storage.ErrNotFound):
		case err != nil:
			return 0, err
		case len(v) == 8:
			last = int64(binary.BigEndian.Uint64(v))
		}
	}
	maxKey, err := ev.largestID(name, collection)
	if err != nil {
		return 0, err
	}
	last = max(last, maxKey)
	limit := int64(math.MaxInt64)
	if t.Def.Key[len(t.Def.Key)-1].Type == schema.KeyInt {
		limit = math.MaxInt32
	}
	if last >= limit {
		return 0, problem.New(problem.Conflict, "auto-increment key of %s is exhausted", name)
	}
	id := max(last+1, 1)
	if found {
		for i := range ev.counters {
			c := &ev.counters[i]
			if c.Table == name && string(c.Collection) == string(collection) {
				c.Value = id
			}
		}
	} else {
		ev.counters = append(ev.counters, Counter{Table: name, Collection: collection, Value: id})
	}
	return id, nil
}

// largestID is the largest last key part in the collection, in storage or
// written earlier in this request.
func (ev *evaluation) largestID(table string, collection []byte) (int64, error) {
	lower := ev.r.prefix.Document(table, collection)
	it, err := ev.r.engine.NewIter(lower, keys.PrefixEnd(lower))
	if err != nil {
		return 0, err
	}
	var largest int64
	if it.Last() {
		if v, _, err := keys.DecodeOne(it.Key()[len(lower):]); err == nil {
			largest = v.(int64)
		}
	}
	if err := it.Close(); err != nil {
		return 0, err
	}
	for sk, p := range ev.docs {
		if p.cur != nil && len(sk) > len(lower) && sk[:len(lower)] == string(lower) {
			if v, _, err := keys.DecodeOne([]byte(sk[len(lower):])); err == nil {
				largest = max(largest, v.(int64))
			}
		}
	}
	return largest, nil
}

func (ev *evaluation) writeSet() (*WriteSet, error) {
	ps := make([]*pending, 0, len(ev.docs))
	for _, p := range ev.docs {
		if p.orig != nil || p.cur != nil {
			ps = append(ps, p)
		}
	}
	slices.SortFunc(ps, func(a, b *pending) int { return a.sequence - b.sequence })
	// A write of many documents folds its text entries itself: they would
	// be folded at once (see fold.go).
	ev.bulk = len(ps) >= bulkDocs
	ws := &WriteSet{Mtime: ev.now, Counters: ev.counters}
	for _, p := range ps {
		w := Write{Table: p.table, Key: p.key}
		switch {
		case p.orig == nil && p.cur == nil:
			continue
		case p.orig == nil:
			w.Op = OpInsert
		case p.cur == nil:
			w.Op = OpDelete
		case p.orig == p.cur:
			continue // read only (a failed condition never gets here)
		default:
			w.Op = OpUpdate
		}
		if p.orig != nil {
			w.BeforeVersion, w.Before = p.orig.Version, p.orig.Avro
		}
		if p.cur != nil {
			w.AfterVersion, w.After = p.cur.Version, p.cur.Avro
		}
		ws.Writes = append(ws.Writes, w)
		if err := ev.maintainIndexes(&ws.Index, p); err != nil {
			return nil, err
		}
	}
	if len(ev.bulkRefs) > 0 {
		entries, err := index.FoldSegment(rand.Uint64(), ev.bulkRefs, ev.bulkValues)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			ws.Index.Puts = append(ws.Index.Puts, IndexEntry{Key: e.Key, Value: e.Value})
		}
	}
	for _, t := range ev.cleared {
		start, end := index.GroupSpan(ev.r.prefix, t.Def.Name, ev.group)
		ws.Index.Ranges = append(ws.Index.Ranges, KeyRange{Start: start, End: end})
	}
	return ws, nil
}

// maintainIndexes adds the index changes of one document: only the lists of
// the values that changed are touched.
func (ev *evaluation) maintainIndexes(x *IndexWrites, p *pending) error {
	t := p.schema
	if t == nil || len(t.Indexes()) == 0 {
		return nil
	}
	_, cleared := ev.cleared[p.table]
	var before schema.Document
	if p.orig != nil && !cleared {
		d, err := t.Decode(p.orig.Avro, int(p.orig.Version), t.Latest())
		if err != nil {
			return err
		}
		before = d
	}
	rest := p.key[len(ev.group):]
	puts, deletes, err := index.Diff(t.Indexes(), ev.r.prefix, p.table, ev.group, rest, before, p.doc, ev.r.readKey)
	if err != nil {
		return err
	}
	x.Puts = slices.Grow(x.Puts, len(puts))
	for _, e := range puts {
		switch {
		case !e.Pending():
			x.Puts = append(x.Puts, IndexEntry{Key: e.Key, Value: e.Value})
		case ev.bulk:
			ev.bulkRefs = append(ev.bulkRefs, e.PendingRef())
			ev.bulkValues = append(ev.bulkValues, e.Value)
			if before != nil {
				// The old text's pending entry, which the put would
				// have replaced.
				x.Deletes = append(x.Deletes, e.Key)
			}
		default:
			x.Puts = append(x.Puts, IndexEntry{Key: e.Key, Value: e.Value})
			if ev.pendingPuts == nil {
				ev.pendingPuts = map[string]int{}
			}
			ev.pendingPuts[p.table]++
		}
	}
	x.Deletes = append(x.Deletes, deletes...)
	return nil
}

// check evaluates a write's condition against the current document.
func check(c Condition, cur *Record) error {
	if len(c.IfMatch) > 0 {
		if cur == nil {
			return problem.New(problem.Precondition, "If-Match: the document does not exist")
		}
		if !matches(c.IfMatch, cur) {
			return problem.New(problem.Precondition, "If-Match: the document's ETag is %s", cur.ETag())
		}
	}
	if len(c.IfNoneMatch) > 0 && cur != nil && matches(c.IfNoneMatch, cur) {
		return problem.New(problem.Precondition, "If-None-Match: the document exists with ETag %s", cur.ETag())
	}
	if !c.IfUnmodifiedSince.IsZero() && cur != nil && cur.Mtime/1000 > c.IfUnmodifiedSince.Unix() {
		return problem.New(problem.Precondition, "If-Unmodified-Since: the document was modified at %s", time.UnixMilli(cur.Mtime).UTC().Format(time.RFC1123))
	}
	return nil
}

func matches(tags []string, cur *Record) bool {
	etag := cur.ETag()
	for _, t := range tags {
		if t == "*" || t == etag || t == "W/"+etag {
			return true
		}
	}
	return false
}
