package index

import (
	"bytes"
	"cmp"
	"container/heap"
	"errors"
	"slices"
	"unsafe"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/storage"
)

// Reader is what Execute reads: *storage.Engine satisfies it. Execute opens
// one iterator and moves its bounds from list to list, so every list of a
// query is read at the same point in time.
type Reader interface {
	NewIter(lower, upper []byte) (*storage.Iter, error)
}

// Options shape the answer of Execute.
type Options struct {
	// Sort orders the matches; the zero Sort is document key order.
	Sort Sort
	// Limit is the page size; 0 or less returns every match.
	Limit int
	// Cursor is the Next of the previous page, or "".
	Cursor string
	// Count asks for the number of matches only.
	Count bool
	// Knobs, when not nil, replace the probing walk's budgets (tests).
	Knobs *TestingKnobs
}

// Result is one page of matches.
type Result struct {
	// Keys are the matching documents' keys in result order. From Execute:
	// the encoded key after the partition key (including the leading parts
	// asked for). From ExecuteAll and Merge: the whole encoded document key,
	// partition key first.
	Keys [][]byte
	// SortValues are set by ExecuteAll and Merge when there is a sort: the
	// encoded value each key is ordered by (for an array, its smallest
	// value ascending, its largest descending), nil for a document without
	// one. Merge needs them: keep them with the page until merged.
	SortValues [][]byte
	// Count is the number of matches, when Options.Count was set.
	Count int
	// Pending is the most pending entries (see PendingSpan) the query read
	// in one text list: the caller may fold them when they pile up. Dead is
	// the most dead postings (see FoldSegment) it read in one: the caller
	// may purge them (PurgeDead).
	Pending, Dead int
	// Next is the cursor of the next page, or "" on the last page.
	Next string
}

// Execute answers q over the documents of table whose encoded key starts
// with group (the partition key) then restPrefix (further leading key parts,
// possibly empty), reading only that group's index lists in the partition
// under prefix.
//
// Matches come in Options.Sort order: by the sort field's value (ascending,
// or descending as the exact reverse), ties by document key, then the
// matches without a value for the field, in key order; without a sort, in
// document key order. A page ends after Limit matches with a Next cursor
// when more follow; the next page starts strictly after the last match of
// the previous one, so documents that exist throughout a paging session
// (and keep their sort value) are returned exactly once.
//
// Errors are *problem.Error (Malformed) for a bad cursor, else storage
// errors.
func Execute(r Reader, prefix keys.Partition, table string, group, restPrefix []byte, q Op, o Options) (Result, error) {
	it, err := r.NewIter(prefix, prefix.End())
	if err != nil {
		return Result{}, err
	}
	res, err := ExecuteIter(it, prefix, table, group, restPrefix, q, o)
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	return res, err
}

// ExecuteIter is Execute reading through it, an iterator over the
// partition's keys that the caller owns (its bounds are left moved), so the
// caller can read the matching documents at the same point in time.
func ExecuteIter(it *storage.Iter, prefix keys.Partition, table string, group, restPrefix []byte, q Op, o Options) (Result, error) {
	var st start
	if o.Cursor != "" && !o.Count {
		c, err := decodeCursor(o.Cursor, o.Sort, cursorVersion)
		if err != nil {
			return Result{}, err
		}
		st = c.start(o.Sort.Desc)
	}
	e := &executor{
		it: it, prefix: prefix, table: table, group: group, restPrefix: restPrefix,
		ords: make(map[string]uint32, ordsHint), rests: make([]string, 0, ordsHint),
	}
	p, err := e.run(q, o, st, o.Limit)
	if err != nil {
		return Result{}, err
	}
	if o.Count {
		return Result{Count: p.count, Pending: e.pendingSeen, Dead: e.deadSeen}, nil
	}
	res := p.result(o.Sort, cursorVersion)
	res.Pending, res.Dead = e.pendingSeen, e.deadSeen
	return res, nil
}

// start is where the walk of one group begins: a cursor, or the global
// cursor of ExecuteAll seen from one group, turned into bounds. The zero
// start is the beginning.
type start struct {
	// missing: with a sort, the walk of the sort values is over; only the
	// documents without a value follow.
	missing bool
	// bound limits the sort walk, as the entry key after the sort field's
	// list (value then rest): ascending, entries at or after bound;
	// descending, entries before bound. Nil: the whole list.
	bound []byte
	// lo: in key order (no sort, or the documents without a sort value),
	// the smallest document key rest included. Nil: every one.
	lo []byte
}

