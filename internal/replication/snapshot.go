package replication

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/objstorage"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/storage"
)

// The frame types of a snapshot stream: header, a table's chunks and end,
// trailer. The package doc ("Snapshots") gives what a snapshot holds and
// why its installation is one atomic ingestion.
const (
	snapHeader  byte = 'h'
	snapChunk   byte = 'c'
	snapEnd     byte = 'e'
	snapTrailer byte = 't'
)

// snapshotTableBytes is about how many key and value bytes one sstable of
// a snapshot holds (TestingKnobs.SnapshotTableBytes replaces it).
const snapshotTableBytes = 32 << 20

// incomingSnapshot is a received snapshot waiting for raft to install it:
// its tables, staged in dir.
type incomingSnapshot struct {
	applied appliedState
	dir     string
	tables  []string
}

func (s *incomingSnapshot) discard() {
	if s != nil {
		_ = os.RemoveAll(s.dir)
	}
}

// sendSnapshot streams the partition to m's recipient in the background
// and reports the outcome to raft.
func (t *transport) sendSnapshot(g *Member, m *raftpb.Message) {
	t.mu.Lock()
	closed := t.closed
	if !closed {
		t.wg.Add(1)
	}
	t.mu.Unlock()
	if closed {
		return
	}
	to, name, prefix := m.GetTo(), g.name(), g.prefix
	head, err := proto.Marshal(m)
	if err != nil {
		t.wg.Done()
		return
	}
	go func() {
		defer t.wg.Done()
		err := t.streamSnapshot(to, name, prefix, head)
		if err == nil {
			t.host.snapshotsSent.Add(1)
		}
		if err != nil && t.ctx.Err() == nil {
			t.host.log.Warn("snapshot failed", "partition", fmt.Sprintf("%x", name), "to", to, "err", err)
		}
		t.host.reportSnapshot(name, to, err == nil)
	}()
}

// streamWritable sends the bytes of one sstable as 'c' frames of about
// chunk bytes, and 'e' once the table is finished.
type streamWritable struct {
	s     grpc.ClientStream
	buf   []byte
	chunk int
	sent  *atomic.Uint64 // counts the table bytes sent
}

func (w *streamWritable) Write(p []byte) error {
	w.buf = append(w.buf, p...)
	if len(w.buf) >= w.chunk {
		return w.flush()
	}
	return nil
}

func (w *streamWritable) flush() error {
	if len(w.buf) <= 1 {
		return nil
	}
	err := w.s.SendMsg(wrapperspb.Bytes(w.buf))
	if err == nil {
		w.sent.Add(uint64(len(w.buf) - 1))
	}
	w.buf = append(w.buf[:0], snapChunk)
	return err
}

func (w *streamWritable) Finish() error {
	if err := w.flush(); err != nil {
		return err
	}
	return w.s.SendMsg(wrapperspb.Bytes([]byte{snapEnd}))
}

func (w *streamWritable) Abort() {}

