package replication

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/doppio-db/doppio/internal/keys"
)

// The gRPC service carries opaque frames (wrapperspb.BytesValue) so that no
// generated code is needed: Messages is one long-lived stream per ordered
// node pair of batched Raft messages (an empty batch is a liveness ping);
// Snapshot streams one partition snapshot in chunks.
const serviceName = "doppio.replication.Raft"

var serviceDesc = grpc.ServiceDesc{
	ServiceName: serviceName,
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Checksum", Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			return srv.(*transport).serveChecksum(ctx, dec)
		}},
		{MethodName: "Rebuild", Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			return srv.(*transport).serveRebuild(ctx, dec)
		}},
		{MethodName: "Suspect", Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			return srv.(*transport).serveSuspect(ctx, dec)
		}},
		{MethodName: "RebuildPeer", Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			return srv.(*transport).serveRebuildPeer(ctx, dec)
		}},
	},
	Streams: []grpc.StreamDesc{
		{StreamName: "Messages", ClientStreams: true, Handler: func(srv any, s grpc.ServerStream) error {
			return srv.(*transport).serveMessages(s)
		}},
		{StreamName: "Snapshot", ClientStreams: true, Handler: func(srv any, s grpc.ServerStream) error {
			return srv.(*transport).serveSnapshot(s)
		}},
	},
	Metadata: "internal/replication/transport.go",
}

// Client-side descriptions of the two streams (the server's carry handlers).
var (
	messagesStream = grpc.StreamDesc{StreamName: "Messages", ClientStreams: true}
	snapshotStream = grpc.StreamDesc{StreamName: "Snapshot", ClientStreams: true}
)

const (
	methodMessages = "/" + serviceName + "/Messages"
	methodSnapshot = "/" + serviceName + "/Snapshot"

	frameTarget = 4 << 20 // a batch frame is cut at about this size
	maxQueued   = 10000   // messages queued per peer before dropping (raft retransmits)
)

// snapshotChunk is about the size of one frame of a snapshot
// (TestingKnobs.SnapshotChunk replaces it).
const snapshotChunk = 1 << 20

// inbound is one received Raft message.
type inbound struct {
	group string
	hints
	msg *raftpb.Message
	// since is a moment of this node's clock before which the message was
	// not yet created: the frame's echo (zero when it had none).
	since time.Time
}

type outbound struct {
	group string
	hints
	data []byte
	// echo is the receiver's latest stamp this node had heard when the
	// message was queued (see encodeBatch).
	echo int64
}

// hints are what a frame carries with a Raft message besides it.
type hints struct {
	// quiesce: a leader's last heartbeat before its Raft group stops ticking.
	quiesce bool
	// trunc: the sending leader's log truncation index (0: none given).
	trunc uint64
	// commit: the sending leader's committed index (0: none given). A
	// heartbeat's own Commit is capped at what the follower is known to
	// hold, so a lagging follower cannot tell from it how far behind it is;
	// this can (see Member.contacted).
	commit uint64
	// released: a MsgTimeoutNow whose sender holds no lease and can earn
	// none in its term, and no earlier lease is left (see lease.go).
	released bool
}

type transport struct {
	host   *Host
	self   uint64
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// cut holds the peers this node neither sends to nor hears from: a
	// network partition, injected by tests (see Host.cut).
	cut atomic.Pointer[map[uint64]bool]
	// starved: this node drops the log entries (MsgApp) it receives,
	// everything else still coming through: a follower kept lagging,
	// injected by tests.
	starved atomic.Bool

	mu     sync.Mutex
	peers  map[uint64]*peer
	server *grpc.Server
	lis    net.Listener
	closed bool
}