// start returns where the page after the position c begins.
func (c cursor) start(desc bool) start {
	switch c.phase {
	case phaseSorted:
		b := append(slices.Clip(c.value), c.rest...)
		if !desc {
			b = append(b, 0) // the smallest key after value+rest
		}
		return start{bound: b}
	case phaseMissing:
		return start{missing: true, lo: append(slices.Clip(c.rest), 0)}
	}
	return start{lo: append(slices.Clip(c.rest), 0)}
}

// executor evaluates one query. Documents get dense ordinals in the order
// they are first met, so sets of documents are Roaring bitmaps.
type executor struct {
	it                *storage.Iter
	prefix            keys.Partition
	table             string
	group, restPrefix []byte

	ords     map[string]uint32 // document key rest -> ordinal
	rests    []string          // ordinal -> document key rest
	universe *roaring.Bitmap   // every document of the collection, once loaded

	// cut, set by ExecuteAll, reports that a position of the group (the
	// rest after the group) comes after every result its page keeps, so
	// it and every later one would be dropped: the sort walk stops there.
	// (A full page has more, as moreKnown then tells.)
	cut       func(c cursor) bool
	moreKnown *bool

	// budget, when positive, bounds the entries eval may read: past it,
	// overflow is set and the sets eval returns are incomplete (a query
	// whose matches are that many is answered by probing instead).
	budget, scanned int
	overflow        bool

	arena []byte // backs the strings of rests (see intern)

	// pending holds, for a probing walk (which cannot move the iterator
	// to read them when it needs them), the group's pending entries of
	// each text field the query reads; pendingSeen is the most pending
	// entries read in one list.
	pending     map[string]map[string][]byte // field -> document key rest -> value
	pendingSeen int
	// dead holds the dead postings of each text field read (see deadSet);
	// deadSeen is the most in one list.
	dead     map[string]map[string]struct{}
	deadSeen int
}

// read counts one entry read by eval; false once past the budget.
func (e *executor) read() bool {
	if e.budget <= 0 {
		return true
	}
	if e.scanned++; e.scanned > e.budget {
		e.overflow = true
		return false
	}
	return true
}

// reset readies the executor for another document group.
func (e *executor) reset(group []byte) {
	if !bytes.Equal(group, e.group) {
		// The pending entries and postings of another group.
		clear(e.pending)
		clear(e.dead)
	}
	e.group = group
	if len(e.ords) > 256 {
		e.ords = make(map[string]uint32) // clearing a large map costs its capacity
	} else {
		clear(e.ords)
	}
	clear(e.rests)
	e.rests = e.rests[:0]
	e.universe = nil
}

// loadPending reads the pending entries of every text field q reads into
// e.pending.
func (e *executor) loadPending(q Op) error {
	var field string
	switch q := q.(type) {
	case Equal:
		if q.Text {
			field = q.Field
		}
	case Prefix:
		if q.Text {
			field = q.Field
		}
	case Phrase:
		field = q.Field
	case Not:
		return e.loadPending(q.Op)
	case And:
		for _, o := range q {
			if err := e.loadPending(o); err != nil {
				return err
			}
		}
	case Or:
		for _, o := range q {
			if err := e.loadPending(o); err != nil {
				return err
			}
		}
	}
	if field == "" {
		return nil
	}
	if _, ok := e.pending[field]; ok {
		return nil
	}
	list := e.list(field)
	lower, upper := PendingSpan(list)
	lower = append(lower, e.restPrefix...)
	values := map[string][]byte{}
	e.it.SetBounds(lower, upper)
	for ok := e.it.First(); ok && bytes.HasPrefix(e.it.Key()[len(list)+1:], e.restPrefix); ok = e.it.Next() {
		values[string(e.it.Key()[len(list)+1:])] = slices.Clone(e.it.Value())
	}
	if err := e.it.Error(); err != nil {
		return err
	}
	if e.pending == nil {
		e.pending = make(map[string]map[string][]byte)
	}
	e.pending[field] = values
	e.pendingSeen = max(e.pendingSeen, len(values))
	return nil
}

