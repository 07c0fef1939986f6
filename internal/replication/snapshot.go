package replication

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/doppio-db/doppio/internal/keys"
)

// A snapshot of a partition is every key under its prefix except the Raft
// section (documents, index entries, change log, metadata), read through
// one Pebble iterator (a consistent point in time), plus the applied state
// read through the same iterator, which gives the snapshot's position.
//
// Stream: 'h' header (sender, partition, the MsgSnap), then 'd' chunks of
// (key, value) pairs, then 't' trailer (the applied state). The receiver
// stages everything and steps the MsgSnap restated at the trailer's
// position; the Ready that installs it deletes the range and writes the
// pairs in one batch.
const (
	snapHeader  byte = 'h'
	snapData    byte = 'd'
	snapTrailer byte = 't'
)

type kv struct{ key, value []byte }

// incomingSnapshot is a received snapshot waiting for raft to install it.
type incomingSnapshot struct {
	applied appliedState
	kvs     []kv
}

// sendSnapshot streams the partition to m's recipient in the background
// and reports the outcome to raft.
func (t *transport) sendSnapshot(g *Group, m *raftpb.Message) {
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
		if err != nil && t.ctx.Err() == nil {
			t.host.log.Warn("snapshot failed", "partition", fmt.Sprintf("%x", name), "to", to, "err", err)
		}
		t.host.reportSnapshot(name, to, err == nil)
	}()
}

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
	it, err := t.host.engine.NewIter(prefix, prefix.End())
	if err != nil {
		return err
	}
	defer it.Close()
	raftPrefix := prefix.Raft()
	appliedKey := prefix.RaftApplied()
	var applied []byte
	chunk := []byte{snapData}
	for ok := it.First(); ok; {
		k := it.Key()
		if bytes.HasPrefix(k, raftPrefix) {
			if ok = it.SeekGE(appliedKey); ok && bytes.Equal(it.Key(), appliedKey) {
				applied = append([]byte(nil), it.Value()...)
			}
			ok = it.SeekGE(keys.PrefixEnd(raftPrefix))
			continue
		}
		chunk = appendBytes(appendBytes(chunk, k), it.Value())
		if len(chunk) >= snapshotChunk {
			if err := s.SendMsg(wrapperspb.Bytes(chunk)); err != nil {
				return err
			}
			chunk = []byte{snapData}
		}
		ok = it.Next()
	}
	if err := it.Error(); err != nil {
		return err
	}
	if applied == nil {
		return errors.New("partition has no applied state")
	}
	if len(chunk) > 1 {
		if err := s.SendMsg(wrapperspb.Bytes(chunk)); err != nil {
			return err
		}
	}
	if err := s.SendMsg(wrapperspb.Bytes(append([]byte{snapTrailer}, applied...))); err != nil {
		return err
	}
	if err := s.CloseSend(); err != nil {
		return err
	}
	var reply wrapperspb.BytesValue
	return s.RecvMsg(&reply)
}

// serveSnapshot receives one snapshot and hands it to the host.
func (t *transport) serveSnapshot(s grpc.ServerStream) error {
	var (
		name    string
		msg     *raftpb.Message
		snap    = &incomingSnapshot{}
		trailer bool
	)
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
		r := reader{b: b[1:]}
		switch b[0] {
		case snapHeader:
			r.uvarint() // sender
			name = string(r.bytes())
			m := &raftpb.Message{}
			if r.err != nil || proto.Unmarshal(r.bytes(), m) != nil || r.err != nil {
				return errFrame
			}
			msg = m
		case snapData:
			for len(r.b) > 0 && r.err == nil {
				k, v := r.bytes(), r.bytes()
				snap.kvs = append(snap.kvs, kv{key: k, value: v})
			}
			if r.err != nil {
				return errFrame
			}
		case snapTrailer:
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
	prefix := keys.Partition(name)
	for _, e := range snap.kvs {
		if !bytes.HasPrefix(e.key, prefix) || inRaftSection(prefix, e.key) {
			return fmt.Errorf("snapshot key %x outside partition %x", e.key, name)
		}
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
