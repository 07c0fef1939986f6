package index

import (
	"bytes"
	"encoding/binary"
	"slices"
	"sort"
)

// Merging segments. A group written one document at a time is folded every
// few hundred documents, and each fold adds a segment: a query of a term
// reads one block per segment holding it, some 200 for a 50,000-message
// mailbox. Merges keep the count down the way Lucene's tiered merge
// policy does: segments fall into tiers by size (each mergeFactor times
// the one below), and once a tier holds mergeFactor segments, the smallest
// of them are merged into one of the tier above, up to a size bound. A
// list of n documents then has about mergeFactor segments per tier, a few
// tiers in all, and a document's postings are rewritten once per tier.
//
// A merge reads every block of the list (blocks are keyed by term first),
// and writes, in one write set, a merged block per term of the segments
// merged, with the postings that no dead posting hides; it deletes their
// blocks, their metas and the dead postings of their origins. Postings keep
// their origin, so the folded entries and dead postings that name it stay
// true, and the writes that run meanwhile (which only add pending entries,
// dead postings and new segments) need no latch: a dead posting written
// after the merge read the list hides the posting in the merged block as
// it hid it in the block it came from. A merge must not run with another
// merge or a purge of the same list (the group's fold job runs them one at
// a time).

// mergeFactor is how many segments of a tier are merged at once, and how
// much larger each tier's segments are than the one's below.
const mergeFactor = 8

// SegmentInfo is a segment of a text list, as its meta records it.
type SegmentInfo struct {
	ID   []byte // 8 bytes
	Docs int    // documents folded or merged into it (dead ones included)
}

// Segments returns the segments of the text list starting at list that
// have a meta, in id order.
func Segments(r Reader, list []byte) ([]SegmentInfo, error) {
	lower := append(slices.Clip(list), tagSegMeta)
	it, err := r.NewIter(lower, append(slices.Clip(list), tagSegMeta+1))
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []SegmentInfo
	for ok := it.First(); ok; ok = it.Next() {
		id := it.Key()[len(lower):]
		docs, n := binary.Uvarint(it.Value())
		if len(id) != segIDLen || n <= 0 {
			return nil, errBadSegment
		}
		out = append(out, SegmentInfo{ID: slices.Clone(id), Docs: int(docs)})
	}
	return out, it.Error()
}

// MergePlan returns the segments of segs (see Segments) to merge next, or
// nil when none need it: the smallest segments of the lowest tier holding
// mergeFactor of them, at most mergeFactor and at most maxDocs documents
// together (at least two). A segment of up to base documents is in tier
// 0, of up to base*mergeFactor in tier 1, and so on.
func MergePlan(segs []SegmentInfo, base, maxDocs int) [][]byte {
	tiers := map[int][]SegmentInfo{}
	for _, s := range segs {
		t := 0
		for size := base; s.Docs > size; size *= mergeFactor {
			t++
		}
		tiers[t] = append(tiers[t], s)
	}
	order := make([]int, 0, len(tiers))
	for t := range tiers {
		order = append(order, t)
	}
	sort.Ints(order)
	for _, t := range order {
		in := tiers[t]
		if len(in) < mergeFactor {
			continue
		}
		slices.SortStableFunc(in, func(a, b SegmentInfo) int { return a.Docs - b.Docs })
		var ids [][]byte
		total := 0
		for _, s := range in[:mergeFactor] {
			if total+s.Docs > maxDocs {
				break
			}
			total += s.Docs
			ids = append(ids, s.ID)
		}
		if len(ids) >= 2 {
			return ids
		}
	}
	return nil
}

// posting is one posting of a block: its origin segment, document key rest
// and positions.
type posting struct{ origin, rest, pos []byte }

