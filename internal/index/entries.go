package index

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strings"
	"sync"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/schema"
)

// Entry is one index entry: a key of the partition and its value.
type Entry struct {
	Key   []byte
	Value []byte
	// pending is, for the pending entry of a text field, the length of its
	// list's prefix in Key; 0 for any other entry.
	pending int
}

// Pending reports whether e is the pending entry of a text field.
func (e Entry) Pending() bool { return e.pending > 0 }

// Entries returns the index entries of doc in their final form, sorted by
// key: for every indexed field of indexes that has a value in doc, the key
//
//	prefix.Index(table, group, field) + value-or-term + rest
//
// where group is the encoded partition key and rest the encoded key parts
// after it. An attribute field gives one entry per distinct value (every
// element of an array) with an empty value; a text field gives one entry per
// distinct term whose value is the term's positions (uvarint deltas). Null
// and absent values (including a null record on the path) give none.
//
// A backfill writes these; the write path writes a text field's entries in
// the pending form instead (see Diff).
func Entries(indexes []schema.Index, prefix keys.Partition, table string, group, rest []byte, doc schema.Document) []Entry {
	return entries(indexes, prefix, table, group, rest, doc, false)
}

// entries returns the entries of doc; with pending set, a text field's are
// one pending entry instead of one per term.
func entries(indexes []schema.Index, prefix keys.Partition, table string, group, rest []byte, doc schema.Document, pending bool) []Entry {
	if doc == nil {
		return nil
	}
	var out []Entry
	for _, ix := range indexes {
		v, ok := lookup(doc, ix.Path)
		if !ok {
			continue
		}
		list := prefix.Index(table, group, ix.String())
		switch {
		case ix.Kind != "text":
			out = appendAttributeEntries(out, list, rest, v)
		case pending:
			out = appendPendingEntry(out, list, rest, v)
		default:
			out = appendTextEntries(out, list, rest, v)
		}
	}
	slices.SortFunc(out, func(a, b Entry) int { return bytes.Compare(a.Key, b.Key) })
	return slices.CompactFunc(out, func(a, b Entry) bool { return bytes.Equal(a.Key, b.Key) })
}

// Diff returns the index writes that turn the entries of before into those
// of after (either may be nil: an insert or a delete): only entries whose
// key or value changes are written, so an update touches only the lists of
// the values and terms that changed. Text is written in the pending form,
// and a changed text is deleted in every form it may be in, reading its
// folded entry through folded (package doc, "Pending entries").
func Diff(indexes []schema.Index, prefix keys.Partition, table string, group, rest []byte, before, after schema.Document, folded FoldedReader) (puts []Entry, deletes [][]byte, err error) {
	old := entries(indexes, prefix, table, group, rest, before, true)
	cur := entries(indexes, prefix, table, group, rest, after, true)
	dropOld := func(e Entry) {
		if e.pending == 0 || err != nil {
			return
		}
		list, rest := e.Key[:e.pending], e.Key[e.pending+1:]
		terms, _ := termEntries(list, rest, e.Value)
		for _, f := range terms {
			deletes = append(deletes, f.Key)
		}
		fk := foldedKey(list, rest)
		var v, seg []byte
		if v, err = folded(fk); err != nil || v == nil {
			return
		}
		if seg, _, err = foldedValue(v); err != nil {
			return
		}
		deletes = append(deletes, fk)
		puts = append(puts, Entry{Key: deadKey(list, seg, rest), Value: []byte{}})
	}
	i, j := 0, 0
	for i < len(old) || j < len(cur) {
		switch {
		case j == len(cur) || (i < len(old) && bytes.Compare(old[i].Key, cur[j].Key) < 0):
			deletes = append(deletes, old[i].Key)
			dropOld(old[i])
			i++
		case i == len(old) || bytes.Compare(old[i].Key, cur[j].Key) > 0:
			puts = append(puts, cur[j])
			j++
		default:
			if !bytes.Equal(old[i].Value, cur[j].Value) {
				puts = append(puts, cur[j])
				dropOld(old[i])
			}
			i++
			j++
		}
	}
	if err != nil {
		return nil, nil, err
	}
	return puts, deletes, nil
}

// GroupSpan returns the span [start, end) of every index entry of the
// document group whose encoded partition key is group: deleting it drops
// the group's entries of every field.
func GroupSpan(prefix keys.Partition, table string, group []byte) (start, end []byte) {
	start = append(prefix.IndexTable(table), group...)
	return start, keys.PrefixEnd(start)
}

// lookup returns the value at path in doc; ok is false when a record on the
// way or the value itself is null or absent.
func lookup(doc schema.Document, path []string) (any, bool) {
	var v any = doc
	for _, name := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[name]; !ok || v == nil {
			return nil, false
		}
	}
	return v, true
}

