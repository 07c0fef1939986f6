package partition

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/cespare/xxhash/v2"

	"github.com/doppio-db/doppio/internal/keys"
)

// LogBucket is how many change-log sequences are summed together, so that
// replicas that trimmed their logs apart still compare whole buckets; the
// package doc ("Consistency checksums") names every summed range.
const LogBucket = 4096

// RangeSum is the checksum of one named key range.
type RangeSum struct {
	Name  string `json:"name"`
	Keys  uint64 `json:"keys"`
	Bytes uint64 `json:"bytes"`
	Sum   uint64 `json:"sum"` // xxhash64 of every key and value, length-prefixed, in key order
	// LogFrom is the first sequence a log bucket covers (log ranges only).
	LogFrom uint64 `json:"logFrom,omitempty"`

	isBucket bool
}

// Checksums are a replica's checksums at one point.
type Checksums struct {
	Ranges []RangeSum `json:"ranges"` // in key order
	// LogFirst is the sequence of the first change-log entry the replica
	// still holds (0: none).
	LogFirst uint64 `json:"logFirst"`
}

// KV is what the checksum reads: a positioned iterator over one partition.
type KV interface {
	SeekGE(key []byte) bool
	Next() bool
	Key() []byte
	Value() []byte
	Error() error
}

// ComputeChecksums sums the partition p as it reads through it (an
// iterator over p, pinned at the state to check). pace, if set, is called
// with the bytes read since its last call, every few hundred KiB and at the
// end; an error from it stops the computation (throttling, cancellation).
func ComputeChecksums(it KV, p keys.Partition, pace func(n int) error) (Checksums, error) {
	var (
		out     Checksums
		cur     *RangeSum
		h       = xxhash.New()
		pending int
		lenbuf  [binary.MaxVarintLen64]byte
		// curPrefix: every key with it belongs to cur (nil: classify each).
		curPrefix []byte
	)
	raft, raftEnd := p.Raft(), keys.PrefixEnd(p.Raft())
	sec := sectionsOf(p)
	finish := func() {
		if cur != nil {
			cur.Sum = h.Sum64()
			out.Ranges = append(out.Ranges, *cur)
			cur = nil
		}
	}
	for ok := it.SeekGE(p); ok; ok = it.Next() {
		k := it.Key()
		if !bytes.HasPrefix(k, p) {
			break
		}
		if bytes.Compare(k, raft) >= 0 && bytes.Compare(k, raftEnd) < 0 {
			if ok = it.SeekGE(raftEnd); !ok {
				break
			}
			k = it.Key()
			if !bytes.HasPrefix(k, p) {
				break
			}
		}
		v := it.Value()
		_, seq, isLog := p.ParseLog(k)
		isLog = isLog && k[len(p)] == sec.log
		// Most keys continue the current range: a table's keys share its
		// prefix, a log bucket's sequences its span; no decoding then.
		same := cur != nil && (isLog && cur.isBucket && seq >= cur.LogFrom && seq < cur.LogFrom+LogBucket ||
			!isLog && curPrefix != nil && bytes.HasPrefix(k, curPrefix))
		if !same {
			name, logFrom, prefix, skip := classify(p, sec, k)
			if skip {
				continue
			}
			if cur == nil || cur.Name != name {
				finish()
				cur = &RangeSum{Name: name, LogFrom: logFrom, isBucket: isLog && name != "log/?"}
				h.Reset()
			}
			curPrefix = prefix
		}
		if isLog && (out.LogFirst == 0 || seq < out.LogFirst) {
			out.LogFirst = seq
		}
		_, _ = h.Write(lenbuf[:binary.PutUvarint(lenbuf[:], uint64(len(k)))])
		_, _ = h.Write(k)
		_, _ = h.Write(lenbuf[:binary.PutUvarint(lenbuf[:], uint64(len(v)))])
		_, _ = h.Write(v)
		cur.Keys++
		cur.Bytes += uint64(len(k) + len(v))
		pending += len(k) + len(v)
		if pace != nil && pending >= 256<<10 {
			if err := pace(pending); err != nil {
				return Checksums{}, err
			}
			pending = 0
		}
	}
	if err := it.Error(); err != nil {
		return Checksums{}, err
	}
	finish()
	if pace != nil && pending > 0 {
		if err := pace(pending); err != nil {
			return Checksums{}, err
		}
	}
	return out, nil
}