// peer is the link to one other node: the outbound stream's queue and
// what we hear from it.
type peer struct {
	t  *transport
	id uint64

	mu     sync.Mutex
	queue  []outbound
	conn   *grpc.ClientConn
	target string

	kick      chan struct{}
	lastHeard atomic.Int64 // unix nanos of the last frame received
	// stamp is the latest stamp the peer put on a frame to this node;
	// lastEcho the latest echo it sent back whose frame was stepped, as
	// unix nanos of this node's clock (see frameHeader).
	stamp, lastEcho atomic.Int64
	alive           atomic.Bool
	stream          atomic.Uint64 // id of the current inbound stream
}

func newTransport(h *Host) *transport {
	ctx, cancel := context.WithCancel(context.Background())
	t := &transport{host: h, self: h.cfg.NodeID, ctx: ctx, cancel: cancel, peers: map[uint64]*peer{}}
	t.wg.Add(1)
	go t.watch()
	return t
}

func (t *transport) serve(lis net.Listener) {
	t.lis = lis
	creds := t.credentials()
	if tc := t.host.cfg.TLS; tc != nil && tc.Server == nil {
		creds = insecure.NewCredentials() // the listener's TLS is done
	}
	t.server = grpc.NewServer(grpc.MaxRecvMsgSize(MaxMessageBytes), grpc.Creds(creds))
	t.server.RegisterService(&serviceDesc, t)
	go func() { _ = t.server.Serve(lis) }()
}

func (t *transport) addr() string {
	if t.lis == nil {
		return ""
	}
	return t.lis.Addr().String()
}

func (t *transport) close() {
	t.mu.Lock()
	t.closed = true
	peers := t.peers
	t.mu.Unlock()
	t.cancel()
	if t.server != nil {
		t.server.Stop()
	}
	t.wg.Wait()
	for _, p := range peers {
		p.mu.Lock()
		if p.conn != nil {
			p.conn.Close()
		}
		p.mu.Unlock()
	}
}

// peer returns the link to node id, starting its sender.
func (t *transport) peer(id uint64) *peer {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.peers[id]; p != nil || t.closed {
		return p
	}
	p := &peer{t: t, id: id, kick: make(chan struct{}, 1)}
	t.peers[id] = p
	t.wg.Add(1)
	go p.run()
	return p
}

// connect makes sure a link to node id exists (so liveness pings flow).
func (t *transport) connect(id uint64) {
	if id != t.self {
		t.peer(id)
	}
}

func (t *transport) alive(id uint64) bool {
	t.mu.Lock()
	p := t.peers[id]
	t.mu.Unlock()
	return p != nil && p.alive.Load()
}

func (t *transport) lastHeard(id uint64) time.Time {
	t.mu.Lock()
	p := t.peers[id]
	t.mu.Unlock()
	if p == nil {
		return time.Time{}
	}
	return time.Unix(0, p.lastHeard.Load())
}

// echoed returns the latest moment of this node's clock that node id has
// shown it was past: it had heard a frame this node sent then (zero when
// none). Unlike lastHeard, this bounds when what node id sent was created,
// however long it was on the way.
func (t *transport) echoed(id uint64) time.Time {
	t.mu.Lock()
	p := t.peers[id]
	t.mu.Unlock()
	if p == nil || p.lastEcho.Load() == 0 {
		return time.Time{}
	}
	return time.Unix(0, p.lastEcho.Load())
}

