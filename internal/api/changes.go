package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/doppio-db/doppio/internal/backoff"
	"github.com/doppio-db/doppio/internal/changes"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/peer"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/replication"
	"github.com/doppio-db/doppio/internal/schema"
)

// ReplicaLocator is implemented by a Cluster that knows where partitions'
// replicas are; the change stream uses it to read partitions this node
// does not host, preferring followers.
type ReplicaLocator interface {
	Replicas(db string, p int) []ReplicaAddr
}

// ReplicaAddr is a live node holding a replica of a partition.
type ReplicaAddr struct {
	Node   string
	Peer   string // the node's peer address (internal/peer)
	Leader bool
}

const (
	// headerChangeSources names, per partition, the node and role of the
	// replica a stream started reading: "0=n2/follower,1=n3/follower".
	headerChangeSources = "X-Doppio-Change-Sources"
	// changesHeartbeat is how often an idle stream writes a checkpoint-only
	// line, so consumers see progress past filtered transactions and both
	// ends notice a dead connection.
	changesHeartbeat = time.Second
	// changesSilence is how long a node waits for a line from a peer's
	// stream before it reads the partition from another replica.
	changesSilence = 5 * time.Second
	// changesQueue bounds the events buffered between the partitions'
	// readers and the writer.
	changesQueue = 1024
)

// changesRequest is a parsed GET /_changes/{db}.
type changesRequest struct {
	db         schema.Database
	tables     []string // selected tables, in name order
	filter     changes.Filter
	partitions []int
	from       *changes.Checkpoint // nil: from now (or bootstrap)
	bootstrap  bool
	sse        bool
	local      bool // forwarded by another node: serve hosted replicas only
	// allOpen is closed once every partition's source is open; a source
	// sends nothing more than its first items before, so what the writer
	// holds while it waits stays small.
	allOpen chan struct{}
}

func (s *Server) parseChanges(r *http.Request, p params) (changesRequest, error) {
	var cr changesRequest
	d, err := s.database(r.Context(), p.db)
	if err != nil {
		return cr, err
	}
	cr.db = d
	q := r.URL.Query()
	for k := range q {
		switch k {
		case "tables", "partitions", "from", "bootstrap":
			if len(q[k]) > 1 {
				return cr, problem.Field(problem.Malformed, k, "parameter %s is given %d times", k, len(q[k]))
			}
		default:
			return cr, problem.Field(problem.Malformed, k, "unknown parameter %q (the change stream takes tables, partitions, from and bootstrap)", k)
		}
	}
	all := s.catalog.Tables(d.Name)
	if v := q.Get("tables"); v != "" || q.Has("tables") {
		cr.filter.Tables = map[string]bool{}
		for _, name := range strings.Split(v, ",") {
			if name == "" {
				return cr, problem.Field(problem.Malformed, "tables", "tables %q has an empty name", v)
			}
			if _, ok := s.catalog.LookupTable(r.Context(), d.Name, name); !ok {
				return cr, problem.Field(problem.NotFound, "tables", "table %q does not exist in database %q", name, d.Name)
			}
			cr.filter.Tables[name] = true
		}
		for n := range cr.filter.Tables {
			cr.tables = append(cr.tables, n)
		}
	} else {
		for _, t := range all {
			cr.tables = append(cr.tables, t.Def.Name)
		}
	}
	slices.Sort(cr.tables)
	if v := q.Get("partitions"); v != "" || q.Has("partitions") {
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(f)
			if err != nil || n < 0 {
				return cr, problem.Field(problem.Malformed, "partitions", "partition %q is not a partition number", f)
			}
			if n >= d.Partitions {
				return cr, problem.Field(problem.NotFound, "partitions", "database %s has no partition %d (it has %d)", d.Name, n, d.Partitions)
			}
			if !slices.Contains(cr.partitions, n) {
				cr.partitions = append(cr.partitions, n)
			}
		}
		slices.Sort(cr.partitions)
	} else {
		for i := range d.Partitions {
			cr.partitions = append(cr.partitions, i)
		}
	}
	if v := q.Get("bootstrap"); v != "" || q.Has("bootstrap") {
		if cr.bootstrap, err = strconv.ParseBool(v); err != nil {
			return cr, problem.Field(problem.Malformed, "bootstrap", "bootstrap %q must be true or false", v)
		}
	}
	from, field := q.Get("from"), "from"
	if !q.Has("from") && r.Header.Get("Last-Event-ID") != "" {
		from, field = r.Header.Get("Last-Event-ID"), "Last-Event-ID"
	}
	if from != "" || q.Has("from") {
		if cr.bootstrap {
			return cr, problem.Field(problem.Malformed, "bootstrap", "bootstrap=true starts a stream afresh; it cannot be combined with %s", field)
		}
		cp, err := changes.ParseCheckpoint(from)
		if err != nil {
			return cr, problem.Field(problem.Malformed, field, "%s is not a checkpoint of this stream (pass back the \"checkpoint\" of an event unchanged)", field)
		}
		if cp.DB != d.Name {
			return cr, problem.Field(problem.Malformed, field, "the checkpoint is of database %q, not %q", cp.DB, d.Name)
		}
		for _, n := range cr.partitions {
			if _, ok := cp.Get(n); !ok {
				return cr, problem.Field(problem.Malformed, field, "the checkpoint has no position in partition %d; select the partitions it covers or start without it", n)
			}
		}
		cr.from = &cp
	}
	cr.sse = acceptsEventStream(r)
	cr.local = r.Header.Get(headerForwardedBy) != ""
	return cr, nil
}