// sections are the bytes after the partition prefix that start each
// section, as package keys lays them out.
type sections struct{ documents, autoinc, index, log, meta, outcomes byte }

func sectionsOf(p keys.Partition) sections {
	at := func(prefix []byte) byte { return prefix[len(p)] }
	return sections{at(p.Table("")), at(p.AutoIncrement("", nil)), at(p.IndexTable("")), at(p.LogPrefix()), at(p.MetaPrefix()), at(p.OutcomePrefix())}
}

// classify names the range key k of partition p belongs to, or skips it;
// prefix, when not nil, starts every key of that range from k on.
func classify(p keys.Partition, sec sections, k []byte) (name string, logFrom uint64, prefix []byte, skip bool) {
	rest := k[len(p):]
	if len(rest) == 0 {
		return "other", 0, nil, false
	}
	section, body := rest[0], rest[1:]
	table := func(kind string) (string, uint64, []byte, bool) {
		v, after, err := keys.DecodeOne(body)
		if s, ok := v.(string); ok && err == nil {
			return kind + "/" + s, 0, bytes.Clone(k[:len(k)-len(after)]), false
		}
		return kind + "/?", 0, nil, false
	}
	switch section {
	case sec.documents:
		return table("documents")
	case sec.autoinc:
		return table("autoinc")
	case sec.index:
		return table("index")
	case sec.log:
		_, seq, ok := p.ParseLog(k)
		if !ok {
			return "log/?", 0, nil, false
		}
		from := seq / LogBucket * LogBucket
		return fmt.Sprintf("log/%d-%d", from, from+LogBucket-1), from, nil, false
	case sec.meta:
		v, _, err := keys.DecodeOne(body)
		if s, ok := v.(string); ok && err == nil && len(s) >= len(metaIndexPrefix) && s[:len(metaIndexPrefix)] == metaIndexPrefix {
			return "", 0, nil, true
		}
		return "meta", 0, nil, false
	case sec.outcomes:
		return "outcomes", 0, p.OutcomePrefix(), false
	}
	return "other", 0, nil, false
}

// Diff returns the names of the ranges in which two replicas' checksums
// differ, in order: a range one has and the other lacks differs too. Log
// buckets are compared only where both replicas hold every entry of the
// bucket (from the later of their first entries on).
func Diff(a, b Checksums) []string {
	floor := max(a.LogFirst, b.LogFirst)
	comparable := func(r RangeSum) bool {
		if !isLog(r.Name) || r.Name == "log/?" {
			return true
		}
		return max(r.LogFrom, 1) >= floor // sequences start at 1
	}
	index := func(c Checksums) map[string]RangeSum {
		m := make(map[string]RangeSum, len(c.Ranges))
		for _, r := range c.Ranges {
			if comparable(r) {
				m[r.Name] = r
			}
		}
		return m
	}
	am, bm := index(a), index(b)
	var out []string
	for name, ra := range am {
		if rb, ok := bm[name]; !ok || rb.Sum != ra.Sum || rb.Keys != ra.Keys || rb.Bytes != ra.Bytes {
			out = append(out, name)
		}
	}
	for name := range bm {
		if _, ok := am[name]; !ok {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func isLog(name string) bool { return len(name) > 4 && name[:4] == "log/" }

// Bytes is the total of key and value bytes summed.
func (c Checksums) Bytes() uint64 {
	var n uint64
	for _, r := range c.Ranges {
		n += r.Bytes
	}
	return n
}
