package index

import (
	"bytes"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/doppio-db/doppio/internal/keys"
)

// Probing: a sorted query with a small limit, whose predicate is made of
// equalities (attribute values, text terms) under AND, OR and NOT, does not
// need the set of every match. It walks the sort field's list in order and
// decides each document by point lookups of its entries, stopping when the
// page is full: the cost follows the page, not the size of the matches (the
// inbox of a 50,000-message mailbox sorted by date). A walk that examines
// too many documents without filling the page gives up, and the query runs
// the general way.

// probeable reports whether q can be decided for one document by lookups.
func probeable(q Op) bool {
	switch q := q.(type) {
	case All, Equal:
		return true
	case And:
		return !slices.ContainsFunc(q, func(o Op) bool { return !probeable(o) })
	case Or:
		return !slices.ContainsFunc(q, func(o Op) bool { return !probeable(o) })
	case Not:
		return probeable(q.Op)
	}
	return false
}

// A probing walk may examine probeBudget documents per result asked for,
// plus probeSlack, before it gives up.
const probeBudget, probeSlack = 64, 256

// A sorted query that would read more than gatherBudget entries per result
// asked for, plus probeSlack, to gather its matches is probed instead.
const gatherBudget = 4

// TestingKnobs let a test make every sorted, limited query probe, and
// many probes give up midway, with tiny budgets.
type TestingKnobs struct {
	// ProbeBudget, ProbeSlack and GatherBudget replace probeBudget,
	// probeSlack and gatherBudget, all three, zeros included.
	ProbeBudget, ProbeSlack, GatherBudget int
}

// budgets is the query's probe budget, slack and gather budget: the
// knobs' when set, else production's.
func (k *TestingKnobs) budgets() (probe, slack, gather int) {
	if k == nil {
		return probeBudget, probeSlack, gatherBudget
	}
	return k.ProbeBudget, k.ProbeSlack, k.GatherBudget
}

// probeSorted fills p by walking the sort list from st, examining at most
// budget documents. ok is false when
// the walk gave up or reached the list's end before the page was full (the
// matches without a sort value, which come last, are not known here); the
// caller then runs the query the general way.
func (e *executor) probeSorted(q Op, s Sort, st start, p page, budget int) (_ page, ok bool, err error) {
	// Same point in time; the clone takes e.it's current bounds, so it is
	// given the partition's.
	probe, err := e.it.Clone(pebble.CloneOptions{IterOptions: &pebble.IterOptions{LowerBound: e.prefix, UpperBound: e.prefix.End()}})
	if err != nil {
		return p, false, err
	}
	defer func() {
		if cerr := probe.Close(); err == nil {
			err = cerr
		}
	}()
	list := e.list(s.Field)
	lower, upper := list, keys.PrefixEnd(list)
	if st.bound != nil {
		at := append(slices.Clip(list), st.bound...)
		if s.Desc {
			upper = at
		} else {
			lower = at
		}
	}
	e.it.SetBounds(lower, upper)
	more := e.it.First()
	if s.Desc {
		more = e.it.Last()
	}
	var key []byte
	for ; more; more = step(e.it, s.Desc) {
		if budget--; budget < 0 {
			return p, false, nil
		}
		v := e.it.Key()[len(list):]
		n, err := valueLen(v)
		if err != nil {
			return p, false, err
		}
		rest := v[n:]
		if !bytes.HasPrefix(rest, e.restPrefix) {
			continue
		}
		match, err := e.decide(probe, q, rest, &key)
		if err != nil {
			return p, false, err
		}
		if match && !p.add(cursor{phase: phaseSorted, value: slices.Clone(v[:n]), rest: slices.Clone(rest)}) {
			return p, true, nil
		}
	}
	return p, false, e.it.Error()
}

// decide reports whether the document rest matches q, by looking up its
// entries through it. key is scratch space.
func (e *executor) decide(it *pebble.Iterator, q Op, rest []byte, key *[]byte) (bool, error) {
	switch q := q.(type) {
	case All:
		return true, nil
	case Equal:
		if term, ok := q.Value.(string); ok && q.Text {
			if v, ok := e.pending[q.Field][string(rest)]; ok {
				pos, err := pendingPositions(v, term)
				return pos != nil, err
			}
			// A folded document: its folded entry holds its terms.
			k := append(append(append((*key)[:0], e.list(q.Field)...), tagFolded), rest...)
			*key = k
			if it.SeekGE(k) && bytes.Equal(it.Key(), k) {
				_, v, err := foldedValue(it.Value())
				if err != nil {
					return false, err
				}
				pos, err := pendingPositions(v, term)
				return pos != nil, err
			}
			if err := it.Error(); err != nil {
				return false, err
			}
		}
		k, ok := AppendValue(append((*key)[:0], e.list(q.Field)...), q.Value)
		if !ok {
			return false, nil
		}
		k = append(k, rest...)
		*key = k
		found := it.SeekGE(k) && bytes.Equal(it.Key(), k)
		return found, it.Error()
	case And:
		for _, o := range q {
			if m, err := e.decide(it, o, rest, key); err != nil || !m {
				return false, err
			}
		}
		return true, nil
	case Or:
		for _, o := range q {
			if m, err := e.decide(it, o, rest, key); err != nil || m {
				return m, err
			}
		}
		return false, nil
	case Not:
		m, err := e.decide(it, q.Op, rest, key)
		return !m, err
	}
	return false, nil
}
