package replication

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/storage"
)

// appliedState is what a replica has applied, written in the same batch as
// the effects of the entries it covers, so restart resumes exactly after it.
type appliedState struct {
	Index uint64
	Term  uint64
	SCN   partition.SCN
	Conf  *raftpb.ConfState
}

func (a appliedState) encode() []byte {
	b := make([]byte, 0, 48)
	b = binary.BigEndian.AppendUint64(b, a.Index)
	b = binary.BigEndian.AppendUint64(b, a.Term)
	b = binary.BigEndian.AppendUint64(b, a.SCN.Generation)
	b = binary.BigEndian.AppendUint64(b, a.SCN.Sequence)
	cs, err := proto.Marshal(a.conf())
	if err != nil {
		panic(err) // a ConfState always marshals
	}
	return append(b, cs...)
}

func (a appliedState) conf() *raftpb.ConfState {
	if a.Conf == nil {
		return &raftpb.ConfState{}
	}
	return a.Conf
}

func decodeApplied(b []byte) (appliedState, error) {
	if len(b) < 32 {
		return appliedState{}, errors.New("corrupt applied state")
	}
	a := appliedState{
		Index: binary.BigEndian.Uint64(b),
		Term:  binary.BigEndian.Uint64(b[8:]),
		SCN:   partition.SCN{Generation: binary.BigEndian.Uint64(b[16:]), Sequence: binary.BigEndian.Uint64(b[24:])},
		Conf:  &raftpb.ConfState{},
	}
	if err := proto.Unmarshal(b[32:], a.Conf); err != nil {
		return appliedState{}, fmt.Errorf("corrupt applied conf state: %w", err)
	}
	return a, nil
}

// entryID names a log position: the truncated state is the last entry
// removed from the log (or the position a snapshot installed).
type entryID struct{ Index, Term uint64 }

func (e entryID) encode() []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, e.Index), e.Term)
}

func decodeEntryID(b []byte) (entryID, error) {
	if len(b) != 16 {
		return entryID{}, errors.New("corrupt truncated state")
	}
	return entryID{binary.BigEndian.Uint64(b), binary.BigEndian.Uint64(b[8:])}, nil
}

// raftStorage is raft.Storage over one partition's Raft section of the
// node's Pebble store. Only the host's loop goroutine uses it; it mirrors
// the small state in memory and reads log entries from Pebble.
type raftStorage struct {
	engine *storage.Engine
	prefix keys.Partition

	hard     *raftpb.HardState
	applied  appliedState
	trunc    entryID
	last     uint64 // index of the last entry in the log (trunc.Index if empty)
	lastTerm uint64

	// tail holds the log's newest entries as appended (raft never changes
	// an entry it handed over), the last one at index last, so that raft
	// reads the entries it commits and applies, just after appending them,
	// without an iterator and an unmarshalling each. Entries once applied
	// leave it; older ones (a lagging follower's) are read from Pebble.
	tail []*raftpb.Entry
}

// entryBuffers hold an entry's encoding on its way into a batch (which
// copies it), so that each write does not leave its entry as garbage.
// Buffers grown past maxPooledEntry are left to the collector.
var entryBuffers = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledEntry = 64 << 10

// maxTail bounds the entries kept in memory per replica.
const maxTail = 256

// fromTail returns the entries [lo, hi) if the tail holds them all.
func (s *raftStorage) fromTail(lo, hi uint64) ([]*raftpb.Entry, bool) {
	if len(s.tail) == 0 || hi > s.last+1 {
		return nil, false
	}
	first := s.tail[0].GetIndex()
	if lo < first || lo > hi {
		return nil, false
	}
	return s.tail[lo-first : hi-first : hi-first], true
}

var _ raft.Storage = (*raftStorage)(nil)

// loadStorage reads the replica's Raft state; an absent state is the empty
// state of a replica waiting to be sent a snapshot.
func loadStorage(e *storage.Engine, p keys.Partition) (*raftStorage, error) {
	s := &raftStorage{engine: e, prefix: p, hard: &raftpb.HardState{}, applied: appliedState{Conf: &raftpb.ConfState{}}}
	if v, err := e.Get(p.RaftHardState()); err == nil {
		if err := proto.Unmarshal(v, s.hard); err != nil {
			return nil, fmt.Errorf("corrupt hard state: %w", err)
		}
	} else if !errors.Is(err, storage.ErrNotFound) {
		return nil, err
	}
	if v, err := e.Get(p.RaftApplied()); err == nil {
		if s.applied, err = decodeApplied(v); err != nil {
			return nil, err
		}
	} else if !errors.Is(err, storage.ErrNotFound) {
		return nil, err
	}
	if v, err := e.Get(p.RaftTruncated()); err == nil {
		if s.trunc, err = decodeEntryID(v); err != nil {
			return nil, err
		}
	} else if !errors.Is(err, storage.ErrNotFound) {
		return nil, err
	}
	s.last, s.lastTerm = s.trunc.Index, s.trunc.Term
	lp := p.RaftLogPrefix()
	it, err := e.NewIter(lp, keys.PrefixEnd(lp))
	if err != nil {
		return nil, err
	}
	defer it.Close()
	if it.Last() {
		var ent raftpb.Entry
		if err := proto.Unmarshal(it.Value(), &ent); err != nil {
			return nil, fmt.Errorf("corrupt log entry: %w", err)
		}
		s.last, s.lastTerm = ent.GetIndex(), ent.GetTerm()
	}
	return s, it.Error()
}

