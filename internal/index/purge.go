package index

import (
	"slices"

	"github.com/doppio-db/doppio/internal/keys"
)

// PurgeDead returns the writes that drop the dead postings of the text
// list starting at list from its posting blocks, as batches of about
// batchBytes each: every block holding a dead posting rewritten without it
// (deleted when none is left), then, in the last batch, the dead postings
// themselves. Every prefix of the batches answers as the whole does (a
// dead posting whose document is gone from the blocks hides nothing), so
// the caller may apply them one by one. Blocks change only here, so the
// caller must not purge one list twice at once; writes meanwhile only add
// dead postings and new segments, which this purge leaves alone. It
// returns nil when the list has fewer than minDead dead postings (and at
// least one). purged is the number of dead postings the batches delete.
func PurgeDead(r Reader, list []byte, minDead, batchBytes int) (batches [][]Entry, deletes [][][]byte, purged int, err error) {
	dl, du := deadSpan(list)
	it, err := r.NewIter(dl, du)
	if err != nil {
		return nil, nil, 0, err
	}
	defer it.Close()
	dead := map[string]bool{}
	var deadKeys [][]byte
	for ok := it.First(); ok; ok = it.Next() {
		dead[string(it.Key()[len(dl):])] = true
		deadKeys = append(deadKeys, slices.Clone(it.Key()))
	}
	if err := it.Error(); err != nil || len(dead) < max(minDead, 1) {
		return nil, nil, 0, err
	}
	bl := append(slices.Clip(list), tagSegment)
	it.SetBounds(bl, keys.PrefixEnd(bl))
	var puts []Entry
	var dels [][]byte
	size := 0
	flush := func() {
		batches, deletes = append(batches, puts), append(deletes, dels)
		puts, dels, size = nil, nil, 0
	}
	var dk []byte
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) < len(bl)+segIDLen {
			return nil, nil, 0, errBadSegment
		}
		seg := k[len(k)-segIDLen:]
		var kept []byte
		changed := false
		err := eachPosting(it.Value(), func(rest, pos []byte) error {
			dk = append(append(dk[:0], seg...), rest...)
			if dead[string(dk)] {
				changed = true
				return nil
			}
			kept = appendPair(kept, rest, pos)
			return nil
		})
		if err != nil {
			return nil, nil, 0, err
		}
		if !changed {
			continue
		}
		if len(kept) == 0 {
			dels = append(dels, slices.Clone(k))
		} else {
			puts = append(puts, Entry{Key: slices.Clone(k), Value: kept})
		}
		if size += len(k) + len(kept); size >= batchBytes {
			flush()
		}
	}
	if err := it.Error(); err != nil {
		return nil, nil, 0, err
	}
	dels = append(dels, deadKeys...)
	flush()
	return batches, deletes, len(deadKeys), nil
}