// send queues m for node to, with its hints. Called from the loop, which
// marshals (raft messages must not be marshalled concurrently with
// appends).
func (t *transport) send(to uint64, group string, h hints, m *raftpb.Message) {
	p := t.peer(to)
	if p == nil {
		return
	}
	data, err := proto.Marshal(m)
	if err != nil {
		t.host.log.Error("marshal raft message", "err", err)
		return
	}
	p.mu.Lock()
	if len(p.queue) < maxQueued {
		p.queue = append(p.queue, outbound{group: group, hints: h, data: data, echo: p.stamp.Load()})
	}
	p.mu.Unlock()
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// watch declares silent peers dead.
func (t *transport) watch() {
	defer t.wg.Done()
	tick := time.NewTicker(t.host.cfg.TickInterval)
	defer tick.Stop()
	for {
		select {
		case <-t.ctx.Done():
			return
		case <-tick.C:
		}
		deadline := time.Now().Add(-t.host.cfg.DeadAfter).UnixNano()
		t.mu.Lock()
		var dead []*peer
		for _, p := range t.peers {
			if p.alive.Load() && p.lastHeard.Load() < deadline {
				dead = append(dead, p)
			}
		}
		t.mu.Unlock()
		for _, p := range dead {
			if p.alive.CompareAndSwap(true, false) {
				t.host.peerDown(p.id)
			}
		}
	}
}

func (t *transport) heard(from uint64, stream uint64) *peer {
	p := t.peer(from)
	if p == nil {
		return nil
	}
	p.lastHeard.Store(time.Now().UnixNano())
	p.stream.Store(stream)
	if p.alive.CompareAndSwap(false, true) {
		t.host.peerUp(from)
	}
	return p
}

var streamSeq atomic.Uint64

// serveMessages receives one node's stream of batches.
func (t *transport) serveMessages(s grpc.ServerStream) error {
	id := streamSeq.Add(1)
	var p *peer
	for {
		var f wrapperspb.BytesValue
		if err := s.RecvMsg(&f); err != nil {
			// The sender is gone (or restarting its stream): unless a newer
			// stream from it already arrived, its Raft groups elect now.
			if p != nil && p.stream.Load() == id && p.alive.CompareAndSwap(true, false) {
				t.host.peerDown(p.id)
			}
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		// Heard before decoding: a big batch on a busy node takes a while
		// to decode, and its sender is alive all the same.
		from, n := binary.Uvarint(f.GetValue())
		if n <= 0 {
			return errFrame
		}
		if t.isCut(from) {
			continue
		}
		p = t.heard(from, id)
		fr, msgs, err := decodeBatch(f.GetValue())
		if err != nil {
			return err
		}
		if p == nil {
			continue // closing
		}
		p.stamp.Store(fr.stamp)
		since, sender := echoTime(fr.echo), p
		for i := range msgs {
			msgs[i].since = since
		}
		if t.starved.Load() {
			msgs = slices.DeleteFunc(msgs, func(m inbound) bool { return m.msg.GetType() == raftpb.MsgApp })
		}
		// The echo is recorded once the frame's messages are stepped, in
		// order after the frames before it: until then a quiesced Raft
		// group this frame wakes still looks quiesced (see Member.FreshAt).
		t.host.deliver(from, msgs, func() { sender.echoed(since) })
	}
}

// run keeps the outbound stream to the peer and sends a batch whenever
// messages are queued, and an empty one (a ping) every tick.
func (p *peer) run() {
	t := p.t
	defer t.wg.Done()
	tick := time.NewTicker(t.host.cfg.TickInterval)
	defer tick.Stop()
	for t.ctx.Err() == nil {
		stream, cancel, err := p.open()
		if err != nil {
			p.dropQueue()
			select {
			case <-t.ctx.Done():
				return
			case <-tick.C:
			}
			continue
		}
		for err == nil {
			select {
			case <-t.ctx.Done():
				cancel()
				return
			case <-p.kick:
			case <-tick.C:
			}
			err = p.flush(stream)
		}
		cancel()
		p.dropQueue()
	}
}

func (p *peer) open() (grpc.ClientStream, context.CancelFunc, error) {
	t := p.t
	addr, err := t.host.cfg.Resolve(p.id)
	if err != nil {
		return nil, nil, err
	}
	conn, err := p.client(addr)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(t.ctx)
	s, err := conn.NewStream(ctx, &messagesStream, methodMessages, grpc.MaxCallSendMsgSize(MaxMessageBytes))
	if err != nil {
		cancel()
		return nil, nil, err
	}
	return s, cancel, nil
}

// client returns the connection to addr, replacing one to another address.
func (p *peer) client(addr string) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn != nil && p.target == addr {
		return p.conn, nil
	}
	if p.conn != nil {
		p.conn.Close()
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(p.t.credentials()))
	if err != nil {
		return nil, err
	}
	p.conn, p.target = conn, addr
	return conn, nil
}

// TLS is the mutual TLS of the node-to-node links.
type TLS struct {
	// Server configures the gRPC listener; it must require a node
	// certificate of the cluster's CA (certs.Loader.PeerServerConfig), so
	// that anything else is refused at the handshake. Nil when the
	// listener terminates TLS itself (a node's peer.Mux): the server then
	// serves the decrypted connections it is given.
	Server *tls.Config
	// Client returns the configuration of a new connection to a peer,
	// read at each handshake so that a reloaded CA or certificate is
	// used (certs.Loader.ClientConfig).
	Client func() *tls.Config
}

func (t *transport) credentials() credentials.TransportCredentials {
	if t.host.cfg.TLS == nil {
		return insecure.NewCredentials()
	}
	return peerCredentials{TransportCredentials: credentials.NewTLS(t.host.cfg.TLS.Server), client: t.host.cfg.TLS.Client}
}

// peerCredentials is gRPC's TLS with a client configuration read at each
// handshake; the server side's configuration reads the current
// certificates itself (GetConfigForClient).
type peerCredentials struct {
	credentials.TransportCredentials
	client func() *tls.Config
}

func (c peerCredentials) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return credentials.NewTLS(c.client()).ClientHandshake(ctx, authority, raw)
}

