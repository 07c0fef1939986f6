package partition

import (
	"bytes"
	"fmt"
	"maps"
	"slices"

	"github.com/cockroachdb/pebble/v2/objstorage"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/storage"
)

// A backup of a partition is a set of sstables read through one Pebble
// iterator, so it is the partition at one point: its applied SCN, read
// through the same iterator.
//
// A full backup holds the partition's data spans (documents, counters,
// index entries, change log, metadata; not the Raft section), tiled by
// range deletions: replayed in order onto any state, it leaves exactly
// the backup's.
//
// An incremental backup since an earlier SCN holds what replaying it onto
// the partition as of that SCN needs to reach this one, derived from the
// change log (since, SCN]: the present state (or absence) of every document
// a transaction wrote, the whole index of every document group it wrote
// (a range deletion over the group's entries and the entries now), the
// change-log entries themselves, and the counters and metadata sections
// whole (small). When the log cannot prove it holds every transaction
// since (trimmed, another timeline) or a transaction was index-only (a
// backfill or an index drop, which touch entries of groups without
// writing to them), the backup is full instead, and says why.

// BackupInfo describes one partition's backup, known before its tables.
type BackupInfo struct {
	// SCN is the partition's applied SCN the backup holds.
	SCN SCN
	// Incremental: the tables apply on top of the partition as of Since.
	Incremental bool
	Since       SCN
	// FullReason says why a backup asked to be incremental is full.
	FullReason string
}

// BackupTableBytes is about how many key and value bytes one sstable of a
// backup holds (small enough to be uploaded whole on restore).
var BackupTableBytes = 4 << 20

// Backup writes the partition's backup as sstables, each to a Writable
// from next, after telling begin what it holds. since, when set, asks for
// an incremental backup since that SCN (see the package comment above).
// Nothing is locked: the backup reads one Pebble iterator.
func (r *Replica) Backup(since *SCN, begin func(BackupInfo) error, next func() (objstorage.Writable, error)) error {
	it, err := r.engine.NewIter(r.prefix, r.prefix.End())
	if err != nil {
		return err
	}
	defer it.Close()
	info := BackupInfo{}
	applied := r.prefix.Meta(metaApplied)
	if it.SeekGE(applied) && bytes.Equal(it.Key(), applied) {
		scn, ok := decodeSCN(it.Value())
		if !ok {
			return errCorrupt
		}
		info.SCN = scn
	}
	if err := it.Error(); err != nil {
		return err
	}
	var ops []backupOp
	if since != nil {
		ops, info.FullReason, err = r.incremental(it, *since, info.SCN)
		if err != nil {
			return err
		}
		if info.FullReason == "" {
			info.Incremental, info.Since = true, *since
		}
	}
	if err := begin(info); err != nil {
		return err
	}
	if !info.Incremental {
		for _, span := range r.prefix.DataSpans() {
			if _, err := storage.WriteSpanTables(r.engine, it, span[0], span[1], BackupTableBytes, next); err != nil {
				return err
			}
		}
		return nil
	}
	return writeOps(r.engine, ops, next)
}

// backupOp is one step of an incremental backup: a range deletion (end
// set) or a point.
type backupOp struct {
	key, end, value []byte
}

