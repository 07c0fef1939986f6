package index

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"

	"github.com/doppio-db/doppio/internal/keys"
)

// The tags of a segment's keys within a text field's list, after the term
// entries (tagString); the package doc ("Segments") gives the layout and
// how folded entries, posting blocks and dead postings answer together.
const (
	tagFolded  byte = 0x03
	tagSegment byte = 0x04
	tagDead    byte = 0x05
)

// segIDLen is the length of a segment id in keys and folded values.
const segIDLen = 8

var errBadSegment = errors.New("index: malformed posting block")

// errBudget stops a walk of posting blocks past the gathering budget.
var errBudget = errors.New("index: over the gathering budget")

// foldedKey returns the key of the folded entry of document rest in the
// text list starting at list.
func foldedKey(list, rest []byte) []byte {
	k := make([]byte, 0, len(list)+1+len(rest))
	return append(append(append(k, list...), tagFolded), rest...)
}

// segmentSpan returns the span of the posting blocks of term in the list
// (prefix set: of every term starting with term).
func segmentSpan(list []byte, term string, prefix bool) (lower, upper []byte) {
	b := append(slices.Clip(list), tagSegment)
	if prefix {
		lower = appendStringPrefix(b, term)
	} else {
		lower = keys.AppendString(b, term)
	}
	return lower, keys.PrefixEnd(lower)
}

// deadSpan returns the span of the list's dead postings.
func deadSpan(list []byte) (lower, upper []byte) {
	lower = append(slices.Clip(list), tagDead)
	return lower, append(slices.Clip(list), tagDead+1)
}

// FoldSegment returns the entries that fold the pending entries refs
// (whose current values are values, in the same order; a nil value is
// skipped) into segment seg of their lists: per list, a posting block per
// term and a folded entry per document, sorted by key. The pending keys
// are the caller's to delete. seg must be new to every list it is used in.
func FoldSegment(seg uint64, refs []PendingRef, values [][]byte) ([]Entry, error) {
	var id [segIDLen]byte
	binary.BigEndian.PutUint64(id[:], seg)
	type doc struct{ rest, value []byte }
	byList := map[string][]doc{}
	var lists []string
	for i, ref := range refs {
		if values[i] == nil {
			continue
		}
		l := string(ref.Key[:ref.list])
		if _, ok := byList[l]; !ok {
			lists = append(lists, l)
		}
		byList[l] = append(byList[l], doc{ref.Rest(), values[i]})
	}
	var out []Entry
	for _, l := range lists {
		docs := byList[l]
		slices.SortFunc(docs, func(a, b doc) int { return bytes.Compare(a.rest, b.rest) })
		postings := map[string][]byte{}
		for _, d := range docs {
			v := make([]byte, 0, segIDLen+len(d.value))
			v = append(append(v, id[:]...), d.value...)
			out = append(out, Entry{Key: foldedKey([]byte(l), d.rest), Value: v})
			err := eachPendingTerm(d.value, func(term, pos []byte) bool {
				postings[string(term)] = appendPair(postings[string(term)], d.rest, pos)
				return true
			})
			if err != nil {
				return nil, err
			}
		}
		for term, p := range postings {
			k, _ := segmentSpan([]byte(l), term, false)
			out = append(out, Entry{Key: append(k, id[:]...), Value: p})
		}
	}
	slices.SortFunc(out, func(a, b Entry) int { return bytes.Compare(a.Key, b.Key) })
	return out, nil
}

// eachPosting calls fn with every posting of a block (see appendPair), in
// order, until fn fails.
func eachPosting(block []byte, fn func(rest, positions []byte) error) error {
	var ferr error
	err := eachPair(block, errBadSegment, func(rest, pos []byte) bool {
		ferr = fn(rest, pos)
		return ferr == nil
	})
	if ferr != nil {
		return ferr
	}
	return err
}

// foldedValue splits a folded entry's value into the id of the segment
// holding the document's postings and the document's pending value.
func foldedValue(v []byte) (seg, pending []byte, err error) {
	if len(v) < segIDLen {
		return nil, nil, errBadSegment
	}
	return v[:segIDLen], v[segIDLen:], nil
}