// empty reports whether the replica has no Raft state at all.
func (s *raftStorage) empty() bool {
	return s.last == 0 && s.hard.GetTerm() == 0 && len(s.applied.conf().GetVoters()) == 0
}

// bootstrap writes the initial state every first voter of a Raft group writes
// identically: an empty log after position (1, 1) whose configuration is the
// voters. The first leader is elected in term 2.
func (s *raftStorage) bootstrap(b *storage.Batch, voters []uint64) {
	s.trunc = entryID{Index: 1, Term: 1}
	s.last, s.lastTerm = 1, 1
	s.applied = appliedState{Index: 1, Term: 1, Conf: &raftpb.ConfState{Voters: append([]uint64(nil), voters...)}}
	s.hard = &raftpb.HardState{Term: new(uint64(1)), Commit: new(uint64(1))}
	b.Set(s.prefix.RaftTruncated(), s.trunc.encode())
	b.Set(s.prefix.RaftApplied(), s.applied.encode())
	s.setHardState(b, s.hard)
}

// InitialState implements raft.Storage. The configuration is the one as of
// the applied index, which is where raft resumes (Config.Applied).
func (s *raftStorage) InitialState() (*raftpb.HardState, *raftpb.ConfState, error) {
	return proto.Clone(s.hard).(*raftpb.HardState), proto.Clone(s.applied.conf()).(*raftpb.ConfState), nil
}

// Entries implements raft.Storage.
func (s *raftStorage) Entries(lo, hi, maxSize uint64) ([]*raftpb.Entry, error) {
	if lo <= s.trunc.Index {
		return nil, raft.ErrCompacted
	}
	if hi > s.last+1 {
		return nil, fmt.Errorf("entries [%d, %d) beyond last index %d", lo, hi, s.last)
	}
	if ents, ok := s.fromTail(lo, hi); ok {
		var size uint64
		for i, e := range ents {
			if size += uint64(proto.Size(e)); i > 0 && size > maxSize {
				return ents[:i:i], nil
			}
		}
		return ents, nil
	}
	it, err := s.engine.NewIter(s.prefix.RaftLog(lo), s.prefix.RaftLog(hi))
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []*raftpb.Entry
	var size uint64
	next := lo
	for ok := it.First(); ok; ok = it.Next() {
		ent := &raftpb.Entry{}
		if err := proto.Unmarshal(it.Value(), ent); err != nil {
			return nil, fmt.Errorf("corrupt log entry: %w", err)
		}
		if ent.GetIndex() != next {
			return nil, raft.ErrUnavailable
		}
		size += uint64(proto.Size(ent))
		if len(out) > 0 && size > maxSize {
			return out, it.Error()
		}
		out = append(out, ent)
		next++
	}
	if err := it.Error(); err != nil {
		return nil, err
	}
	if next != hi {
		return nil, raft.ErrUnavailable
	}
	return out, nil
}

// Term implements raft.Storage.
func (s *raftStorage) Term(i uint64) (uint64, error) {
	switch {
	case i == s.trunc.Index:
		return s.trunc.Term, nil
	case i < s.trunc.Index:
		return 0, raft.ErrCompacted
	case i > s.last:
		return 0, raft.ErrUnavailable
	case i == s.last:
		return s.lastTerm, nil
	}
	if ents, ok := s.fromTail(i, i+1); ok {
		return ents[0].GetTerm(), nil
	}
	v, err := s.engine.Get(s.prefix.RaftLog(i))
	if errors.Is(err, storage.ErrNotFound) {
		return 0, raft.ErrUnavailable
	}
	if err != nil {
		return 0, err
	}
	var ent raftpb.Entry
	if err := proto.Unmarshal(v, &ent); err != nil {
		return 0, fmt.Errorf("corrupt log entry: %w", err)
	}
	return ent.GetTerm(), nil
}

// LastIndex implements raft.Storage.
func (s *raftStorage) LastIndex() (uint64, error) { return s.last, nil }

// FirstIndex implements raft.Storage.
func (s *raftStorage) FirstIndex() (uint64, error) { return s.trunc.Index + 1, nil }