func (t *transport) streamSnapshot(to uint64, name string, prefix keys.Partition, head []byte) error {
	p := t.peer(to)
	if p == nil {
		return errors.New("transport closed")
	}
	if t.isCut(to) {
		return fmt.Errorf("node %d unreachable", to)
	}
	addr, err := t.host.cfg.Resolve(to)
	if err != nil {
		return err
	}
	conn, err := p.client(addr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(t.ctx)
	defer cancel()
	s, err := conn.NewStream(ctx, &snapshotStream, methodSnapshot, grpc.MaxCallSendMsgSize(MaxMessageBytes))
	if err != nil {
		return err
	}
	frame := appendBytes(appendBytes(binary.AppendUvarint([]byte{snapHeader}, t.self), []byte(name)), head)
	if err := s.SendMsg(wrapperspb.Bytes(frame)); err != nil {
		return err
	}
	e, knobs := t.host.engine, t.host.cfg.Knobs
	it, err := e.NewIter(prefix, prefix.End())
	if err != nil {
		return err
	}
	defer it.Close()
	next := func() (objstorage.Writable, error) {
		return &streamWritable{s: s, buf: []byte{snapChunk}, chunk: knobs.snapshotChunk(), sent: &t.host.snapshotBytes}, nil
	}
	for _, span := range prefix.DataSpans() {
		if _, err := storage.WriteSpanTables(e, it, span[0], span[1], knobs.snapshotTableBytes(), next); err != nil {
			return err
		}
	}
	appliedKey := prefix.RaftApplied()
	if !it.SeekGE(appliedKey) || !bytes.Equal(it.Key(), appliedKey) {
		if err := it.Error(); err != nil {
			return err
		}
		return errors.New("partition has no applied state")
	}
	if err := s.SendMsg(wrapperspb.Bytes(append([]byte{snapTrailer}, it.Value()...))); err != nil {
		return err
	}
	if err := s.CloseSend(); err != nil {
		return err
	}
	var reply wrapperspb.BytesValue
	return s.RecvMsg(&reply)
}

var snapshotSeq atomic.Uint64

// serveSnapshot receives one snapshot into staged files and hands it to
// the host.
func (t *transport) serveSnapshot(s grpc.ServerStream) (err error) {
	var (
		name    string
		msg     *raftpb.Message
		snap    = &incomingSnapshot{}
		trailer bool
		cur     *os.File
	)
	defer func() {
		if cur != nil {
			cur.Close()
		}
		if err != nil {
			snap.discard()
		}
	}()
	for {
		var f wrapperspb.BytesValue
		err := s.RecvMsg(&f)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		b := f.GetValue()
		if len(b) == 0 {
			return errFrame
		}
		if err := t.host.cfg.Knobs.snapshotFrame(b[0]); err != nil {
			return err
		}
		switch b[0] {
		case snapHeader:
			if msg != nil {
				return errFrame
			}
			r := reader{b: b[1:]}
			r.uvarint() // sender
			name = string(r.bytes())
			m := &raftpb.Message{}
			if r.err != nil || proto.Unmarshal(r.bytes(), m) != nil || r.err != nil {
				return errFrame
			}
			msg = m
			dir, err := os.MkdirTemp(t.host.staging, fmt.Sprintf("%x-", name))
			if err != nil {
				return err
			}
			snap.dir = dir
		case snapChunk:
			if msg == nil || trailer {
				return errFrame
			}
			if cur == nil {
				path := filepath.Join(snap.dir, fmt.Sprintf("%06d.sst", len(snap.tables)))
				if cur, err = os.Create(path); err != nil {
					return err
				}
				snap.tables = append(snap.tables, path)
			}
			if _, err := cur.Write(b[1:]); err != nil {
				return err
			}
		case snapEnd:
			if cur == nil {
				return errFrame
			}
			if err := cur.Sync(); err != nil {
				return err
			}
			err := cur.Close()
			cur = nil
			if err != nil {
				return err
			}
		case snapTrailer:
			if msg == nil || cur != nil {
				return errFrame
			}
			a, err := decodeApplied(b[1:])
			if err != nil {
				return err
			}
			snap.applied = a
			trailer = true
		default:
			return errFrame
		}
	}
	if msg == nil || !trailer || msg.GetType() != raftpb.MsgSnap {
		return errFrame
	}
	// Restate the snapshot at the position the sender actually read.
	a := snap.applied
	msg.Snapshot = &raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{
		Index: new(a.Index), Term: new(a.Term), ConfState: a.conf(),
	}}
	if err := t.host.receiveSnapshot(name, msg, snap); err != nil {
		return err
	}
	return s.SendMsg(&wrapperspb.BytesValue{})
}

// raftTable writes the table that replaces the Raft section of partition p
// on installing snap: a range deletion over the section (the old log and
// states), the hard state hs and the applied and truncated states at the
// snapshot's position.
func raftTable(e *storage.Engine, p keys.Partition, path string, snap *incomingSnapshot, hs *raftpb.HardState) error {
	out, err := storage.FileWritable(path)
	if err != nil {
		return err
	}
	w := e.NewSSTWriter(out)
	hsb, err := proto.Marshal(hs)
	if err != nil {
		return err
	}
	trunc := entryID{Index: snap.applied.Index, Term: snap.applied.Term}
	points := []kv{
		{p.RaftHardState(), hsb},
		{p.RaftApplied(), snap.applied.encode()},
		{p.RaftTruncated(), trunc.encode()},
	}
	slices.SortFunc(points, func(a, b kv) int { return bytes.Compare(a.key, b.key) })
	for _, pt := range points {
		if err := w.Set(pt.key, pt.value); err != nil {
			w.Close()
			return err
		}
	}
	rp := p.Raft()
	if err := w.DeleteRange(rp, keys.PrefixEnd(rp)); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

type kv struct{ key, value []byte }
