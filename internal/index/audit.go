package index

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/schema"
)

// An Audit (for tests and tools) checks a store's index lists against the
// documents that are live in it: Live names each, List checks one list.
type Audit struct {
	indexes        []schema.Index
	pending, final map[string][]byte // the live documents' entries, key -> value
}

// NewAudit returns an Audit of the given indexes with no live document.
func NewAudit(indexes []schema.Index) *Audit {
	return &Audit{indexes: indexes, pending: map[string][]byte{}, final: map[string][]byte{}}
}

// Live records doc as the live document of table under group and rest in
// the partition under prefix.
func (a *Audit) Live(prefix keys.Partition, table string, group, rest []byte, doc schema.Document) {
	for _, e := range entries(a.indexes, prefix, table, group, rest, doc, true) {
		if e.Pending() {
			a.pending[string(e.Key)] = e.Value
		}
	}
	for _, e := range entries(a.indexes, prefix, table, group, rest, doc, false) {
		a.final[string(e.Key)] = e.Value
	}
}

// List checks every entry of the index list starting at list against the
// live documents: a pending or folded entry must be a live document's, with
// its current text; a term or attribute entry one it has; a posting of a
// segment, unless a dead posting hides it, a document whose folded entry
// names that segment and has the term at those positions. It returns the
// number of entries read.
func (a *Audit) List(r Reader, list []byte) (int, error) {
	pending, final := a.pending, a.final
	it, err := r.NewIter(list, keys.PrefixEnd(list))
	if err != nil {
		return 0, err
	}
	defer it.Close()
	n := 0
	dead := map[string]bool{}
	folded := map[string]string{} // rest -> segment id
	var blocks [][2][]byte
	pendingOf := func(rest []byte) []byte {
		return append(append(append([]byte{}, list...), tagPending), rest...)
	}
	for ok := it.First(); ok; ok = it.Next() {
		n++
		k, v := it.Key(), it.Value()
		tail := k[len(list):]
		switch tail[0] {
		case tagPending:
			if want, ok := pending[string(k)]; !ok || !bytes.Equal(want, v) {
				return n, fmt.Errorf("pending entry %q is not a live document's current text", k)
			}
		case tagFolded:
			rest := tail[1:]
			seg, text, err := foldedValue(v)
			if want, ok := pending[string(pendingOf(rest))]; !ok || err != nil || !bytes.Equal(want, text) {
				return n, fmt.Errorf("folded entry %q is not a live document's current text", k)
			}
			folded[string(rest)] = string(seg)
		case tagSegment:
			blocks = append(blocks, [2][]byte{slices.Clone(k), slices.Clone(v)})
		case tagDead:
			dead[string(tail[1:])] = true
		default:
			if want, ok := final[string(k)]; !ok || !bytes.Equal(want, v) {
				return n, fmt.Errorf("entry %q is not a live document's", k)
			}
		}
	}
	if err := it.Error(); err != nil {
		return n, err
	}
	for _, b := range blocks {
		k := b[0]
		seg := k[len(k)-segIDLen:]
		termEnc := k[len(list)+1 : len(k)-segIDLen]
		err := eachPosting(b[1], func(rest, pos []byte) error {
			if dead[string(seg)+string(rest)] {
				return nil
			}
			if folded[string(rest)] != string(seg) {
				return fmt.Errorf("a live posting of %q in segment %x for a document not folded into it", termEnc, seg)
			}
			var found []byte
			eachPendingTerm(pending[string(pendingOf(rest))], func(t, p []byte) bool {
				if bytes.Equal(keys.AppendString(nil, string(t)), termEnc) {
					found = p
					return false
				}
				return true
			})
			if found == nil || !bytes.Equal(found, pos) {
				return fmt.Errorf("a live posting of %q in segment %x that the document's text does not have", termEnc, seg)
			}
			return nil
		})
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
