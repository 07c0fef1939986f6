package index

import (
	"encoding/binary"
	"errors"
	"slices"

	"github.com/doppio-db/doppio/internal/keys"
)

// The pending form of a text field's entries. The write path (Diff) writes
// one entry per document and text field, holding every term with its
// positions, instead of one entry per term: what an insert writes grows
// with its fields, not its words. Queries read a collection's pending
// entries beside its term lists and segments, one value per document:
// cheaper than the term lists' keys for a few, dearer as they pile up, so
// the partition folds a group's pending entries into a segment
// (PendingKeys, FoldSegment) once it has some hundred.

// PendingSpan returns the span [start, end) of the pending entries of the
// text field whose list starts at list: each is start followed by the
// document key rest, its value the document's terms (see Fold). The span
// lies inside the list, before every term, so a scan of the whole list
// (field:*) and the removal of a dropped index include it.
func PendingSpan(list []byte) (start, end []byte) {
	start = append(slices.Clip(list), tagPending)
	return start, append(slices.Clip(list), tagPending+1)
}

// termEntries returns the final-form entries (one per term, sorted by key) of
// the pending entry of document rest in the text list starting at list,
// whose value is value.
func termEntries(list, rest, value []byte) ([]Entry, error) {
	n, size := 0, 0
	err := eachPendingTerm(value, func(term, positions []byte) bool {
		n++
		size += len(list) + len(term) + 4 + len(rest) + len(positions)
		return true
	})
	if err != nil {
		return nil, err
	}
	// Every key and value is carved from one buffer.
	out := make([]Entry, 0, n)
	buf := make([]byte, 0, size)
	eachPendingTerm(value, func(term, positions []byte) bool {
		start := len(buf)
		buf = append(keys.AppendString(append(buf, list...), string(term)), rest...)
		key := buf[start:len(buf):len(buf)]
		start = len(buf)
		buf = append(buf, positions...)
		out = append(out, Entry{Key: key, Value: buf[start:len(buf):len(buf)]})
		return true
	})
	return out, nil
}

// eachPendingTerm calls fn with every term of a pending entry's value, in
// order, and its encoded positions, until fn reports false.
//
// The value is, for every distinct term in byte order: uvarint length,
// the term, uvarint length, the positions (uvarint deltas, as the value
// of a term's entry).
func eachPendingTerm(value []byte, fn func(term, positions []byte) bool) error {
	return eachPair(value, errBadPending, fn)
}

// eachPair calls fn with every pair of length-prefixed byte strings (uvarint
// length, bytes, uvarint length, bytes) in b, in order, until fn reports
// false; a malformed pair ends it with bad. A pending entry's value is such
// pairs (term, positions), and so is a posting block (rest, positions).
func eachPair(b []byte, bad error, fn func(first, second []byte) bool) error {
	for len(b) > 0 {
		first, n := pendingBytes(b)
		if n <= 0 {
			return bad
		}
		b = b[n:]
		second, n := pendingBytes(b)
		if n <= 0 {
			return bad
		}
		b = b[n:]
		if !fn(first, second) {
			return nil
		}
	}
	return nil
}

// appendPair appends a pair that eachPair reads.
func appendPair(dst, first, second []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(first)))
	dst = append(dst, first...)
	dst = binary.AppendUvarint(dst, uint64(len(second)))
	return append(dst, second...)
}

var errBadPending = errors.New("index: malformed pending entry")

func pendingBytes(b []byte) ([]byte, int) {
	l, n := binary.Uvarint(b)
	if n <= 0 || l > uint64(len(b)-n) {
		return nil, 0
	}
	return b[n : n+int(l)], n + int(l)
}

// PendingRef is the key of one pending entry.
type PendingRef struct {
	Key  []byte
	list int // length of its list's prefix in Key
}

// PendingRef returns the reference of a pending entry (see Pending).
func (e Entry) PendingRef() PendingRef { return PendingRef{Key: e.Key, list: e.pending} }

// Rest is the key rest of the document the entry belongs to.
func (p PendingRef) Rest() []byte { return p.Key[p.list+1:] }

// PendingKeys returns the keys of at most limit pending entries of the
// document group group of table, in its text fields fields, and whether
// more remain. A fold reads them, takes the documents' latches, then
// reads each value again and writes its Fold and the key's deletion in
// one batch.
func PendingKeys(r Reader, prefix keys.Partition, table string, group []byte, fields []string, limit int) (refs []PendingRef, more bool, err error) {
	for _, field := range fields {
		list := prefix.Index(table, group, field)
		lower, upper := PendingSpan(list)
		it, err := r.NewIter(lower, upper)
		if err != nil {
			return nil, false, err
		}
		for ok := it.First(); ok; ok = it.Next() {
			if len(refs) == limit {
				more = true
				break
			}
			refs = append(refs, PendingRef{Key: slices.Clone(it.Key()), list: len(list)})
		}
		if err := it.Close(); err != nil {
			return nil, false, err
		}
		if more {
			break
		}
	}
	return refs, more, nil
}

// pendingPositions returns the encoded positions of term in a pending
// entry's value, or nil.
func pendingPositions(value []byte, term string) ([]byte, error) {
	var found []byte
	err := eachPendingTerm(value, func(t, pos []byte) bool {
		// (Comparisons of a converted []byte do not allocate.)
		switch {
		case string(t) == term:
			found = pos
			return false
		case string(t) > term:
			return false // terms are in order
		}
		return true
	})
	return found, err
}

// pendingHasPrefix reports whether a pending entry's value holds a term
// starting with prefix.
func pendingHasPrefix(value []byte, prefix string) (bool, error) {
	found := false
	err := eachPendingTerm(value, func(t, _ []byte) bool {
		if len(t) >= len(prefix) && string(t[:len(prefix)]) == prefix {
			found = true
			return false
		}
		return string(t) < prefix
	})
	return found, err
}

// pendingPhrase reports whether a pending entry's value holds terms at
// consecutive positions.
func pendingPhrase(value []byte, terms []string) (bool, error) {
	var starts, buf []int
	for i, term := range terms {
		pos, err := pendingPositions(value, term)
		if err != nil || pos == nil {
			return false, err
		}
		if i == 0 {
			starts = decodePositions(nil, pos)
			continue
		}
		buf = decodePositions(buf[:0], pos)
		starts = slices.DeleteFunc(starts, func(p int) bool {
			_, found := slices.BinarySearch(buf, p+i)
			return !found
		})
		if len(starts) == 0 {
			return false, nil
		}
	}
	return len(starts) > 0, nil
}