// addPending adds to set the documents of field's pending entries whose
// value match accepts; with insert unset, only documents met before.
func (e *executor) addPending(set *roaring.Bitmap, field string, insert bool, match func(value []byte) (bool, error)) error {
	list := e.list(field)
	lower, upper := PendingSpan(list)
	lower = append(lower, e.restPrefix...)
	n := 0
	e.it.SetBounds(lower, upper)
	// Not counted against a gathering budget (e.read): a probing walk
	// would read them all too.
	for ok := e.it.First(); ok; ok = e.it.Next() {
		rest := e.it.Key()[len(list)+1:]
		if !bytes.HasPrefix(rest, e.restPrefix) {
			break
		}
		n++
		m, err := match(e.it.Value())
		if err != nil {
			return err
		}
		if !m {
			continue
		}
		if o, known := e.ord(rest, insert); known {
			set.Add(o)
		}
	}
	e.pendingSeen = max(e.pendingSeen, n)
	return e.it.Error()
}

// run evaluates q in the executor's group and returns at most limit
// matches (every one if limit <= 0) from st on, or just their number when
// o.Count is set.
func (e *executor) run(q Op, o Options, st start, limit int) (page, error) {
	probe := !o.Count && o.Sort.Field != "" && !o.Sort.Multi && limit > 0 && e.cut == nil && !st.missing && probeable(q)
	perResult, slack, gather := o.Knobs.budgets()
	if probe {
		// The matches are gathered the general way unless that reads more
		// than gatherBudget entries: then a probing walk answers, which
		// costs about the page, not the matches (a small mailbox is not
		// walked twice, once to size a list and once to answer).
		e.budget, e.scanned, e.overflow = gather*limit+slack, 0, false
	}
	set, err := e.eval(q, true)
	if probe {
		over := e.overflow
		e.budget, e.scanned, e.overflow = 0, 0, false
		if err == nil && over {
			e.reset(e.group)
			if err := e.loadPending(q); err != nil {
				return page{}, err
			}
			p, ok, err := e.probeSorted(q, o.Sort, st, newPage(limit), perResult*limit+slack)
			if err != nil || ok {
				return p, err
			}
			e.reset(e.group)
			set, err = e.eval(q, true)
		}
	}
	if err != nil {
		return page{}, err
	}
	if o.Count {
		return page{count: int(set.GetCardinality())}, nil
	}
	p := newPage(limit)
	if set.IsEmpty() {
		return p, nil
	}
	if o.Sort.Field == "" {
		ks, more := e.smallest(set, st.lo, limit)
		for _, k := range ks {
			p.add(cursor{phase: phaseKey, rest: []byte(k)})
		}
		p.more = more
		return p, nil
	}
	return e.sorted(set, o.Sort, st, p)
}

// ord returns the ordinal of a document, giving it one if insert is set.
func (e *executor) ord(rest []byte, insert bool) (uint32, bool) {
	if o, ok := e.ords[string(rest)]; ok {
		return o, true
	}
	if !insert {
		return 0, false
	}
	s := e.intern(rest)
	o := uint32(len(e.rests))
	e.ords[s] = o
	e.rests = append(e.rests, s)
	return o, true
}

// intern returns a string holding b, copied into the executor's arena: one
// allocation per few hundred documents met instead of one each. A chunk
// is never written again once a string points into it.
func (e *executor) intern(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if cap(e.arena)-len(e.arena) < len(b) {
		e.arena = make([]byte, 0, max(min(2*cap(e.arena), 16<<10), 512, len(b)))
	}
	start := len(e.arena)
	e.arena = append(e.arena, b...)
	return unsafe.String(&e.arena[start], len(b))
}

// scan calls fn with the value and document key rest of every entry of the
// collection in [lower, upper), a span inside the list starting at list.
func (e *executor) scan(list, lower, upper []byte, fn func(value, rest []byte) bool) error {
	if upper != nil && bytes.Compare(lower, upper) >= 0 {
		return nil
	}
	e.it.SetBounds(lower, upper)
	for ok := e.it.First(); ok && e.read(); ok = e.it.Next() {
		v := e.it.Key()[len(list):]
		if len(v) > 0 && (v[0] == tagSegment || v[0] == tagDead) {
			continue // their documents are read through their folded entries
		}
		n, err := valueLen(v)
		if err != nil {
			return err
		}
		if rest := v[n:]; bytes.HasPrefix(rest, e.restPrefix) && !fn(v[:n], rest) {
			break
		}
	}
	return e.it.Error()
}

