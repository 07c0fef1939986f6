package partition

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/storage"
)

// A restore loads a backup into an empty partition through its replicator,
// so every replica applies the same steps (like write sets, they are
// evaluated once, by the leader, and applied mechanically):
//
//	begin(session)        clear the data spans, mark the partition as
//	                      being restored by session
//	load(session, keys)   range deletions then points, one bounded step at a
//	                      time; the mark stays
//	finish(session, SCN)  drop the mark; the partition's applied SCN becomes
//	                      the backup's, so new writes continue after it
//
// Restore steps consume no SCN. The leader refuses a begin unless the
// partition has never applied a write set (or it holds an interrupted
// restore of the same session, which begin clears and starts over), and
// refuses load and finish unless the mark names the session: a rerun
// restore converges, another one is refused.

// metaRestore marks a partition with an unfinished restore; its value is
// the session.
const metaRestore = "restore"

// Restore step kinds.
const (
	RestoreBegin  byte = 'b'
	RestoreLoad   byte = 'l'
	RestoreFinish byte = 'f'
)

// RestoreStep is one replicated step of a restore.
type RestoreStep struct {
	Kind    byte
	Session string
	// Load: ranges to delete, then points to set.
	Ranges []KeyRange
	Sets   []IndexEntry
	// Finish: the partition's SCN from now on.
	SCN SCN
}

const restoreFormat = 1

// Encode returns the binary form of s.
func (s *RestoreStep) Encode() []byte {
	b := []byte{restoreFormat, s.Kind}
	b = appendBytes(b, []byte(s.Session))
	b = binary.AppendUvarint(b, s.SCN.Generation)
	b = binary.AppendUvarint(b, s.SCN.Sequence)
	b = binary.AppendUvarint(b, uint64(len(s.Ranges)))
	for _, r := range s.Ranges {
		b = appendBytes(appendBytes(b, r.Start), r.End)
	}
	b = binary.AppendUvarint(b, uint64(len(s.Sets)))
	for _, e := range s.Sets {
		b = appendBytes(appendBytes(b, e.Key), e.Value)
	}
	return b
}

// DecodeRestoreStep parses the output of Encode.
func DecodeRestoreStep(b []byte) (*RestoreStep, error) {
	d := decoder{b: b}
	if d.byte() != restoreFormat {
		return nil, errCorrupt
	}
	s := &RestoreStep{Kind: d.byte(), Session: string(d.bytes())}
	s.SCN = SCN{Generation: d.uvarint(), Sequence: d.uvarint()}
	count := func() int {
		n := d.uvarint()
		if n > uint64(len(b)) {
			d.fail()
			return 0
		}
		return int(n)
	}
	s.Ranges = make([]KeyRange, count())
	for i := range s.Ranges {
		s.Ranges[i] = KeyRange{Start: d.bytes(), End: d.bytes()}
	}
	s.Sets = make([]IndexEntry, count())
	for i := range s.Sets {
		s.Sets[i] = IndexEntry{Key: d.bytes(), Value: d.bytes()}
	}
	if d.err != nil || len(d.b) != 0 {
		return nil, errCorrupt
	}
	return s, nil
}

// ApplyRestore writes the effect of step s into b and returns the SCN the
// partition is at from now on when s finishes the restore (nil otherwise).
// Like Apply, it is a pure function of its inputs.
func ApplyRestore(b *storage.Batch, p keys.Partition, s *RestoreStep) *SCN {
	mark := p.Meta(metaRestore)
	switch s.Kind {
	case RestoreBegin:
		for _, span := range p.DataSpans() {
			b.DeleteRange(span[0], span[1])
		}
		b.Set(mark, []byte(s.Session))
	case RestoreLoad:
		for _, r := range s.Ranges {
			b.DeleteRange(r.Start, r.End)
		}
		for _, e := range s.Sets {
			b.Set(e.Key, e.Value)
		}
		b.Set(mark, []byte(s.Session)) // a full table's range clears it
	case RestoreFinish:
		b.Delete(mark)
		if s.SCN.Sequence > 0 {
			b.Set(p.Meta(metaApplied), encodeSCN(s.SCN)) // as the backup's metadata says
		}
		b.Notify(string(p.LogPrefix()))
		scn := s.SCN
		return &scn
	}
	return nil
}