func acceptsEventStream(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
			if strings.EqualFold(strings.TrimSpace(mt), "text/event-stream") {
				return true
			}
		}
	}
	return false
}

// streamItem is what a partition's reader hands the writer.
type streamItem struct {
	part   int
	line   []byte           // an event's JSON object; nil for a position-only item
	pos    changes.Position // the partition's position after this item
	hasPos bool             // false for snapshot events: not resumable mid-bootstrap
	err    error            // the partition's stream failed for good
	opened bool             // the partition's first source is open (nothing else set)
	source string           // with opened: "node/role" of the replica read
}

// changes streams GET /_changes/{db}: every selected partition is read by
// its own goroutine — from a replica hosted here or, through a peer's
// stream, from another node, preferring followers — and one writer merges
// their events, stamping each with the checkpoint of every partition.
func (s *Server) changes(w http.ResponseWriter, r *http.Request, p params) error {
	cr, err := s.parseChanges(r, p)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	items := make(chan streamItem, changesQueue)
	cr.allOpen = make(chan struct{})
	for _, part := range cr.partitions {
		go s.readPartition(ctx, cr, part, items)
	}
	// Answer 200 only once every partition's source is open, so a
	// checkpoint out of the retained log is a 410 and not a stream error.
	var pending []streamItem
	sources := make([]string, 0, len(cr.partitions))
	for opened := 0; opened < len(cr.partitions); {
		select {
		case it := <-items:
			switch {
			case it.err != nil:
				return it.err
			case it.opened:
				opened++
				sources = append(sources, fmt.Sprintf("%d=%s", it.part, it.source))
			default:
				pending = append(pending, it)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	close(cr.allOpen)
	sw := &streamWriter{w: w, bw: bufio.NewWriterSize(w, 64<<10), sse: cr.sse, cp: changes.Checkpoint{DB: cr.db.Name}, booting: len(cr.partitions)}
	for _, part := range cr.partitions {
		pos := changes.Position{Partition: part}
		if cr.from != nil {
			pos, _ = cr.from.Get(part)
		}
		sw.cp.Set(pos)
	}
	if !cr.bootstrap {
		sw.booting = 0
	}
	sw.booted = make([]bool, cr.db.Partitions)
	h := w.Header()
	if cr.sse {
		h.Set("Content-Type", "text/event-stream")
	} else {
		h.Set("Content-Type", "application/x-ndjson")
	}
	h.Set("Cache-Control", "no-store")
	// Which replica serves each partition (at the start), for diagnostics.
	slices.SortFunc(sources, func(a, b string) int {
		pa, _ := strconv.Atoi(a[:strings.IndexByte(a, '=')])
		pb, _ := strconv.Atoi(b[:strings.IndexByte(b, '=')])
		return pa - pb
	})
	h.Set(headerChangeSources, strings.Join(sources, ","))
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return nil // the headers say it all; a HEAD never streams
	}
	for _, it := range pending {
		if sw.write(it) != nil {
			return nil
		}
	}
	// Every partition's starting position is known now: a consumer that
	// reads nothing else can still resume from here without a gap.
	if err := sw.heartbeat(); err != nil {
		return nil
	}
	sw.flush()
	tick := time.NewTicker(changesHeartbeat)
	defer tick.Stop()
	for {
		select {
		case it := <-items:
			if err := sw.write(it); err != nil {
				return nil // the client is gone, or the stream ended with an error line
			}
			if len(items) == 0 {
				sw.flush()
			}
		case <-tick.C:
			if time.Since(sw.last) >= changesHeartbeat/2 {
				if err := sw.heartbeat(); err != nil {
					return nil
				}
				sw.flush()
			}
		case <-ctx.Done():
			return nil
		}
	}
}

// streamWriter frames the merged stream as NDJSON or Server-Sent Events.
type streamWriter struct {
	w       http.ResponseWriter
	bw      *bufio.Writer // fewer, larger chunks than the server's 4 KiB
	sse     bool
	cp      changes.Checkpoint
	booting int    // partitions still sending their snapshot
	booted  []bool // by partition
	buf     []byte
	last    time.Time
}

var errStreamEnded = errors.New("change stream ended")

func (sw *streamWriter) write(it streamItem) error {
	if it.err != nil {
		sw.writeError(it.err)
		return errStreamEnded
	}
	if it.opened {
		return nil
	}
	if it.hasPos {
		sw.cp.Set(it.pos)
		if sw.booting > 0 && !sw.booted[it.part] {
			sw.booted[it.part] = true
			sw.booting--
			if sw.booting == 0 && it.line == nil {
				return sw.heartbeat() // the bootstrap is complete: a checkpoint to resume from
			}
		}
	}
	if it.line == nil {
		return nil
	}
	b := sw.buf[:0]
	withCP := sw.booting == 0
	if sw.sse {
		b = append(b, "event: change\n"...)
		if withCP {
			b = append(b, "id: "...)
			b = sw.cp.Append(b)
			b = append(b, '\n')
		}
		b = append(b, "data: "...)
	}
	if withCP {
		b = append(b, it.line[:len(it.line)-1]...)
		b = append(b, `,"checkpoint":"`...)
		b = sw.cp.Append(b)
		b = append(b, `"}`...)
	} else {
		b = append(b, it.line...)
	}
	b = append(b, '\n')
	if sw.sse {
		b = append(b, '\n')
	}
	sw.buf = b
	return sw.emit(b)
}

// heartbeat writes a checkpoint-only line (nothing while a bootstrap is
// in progress: there is no checkpoint to give yet).
func (sw *streamWriter) heartbeat() error {
	if sw.booting > 0 {
		return nil
	}
	b := sw.buf[:0]
	if sw.sse {
		b = append(b, "event: checkpoint\nid: "...)
		b = sw.cp.Append(b)
		b = append(b, "\ndata: "...)
	}
	b = append(b, `{"checkpoint":"`...)
	b = sw.cp.Append(b)
	b = append(b, "\"}\n"...)
	if sw.sse {
		b = append(b, '\n')
	}
	sw.buf = b
	return sw.emit(b)
}

func (sw *streamWriter) writeError(err error) {
	pe, ok := problem.As(err)
	body := internalProblem()
	if ok {
		body = problemBody{Type: pe.Kind.Type(), Title: pe.Kind.Title(), Status: pe.Kind.Status(), Detail: pe.Detail}
	}
	js, _ := json.Marshal(map[string]any{"error": body})
	var b []byte
	if sw.sse {
		b = append(b, "event: error\ndata: "...)
	}
	b = append(append(b, js...), '\n')
	if sw.sse {
		b = append(b, '\n')
	}
	_ = sw.emit(b)
	sw.flush()
}

func (sw *streamWriter) emit(b []byte) error {
	sw.last = time.Now()
	_, err := sw.bw.Write(b)
	return err
}

func (sw *streamWriter) flush() {
	if sw.bw.Flush() != nil {
		return
	}
	if f, ok := sw.w.(http.Flusher); ok {
		f.Flush()
	}
}

// readPartition streams one partition into items until ctx ends: from a
// replica hosted here, else from a peer's stream; when a source fails
// (node gone, replica moved) it resumes from its position on another
// replica. The first item it sends is either opened or a fatal err.
func (s *Server) readPartition(ctx context.Context, cr changesRequest, part int, items chan<- streamItem) {
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("change stream panic", "db", cr.db.Name, "partition", part, "panic", v)
			send(ctx, items, streamItem{part: part, err: errors.New("internal error")})
		}
	}()
	var pos changes.Position
	bootstrap := cr.bootstrap
	if cr.from != nil {
		pos, _ = cr.from.Get(part)
	}
	started := cr.from != nil
	opened := false
	var lastErr error
	deadline := time.Now().Add(s.cfg.RequestTimeout)
	bo := backoff.Backoff{First: 50 * time.Millisecond, Max: time.Second}
	for attempt := 0; ctx.Err() == nil; attempt++ {
		src := s.changeSources(cr, part, attempt)
		if len(src) == 0 {
			lastErr = &problem.Error{Kind: problem.Unavailable, Operation: -1, RetryAfter: 1,
				Detail: fmt.Sprintf("no replica of partition %s/%d is reachable from node %s", cr.db.Name, part, s.cfg.NodeID)}
		}
		for _, addr := range src {
			st := partStream{s: s, cr: cr, part: part, items: items, pos: pos, started: started, bootstrap: bootstrap, opened: opened}
			var err error
			if addr.Node == "" {
				err = st.local(ctx)
			} else {
				err = st.remote(ctx, addr)
			}
			pos, started, opened = st.pos, st.started, st.opened
			if st.progressed {
				bo.Reset()
			}
			if st.booted {
				bootstrap = false
			}
			if ctx.Err() != nil {
				return
			}
			if pe, ok := problem.As(err); ok && pe.Kind != problem.Unavailable || (bootstrap && st.snapshotSent) {
				// Gone, or a bootstrap interrupted after it began (its
				// events cannot be resumed): the stream ends here.
				if bootstrap && st.snapshotSent && (!ok || pe.Kind == problem.Unavailable) {
					err = &problem.Error{Kind: problem.Unavailable, Operation: -1, RetryAfter: 1,
						Detail: fmt.Sprintf("the bootstrap of partition %d was interrupted (%v); start it again", part, err)}
				}
				send(ctx, items, streamItem{part: part, err: err})
				return
			}
			lastErr = err
		}
		if !opened && time.Now().After(deadline) {
			send(ctx, items, streamItem{part: part, err: lastErr})
			return
		}
		if bo.Wait(ctx) != nil {
			return
		}
	}
}