// incremental collects the ops that take the partition from since to scn,
// or a reason to back it up whole.
func (r *Replica) incremental(it *storage.Iter, since, scn SCN) ([]backupOp, string, error) {
	p := r.prefix
	switch {
	case scn == since:
		return nil, "", nil
	case scn.Sequence < since.Sequence || (scn.Sequence == since.Sequence && scn != since):
		return nil, fmt.Sprintf("the partition is at SCN %s, not after the previous backup's %s (another timeline)", scn, since), nil
	}
	logPrefix := p.LogPrefix()
	var ok bool
	if since.Sequence == 0 {
		ok = it.SeekGE(logPrefix)
	} else {
		at := p.Log(since.Generation, since.Sequence)
		if !it.SeekGE(at) || !bytes.Equal(it.Key(), at) {
			if err := it.Error(); err != nil {
				return nil, "", err
			}
			return nil, fmt.Sprintf("the change log no longer holds the previous backup's SCN %s", since), nil
		}
		ok = it.Next()
	}
	var ops []backupOp
	docs := map[string]bool{}
	groups := map[string]bool{}
	want := since.Sequence + 1
	for ; ok && bytes.HasPrefix(it.Key(), logPrefix); ok = it.Next() {
		g, s, valid := p.ParseLog(it.Key())
		if !valid {
			return nil, "", errCorrupt
		}
		if s != want {
			return nil, fmt.Sprintf("the change log has no entry at sequence %d", want), nil
		}
		ws, err := DecodeWriteSet(bytes.Clone(it.Value()))
		if err != nil {
			return nil, "", err
		}
		if len(ws.Writes) == 0 && len(ws.Counters) == 0 {
			return nil, fmt.Sprintf("SCN %d:%d built or dropped an index", g, s), nil
		}
		for _, w := range ws.Writes {
			docs[string(p.Document(w.Table, w.Key))] = true
			_, rest, err := keys.DecodeOne(w.Key)
			if err != nil {
				return nil, "", err
			}
			group := w.Key[:len(w.Key)-len(rest)]
			groups[string(append(p.IndexTable(w.Table), group...))] = true
		}
		ops = append(ops, backupOp{key: bytes.Clone(it.Key()), value: bytes.Clone(it.Value())})
		want++
	}
	if err := it.Error(); err != nil {
		return nil, "", err
	}
	if want != scn.Sequence+1 {
		return nil, fmt.Sprintf("the change log ends at sequence %d, not at the partition's %d", want-1, scn.Sequence), nil
	}
	// Whole sections: the counters and the metadata.
	for _, sec := range [][]byte{p.AutoIncrementPrefix(), p.MetaPrefix()} {
		var err error
		if ops, err = appendSpan(ops, it, sec, keys.PrefixEnd(sec)); err != nil {
			return nil, "", err
		}
	}
	for _, k := range slices.Sorted(maps.Keys(docs)) {
		key := []byte(k)
		if it.SeekGE(key) && bytes.Equal(it.Key(), key) {
			ops = append(ops, backupOp{key: key, value: bytes.Clone(it.Value())})
		} else {
			ops = append(ops, backupOp{key: key, end: append(bytes.Clone(key), 0)})
		}
	}
	for _, g := range slices.Sorted(maps.Keys(groups)) {
		var err error
		if ops, err = appendSpan(ops, it, []byte(g), keys.PrefixEnd([]byte(g))); err != nil {
			return nil, "", err
		}
	}
	if err := it.Error(); err != nil {
		return nil, "", err
	}
	slices.SortStableFunc(ops, func(a, b backupOp) int {
		if c := bytes.Compare(a.key, b.key); c != 0 {
			return c
		}
		// A range deletion comes before the points it starts with.
		switch {
		case a.end != nil && b.end == nil:
			return -1
		case a.end == nil && b.end != nil:
			return 1
		}
		return 0
	})
	return ops, "", nil
}

// appendSpan adds a range deletion of [start, end) and every key in it.
func appendSpan(ops []backupOp, it *storage.Iter, start, end []byte) ([]backupOp, error) {
	ops = append(ops, backupOp{key: bytes.Clone(start), end: bytes.Clone(end)})
	for ok := it.SeekGE(start); ok && bytes.Compare(it.Key(), end) < 0; ok = it.Next() {
		ops = append(ops, backupOp{key: bytes.Clone(it.Key()), value: bytes.Clone(it.Value())})
	}
	return ops, it.Error()
}

// writeOps writes ops (in key order) as sstables of about
// BackupTableBytes. An incremental backup with no ops has no table.
func writeOps(e *storage.Engine, ops []backupOp, next func() (objstorage.Writable, error)) error {
	var w *storage.SSTWriter
	size := 0
	for _, op := range ops {
		if w != nil && size >= BackupTableBytes {
			// Ranges never overlap and each precedes the points it
			// covers, so a table may end anywhere.
			if err := w.Close(); err != nil {
				return err
			}
			w = nil
		}
		if w == nil {
			out, err := next()
			if err != nil {
				return err
			}
			w, size = e.NewSSTWriter(out), 0
		}
		var err error
		if op.end != nil {
			err = w.DeleteRange(op.key, op.end)
		} else {
			err = w.Set(op.key, op.value)
		}
		if err != nil {
			return err
		}
		size += len(op.key) + len(op.end) + len(op.value)
	}
	if w != nil {
		return w.Close()
	}
	return nil
}