// deadKey returns the key of the dead posting that hides document rest in
// segment seg of the list.
func deadKey(list, seg, rest []byte) []byte {
	k := make([]byte, 0, len(list)+1+len(seg)+len(rest))
	return append(append(append(append(k, list...), tagDead), seg...), rest...)
}

// FoldedReader reads a key of the partition: the value, or nil when the key
// is absent.
type FoldedReader func(key []byte) ([]byte, error)

// deadSet returns the dead postings of field's list in the executor's
// group, as segment id + rest, read once per group.
func (e *executor) deadSet(field string) (map[string]struct{}, error) {
	if d, ok := e.dead[field]; ok {
		return d, nil
	}
	list := e.list(field)
	lower, upper := deadSpan(list)
	var d map[string]struct{}
	e.it.SetBounds(lower, upper)
	for ok := e.it.First(); ok; ok = e.it.Next() {
		if d == nil {
			d = map[string]struct{}{}
		}
		d[string(e.it.Key()[len(lower):])] = struct{}{}
	}
	if err := e.it.Error(); err != nil {
		return nil, err
	}
	if e.dead == nil {
		e.dead = map[string]map[string]struct{}{}
	}
	e.dead[field] = d
	e.deadSeen = max(e.deadSeen, len(d))
	return d, nil
}

// postings calls fn with the live postings of the collection in the
// posting blocks of field in [lower, upper) (see segmentSpan): the
// document key rest and the positions, in block order. Each posting counts
// against a gathering budget (see executor.read), as a term entry does: a
// probing walk decides a folded document by its folded entry instead.
func (e *executor) postings(field string, lower, upper []byte, fn func(rest, positions []byte) error) error {
	dead, err := e.deadSet(field)
	if err != nil {
		return err
	}
	var dk []byte
	e.it.SetBounds(lower, upper)
	for ok := e.it.First(); ok; ok = e.it.Next() {
		k := e.it.Key()
		if len(k) < len(lower)+segIDLen {
			return errBadSegment
		}
		seg := k[len(k)-segIDLen:]
		err := eachPosting(e.it.Value(), func(rest, pos []byte) error {
			if !bytes.HasPrefix(rest, e.restPrefix) {
				return nil
			}
			if !e.read() {
				return errBudget
			}
			if dead != nil {
				dk = append(append(dk[:0], seg...), rest...)
				if _, gone := dead[string(dk)]; gone {
					return nil
				}
			}
			return fn(rest, pos)
		})
		if err == errBudget {
			return nil // e.overflow is set
		}
		if err != nil {
			return err
		}
	}
	return e.it.Error()
}

// addPostings adds to set the documents with a live posting of field in
// [lower, upper); with insert unset, only documents met before.
func (e *executor) addPostings(set interface{ Add(uint32) }, field string, lower, upper []byte, insert bool) error {
	return e.postings(field, lower, upper, func(rest, _ []byte) error {
		if o, known := e.ord(rest, insert); known {
			set.Add(o)
		}
		return nil
	})
}

// segmentPhrase returns the folded documents of the collection in which
// the terms occur at consecutive positions.
func (e *executor) segmentPhrase(field string, terms []string) ([]string, error) {
	list := e.list(field)
	var starts map[string][]int
	var buf []int
	for i, term := range terms {
		next := map[string][]int{}
		lower, upper := segmentSpan(list, term, false)
		err := e.postings(field, lower, upper, func(rest, pos []byte) error {
			if i == 0 {
				next[string(rest)] = decodePositions(nil, pos)
				return nil
			}
			s, ok := starts[string(rest)]
			if !ok {
				return nil
			}
			buf = decodePositions(buf[:0], pos)
			var kept []int
			for _, p := range s {
				if _, found := slices.BinarySearch(buf, p+i); found {
					kept = append(kept, p)
				}
			}
			if len(kept) > 0 {
				next[string(rest)] = kept
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if starts = next; len(starts) == 0 {
			return nil, nil
		}
	}
	out := make([]string, 0, len(starts))
	for r := range starts {
		out = append(out, r)
	}
	return out, nil
}