func send(ctx context.Context, items chan<- streamItem, it streamItem) bool {
	select {
	case items <- it:
		return true
	case <-ctx.Done():
		return false
	}
}

// changeSources lists where to read partition part, best first: a
// follower hosted here, followers elsewhere, a leader hosted here, the
// leader elsewhere. The empty Node is this node. A request forwarded by a
// peer is served from this node only.
func (s *Server) changeSources(cr changesRequest, part int, attempt int) []ReplicaAddr {
	_, g, hosted := s.registry.Hosted(cr.db.Name, part)
	if cr.local {
		if hosted {
			return []ReplicaAddr{{}}
		}
		return nil
	}
	var remote []ReplicaAddr
	if loc, ok := s.clusterInfo.(ReplicaLocator); ok {
		for _, a := range loc.Replicas(cr.db.Name, part) {
			if a.Node != s.cfg.NodeID {
				remote = append(remote, a)
			}
		}
	}
	// Rotate among equals so retries after a failure try another node first.
	if n := len(remote); n > 1 {
		k := attempt % n
		remote = append(remote[k:], remote[:k]...)
	}
	slices.SortStableFunc(remote, func(a, b ReplicaAddr) int {
		switch {
		case a.Leader == b.Leader:
			return 0
		case a.Leader:
			return 1
		}
		return -1
	})
	var out []ReplicaAddr
	var role replication.Role
	known := false // the hosted replica answered its status
	if hosted {
		if st, err := g.Status(); err == nil {
			role, known = st.Role, true
		}
	}
	if hosted && role != replication.RoleLeader && role != replication.RoleLearner && role != replication.RoleRemoved {
		out = append(out, ReplicaAddr{})
	}
	for _, a := range remote {
		if !a.Leader {
			out = append(out, a)
		}
	}
	if hosted && role == replication.RoleLeader {
		out = append(out, ReplicaAddr{})
	}
	for _, a := range remote {
		if a.Leader {
			out = append(out, a)
		}
	}
	if hosted && (role == replication.RoleLearner || role == replication.RoleRemoved || !known) {
		// A learner may still be installing its snapshot: its log is
		// complete only later. Last resort.
		out = append(out, ReplicaAddr{})
	}
	return out
}