// MergeSegments returns the writes that merge the segments segs of the
// text list starting at list into the new segment id (see the comment
// above): the merged blocks and the merged segment's meta to put (sorted
// by key), and the keys to delete. docs is the number of documents with a
// posting in the merged segment (none: nothing is put).
func MergeSegments(r Reader, list []byte, segs [][]byte, id uint64) (puts []Entry, deletes [][]byte, docs int, err error) {
	in := make(map[string]bool, len(segs))
	for _, s := range segs {
		in[string(s)] = true
		deletes = append(deletes, segMetaKey(list, s))
	}
	dl, du := deadSpan(list)
	it, err := r.NewIter(dl, du)
	if err != nil {
		return nil, nil, 0, err
	}
	defer it.Close()
	dead := map[string][]byte{} // origin + rest -> dead posting key
	for ok := it.First(); ok; ok = it.Next() {
		dead[string(it.Key()[len(dl):])] = slices.Clone(it.Key())
	}
	if err := it.Error(); err != nil {
		return nil, nil, 0, err
	}
	byTerm := map[string][]posting{} // encoded term -> live postings
	origins := map[string]bool{}
	live := map[string]bool{} // origin + rest of the live postings
	var dk []byte
	for _, tag := range [...]byte{tagSegment, tagMerged} {
		lower := append(slices.Clip(list), tag)
		it.SetBounds(lower, append(slices.Clip(list), tag+1))
		for ok := it.First(); ok; ok = it.Next() {
			k := it.Key()
			if len(k) < len(lower)+segIDLen {
				return nil, nil, 0, errBadSegment
			}
			if !in[string(k[len(k)-segIDLen:])] {
				continue
			}
			term := string(k[len(lower) : len(k)-segIDLen])
			deletes = append(deletes, slices.Clone(k))
			err := eachBlockPosting(len(list), k, it.Value(), func(origin, rest, pos []byte) error {
				origins[string(origin)] = true
				dk = append(append(dk[:0], origin...), rest...)
				if _, gone := dead[string(dk)]; gone {
					return nil
				}
				live[string(dk)] = true
				byTerm[term] = append(byTerm[term], posting{slices.Clone(origin), slices.Clone(rest), slices.Clone(pos)})
				return nil
			})
			if err != nil {
				return nil, nil, 0, err
			}
		}
		if err := it.Error(); err != nil {
			return nil, nil, 0, err
		}
	}
	// Every posting of an origin is in the segment that holds it now, so
	// the dead postings of the merged origins hide nothing once the merged
	// blocks leave them out.
	for key, dkey := range dead {
		if origins[key[:segIDLen]] {
			deletes = append(deletes, dkey)
		}
	}
	var seg [segIDLen]byte
	binary.BigEndian.PutUint64(seg[:], id)
	for term, ps := range byTerm {
		k := append(append(append(slices.Clip(list), tagMerged), term...), seg[:]...)
		puts = append(puts, Entry{Key: k, Value: appendMergedBlock(nil, ps)})
	}
	if len(live) > 0 {
		puts = append(puts, Entry{Key: segMetaKey(list, seg[:]), Value: binary.AppendUvarint(nil, uint64(len(live)))})
	}
	slices.SortFunc(puts, func(a, b Entry) int { return bytes.Compare(a.Key, b.Key) })
	return puts, deletes, len(live), nil
}

// appendMergedBlock appends the value of a merged block holding ps, which
// it sorts by (rest, origin).
func appendMergedBlock(dst []byte, ps []posting) []byte {
	slices.SortFunc(ps, func(a, b posting) int {
		if c := bytes.Compare(a.rest, b.rest); c != 0 {
			return c
		}
		return bytes.Compare(a.origin, b.origin)
	})
	index := map[string]int{}
	var origins [][]byte
	for _, p := range ps {
		if _, ok := index[string(p.origin)]; !ok {
			index[string(p.origin)] = len(origins)
			origins = append(origins, p.origin)
		}
	}
	dst = binary.AppendUvarint(dst, uint64(len(origins)))
	for _, o := range origins {
		dst = append(dst, o...)
	}
	for _, p := range ps {
		dst = binary.AppendUvarint(dst, uint64(index[string(p.origin)]))
		dst = appendPair(dst, p.rest, p.pos)
	}
	return dst
}