// collect returns the documents with an entry in [lower, upper).
func (e *executor) collect(list, lower, upper []byte, insert bool) (*roaring.Bitmap, error) {
	set := roaring.New()
	err := e.scan(list, lower, upper, func(_, rest []byte) bool {
		if o, ok := e.ord(rest, insert); ok {
			set.Add(o)
		}
		return true
	})
	return set, err
}

// all returns (a copy of) every document of the collection, read from the
// document keys.
func (e *executor) all() (*roaring.Bitmap, error) {
	if e.universe == nil {
		base := e.prefix.Document(e.table, e.group)
		lower := append(slices.Clip(base), e.restPrefix...)
		e.universe = roaring.New()
		e.it.SetBounds(lower, keys.PrefixEnd(lower))
		for ok := e.it.First(); ok && e.read(); ok = e.it.Next() {
			o, _ := e.ord(e.it.Key()[len(base):], true)
			e.universe.Add(o)
		}
		if err := e.it.Error(); err != nil {
			return nil, err
		}
	}
	return e.universe.Clone(), nil
}

func (e *executor) list(field string) []byte { return e.prefix.Index(e.table, e.group, field) }

// eval returns the documents matching q. With insert unset, documents not
// met before are left out: the caller intersects with a set of known ones.
func (e *executor) eval(q Op, insert bool) (*roaring.Bitmap, error) {
	switch q := q.(type) {
	case All:
		return e.all()
	case Equal:
		list := e.list(q.Field)
		lower, ok := AppendValue(slices.Clip(list), q.Value)
		if !ok {
			return roaring.New(), nil
		}
		set, err := e.collect(list, lower, keys.PrefixEnd(lower), insert)
		if term, ok := q.Value.(string); ok && q.Text && err == nil {
			err = e.addPending(set, q.Field, insert, func(v []byte) (bool, error) {
				pos, err := pendingPositions(v, term)
				return pos != nil, err
			})
			if err == nil {
				lower, upper := segmentSpan(list, term, false)
				err = e.addPostings(set, q.Field, lower, upper, insert)
			}
		}
		return set, err
	case Prefix:
		list := e.list(q.Field)
		lower := appendStringPrefix(slices.Clip(list), q.Prefix)
		set, err := e.collect(list, lower, keys.PrefixEnd(lower), insert)
		if q.Text && err == nil {
			err = e.addPending(set, q.Field, insert, func(v []byte) (bool, error) { return pendingHasPrefix(v, q.Prefix) })
			if err == nil {
				lower, upper := segmentSpan(list, q.Prefix, true)
				err = e.addPostings(set, q.Field, lower, upper, insert)
			}
		}
		return set, err
	case Range:
		list := e.list(q.Field)
		lower, upper := list, keys.PrefixEnd(list)
		if q.Lower != nil {
			lower, _ = AppendValue(slices.Clip(list), q.Lower)
			if !q.LowerInclusive {
				lower = keys.PrefixEnd(lower)
			}
		}
		if q.Upper != nil {
			upper, _ = AppendValue(slices.Clip(list), q.Upper)
			if q.UpperInclusive {
				upper = keys.PrefixEnd(upper)
			}
		}
		return e.collect(list, lower, upper, insert)
	case Phrase:
		return e.phrase(q, insert)
	case Not:
		set, err := e.all() // first: every document gets its ordinal
		if err != nil {
			return nil, err
		}
		sub, err := e.eval(q.Op, false)
		if err != nil {
			return nil, err
		}
		set.AndNot(sub)
		return set, nil
	case Or:
		set := roaring.New()
		for _, sub := range q {
			s, err := e.eval(sub, insert)
			if err != nil {
				return nil, err
			}
			set.Or(s)
		}
		return set, nil
	case And:
		return e.and(q, insert)
	}
	return nil, errors.New("index: unknown query operator")
}

