package partition

import (
	"context"
	"strings"
	"time"

	"github.com/doppio-db/doppio/internal/keys"
)

// DropTable removes every document, auto-increment counter and index
// entry of table from the partition, and its index build states, as
// range deletions in one replicated write set: every replica applies
// them at the same point of the log, and a snapshot taken after carries
// none of it. It is not a change event (no document write). Leader only.
// A derived table's expired versions leave this way.
func (r *Replica) DropTable(ctx context.Context, table string) (SCN, error) {
	if err := r.repl.Lead(ctx); err != nil {
		return SCN{}, err
	}
	scn, err := r.repl.Replicate(ctx, &WriteSet{Mtime: time.Now().UnixMilli(), Upkeep: true, Index: r.tableRanges(table)})
	if err != nil {
		return SCN{}, err
	}
	r.idx.mu.Lock()
	for key, b := range r.idx.builds {
		if t, _, _ := strings.Cut(key, "\x00"); t == table {
			if b.cancel != nil {
				b.cancel()
			}
			delete(r.idx.builds, key)
		}
	}
	r.idx.mu.Unlock()
	return scn, nil
}

// tableRanges is every key of table in the partition, as range deletions:
// documents, auto-increment counters, index entries and build states.
func (r *Replica) tableRanges(table string) IndexWrites {
	var x IndexWrites
	states := r.prefix.Meta(metaIndexPrefix + table + "\x00")
	for _, start := range [][]byte{r.prefix.Table(table), r.prefix.AutoIncrement(table, nil), r.prefix.IndexTable(table), states} {
		x.Ranges = append(x.Ranges, KeyRange{Start: start, End: keys.PrefixEnd(start)})
	}
	return x
}

// TableEmpty reports whether this replica holds no document and no index
// entry of table.
func (r *Replica) TableEmpty(table string) (bool, error) {
	for _, start := range [][]byte{r.prefix.Table(table), r.prefix.IndexTable(table)} {
		it, err := r.engine.NewIter(start, keys.PrefixEnd(start))
		if err != nil {
			return false, err
		}
		found := it.First()
		err = it.Error()
		it.Close()
		if err != nil || found {
			return false, err
		}
	}
	return true, nil
}