func (c peerCredentials) Clone() credentials.TransportCredentials {
	return peerCredentials{TransportCredentials: c.TransportCredentials.Clone(), client: c.client}
}

func (t *transport) isCut(id uint64) bool {
	m := t.cut.Load()
	return m != nil && (*m)[id]
}

// frame returns the header of a frame of msgs: the sender, a stamp of now
// and, as its echo, the earliest of the peer's stamps the messages were
// queued after (for a ping, the latest).
func (p *peer) frame(msgs []outbound) frameHeader {
	h := frameHeader{from: p.t.self, stamp: time.Now().UnixNano(), echo: p.stamp.Load()}
	for _, m := range msgs {
		h.echo = min(h.echo, m.echo)
	}
	return h
}

// flush sends everything queued, in frames of about frameTarget bytes.
func (p *peer) flush(s grpc.ClientStream) error {
	p.mu.Lock()
	q := p.queue
	p.queue = nil
	p.mu.Unlock()
	if p.t.isCut(p.id) {
		return nil // lost on the way
	}
	for first := true; first || len(q) > 0; first = false {
		n, size := 0, 0
		for n < len(q) && (n == 0 || size+len(q[n].data) < frameTarget) {
			size += len(q[n].data) + len(q[n].group) + 8
			n++
		}
		frame := encodeBatch(p.frame(q[:n]), q[:n])
		if err := s.SendMsg(wrapperspb.Bytes(frame)); err != nil {
			p.unreachable(q)
			return err
		}
		q = q[n:]
	}
	return nil
}

// echoTime is an echo of one of this node's stamps as a time: zero for
// none, or for one this node's clock has not reached (after a restart
// with the clock stepped back).
func echoTime(e int64) time.Time {
	if e <= 0 || e > time.Now().UnixNano() {
		return time.Time{}
	}
	return time.Unix(0, e)
}

// echoed records an echo heard from the peer (see transport.echoed).
func (p *peer) echoed(at time.Time) {
	if at.IsZero() {
		return
	}
	e := at.UnixNano()
	for {
		old := p.lastEcho.Load()
		if e <= old || p.lastEcho.CompareAndSwap(old, e) {
			return
		}
	}
}

func (p *peer) dropQueue() {
	p.mu.Lock()
	q := p.queue
	p.queue = nil
	p.mu.Unlock()
	p.unreachable(q)
}

func (p *peer) unreachable(q []outbound) {
	if len(q) == 0 {
		return
	}
	var groups []string
	seen := map[string]bool{}
	for _, m := range q {
		if !seen[m.group] {
			seen[m.group] = true
			groups = append(groups, m.group)
		}
	}
	p.t.host.reportUnreachable(p.id, groups)
}