// RestoreReplicator is a Replicator that also replicates restore steps: it
// returns once the step is applied on this replica.
type RestoreReplicator interface {
	ReplicateRestore(ctx context.Context, s *RestoreStep) error
}

// ReplicateRestore implements RestoreReplicator.
func (l *Local) ReplicateRestore(ctx context.Context, s *RestoreStep) error {
	b := l.engine.NewBatch()
	l.mu.Lock()
	final := ApplyRestore(b, l.prefix, s)
	err := l.engine.Commit(b)
	if err == nil && final != nil {
		l.last = *final
	}
	l.mu.Unlock()
	return err
}

// RestoreSession returns the session of the restore this replica holds
// unfinished ("" when none).
func (r *Replica) RestoreSession() (string, error) {
	v, err := r.engine.Get(r.prefix.Meta(metaRestore))
	if errors.Is(err, storage.ErrNotFound) {
		return "", nil
	}
	return string(v), err
}

// refuseWhileRestoring refuses writes to a partition with an unfinished
// restore. Only a partition that never applied a write set can hold one,
// so the lookup costs nothing once a partition has data.
func (r *Replica) refuseWhileRestoring() error {
	if r.Applied().Sequence != 0 {
		return nil
	}
	session, err := r.RestoreSession()
	if err != nil || session == "" {
		return err
	}
	return problem.New(problem.Conflict, "partition %d of %s is being restored from backup %s; write once the restore has finished", r.ID, r.DB, session)
}

// AppliedPoint is the replica's applied SCN with the digest of its
// change-log entry there (see BackupPoint): a restore run again knows a
// partition it finished by it.
func (r *Replica) AppliedPoint() (BackupPoint, error) {
	pt := BackupPoint{SCN: r.Applied()}
	if pt.SCN.Sequence == 0 {
		return pt, nil
	}
	v, err := r.engine.Get(r.prefix.Log(pt.SCN.Generation, pt.SCN.Sequence))
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return pt, nil
	case err != nil:
		return pt, err
	}
	pt.Entry = EntryDigest(v)
	return pt, nil
}

func (r *Replica) restorer(ctx context.Context) (RestoreReplicator, error) {
	rr, ok := r.repl.(RestoreReplicator)
	if !ok {
		return nil, problem.New(problem.Conflict, "partition %d of %s cannot be restored (its replicator carries no restore steps)", r.ID, r.DB)
	}
	if err := r.repl.Lead(ctx); err != nil {
		return nil, err
	}
	return rr, nil
}

// BeginRestore starts (or, for the same session, starts over) a restore
// of this partition. It refuses a partition that has applied a write set
// or holds another session's unfinished restore. Call it on the leader.
func (r *Replica) BeginRestore(ctx context.Context, session string) error {
	rr, err := r.restorer(ctx)
	if err != nil {
		return err
	}
	cur, err := r.RestoreSession()
	if err != nil {
		return err
	}
	switch {
	case cur == session:
	case cur != "":
		return problem.New(problem.Conflict, "partition %d of %s holds an unfinished restore of backup %s; run that restore again, or restore into a new database", r.ID, r.DB, cur)
	case r.Applied().Sequence != 0:
		return problem.New(problem.Conflict, "partition %d of %s is not empty (at SCN %s); a backup is restored only into an empty database", r.ID, r.DB, r.Applied())
	}
	return rr.ReplicateRestore(ctx, &RestoreStep{Kind: RestoreBegin, Session: session})
}

func (r *Replica) checkSession(session string) error {
	cur, err := r.RestoreSession()
	if err != nil {
		return err
	}
	if cur != session {
		if cur == "" {
			return problem.New(problem.Conflict, "partition %d of %s has no restore of backup %s in progress; begin it first", r.ID, r.DB, session)
		}
		return problem.New(problem.Conflict, "partition %d of %s is being restored from backup %s, not %s", r.ID, r.DB, cur, session)
	}
	return nil
}

// RestoreStepBytes bounds the keys and values of one load step.
var RestoreStepBytes = 1 << 20

// Loaded counts what LoadRestore wrote.
type Loaded struct {
	Keys, Ranges int
	Bytes        int64
}