// partStream is one attempt at reading a partition from one source.
type partStream struct {
	s     *Server
	cr    changesRequest
	part  int
	items chan<- streamItem

	pos          changes.Position
	started      bool // pos is meaningful (else: start from the source's now)
	bootstrap    bool // a snapshot is still to be sent
	booted       bool // this attempt finished the snapshot
	snapshotSent bool // some snapshot event was sent
	opened       bool
	progressed   bool
	tables       map[string]*schema.Table
	source       string // "node/role" of the replica read
}

// send hands the writer an item; once this source is open, only after
// every partition's is.
func (st *partStream) send(ctx context.Context, it streamItem) bool {
	if st.opened {
		select {
		case <-st.cr.allOpen:
		case <-ctx.Done():
			return false
		}
	}
	return send(ctx, st.items, it)
}

func (st *partStream) open(ctx context.Context) bool {
	if st.opened {
		return true
	}
	st.opened = true
	return send(ctx, st.items, streamItem{part: st.part, opened: true, source: st.source})
}

func (st *partStream) table(name string) (*schema.Table, error) {
	if t, ok := st.tables[name]; ok {
		return t, nil
	}
	t, ok := st.s.catalog.Table(st.cr.db.Name, name)
	if !ok {
		return nil, fmt.Errorf("change log of %s/%d names unknown table %q", st.cr.db.Name, st.part, name)
	}
	if st.tables == nil {
		st.tables = map[string]*schema.Table{}
	}
	st.tables[name] = t
	return t, nil
}

