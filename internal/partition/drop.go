package partition

import (
	"context"
	"time"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/problem"
)

// Drop removes every document, auto-increment counter and index entry of
// the named tables from the partition, in one write set: its writes are
// one OpDrop per table (the change log's record of the drop, without key
// or images) and its index part the range deletions, so every replica
// drops the same keys at the same SCN and compacts their span. With all,
// the ranges cover every table's sections (a database drop), whatever
// tables names. Leader only.
//
// Drop takes the partition's epoch exclusively: the evaluations under way
// finish first and the next ones wait, so no write evaluated before the
// drop lands after it.
func (r *Replica) Drop(ctx context.Context, tables []string, all bool) (SCN, error) {
	if len(tables) == 0 && !all {
		return SCN{}, problem.New(problem.Malformed, "a drop names at least one table")
	}
	if err := r.repl.Lead(ctx); err != nil {
		return SCN{}, err
	}
	if err := r.refuseWhileRestoring(); err != nil {
		return SCN{}, err
	}
	r.idx.epoch.Lock()
	defer r.idx.epoch.Unlock()
	ws := &WriteSet{Mtime: time.Now().UnixMilli()}
	for _, t := range tables {
		ws.Writes = append(ws.Writes, Write{Table: t, Op: OpDrop})
	}
	ws.Index.Ranges = dropRanges(r.prefix, tables, all)
	scn, _, err := r.replicate(ctx, ws, "drop", func() {})
	return scn, err
}

// dropRanges are the spans a drop deletes: each table's documents,
// counters and index entries, or, with all, the three sections whole.
func dropRanges(p keys.Partition, tables []string, all bool) []KeyRange {
	var starts [][]byte
	if all {
		starts = [][]byte{p.DocumentPrefix(), p.AutoIncrementPrefix(), p.IndexPrefix()}
	} else {
		for _, t := range tables {
			starts = append(starts, p.Table(t), p.AutoIncrement(t, nil), p.IndexTable(t))
		}
	}
	out := make([]KeyRange, len(starts))
	for i, s := range starts {
		out[i] = KeyRange{Start: s, End: keys.PrefixEnd(s)}
	}
	return out
}

// HoldsDocuments reports whether the partition holds a document of table,
// or, with table empty, of any table; a linearizable read.
func (r *Replica) HoldsDocuments(ctx context.Context, table string) (bool, error) {
	if err := r.repl.ReadIndex(ctx); err != nil {
		return false, err
	}
	lower := r.prefix.DocumentPrefix()
	if table != "" {
		lower = r.prefix.Table(table)
	}
	it, err := r.engine.NewIter(lower, keys.PrefixEnd(lower))
	if err != nil {
		return false, err
	}
	defer it.Close()
	return it.First(), it.Error()
}