// frameHeader opens a batch frame. stamp is the sender's clock when it
// sent the frame, echo the latest stamp it had heard from the receiver
// before it created every message in the frame (unix nanos; 0: none). The
// echo is what lets a follower bound how stale a leader's message is: it
// was created after the leader heard a frame the follower sent at echo,
// by the follower's own clock, so no two clocks are compared.
type frameHeader struct {
	from        uint64
	stamp, echo int64
}

// Batch frame: uvarint(from) uvarint(stamp) uvarint(echo) uvarint(n) n ×
// (bytes(Raft group) flags [uvarint(trunc)] [uvarint(commit)]
// bytes(message)); flags: 1 quiesce, 2 a truncation index follows, 4
// released, 8 a committed index follows.
func encodeBatch(fh frameHeader, msgs []outbound) []byte {
	size := 20
	for _, m := range msgs {
		size += len(m.group) + len(m.data) + 22
	}
	b := make([]byte, 0, size)
	b = binary.AppendUvarint(b, fh.from)
	b = binary.AppendUvarint(b, uint64(max(fh.stamp, 0)))
	b = binary.AppendUvarint(b, uint64(max(fh.echo, 0)))
	b = binary.AppendUvarint(b, uint64(len(msgs)))
	for _, m := range msgs {
		b = appendBytes(b, []byte(m.group))
		flags := byte(0)
		if m.quiesce {
			flags |= flagQuiesce
		}
		if m.trunc > 0 {
			flags |= flagTrunc
		}
		if m.released {
			flags |= flagReleased
		}
		if m.commit > 0 {
			flags |= flagCommit
		}
		b = append(b, flags)
		if m.trunc > 0 {
			b = binary.AppendUvarint(b, m.trunc)
		}
		if m.commit > 0 {
			b = binary.AppendUvarint(b, m.commit)
		}
		b = appendBytes(b, m.data)
	}
	return b
}

var errFrame = errors.New("corrupt replication frame")

const (
	flagQuiesce = 1 << iota
	flagTrunc
	flagReleased
	flagCommit
)

func decodeBatch(b []byte) (frameHeader, []inbound, error) {
	r := reader{b: b}
	fh := frameHeader{from: r.uvarint()}
	stamp, echo := r.uvarint(), r.uvarint()
	n := r.uvarint()
	if r.err != nil || n > uint64(len(b)) || stamp > math.MaxInt64 || echo > math.MaxInt64 {
		return frameHeader{}, nil, errFrame
	}
	fh.stamp, fh.echo = int64(stamp), int64(echo)
	out := make([]inbound, 0, n)
	for i := uint64(0); i < n; i++ {
		group := string(r.bytes())
		flags := r.byte()
		var trunc, commit uint64
		if flags&flagTrunc != 0 {
			trunc = r.uvarint()
		}
		if flags&flagCommit != 0 {
			commit = r.uvarint()
		}
		data := r.bytes()
		if r.err != nil {
			return frameHeader{}, nil, errFrame
		}
		m := &raftpb.Message{}
		if err := proto.Unmarshal(data, m); err != nil {
			return frameHeader{}, nil, fmt.Errorf("%w: %v", errFrame, err)
		}
		h := hints{quiesce: flags&flagQuiesce != 0, trunc: trunc, commit: commit, released: flags&flagReleased != 0}
		out = append(out, inbound{group: group, hints: h, msg: m})
	}
	if r.err != nil || len(r.b) != 0 {
		return frameHeader{}, nil, errFrame
	}
	return fh, out, nil
}

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errFrame
		r.b = nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) byte() byte {
	if len(r.b) == 0 {
		r.err = errFrame
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) bytes() []byte {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.err = errFrame
		r.b = nil
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// hasPrefix reports whether key is in the Raft section of partition p.
func inRaftSection(p keys.Partition, key []byte) bool { return bytes.HasPrefix(key, p.Raft()) }
