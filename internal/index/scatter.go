// This file answers a query that names no partition key: ExecuteAll walks
// every document group of a partition, and Merge joins the pages of
// several partitions into one, with a cursor that continues on each.

package index

import (
	"bytes"
	"cmp"
	"container/heap"
	"slices"

	"github.com/doppio-db/doppio/internal/keys"
)

// ExecuteAll answers q over every document group of table in the partition
// under prefix: the query of a request without a partition key. The groups
// are the distinct partition keys among the table's document keys; each is
// evaluated on its own index lists as by Execute, and the matches merged.
//
// Keys are whole encoded document keys (partition key first) and the order
// is Execute's extended to the whole key: by sort value (ascending, or
// descending as the exact reverse), ties by whole key, then the matches
// without a value in whole key order; without a sort, whole key order.
// SortValues hold the sort value of each key, for Merge. Next is a cursor
// for ExecuteAll (not Execute) with the same query and sort, on this
// partition or any other: the next page starts strictly after the last
// result, so documents that exist throughout a paging session (and keep
// their sort value) come exactly once. Count sums the groups' counts.
//
// Every group is read through one iterator, at one point in time. No group
// is asked for more than Limit matches after the cursor; without a sort (or
// once the cursor is past every sort value) groups are visited in key
// order from the cursor's own and the walk stops as soon as the page is
// known complete.
func ExecuteAll(r Reader, prefix keys.Partition, table string, q Op, o Options) (Result, error) {
	var c *cursor
	if o.Cursor != "" && !o.Count {
		cur, err := decodeCursor(o.Cursor, o.Sort, cursorVersionAll)
		if err != nil {
			return Result{}, err
		}
		c = &cur
	}
	it, err := r.NewIter(prefix, prefix.End())
	if err != nil {
		return Result{}, err
	}
	e := &executor{it: it, prefix: prefix, table: table, ords: make(map[string]uint32, ordsHint), rests: make([]string, 0, ordsHint)}
	m := newMerger(o.Sort, o.Limit)
	if o.Count {
		err = e.groups(nil, func(group []byte) (bool, error) {
			e.reset(group)
			p, err := e.run(q, o, start{}, 0)
			m.count += p.count
			return true, err
		})
	} else {
		err = e.allGroups(q, o, c, m)
	}
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Result{}, err
	}
	if o.Count {
		return Result{Count: m.count}, nil
	}
	return m.result(), nil
}

// allGroups offers the matches of every group after c to m.
func (e *executor) allGroups(q Op, o Options, c *cursor, m *merger) error {
	var from, cg []byte // the first group to visit; the cursor's group
	// inKeyOrder: the rest of the order is by whole key, so groups come in
	// key order and those before the cursor's have nothing left.
	inKeyOrder := o.Sort.Field == ""
	if c != nil {
		n, _ := valueLen(c.rest) // checked by decodeCursor
		cg = c.rest[:n]
		if inKeyOrder = inKeyOrder || c.phase == phaseMissing; inKeyOrder {
			from = cg
		}
	}
	if !inKeyOrder {
		var buf []byte
		e.moreKnown = &m.more
		e.cut = func(h cursor) bool {
			if !m.full() {
				return false
			}
			buf = append(append(buf[:0], e.group...), h.rest...)
			h.rest = buf
			return m.compare(h, m.hits[0]) > 0
		}
	}
	return e.groups(from, func(group []byte) (bool, error) {
		st, skip := groupStart(c, cg, o.Sort, group)
		if skip {
			return true, nil
		}
		e.reset(group)
		limit := o.Limit
		if inKeyOrder && limit > 0 {
			// This group's matches follow every one kept: it only needs to
			// fill the page, or once full, tell whether more follow.
			if limit = max(1, o.Limit-len(m.hits)); m.full() {
				p, err := e.run(q, o, st, 1)
				if len(p.hits) > 0 {
					m.more = true
				}
				return !m.more, err
			}
		}
		p, err := e.run(q, o, st, limit)
		if err != nil {
			return false, err
		}
		for _, h := range p.hits {
			h.rest = append(slices.Clip(group), h.rest...)
			if !m.offer(h) {
				break // the group's later matches come later still
			}
		}
		if p.more {
			m.more = true
		}
		return !(inKeyOrder && m.more), nil
	})
}

// groups calls fn with the encoded partition key of every document group
// of the table, in key order, starting at the group from (nil: the first),
// until fn reports false. It seeks past each group, so a group costs one
// seek however many documents it holds.
func (e *executor) groups(from []byte, fn func(group []byte) (bool, error)) error {
	tp := e.prefix.Table(e.table)
	end := keys.PrefixEnd(tp)
	lower := append(slices.Clip(tp), from...)
	for {
		e.it.SetBounds(lower, end)
		if !e.it.First() {
			return e.it.Error()
		}
		k := e.it.Key()[len(tp):]
		n, err := valueLen(k)
		if err != nil {
			return err
		}
		group := slices.Clone(k[:n])
		lower = keys.PrefixEnd(append(slices.Clip(tp), group...))
		if ok, err := fn(group); err != nil || !ok {
			return err
		}
	}
}