// and evaluates the positive operands first, the likely most selective
// first: later ones only need to look up documents already met. Negated
// operands are subtracted, which needs no complement.
func (e *executor) and(q And, insert bool) (*roaring.Bitmap, error) {
	var pos, neg []Op
	for _, sub := range q {
		if n, ok := sub.(Not); ok {
			neg = append(neg, n.Op)
		} else {
			pos = append(pos, sub)
		}
	}
	slices.SortStableFunc(pos, func(a, b Op) int { return cmp.Compare(cost(a), cost(b)) })
	var set *roaring.Bitmap
	var err error
	if len(pos) == 0 {
		if set, err = e.all(); err != nil {
			return nil, err
		}
	}
	for i, sub := range pos {
		s, err := e.eval(sub, insert && i == 0)
		if err != nil {
			return nil, err
		}
		if set == nil {
			set = s
		} else {
			set.And(s)
		}
		if set.IsEmpty() {
			return set, nil
		}
	}
	for _, sub := range neg {
		s, err := e.eval(sub, false)
		if err != nil {
			return nil, err
		}
		if set.AndNot(s); set.IsEmpty() {
			return set, nil
		}
	}
	return set, nil
}

// cost ranks operators by how many entries they are likely to read.
func cost(q Op) int {
	switch q := q.(type) {
	case Phrase:
		return 0
	case Equal:
		if _, ok := q.Value.(string); ok {
			return 1 // terms and string values: usually selective
		}
		return 2 // booleans and numbers: often not
	case Prefix:
		return 3
	case Range:
		return 4
	case And:
		return 5
	case Or:
		return 6
	}
	return 7
}

// phrase keeps, term after term, the start positions at which the phrase
// so far occurs in each document.
func (e *executor) phrase(q Phrase, insert bool) (*roaring.Bitmap, error) {
	list := e.list(q.Field)
	var starts map[uint32][]int
	var buf []int
	for i, term := range q.Terms {
		next := make(map[uint32][]int)
		lower := keys.AppendString(slices.Clip(list), term)
		err := e.scan(list, lower, keys.PrefixEnd(lower), func(_, rest []byte) bool {
			o, ok := e.ord(rest, insert && i == 0)
			if !ok {
				return true
			}
			if i == 0 {
				next[o] = decodePositions(nil, e.it.Value())
				return true
			}
			s, ok := starts[o]
			if !ok {
				return true
			}
			buf = decodePositions(buf[:0], e.it.Value())
			var kept []int
			for _, p := range s {
				if _, found := slices.BinarySearch(buf, p+i); found {
					kept = append(kept, p)
				}
			}
			if len(kept) > 0 {
				next[o] = kept
			}
			return true
		})
		if err != nil {
			return nil, err
		}
		if starts = next; len(starts) == 0 {
			break
		}
	}
	set := roaring.New()
	for o := range starts {
		set.Add(o)
	}
	err := e.addPending(set, q.Field, insert, func(v []byte) (bool, error) { return pendingPhrase(v, q.Terms) })
	if err != nil {
		return nil, err
	}
	folded, err := e.segmentPhrase(q.Field, q.Terms)
	for _, rest := range folded {
		if o, ok := e.ord([]byte(rest), insert); ok {
			set.Add(o)
		}
	}
	return set, err
}

// ordsHint sizes a new executor's ordinals for a small collection's
// matches (a 100-message mailbox's inbox): growing the map there from
// empty was a sixth of the query's time (BenchmarkQueryInbox).
const ordsHint = 128

// newPage returns an empty page of limit results (every match if limit <=
// 0).
func newPage(limit int) page {
	p := page{limit: limit}
	if limit > 0 {
		p.hits = make([]cursor, 0, min(limit, 1024))
	}
	return p
}

// page gathers one page of results with their positions.
type page struct {
	limit int
	hits  []cursor
	more  bool
	count int // Options.Count
}

// add appends a result, or reports false (and notes that more follow) once
// the page is full.
func (p *page) add(c cursor) bool {
	if p.limit > 0 && len(p.hits) == p.limit {
		p.more = true
		return false
	}
	p.hits = append(p.hits, c)
	return true
}

