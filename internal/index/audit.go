package index

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/doppio-db/doppio/internal/keys"
)

// AuditList (for tests and tools) checks every entry of the index list starting at list against
// the live documents: pending holds the pending entries their text would
// have (key -> value), final their final-form entries (key -> value). A
// pending or folded entry must be a live document's, with its current
// value; a term or attribute entry one of final; a posting of a segment,
// unless a dead posting hides it, a document whose folded entry names that
// segment and has the term at those positions. It returns the number of
// entries read.
func AuditList(r Reader, list []byte, pending, final map[string][]byte) (int, error) {
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
			if want, ok := pending[string(pendingOf(rest))]; !ok || len(v) < segIDLen || !bytes.Equal(want, v[segIDLen:]) {
				return n, fmt.Errorf("folded entry %q is not a live document's current text", k)
			}
			folded[string(rest)] = string(v[:segIDLen])
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