func entryKey(list []byte, value, rest []byte) []byte {
	k := make([]byte, 0, len(list)+len(value)+len(rest))
	return append(append(append(k, list...), value...), rest...)
}

func appendAttributeEntries(out []Entry, list, rest []byte, v any) []Entry {
	add := func(x any) {
		if enc, ok := AppendValue(nil, x); ok {
			out = append(out, Entry{Key: entryKey(list, enc, rest), Value: []byte{}})
		}
	}
	if arr, ok := v.([]any); ok {
		for _, x := range arr {
			add(x)
		}
		return out
	}
	add(v)
	return out
}

// tokenSlices pools the token lists of textTokens: a message body's list
// grew by doubling on every insert.
var tokenSlices = sync.Pool{New: func() any { return new([]Token) }}

// textTokens returns the tokens of a text value (every element of an
// array), ordered by term then position; release gives the list back.
func textTokens(v any) (toks []Token, release func()) {
	pooled := tokenSlices.Get().(*[]Token)
	toks = (*pooled)[:0]
	pos := 0
	addText := func(x any) {
		if s, ok := x.(string); ok {
			toks, pos = appendTokens(toks, s, pos)
			pos += elementGap
		}
	}
	if arr, ok := v.([]any); ok {
		for _, x := range arr {
			addText(x)
		}
	} else {
		addText(v)
	}
	// Group positions by term, each term's in order. Positions are
	// distinct, so this order is total and an unstable sort gives it (a
	// stable sort by term alone was a quarter of this function's time).
	slices.SortFunc(toks, func(a, b Token) int {
		if c := strings.Compare(a.Term, b.Term); c != 0 {
			return c
		}
		return a.Pos - b.Pos
	})
	return toks, func() {
		if cap(toks) > 1<<12 {
			return // a huge text's list is not kept
		}
		clear(toks) // no term outlives the call in the pool
		*pooled = toks[:0]
		tokenSlices.Put(pooled)
	}
}

// appendPositions appends the positions of the term starting at toks[i]
// (uvarint deltas) and returns the index of the next term.
func appendPositions(dst []byte, toks []Token, i int) ([]byte, int) {
	j, prev := i, 0
	for ; j < len(toks) && toks[j].Term == toks[i].Term; j++ {
		dst = binary.AppendUvarint(dst, uint64(toks[j].Pos-prev))
		prev = toks[j].Pos
	}
	return dst, j
}

func appendTextEntries(out []Entry, list, rest []byte, v any) []Entry {
	toks, release := textTokens(v)
	defer release()
	// Every key and value is carved from one buffer rather than allocated
	// one by one: a body gives tens of entries.
	size := 0
	for i, t := range toks {
		if i == 0 || t.Term != toks[i-1].Term {
			size += len(list) + len(t.Term) + 4 + len(rest)
		}
		size += binary.MaxVarintLen32
	}
	buf := make([]byte, 0, size)
	for i := 0; i < len(toks); {
		start := len(buf)
		buf = append(buf, list...)
		buf = keys.AppendString(buf, toks[i].Term)
		buf = append(buf, rest...)
		key := buf[start:len(buf):len(buf)]
		start = len(buf)
		var j int
		buf, j = appendPositions(buf, toks, i)
		out = append(out, Entry{Key: key, Value: buf[start:len(buf):len(buf)]})
		i = j
	}
	return out
}

// appendPendingEntry appends the pending entry of a text value: nothing
// when it has no term.
func appendPendingEntry(out []Entry, list, rest []byte, v any) []Entry {
	toks, release := textTokens(v)
	defer release()
	if len(toks) == 0 {
		return out
	}
	size := len(list) + 1 + len(rest)
	for i, t := range toks {
		if i == 0 || t.Term != toks[i-1].Term {
			size += len(t.Term) + 2*binary.MaxVarintLen32
		}
		size += binary.MaxVarintLen32
	}
	buf := make([]byte, 0, size)
	buf = append(append(append(buf, list...), tagPending), rest...)
	key := buf[:len(buf):len(buf)]
	start := len(buf)
	var pos []byte
	for i := 0; i < len(toks); {
		var j int
		pos, j = appendPositions(pos[:0], toks, i)
		buf = appendPair(buf, []byte(toks[i].Term), pos)
		i = j
	}
	return append(out, Entry{Key: key, Value: buf[start:len(buf):len(buf)], pending: len(list)})
}

// decodePositions appends the positions encoded in an entry's value.
func decodePositions(dst []int, b []byte) []int {
	pos := 0
	for len(b) > 0 {
		d, n := binary.Uvarint(b)
		if n <= 0 {
			return dst
		}
		pos += int(d)
		dst = append(dst, pos)
		b = b[n:]
	}
	return dst
}
