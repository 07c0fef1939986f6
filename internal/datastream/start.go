package datastream

import (
	"math"

	"github.com/doppio-db/doppio/internal/changes"
	"github.com/doppio-db/doppio/internal/partition"
)

// startSCN is where a partition without a checkpoint starts: the position
// just before the first retained transaction (earliest), or before the
// first one committed at or after since (Unix ms, by the committing
// leader's clock). The SCN's sequence is exact; its generation is the
// next transaction's, which is what changes.NewReader needs to continue
// there on any replica.
//
// It reads O(generations + log entries of one generation) entries, not
// the whole log: the log is keyed by (generation, sequence), so one read
// past (g, max) lands on the next generation's first entry, and within a
// generation sequences are contiguous and searched by halving (commit
// times grow with sequences, up to clock skew between leaders).
func startSCN(l changes.Log, earliest bool, since int64) (partition.SCN, error) {
	applied := l.Applied()
	first, err := l.ReadLog(partition.SCN{}, 1)
	if err != nil {
		return partition.SCN{}, err
	}
	if len(first) == 0 {
		return applied, nil // nothing committed (the newest entry is never trimmed)
	}
	before := func(e partition.LogEntry) partition.SCN {
		return partition.SCN{Generation: e.SCN.Generation, Sequence: e.SCN.Sequence - 1}
	}
	if earliest || first[0].Mtime >= since {
		return before(first[0]), nil
	}
	// The first entry of each generation.
	gens := []partition.LogEntry{first[0]}
	for {
		last := gens[len(gens)-1]
		next, err := l.ReadLog(partition.SCN{Generation: last.SCN.Generation, Sequence: math.MaxUint64 - 1}, 1)
		if err != nil {
			return partition.SCN{}, err
		}
		if len(next) == 0 {
			break
		}
		if next[0].Mtime >= since {
			break
		}
		gens = append(gens, next[0])
	}
	// The sought entry is in generation g after its first entry, or it is
	// the next generation's first entry, or none has committed yet.
	g := gens[len(gens)-1]
	at := func(seq uint64) (*partition.LogEntry, error) {
		ents, err := l.ReadLog(partition.SCN{Generation: g.SCN.Generation, Sequence: seq - 1}, 1)
		if err != nil || len(ents) == 0 || ents[0].SCN.Generation != g.SCN.Generation || ents[0].SCN.Sequence != seq {
			return nil, err
		}
		return &ents[0], nil
	}
	// Find the generation's last sequence by doubling, then halve: lo has
	// mtime < since, hi is the first sequence past lo known to be >= since
	// or absent.
	lo, step := g.SCN.Sequence, uint64(1)
	hi := lo
	for {
		e, err := at(lo + step)
		if err != nil {
			return partition.SCN{}, err
		}
		if e == nil || e.Mtime >= since {
			hi = lo + step
			break
		}
		lo += step
		step *= 2
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		e, err := at(mid)
		if err != nil {
			return partition.SCN{}, err
		}
		if e == nil || e.Mtime >= since {
			hi = mid
		} else {
			lo = mid
		}
	}
	e, err := at(hi)
	if err != nil {
		return partition.SCN{}, err
	}
	if e != nil {
		return before(*e), nil
	}
	// hi is past the generation's end: start after lo, its last entry
	// (exact), so the next generation's first entry, or the next commit,
	// comes next.
	return partition.SCN{Generation: g.SCN.Generation, Sequence: lo}, nil
}
