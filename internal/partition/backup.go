package partition

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
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

// BackupPoint is where a backup left a partition: its SCN and a digest of
// the change-log entry there, which tells the same timeline from another
// one that happens to reach the same SCN (a database dropped and created
// again under the same name).
type BackupPoint struct {
	SCN SCN
	// Entry is EntryDigest of the log entry at SCN ("" if none: an empty
	// partition, or not known).
	Entry string
}

// EntryDigest is the digest of a change-log entry a BackupPoint holds.
func EntryDigest(entry []byte) string {
	sum := sha256.Sum256(entry)
	return hex.EncodeToString(sum[:12])
}

// BackupInfo describes one partition's backup, known before its tables.
type BackupInfo struct {
	// SCN is the partition's applied SCN the backup holds.
	SCN SCN
	// Entry is the digest of the change-log entry at SCN.
	Entry string
	// Incremental: the tables apply on top of the partition as of Since.
	Incremental bool
	Since       BackupPoint
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
func (r *Replica) Backup(since *BackupPoint, begin func(BackupInfo) error, next func() (objstorage.Writable, error)) error {
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
	if at := r.prefix.Log(info.SCN.Generation, info.SCN.Sequence); info.SCN.Sequence > 0 && it.SeekGE(at) && bytes.Equal(it.Key(), at) {
		info.Entry = EntryDigest(it.Value())
	}
	var d *delta
	if since != nil {
		d, info.FullReason, err = r.incremental(it, *since, info.SCN)
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
	w := &tableWriter{e: r.engine, next: next}
	if err := r.writeDelta(it, d, w); err != nil {
		return err
	}
	return w.close()
}

// delta is what an incremental backup carries, by key: the documents
// written since the previous backup, the index groups they are in, and
// where the change log after it starts. Values are read when written out,
// so an incremental holds only keys in memory.
type delta struct {
	docs    []string // document keys, sorted
	groups  []string // index prefixes (table, partition key), sorted
	logFrom []byte   // the first change-log key after the previous backup
}

// incremental finds what changed from since to scn in the change log, or
// a reason to back the partition up whole.
func (r *Replica) incremental(it *storage.Iter, from BackupPoint, scn SCN) (*delta, string, error) {
	p := r.prefix
	since := from.SCN
	switch {
	case scn == since && (from.Entry == "" || scn.Sequence == 0):
		return &delta{}, "", nil
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
		if from.Entry != "" && EntryDigest(it.Value()) != from.Entry {
			return nil, fmt.Sprintf("the transaction at SCN %s is not the previous backup's (another timeline: was the database created again?)", since), nil
		}
		ok = it.Next()
	}
	d := &delta{}
	if ok && bytes.HasPrefix(it.Key(), logPrefix) {
		d.logFrom = bytes.Clone(it.Key())
	}
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
		if ws.Upkeep {
			// Index entries moved from one form to the other: the
			// previous backup's form of the group answers the same.
			want++
			continue
		}
		if len(ws.Writes) == 0 && len(ws.Counters) == 0 {
			return nil, fmt.Sprintf("SCN %d:%d built or dropped an index", g, s), nil
		}
		for _, w := range ws.Writes {
			if w.Op == OpDrop {
				return nil, fmt.Sprintf("SCN %d:%d dropped table %s", g, s, w.Table), nil
			}
			if w.Op == OpReplace {
				return nil, fmt.Sprintf("SCN %d:%d replaced table %s by a bulk load", g, s, w.Table), nil
			}
			docs[string(p.Document(w.Table, w.Key))] = true
			_, rest, err := keys.DecodeOne(w.Key)
			if err != nil {
				return nil, "", err
			}
			group := w.Key[:len(w.Key)-len(rest)]
			groups[string(append(p.IndexTable(w.Table), group...))] = true
		}
		want++
	}
	if err := it.Error(); err != nil {
		return nil, "", err
	}
	if want != scn.Sequence+1 {
		return nil, fmt.Sprintf("the change log ends at sequence %d, not at the partition's %d", want-1, scn.Sequence), nil
	}
	d.docs, d.groups = slices.Sorted(maps.Keys(docs)), slices.Sorted(maps.Keys(groups))
	return d, "", nil
}

// writeDelta writes d as it is at the iterator's point, in key order
// (counters, documents, index groups, change log, metadata; a range
// deletion before the points it covers): the counters and metadata
// sections whole, each written document or its deletion, each group's
// index entries whole, the log entries after the previous backup.
func (r *Replica) writeDelta(it *storage.Iter, d *delta, w *tableWriter) error {
	p := r.prefix
	span := func(start, end []byte) error {
		if err := w.deleteRange(start, end); err != nil {
			return err
		}
		for ok := it.SeekGE(start); ok && bytes.Compare(it.Key(), end) < 0; ok = it.Next() {
			if err := w.set(it.Key(), it.Value()); err != nil {
				return err
			}
		}
		return it.Error()
	}
	if d.logFrom == nil {
		return nil // nothing was written since
	}
	counters := p.AutoIncrementPrefix()
	if err := span(counters, keys.PrefixEnd(counters)); err != nil {
		return err
	}
	for _, k := range d.docs {
		key := []byte(k)
		var err error
		if it.SeekGE(key) && bytes.Equal(it.Key(), key) {
			err = w.set(key, it.Value())
		} else {
			err = w.deleteRange(key, append(key, 0))
		}
		if err != nil {
			return err
		}
	}
	for _, g := range d.groups {
		if err := span([]byte(g), keys.PrefixEnd([]byte(g))); err != nil {
			return err
		}
	}
	logEnd := keys.PrefixEnd(p.LogPrefix())
	for ok := it.SeekGE(d.logFrom); ok && bytes.Compare(it.Key(), logEnd) < 0; ok = it.Next() {
		if err := w.set(it.Key(), it.Value()); err != nil {
			return err
		}
	}
	meta := p.MetaPrefix()
	return span(meta, keys.PrefixEnd(meta))
}

// tableWriter writes keys given in order as sstables of about
// BackupTableBytes. Ranges never overlap and each comes before the points
// it covers, so a table may end anywhere.
type tableWriter struct {
	e    *storage.Engine
	next func() (objstorage.Writable, error)
	w    *storage.SSTWriter
	size int
}

func (t *tableWriter) table(n int) error {
	if t.w != nil && t.size >= BackupTableBytes {
		if err := t.close(); err != nil {
			return err
		}
	}
	if t.w == nil {
		out, err := t.next()
		if err != nil {
			return err
		}
		t.w, t.size = t.e.NewSSTWriter(out), 0
	}
	t.size += n
	return nil
}

func (t *tableWriter) set(k, v []byte) error {
	if err := t.table(len(k) + len(v)); err != nil {
		return err
	}
	return t.w.Set(k, v)
}

func (t *tableWriter) deleteRange(start, end []byte) error {
	if err := t.table(len(start) + len(end)); err != nil {
		return err
	}
	return t.w.DeleteRange(start, end)
}

// close finishes the last table (an incremental with nothing has none).
func (t *tableWriter) close() error {
	if t.w == nil {
		return nil
	}
	err := t.w.Close()
	t.w = nil
	return err
}
