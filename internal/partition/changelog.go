package partition

import (
	"bytes"
	"time"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/storage"
)

// LogEntry is one committed transaction of the partition's change log.
type LogEntry struct {
	SCN SCN
	*WriteSet
}

// ReadLog returns up to limit change-log entries with SCN after from, in
// SCN order.
func (r *Replica) ReadLog(from SCN, limit int) ([]LogEntry, error) {
	lower := r.prefix.Log(from.Generation, from.Sequence+1)
	it, err := r.engine.NewIter(lower, keys.PrefixEnd(r.prefix.LogPrefix()))
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []LogEntry
	for ok := it.First(); ok && len(out) < limit; ok = it.Next() {
		g, s, ok := r.prefix.ParseLog(it.Key())
		if !ok {
			return nil, errCorrupt
		}
		ws, err := DecodeWriteSet(append([]byte(nil), it.Value()...))
		if err != nil {
			return nil, err
		}
		out = append(out, LogEntry{SCN: SCN{Generation: g, Sequence: s}, WriteSet: ws})
	}
	return out, it.Error()
}

// Retention bounds the change log: entries beyond the newest MaxEntries, or
// older than MaxAge, are trimmed. Zero means unbounded.
type Retention struct {
	MaxEntries uint64
	MaxAge     time.Duration
}

// TrimLog deletes the change-log entries that retention no longer keeps, and
// returns how many it deleted. The newest entry is always kept, so a reader
// can tell where the log resumes.
func (r *Replica) TrimLog(ret Retention, now time.Time) (int, error) {
	applied := r.Applied()
	logPrefix := r.prefix.LogPrefix()
	it, err := r.engine.NewIter(logPrefix, keys.PrefixEnd(logPrefix))
	if err != nil {
		return 0, err
	}
	cutoff := now.Add(-ret.MaxAge).UnixMilli()
	var end []byte
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		_, s, ok := r.prefix.ParseLog(it.Key())
		if !ok || s >= applied.Sequence {
			break
		}
		tooMany := ret.MaxEntries > 0 && applied.Sequence-s >= ret.MaxEntries
		tooOld := ret.MaxAge > 0 && MtimeOf(it.Value()) < cutoff
		if !tooMany && !tooOld {
			break
		}
		end = append(end[:0], it.Key()...)
		n++
	}
	if err := it.Close(); err != nil || end == nil {
		return 0, err
	}
	b := r.engine.NewBatch()
	b.DeleteRange(logPrefix, append(end, 0))
	return n, r.engine.Commit(b)
}

// Commits returns a channel closed when the next write set is committed to
// this replica's change log (on this node). Take it before ReadLog, so a
// commit landing between the read and the wait wakes the waiter.
func (r *Replica) Commits() <-chan struct{} {
	return r.engine.Changed(string(r.prefix.LogPrefix()))
}

// Snapshot is a consistent, point-in-time view of one replica's documents
// and the SCN they reflect: the change log after SCN continues it exactly.
type Snapshot struct {
	SCN    SCN
	prefix keys.Partition
	it     *storage.Iter
}

// Snapshot opens a view of the replica as of now. Close it when done; an
// open view pins the storage it reads.
func (r *Replica) Snapshot() (*Snapshot, error) {
	it, err := r.engine.NewIter(r.prefix, r.prefix.End())
	if err != nil {
		return nil, err
	}
	s := &Snapshot{prefix: r.prefix, it: it}
	applied := r.prefix.Meta(metaApplied)
	if it.SeekGE(applied) && bytes.Equal(it.Key(), applied) {
		scn, ok := decodeSCN(it.Value())
		if !ok {
			it.Close()
			return nil, errCorrupt
		}
		s.SCN = scn
	}
	return s, nil
}

// Documents calls fn with every document of table in key order (key is
// the encoded full key; both are valid only during the call) until fn
// fails.
func (s *Snapshot) Documents(table string, fn func(key []byte, rec Record) error) error {
	tp := s.prefix.Table(table)
	end := keys.PrefixEnd(tp)
	for ok := s.it.SeekGE(tp); ok && bytes.Compare(s.it.Key(), end) < 0; ok = s.it.Next() {
		rec, err := decodeRecord(s.it.Value())
		if err != nil {
			return err
		}
		if err := fn(s.it.Key()[len(tp):], rec); err != nil {
			return err
		}
	}
	return s.it.Error()
}

// Close releases the view.
func (s *Snapshot) Close() error { return s.it.Close() }