// Snapshot implements raft.Storage. The state machine lives in Pebble, so a
// snapshot is described by the applied position only; the sender reads the
// partition's range at send time and restates the position it actually
// read (which may be later, never earlier).
func (s *raftStorage) Snapshot() (*raftpb.Snapshot, error) {
	return &raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{
		Index:     new(s.applied.Index),
		Term:      new(s.applied.Term),
		ConfState: proto.Clone(s.applied.conf()).(*raftpb.ConfState),
	}}, nil
}

func (s *raftStorage) setHardState(b *storage.Batch, hs *raftpb.HardState) {
	v, err := proto.Marshal(hs)
	if err != nil {
		panic(err)
	}
	b.Set(s.prefix.RaftHardState(), v)
	s.hard = proto.Clone(hs).(*raftpb.HardState)
}

// append writes ents to the log, replacing any entries at or after the
// first of them.
func (s *raftStorage) append(b *storage.Batch, ents []*raftpb.Entry) {
	if len(ents) == 0 {
		return
	}
	first := ents[0].GetIndex()
	if first <= s.last {
		b.DeleteRange(s.prefix.RaftLog(first), s.prefix.RaftLog(s.last+1))
	}
	buf := entryBuffers.Get().(*[]byte)
	for _, e := range ents {
		v, err := proto.MarshalOptions{}.MarshalAppend((*buf)[:0], e)
		if err != nil {
			panic(err)
		}
		b.Set(s.prefix.RaftLog(e.GetIndex()), v) // copied into the batch
		*buf = v
	}
	if cap(*buf) <= maxPooledEntry {
		entryBuffers.Put(buf)
	}
	last := ents[len(ents)-1]
	s.last, s.lastTerm = last.GetIndex(), last.GetTerm()
	// The tail stays contiguous up to last: entries from first on are
	// replaced, and a gap (first beyond the tail's end) starts it anew.
	// Slices of the tail handed to raft (a Ready's committed entries) must
	// not change under it: the tail is only ever resliced or copied, never
	// written in place.
	keep := 0
	if n := len(s.tail); n > 0 && first >= s.tail[0].GetIndex() && first <= s.tail[n-1].GetIndex()+1 {
		keep = int(first - s.tail[0].GetIndex())
	}
	s.tail = append(s.tail[:keep:keep], ents...)
	if len(s.tail) > maxTail {
		s.tail = s.tail[len(s.tail)-maxTail:]
	}
}

// dropTail forgets the tail's entries up to and including index.
func (s *raftStorage) dropTail(index uint64) {
	n := 0
	for n < len(s.tail) && s.tail[n].GetIndex() <= index {
		n++
	}
	s.tail = s.tail[n:]
}

// setApplied records the applied state in b.
func (s *raftStorage) setApplied(b *storage.Batch, a appliedState) {
	b.Set(s.prefix.RaftApplied(), a.encode())
	s.noteApplied(a)
}

// noteApplied takes a as the applied state, which the caller writes.
func (s *raftStorage) noteApplied(a appliedState) {
	s.applied = a
	s.dropTail(a.Index)
}

// truncate removes the log entries up to and including index.
func (s *raftStorage) truncate(b *storage.Batch, index uint64) error {
	if index <= s.trunc.Index || index > s.applied.Index {
		return nil
	}
	term, err := s.Term(index)
	if err != nil {
		return err
	}
	b.DeleteRange(s.prefix.RaftLogPrefix(), s.prefix.RaftLog(index+1))
	s.dropTail(index)
	s.trunc = entryID{Index: index, Term: term}
	b.Set(s.prefix.RaftTruncated(), s.trunc.encode())
	return nil
}

// installSnapshot replaces the partition's whole range, data and Raft
// section, with the staged snapshot in one atomic Pebble ingestion (see
// raftTable); hs is the hard state to hold with it (its commit at least the
// snapshot's index, so a restart right after finds a consistent state).
func (s *raftStorage) installSnapshot(knobs *TestingKnobs, snap *incomingSnapshot, hs *raftpb.HardState) error {
	hs = proto.Clone(hs).(*raftpb.HardState)
	if hs.GetCommit() < snap.applied.Index {
		hs.Commit = new(snap.applied.Index)
	}
	rt := filepath.Join(snap.dir, "raft.sst")
	if err := raftTable(s.engine, s.prefix, rt, snap, hs); err != nil {
		return err
	}
	knobs.snapshotIngest("before")
	if err := s.engine.Ingest(context.Background(), append(slices.Clone(snap.tables), rt)); err != nil {
		return err
	}
	knobs.snapshotIngest("after")
	s.trunc = entryID{Index: snap.applied.Index, Term: snap.applied.Term}
	s.last, s.lastTerm = s.trunc.Index, s.trunc.Term
	s.tail = nil
	s.applied = snap.applied
	s.hard = hs
	return nil
}