func (st *partStream) render(ev *changes.Event) ([]byte, error) {
	if ev.Op == partition.OpDrop || ev.Op == partition.OpReplace {
		return ev.AppendJSON(nil, nil) // no images; a dropped table is gone from the catalog
	}
	t, err := st.table(ev.Table)
	if err != nil {
		return nil, err
	}
	return ev.AppendJSON(nil, t)
}

// local reads the partition from the replica hosted here.
func (st *partStream) local(ctx context.Context) error {
	rep, g, ok := st.s.registry.Hosted(st.cr.db.Name, st.part)
	if ok {
		role := "follower"
		if _, leads := g.Leader(); leads {
			role = "leader"
		}
		st.source = st.s.cfg.NodeID + "/" + role
	}
	if !ok {
		return &problem.Error{Kind: problem.Unavailable, Operation: -1, RetryAfter: 1,
			Detail: fmt.Sprintf("node %s does not host partition %s/%d", st.s.cfg.NodeID, st.cr.db.Name, st.part)}
	}
	if st.bootstrap {
		snap, err := rep.Snapshot()
		if err != nil {
			return err
		}
		if !st.open(ctx) {
			snap.Close()
			return ctx.Err()
		}
		pos, err := changes.Bootstrap(ctx, snap, st.part, st.cr.tables, func(ev changes.Event) error {
			line, err := st.render(&ev)
			if err != nil {
				return err
			}
			st.snapshotSent = true
			if !st.send(ctx, streamItem{part: st.part, line: line}) {
				return ctx.Err()
			}
			return nil
		})
		snap.Close()
		if err != nil {
			return err
		}
		st.pos, st.started, st.booted, st.bootstrap = pos, true, true, false
		if !st.send(ctx, streamItem{part: st.part, pos: pos, hasPos: true}) {
			return ctx.Err()
		}
	}
	if !st.started {
		st.pos, st.started = changes.Start(rep, st.part), true
	}
	rd, err := changes.NewReader(rep, st.pos, st.cr.filter)
	if err != nil {
		return err
	}
	if !st.send(ctx, streamItem{part: st.part, pos: st.pos, hasPos: true}) || !st.open(ctx) {
		return ctx.Err()
	}
	for {
		if cur, _, ok := st.s.registry.Hosted(st.cr.db.Name, st.part); !ok || cur != rep {
			return &problem.Error{Kind: problem.Unavailable, Operation: -1, RetryAfter: 1,
				Detail: fmt.Sprintf("partition %s/%d moved off node %s", st.cr.db.Name, st.part, st.s.cfg.NodeID)}
		}
		evs, err := rd.Next(ctx, changesHeartbeat)
		if err != nil {
			return err
		}
		for i := range evs {
			line, err := st.render(&evs[i])
			if err != nil {
				return err
			}
			if !st.send(ctx, streamItem{part: st.part, line: line, pos: evs[i].Next, hasPos: true}) {
				return ctx.Err()
			}
			st.pos = evs[i].Next
			st.progressed = true
		}
		if p := rd.Position(); p != st.pos {
			st.pos = p
			if !st.send(ctx, streamItem{part: st.part, pos: p, hasPos: true}) {
				return ctx.Err()
			}
		}
	}
}

