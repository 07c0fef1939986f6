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
	var puts []Entry
	var dels [][]byte
	size := 0
	flush := func() {
		batches, deletes = append(batches, puts), append(deletes, dels)
		puts, dels, size = nil, nil, 0
	}
	var dk []byte
	var kept []posting
	for _, tag := range [...]byte{tagSegment, tagMerged} {
		bl := append(slices.Clip(list), tag)
		it.SetBounds(bl, keys.PrefixEnd(bl))
		for ok := it.First(); ok; ok = it.Next() {
			k := it.Key()
			kept = kept[:0]
			changed := false
			err := eachBlockPosting(len(list), k, it.Value(), func(origin, rest, pos []byte) error {
				dk = append(append(dk[:0], origin...), rest...)
				if dead[string(dk)] {
					changed = true
				} else {
					kept = append(kept, posting{origin, rest, pos})
				}
				return nil
			})
			if err != nil {
				return nil, nil, 0, err
			}
			if !changed {
				continue
			}
			var v []byte
			if len(kept) == 0 {
				dels = append(dels, slices.Clone(k))
			} else {
				if tag == tagMerged {
					v = appendMergedBlock(nil, kept)
				} else {
					for _, p := range kept {
						v = appendPair(v, p.rest, p.pos)
					}
				}
				puts = append(puts, Entry{Key: slices.Clone(k), Value: v})
			}
			if size += len(k) + len(v); size >= batchBytes {
				flush()
			}
		}
		if err := it.Error(); err != nil {
			return nil, nil, 0, err
		}
	}
	dels = append(dels, deadKeys...)
	flush()
	return batches, deletes, len(deadKeys), nil
}