// groupStart translates the global cursor c, whose position is in group
// cg, into where the walk of group starts, or reports that group has
// nothing after c.
//
// In the sorted phase c is (value v, group cg, rest r): group cg resumes
// after (v, r); a group before cg comes before cg among the documents of
// value v, so it resumes after every entry of v ascending and at v
// inclusive descending: in both directions, at the bound just past v's
// entries. A group after cg is the mirror: the bound just before them. In
// key order (no sort, or the documents without a sort value) the groups
// before cg are done, cg resumes after r, and later groups start at their
// beginning (of that phase).
func groupStart(c *cursor, cg []byte, s Sort, group []byte) (st start, skip bool) {
	if c == nil {
		return start{}, false
	}
	d := bytes.Compare(group, cg)
	if d == 0 {
		return cursor{phase: c.phase, value: c.value, rest: c.rest[len(cg):]}.start(s.Desc), false
	}
	if c.phase == phaseSorted {
		if d < 0 {
			return start{bound: keys.PrefixEnd(c.value)}, false
		}
		return start{bound: c.value}, false
	}
	if d < 0 {
		return start{}, true
	}
	return start{missing: c.phase == phaseMissing}, false
}

// Merge merges pages of the same query over different partitions, each an
// ExecuteAll result for the same Options (sort, limit and cursor), into
// one page of at most limit keys (every one if limit <= 0) in the order of
// ExecuteAll, with a Next cursor that continues on every partition: pass it
// to ExecuteAll of each. Count is the sum of the pages' counts. Pages must
// keep their SortValues; partitions hold disjoint document groups.
func Merge(s Sort, limit int, pages ...Result) Result {
	m := newMerger(s, limit)
	for _, p := range pages {
		m.count += p.Count
		if p.Next != "" {
			m.more = true // that partition alone has more than limit left
		}
		for i, k := range p.Keys {
			h := cursor{phase: phaseKey, rest: k}
			if s.Field != "" {
				h.phase = phaseMissing
				if i < len(p.SortValues) && p.SortValues[i] != nil {
					h.phase, h.value = phaseSorted, p.SortValues[i]
				}
			}
			if !m.offer(h) {
				break
			}
		}
	}
	r := m.result()
	r.Count = m.count
	return r
}

// merger keeps the first limit positions (whole keys) offered, in global
// order, as a heap with the last on top.
type merger struct {
	s     Sort
	limit int
	hits  []cursor
	more  bool
	count int
}

func newMerger(s Sort, limit int) *merger { return &merger{s: s, limit: limit} }

// compare orders positions whose rests are whole keys.
func (m *merger) compare(a, b cursor) int {
	if a.phase != b.phase { // phaseSorted before phaseMissing
		return cmp.Compare(a.phase, b.phase)
	}
	if a.phase != phaseSorted {
		return bytes.Compare(a.rest, b.rest)
	}
	c := cmp.Or(bytes.Compare(a.value, b.value), bytes.Compare(a.rest, b.rest))
	if m.s.Desc {
		return -c
	}
	return c
}

func (m *merger) full() bool { return m.limit > 0 && len(m.hits) == m.limit }

// offer keeps h if it is among the first limit, noting when a position is
// dropped; it reports false when h itself is dropped: then so would be
// anything after it.
func (m *merger) offer(h cursor) bool {
	if !m.full() {
		if m.limit > 0 {
			heap.Push(m, h)
		} else {
			m.hits = append(m.hits, h)
		}
		return true
	}
	m.more = true
	if m.compare(h, m.hits[0]) >= 0 {
		return false
	}
	m.hits[0] = h
	heap.Fix(m, 0)
	return true
}

func (m *merger) Len() int           { return len(m.hits) }
func (m *merger) Less(i, j int) bool { return m.compare(m.hits[i], m.hits[j]) > 0 }
func (m *merger) Swap(i, j int)      { m.hits[i], m.hits[j] = m.hits[j], m.hits[i] }
func (m *merger) Push(x any)         { m.hits = append(m.hits, x.(cursor)) }
func (m *merger) Pop() any {
	x := m.hits[len(m.hits)-1]
	m.hits = m.hits[:len(m.hits)-1]
	return x
}

// result returns the kept positions in order, with a cursor after the last
// when more follow.
func (m *merger) result() Result {
	slices.SortFunc(m.hits, m.compare)
	r := Result{Keys: make([][]byte, len(m.hits))}
	if m.s.Field != "" {
		r.SortValues = make([][]byte, len(m.hits))
	}
	for i, h := range m.hits {
		r.Keys[i] = h.rest
		if h.phase == phaseSorted {
			r.SortValues[i] = h.value
		}
	}
	if m.more && len(m.hits) > 0 {
		r.Next = m.hits[len(m.hits)-1].encode(m.s, cursorVersionAll)
	}
	return r
}