// remote reads the partition through the stream of the node at addr,
// which serves it from its own replica.
func (st *partStream) remote(ctx context.Context, addr ReplicaAddr) error {
	q := url.Values{"partitions": {strconv.Itoa(st.part)}}
	if st.cr.filter.Tables != nil {
		q.Set("tables", strings.Join(st.cr.tables, ","))
	}
	if st.bootstrap {
		q.Set("bootstrap", "true")
	} else if st.started {
		cp := changes.Checkpoint{DB: st.cr.db.Name, Positions: []changes.Position{st.pos}}
		q.Set("from", cp.String())
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	u := st.s.peers.URL(addr.Peer, "/_changes/"+url.PathEscape(st.cr.db.Name)+"?"+q.Encode())
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	peer.SetCaller(ctx, req)
	req.Header.Set(headerForwardedBy, st.s.cfg.NodeID)
	silence := time.AfterFunc(st.s.cfg.RequestTimeout, cancel)
	defer silence.Stop()
	resp, err := st.s.peers.Do(req)
	if err != nil {
		return &problem.Error{Kind: problem.Unavailable, Operation: -1, RetryAfter: 1,
			Detail: fmt.Sprintf("reading partition %s/%d from node %s failed: %v", st.cr.db.Name, st.part, addr.Node, err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var pb problemBody
		_ = json.Unmarshal(b, &pb)
		kind := problem.Unavailable
		if resp.StatusCode == http.StatusGone {
			kind = problem.Gone
		}
		return &problem.Error{Kind: kind, Operation: -1, RetryAfter: 1,
			Detail: fmt.Sprintf("node %s: %s", addr.Node, pb.Detail)}
	}
	st.source = addr.Node + "/unknown"
	if v := resp.Header.Get(headerChangeSources); strings.HasPrefix(v, strconv.Itoa(st.part)+"=") {
		st.source = strings.TrimPrefix(v, strconv.Itoa(st.part)+"=")
	}
	if st.bootstrap && !st.open(ctx) {
		return ctx.Err()
	}
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	for {
		silence.Reset(changesSilence)
		line, err := br.ReadBytes('\n')
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return &problem.Error{Kind: problem.Unavailable, Operation: -1, RetryAfter: 1,
				Detail: fmt.Sprintf("the stream of partition %s/%d from node %s ended: %v", st.cr.db.Name, st.part, addr.Node, err)}
		}
		line = bytes.TrimSuffix(line, []byte{'\n'})
		if bytes.HasPrefix(line, []byte(`{"error":`)) {
			var e struct{ Error problemBody }
			_ = json.Unmarshal(line, &e)
			kind := problem.Unavailable
			if e.Error.Status == http.StatusGone {
				kind = problem.Gone
			}
			return &problem.Error{Kind: kind, Operation: -1, RetryAfter: 1, Detail: fmt.Sprintf("node %s: %s", addr.Node, e.Error.Detail)}
		}
		it := streamItem{part: st.part}
		if i := bytes.LastIndex(line, []byte(`"checkpoint":"`)); i >= 0 && bytes.HasSuffix(line, []byte(`"}`)) {
			cp, err := changes.ParseCheckpoint(string(line[i+len(`"checkpoint":"`) : len(line)-2]))
			if err != nil {
				return fmt.Errorf("node %s sent a bad checkpoint: %w", addr.Node, err)
			}
			pos, ok := cp.Get(st.part)
			if !ok {
				return fmt.Errorf("node %s sent a checkpoint without partition %d", addr.Node, st.part)
			}
			it.pos, it.hasPos = pos, true
			if i > 1 && line[i-1] == ',' {
				it.line = append(line[:i-1:i-1], '}')
			}
		} else {
			it.line = line // a snapshot event
			st.snapshotSent = true
		}
		if it.hasPos {
			if st.bootstrap {
				st.booted, st.bootstrap = true, false
			}
			if it.line == nil && st.opened && it.pos == st.pos {
				continue // a heartbeat that moves nothing
			}
			st.pos, st.started = it.pos, true
			st.progressed = true
		}
		// Opened once the peer has said where the stream starts.
		if !st.send(ctx, it) || !st.open(ctx) {
			return ctx.Err()
		}
	}
}