// LoadRestoreTable is LoadRestore of a table held in memory.
func (r *Replica) LoadRestoreTable(ctx context.Context, session string, from keys.Partition, table []byte) (Loaded, error) {
	dir, err := r.engine.StagingDir(fmt.Sprintf("restore-%d-%d", r.ID, restoreSeq.Add(1)))
	if err != nil {
		return Loaded{}, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "table.sst")
	if err := os.WriteFile(path, table, 0o644); err != nil {
		return Loaded{}, err
	}
	return r.LoadRestore(ctx, session, from, path)
}

var restoreSeq atomic.Uint64

// LoadRestore replicates the contents of the backup sstable at path,
// written from partition from (the same partition of the backup's
// database), in steps of at most RestoreStepBytes, rewriting keys to this
// partition. A key outside from's data spans fails it before anything is
// replicated.
func (r *Replica) LoadRestore(ctx context.Context, session string, from keys.Partition, path string) (Loaded, error) {
	rr, err := r.restorer(ctx)
	if err != nil {
		return Loaded{}, err
	}
	if err := r.checkSession(session); err != nil {
		return Loaded{}, err
	}
	var (
		steps []*RestoreStep
		cur   = &RestoreStep{Kind: RestoreLoad, Session: session}
		size  int
		n     Loaded
	)
	add := func(sz int) {
		size += sz
		n.Bytes += int64(sz)
		if size >= RestoreStepBytes {
			steps = append(steps, cur)
			cur, size = &RestoreStep{Kind: RestoreLoad, Session: session}, 0
		}
	}
	rewrite := func(k []byte, end bool) ([]byte, error) {
		if end && bytes.Equal(k, from.End()) {
			return r.prefix.End(), nil
		}
		if !bytes.HasPrefix(k, from) {
			return nil, problem.New(problem.Invalid, "backup table holds key %x outside partition %x", k, []byte(from))
		}
		if !end && bytes.HasPrefix(k, from.Raft()) {
			return nil, problem.New(problem.Invalid, "backup table holds key %x of the Raft section", k)
		}
		return append(bytes.Clone(r.prefix), k[len(from):]...), nil
	}
	raftStart, raftEnd := from.Raft(), keys.PrefixEnd(from.Raft())
	err = r.engine.ReadSST(path, storage.SSTVisitor{
		RangeDelete: func(start, end []byte) error {
			if bytes.Compare(start, raftEnd) < 0 && bytes.Compare(end, raftStart) > 0 {
				return problem.New(problem.Invalid, "backup table deletes keys of the Raft section")
			}
			s, err := rewrite(start, false)
			if err != nil {
				return err
			}
			e, err := rewrite(end, true)
			if err != nil {
				return err
			}
			cur.Ranges = append(cur.Ranges, KeyRange{Start: s, End: e})
			n.Ranges++
			add(len(s) + len(e))
			return nil
		},
		Set: func(key, value []byte) error {
			k, err := rewrite(key, false)
			if err != nil {
				return err
			}
			cur.Sets = append(cur.Sets, IndexEntry{Key: k, Value: bytes.Clone(value)})
			n.Keys++
			add(len(k) + len(value))
			return nil
		},
	})
	if err != nil {
		if _, ok := problem.As(err); ok {
			return Loaded{}, err
		}
		return Loaded{}, problem.New(problem.Invalid, "backup table is unreadable: %v", err)
	}
	if len(cur.Ranges)+len(cur.Sets) > 0 {
		steps = append(steps, cur)
	}
	for _, s := range steps {
		if err := rr.ReplicateRestore(ctx, s); err != nil {
			return Loaded{}, fmt.Errorf("restore step of partition %d: %w", r.ID, err)
		}
	}
	return n, nil
}

// FinishRestore ends the restore of session: the partition's SCN becomes
// scn, the backup's.
func (r *Replica) FinishRestore(ctx context.Context, session string, scn SCN) error {
	rr, err := r.restorer(ctx)
	if err != nil {
		return err
	}
	if err := r.checkSession(session); err != nil {
		return err
	}
	return rr.ReplicateRestore(ctx, &RestoreStep{Kind: RestoreFinish, Session: session, SCN: scn})
}