// result returns the page's keys (the positions' rests) and the cursor of
// the next page, made with the given version.
func (p *page) result(s Sort, version byte) Result {
	r := Result{Keys: make([][]byte, len(p.hits))}
	for i, h := range p.hits {
		r.Keys[i] = h.rest
	}
	if p.more && len(p.hits) > 0 {
		r.Next = p.hits[len(p.hits)-1].encode(s, version)
	}
	return r
}

// sorted walks the sort field's list in value order, keeping the matches,
// then appends the matches without a value in key order.
func (e *executor) sorted(set *roaring.Bitmap, s Sort, st start, p page) (page, error) {
	list := e.list(s.Field)
	// have collects the matches that have a sort value, when the walk
	// covers the whole list; else it is computed after.
	var have *roaring.Bitmap
	if !st.missing {
		var at []byte // the bound's entry key
		if st.bound != nil {
			at = append(slices.Clip(list), st.bound...)
		}
		lower, upper := list, keys.PrefixEnd(list)
		whole := at == nil || s.Multi
		if !whole {
			if s.Desc {
				upper = at
			} else {
				lower = at
			}
		}
		seen := roaring.New()
		e.it.SetBounds(lower, upper)
		ok := e.it.First()
		if s.Desc {
			ok = e.it.Last()
		}
		for ; ok; ok = step(e.it, s.Desc) {
			k := e.it.Key()
			v := k[len(list):]
			n, err := valueLen(v)
			if err != nil {
				return page{}, err
			}
			o, known := e.ord(v[n:], false)
			if !known || !set.Contains(o) || !seen.CheckedAdd(o) {
				continue // not a match, or an array's later value
			}
			if at != nil && s.Multi {
				if d := bytes.Compare(k, at); (d < 0 && !s.Desc) || (d >= 0 && s.Desc) {
					continue // before the start
				}
			}
			if e.cut != nil && e.cut(cursor{phase: phaseSorted, value: v[:n], rest: []byte(e.rests[o])}) {
				p.more = true
				return p, nil
			}
			if !p.add(cursor{phase: phaseSorted, value: slices.Clone(v[:n]), rest: []byte(e.rests[o])}) {
				return p, nil
			}
		}
		if err := e.it.Error(); err != nil {
			return page{}, err
		}
		if whole {
			have = seen
		}
	}
	if e.cut != nil && *e.moreKnown && e.cut(cursor{phase: phaseMissing, rest: []byte{}}) {
		// Every match without a value (the first at rest "" or after)
		// would be dropped, and that more follow is known.
		return p, nil
	}
	if have == nil {
		var err error
		if have, err = e.collect(list, list, keys.PrefixEnd(list), false); err != nil {
			return page{}, err
		}
	}
	missing := roaring.AndNot(set, have)
	var lo []byte
	if st.missing {
		lo = st.lo
	}
	n := 0
	if p.limit > 0 {
		if n = p.limit - len(p.hits); n == 0 {
			// The page is full; the matches without a value follow it.
			p.more = !missing.IsEmpty()
			return p, nil
		}
	}
	ks, more := e.smallest(missing, lo, n)
	for _, k := range ks {
		p.add(cursor{phase: phaseMissing, rest: []byte(k)})
	}
	p.more = p.more || more
	return p, nil
}

func step(it *storage.Iter, desc bool) bool {
	if desc {
		return it.Prev()
	}
	return it.Next()
}

// smallest returns, in order, the n smallest document keys of set at or
// after lo (every one if n <= 0), and whether more remain.
func (e *executor) smallest(set *roaring.Bitmap, lo []byte, n int) ([]string, bool) {
	h := &maxHeap{}
	more := false
	for it := set.Iterator(); it.HasNext(); {
		k := e.rests[it.Next()]
		if k < string(lo) {
			continue
		}
		if n <= 0 || h.Len() < n {
			heap.Push(h, k)
			continue
		}
		more = true
		if k < (*h)[0] {
			(*h)[0] = k
			heap.Fix(h, 0)
		}
	}
	out := []string(*h)
	slices.Sort(out)
	return out, more
}

// maxHeap keeps the n smallest keys seen, the largest on top.
type maxHeap []string

func (h maxHeap) Len() int           { return len(h) }
func (h maxHeap) Less(i, j int) bool { return h[i] > h[j] }
func (h maxHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *maxHeap) Push(x any)        { *h = append(*h, x.(string)) }
func (h *maxHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
