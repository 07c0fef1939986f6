package api

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/quota"
	"github.com/doppio-db/doppio/internal/replicas"
	"github.com/doppio-db/doppio/internal/schema"
)

const (
	headerSCN = "X-Doppio-SCN"
	// headerAsOf is the Unix millisecond time at which a read's answer was
	// the latest state (docs/design/cache.md).
	headerAsOf          = "X-Doppio-As-Of"
	headerSchemaVersion = "X-Doppio-Schema-Version"
	headerDeleted       = "X-Doppio-Deleted"
	mediaAvro           = "avro/binary"

	defaultLimit = 100
	maxLimit     = 1000
	maxMultiGet  = 1000
)

func checkJSONContentType(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return problem.New(problem.MediaType, "Content-Type %q cannot be parsed", ct)
	}
	if mt != "application/json" && !(strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")) {
		return problem.New(problem.MediaType, "Content-Type %s is not supported; send application/json", mt)
	}
	return nil
}

func readBody(r *http.Request, limit int) ([]byte, error) {
	if err := checkJSONContentType(r); err != nil {
		return nil, err
	}
	return readLimited(r, int64(limit))
}

// readLimited reads a request's body, of at most limit bytes: in one
// allocation of the declared length when there is one (io.ReadAll grows
// its buffer from 512 bytes, copying at each step, and a body is read
// twice: once to keep for a forward or a retry and once by its handler).
func readLimited(r *http.Request, limit int64) ([]byte, error) {
	switch n := r.ContentLength; {
	case n > limit:
		return nil, &http.MaxBytesError{Limit: limit}
	case n > 0:
		b := make([]byte, n)
		if _, err := io.ReadFull(r.Body, b); err != nil {
			return nil, unreadable(err)
		}
		return b, nil
	}
	b, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if !errors.As(err, &mbe) {
			err = unreadable(err)
		}
	}
	return b, err
}

// unreadable is the answer to a body that ends before its declared length
// or breaks its chunked framing: the client's fault, not the server's.
func unreadable(err error) error {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return problem.New(problem.Malformed, "the request body cannot be read: %v", err)
}

// target is a parsed document URI.
type target struct {
	db    schema.Database
	table *schema.Table
	key   keys.Tuple   // leading or full key parts
	multi []keys.Tuple // full keys of a multi-get, else nil
}

func (s *Server) target(ctx context.Context, p params) (target, error) {
	d, err := s.database(ctx, p.db)
	if err != nil {
		return target{}, err
	}
	t, err := s.table(ctx, p.db, p.table)
	if err != nil {
		return target{}, err
	}
	last := p.lastRaw
	if strings.HasPrefix(last, "(") && strings.HasSuffix(last, ")") && len(last) >= 2 {
		return s.multiTarget(d, t, p)
	}
	key, err := t.ParseKeySegments(p.key)
	if err != nil {
		return target{}, err
	}
	return target{db: d, table: t, key: key}, nil
}

// multiTarget parses "/{k1}/…/(a,b,c)": the listed values of the last key
// part under the leading ones.
func (s *Server) multiTarget(d schema.Database, t *schema.Table, p params) (target, error) {
	leading := p.key[:len(p.key)-1]
	if t.Arity() == 1 {
		// Its keys would be partition keys, of any partitions.
		return target{}, problem.New(problem.Malformed, "a multi-get lists values of the last key part within one document group; %s has a single key part", t.Def.Name)
	}
	if len(leading)+1 != t.Arity() {
		return target{}, problem.New(problem.Malformed, "a multi-get lists values of the last key part: give the %d leading parts of %s first", t.Arity()-1, t.Def.Name)
	}
	inner := p.lastRaw[1 : len(p.lastRaw)-1]
	if inner == "" {
		return target{}, problem.New(problem.Malformed, "the multi-get list is empty")
	}
	items := strings.Split(inner, ",")
	if len(items) > maxMultiGet {
		return target{}, problem.New(problem.TooLarge, "a multi-get lists at most %d keys, got %d", maxMultiGet, len(items))
	}
	tg := target{db: d, table: t}
	for _, it := range items {
		v, err := url.PathUnescape(it)
		if err != nil {
			return target{}, problem.New(problem.Malformed, "multi-get item %q is not percent-encoded correctly", it)
		}
		key, err := t.ParseKeySegments(append(append([]string(nil), leading...), v))
		if err != nil {
			return target{}, err
		}
		tg.multi = append(tg.multi, key)
	}
	tg.key = tg.multi[0][:len(leading)]
	return tg, nil
}

// readOptions are the parameters common to every read.
type readOptions struct {
	version int // reader schema version, 0 = as written
	fields  [][]string
}

func (s *Server) readOptions(r *http.Request, t *schema.Table) (readOptions, error) {
	o := readOptions{version: t.Latest()}
	if v := r.Header.Get(headerSchemaVersion); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return o, problem.Field(problem.Malformed, headerSchemaVersion, "%s %q is not a version number (0 = as written)", headerSchemaVersion, v)
		}
		if n > t.Latest() {
			return o, problem.Field(problem.NotFound, headerSchemaVersion, "table %s has no schema version %d (latest is %d)", t.Def.Name, n, t.Latest())
		}
		o.version = n
	}
	if f := r.URL.Query().Get("fields"); f != "" {
		fields, err := t.ParseFields(f)
		if err != nil {
			return o, err
		}
		o.fields = fields
	}
	return o, nil
}

// render returns the JSON of a stored record as the reader asked for it.
func (o readOptions) render(t *schema.Table, rec partition.Record) ([]byte, int, error) {
	return o.appendRender(nil, t, rec)
}

// appendRender appends the JSON of a stored record, as the reader asked for
// it, to dst.
func (o readOptions) appendRender(dst []byte, t *schema.Table, rec partition.Record) ([]byte, int, error) {
	version := o.version
	if version == 0 {
		version = int(rec.Version)
	}
	if o.fields == nil {
		b, err := t.AppendAvroAsJSON(dst, rec.Avro, int(rec.Version), version)
		return b, version, err
	}
	doc, err := t.Decode(rec.Avro, int(rec.Version), o.version)
	if err != nil {
		return nil, 0, err
	}
	return t.AppendJSON(dst, schema.Project(doc, o.fields), version), version, nil
}

func (s *Server) read(w http.ResponseWriter, r *http.Request, p params) error {
	tg, err := s.target(r.Context(), p)
	if err != nil {
		return err
	}
	if tg.table, err = s.readVersion(w, r, tg.table); err != nil {
		return err
	}
	opts, err := s.readOptions(r, tg.table)
	if err != nil {
		return err
	}
	switch {
	case tg.multi != nil:
		return s.multiGet(w, r, tg, opts)
	case len(tg.key) == tg.table.Arity():
		if s.tier != nil && r.Header.Get(headerStaleness) != "" && r.Header.Get(headerForwardedBy) == "" {
			return s.cachedGetOne(w, r, tg, opts)
		}
		return s.getOne(w, r, tg, opts)
	default:
		return s.collection(w, r, tg, opts)
	}
}

// replicaFor returns the replica holding the target's document group, once
// a read of the group may proceed (see partition.Replica.ReadFence).
//
// The replica is the partition's leader here, confirmed current by a quorum
// (linearizable), or with X-Doppio-Staleness any replica here fresh enough;
// otherwise the error names the node to forward to.
func (s *Server) replicaFor(r *http.Request, tg target) (*partition.Replica, error) {
	a, err := access(r)
	if err != nil {
		return nil, err
	}
	rep, err := s.registry.Locate(r.Context(), tg.db, tg.key[0], a)
	if err != nil {
		return nil, err
	}
	if err := s.admit(r, rep.DB, quota.Read); err != nil {
		return nil, err
	}
	group, err := keys.EncodeTuple(tg.key[:1])
	if err != nil {
		return nil, err
	}
	return rep, rep.ReadFence(r.Context(), group)
}

// pointRead is what a read of one document found, and how current it is.
type pointRead struct {
	rec   partition.Record
	found bool
	// scn is the document's SCN, or when it was not found the SCN its
	// partition had applied before the read: no write of the document at
	// or below it is missing from the answer.
	scn partition.SCN
	// asOf is a time at which the answer was the latest state.
	asOf time.Time
}

// readOne reads the target's document at the replica the request may read
// (see replicaFor).
func (s *Server) readOne(r *http.Request, tg target) (pointRead, error) {
	a, err := access(r)
	if err != nil {
		return pointRead{}, err
	}
	rep, at, err := s.registry.LocateAt(r.Context(), tg.db, tg.key[0], a)
	if err != nil {
		return pointRead{}, err
	}
	if err := s.admit(r, rep.DB, quota.Read); err != nil {
		return pointRead{}, err
	}
	group, err := keys.EncodeTuple(tg.key[:1])
	if err != nil {
		return pointRead{}, err
	}
	if err := rep.ReadFence(r.Context(), group); err != nil {
		return pointRead{}, err
	}
	// Read before the document, so that a write the read missed has a
	// higher SCN than a 404 answers.
	applied := rep.Applied()
	enc, _ := keys.EncodeTuple(tg.key)
	rec, found, err := rep.Get(tg.table.Def.Name, enc)
	if err != nil {
		return pointRead{}, err
	}
	s.chargeRead(r, rep.DB, recordBytes(enc, rec))
	pr := pointRead{rec: rec, found: found, scn: applied, asOf: at}
	if found {
		pr.scn = rec.SCN
	}
	return pr, nil
}

func (s *Server) getOne(w http.ResponseWriter, r *http.Request, tg target, opts readOptions) error {
	pr, err := s.readOne(r, tg)
	if err != nil {
		return err
	}
	return answerOne(w, r, tg, opts, pr)
}

// answerOne answers a read of one document from what was read, wherever
// it was read: the reader's projection, schema version, media type and
// conditions applied here.
func answerOne(w http.ResponseWriter, r *http.Request, tg target, opts readOptions, pr pointRead) error {
	asOf := strconv.FormatInt(pr.asOf.UnixMilli(), 10)
	if !pr.found {
		pe := problem.New(problem.NotFound, "document %s %s does not exist", tg.table.Def.Name, tg.key)
		scn := pr.scn.String()
		// writeProblem starts the header afresh: a cache tier's answer
		// keeps saying where it came from and how old it may be.
		cached, age := w.Header()[canonicalCache], w.Header()[canonicalAge]
		aw := headerAdder{w, func(h http.Header) {
			h[canonicalSCN], h[canonicalAsOf] = []string{scn}, []string{asOf}
			if cached != nil {
				h[canonicalCache] = cached
			}
			if age != nil {
				h[canonicalAge] = age
			}
		}}
		writeProblem(aw, problemFor(pe, r.URL.EscapedPath()), 0, 0, "", false)
		return nil
	}
	rec := pr.rec
	etag := rec.ETag()
	mtime := time.UnixMilli(rec.Mtime).UTC()
	h := w.Header()
	// The answer's six header values share one slice (h.Set would
	// allocate one per value).
	vals := make([]string, 6)
	vals[0], vals[1], vals[2], vals[5] = etag, httpDate(mtime), rec.SCN.String(), asOf
	h[canonicalETag], h[canonicalLastModified], h[canonicalSCN], h[canonicalAsOf] = vals[0:1:1], vals[1:2:2], vals[2:3:3], vals[5:6:6]
	if notModified(r, etag, mtime) {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	if acceptsAvro(r) {
		if opts.fields != nil {
			return problem.New(problem.Malformed, "a projection (fields=) cannot be answered as %s", mediaAvro)
		}
		h.Set("Content-Type", mediaAvro)
		h.Set(headerSchemaVersion, strconv.Itoa(int(rec.Version)))
		_, err := w.Write(rec.Avro)
		return err
	}
	buf := renderBuffers.Get().(*[]byte)
	defer renderBuffers.Put(buf)
	body, version, err := opts.appendRender((*buf)[:0], tg.table, rec)
	if err != nil {
		return err
	}
	body = append(body, '\n')
	if cap(body) <= 64<<10 {
		*buf = body // keep the grown buffer, unless it grew large
	}
	vals[3], vals[4] = "application/json", strconv.Itoa(version)
	h[canonicalContentType], h[canonicalSchemaVersion] = vals[3:4:4], vals[4:5:5]
	_, err = w.Write(body) // w copies: the buffer goes back to the pool
	return err
}

// headerAdder sets more header fields on an answer just before its
// status line goes out (writeProblem clears the fields set before it).
type headerAdder struct {
	http.ResponseWriter
	add func(http.Header)
}

func (w headerAdder) WriteHeader(code int) {
	w.add(w.Header())
	w.ResponseWriter.WriteHeader(code)
}

// renderBuffers hold documents rendered as JSON until the ResponseWriter
// has copied them.
var renderBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

var (
	canonicalCache         = textproto.CanonicalMIMEHeaderKey(headerCache)
	canonicalAge           = textproto.CanonicalMIMEHeaderKey(headerAge)
	canonicalETag          = textproto.CanonicalMIMEHeaderKey("ETag")
	canonicalLastModified  = textproto.CanonicalMIMEHeaderKey("Last-Modified")
	canonicalSCN           = textproto.CanonicalMIMEHeaderKey(headerSCN)
	canonicalAsOf          = textproto.CanonicalMIMEHeaderKey(headerAsOf)
	canonicalContentType   = textproto.CanonicalMIMEHeaderKey("Content-Type")
	canonicalSchemaVersion = textproto.CanonicalMIMEHeaderKey(headerSchemaVersion)
)

// notModified evaluates If-None-Match, else If-Modified-Since (RFC 9110 13.2.2).
func notModified(r *http.Request, etag string, mtime time.Time) bool {
	if inm := r.Header.Get("If-None-Match"); inm != "" {
		return etagMatches(inm, etag)
	}
	if ims := r.Header.Get("If-Modified-Since"); ims != "" {
		if t, err := http.ParseTime(ims); err == nil && !mtime.Truncate(time.Second).After(t) {
			return true
		}
	}
	return false
}

func acceptsAvro(r *http.Request) bool {
	accept := r.Header.Get("Accept")
	if !containsFold(accept, "avro") {
		return false // most answers: no media type of Avro's asked for
	}
	for _, a := range strings.Split(accept, ",") {
		mt, _, _ := mime.ParseMediaType(strings.TrimSpace(a))
		if mt == mediaAvro {
			return true
		}
	}
	return false
}

// containsFold reports whether s contains the lower-case ASCII word, in
// any case.
func containsFold(s, word string) bool {
	for i := 0; i+len(word) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(word)], word) {
			return true
		}
	}
	return false
}

type listItem struct {
	Key      keys.Tuple      `json:"key"`
	Document json.RawMessage `json:"document"`
}

type listBody struct {
	Documents []listItem `json:"documents"`
	Next      string     `json:"next,omitempty"`
}

// writeList answers a list of documents, as json.Marshal(out) would.
func writeList(w http.ResponseWriter, out listBody) error {
	l := newListWriter(len(out.Documents), 0)
	for _, d := range out.Documents {
		if err := l.addJSON(d.Key, d.Document); err != nil {
			return err
		}
	}
	return l.write(w, out.Next)
}

// listWriter builds a list answer byte for byte as json.Marshal(listBody)
// would, each document rendered straight into the answer from its Avro
// bytes: no document is re-validated and compacted (they are the codec's
// own compact JSON; on a 20-document query page that cost more than
// reading them), nor copied into the page after its own buffer.
type listWriter struct {
	b    []byte
	n    int
	docs int // expected
}

// listBuffers keeps the buffers of answered lists for the next ones: a
// query page's answer is large, and was allocated, zeroed and collected
// per request.
var listBuffers sync.Pool // of *[]byte

// docBuffers keeps, the same way, the buffers a query page's documents are
// read into (partition.Replica.QueryDocuments).
var docBuffers sync.Pool // of *[]byte

// maxPooledList bounds the buffers kept in listBuffers and docBuffers.
const maxPooledList = 1 << 20

// newListWriter starts a list of about docs documents of docBytes bytes of
// Avro each (0: unknown); the buffer is sized again after the first one.
func newListWriter(docs, docBytes int) *listWriter {
	var b []byte
	if p, ok := listBuffers.Get().(*[]byte); ok {
		b = (*p)[:0]
	} else {
		b = make([]byte, 0, 64+64+2*docBytes)
	}
	l := &listWriter{b: b, docs: docs}
	l.b = append(l.b, `{"documents":[`...)
	return l
}

// sized grows the buffer for the remaining documents once the first one
// shows their size.
func (l *listWriter) sized() {
	if l.n == 1 && l.docs > 1 {
		l.b = slices.Grow(l.b, (l.docs-1)*(len(l.b)+len(l.b)/8))
	}
}

func (l *listWriter) open(key keys.Tuple) error {
	if l.n > 0 {
		l.b = append(l.b, ',')
	}
	l.n++
	l.b = append(l.b, `{"key":`...)
	var err error
	if l.b, err = appendTupleJSON(l.b, key); err != nil {
		return err
	}
	l.b = append(l.b, `,"document":`...)
	return nil
}

// addJSON appends a document given as JSON.
func (l *listWriter) addJSON(key keys.Tuple, doc []byte) error {
	if err := l.open(key); err != nil {
		return err
	}
	l.b = append(append(l.b, doc...), '}')
	l.sized()
	return nil
}

// add appends the stored document under the encoded full key, rendered as
// the reader asked for it.
func (l *listWriter) add(t *schema.Table, key []byte, rec partition.Record, opts readOptions) error {
	tuple, err := keys.DecodeTuple(key)
	if err != nil {
		return err
	}
	if err := l.open(tuple); err != nil {
		return err
	}
	if l.b, _, err = opts.appendRender(l.b, t, rec); err != nil {
		return err
	}
	l.b = append(l.b, '}')
	l.sized()
	return nil
}

// write sends the answer (200) with its length, so that it goes out
// without chunked framing, and gives the buffer back to listBuffers: the
// list is not to be used after.
func (l *listWriter) write(w http.ResponseWriter, next string) error {
	l.b = append(l.b, ']')
	if next != "" {
		n, err := json.Marshal(next)
		if err != nil {
			return err
		}
		l.b = append(append(l.b, `,"next":`...), n...)
	}
	l.b = append(l.b, "}\n"...)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(l.b)))
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(l.b) // copies it (or sends it) before it returns
	if cap(l.b) <= maxPooledList {
		b := l.b[:0]
		listBuffers.Put(&b)
	}
	l.b = nil
	return err
}

// appendTupleJSON appends json.Marshal(key): plain strings and integers
// directly, any string JSON would escape through encoding/json.
func appendTupleJSON(b []byte, key keys.Tuple) ([]byte, error) {
	b = append(b, '[')
	for i, v := range key {
		if i > 0 {
			b = append(b, ',')
		}
		switch v := v.(type) {
		case int64:
			b = strconv.AppendInt(b, v, 10)
			continue
		case string:
			if plainJSONString(v) {
				b = append(append(append(b, '"'), v...), '"')
				continue
			}
		}
		js, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		b = append(b, js...)
	}
	return append(b, ']'), nil
}

// plainJSONString reports whether encoding/json writes s as it is between
// quotes: printable ASCII without the characters it escapes.
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

func (s *Server) collection(w http.ResponseWriter, r *http.Request, tg target, opts readOptions) error {
	q := r.URL.Query()
	if isQuery(q) {
		return s.queryGroup(w, r, tg, opts)
	}
	limit, err := parseLimit(q)
	if err != nil {
		return err
	}
	prefix, _ := keys.EncodeTuple(tg.key)
	var after []byte
	if c := q.Get("cursor"); c != "" {
		b, err := base64.RawURLEncoding.DecodeString(c)
		if err != nil || !bytes.HasPrefix(b, prefix) {
			return problem.Field(problem.Malformed, "cursor", "cursor %q does not belong to this collection", c)
		}
		if t, err := keys.DecodeTuple(b); err != nil || len(t) != tg.table.Arity() {
			return problem.Field(problem.Malformed, "cursor", "cursor %q does not belong to this collection", c)
		}
		after = b
	}
	rep, err := s.replicaFor(r, tg)
	if err != nil {
		return err
	}
	entries, more, err := rep.Scan(tg.table.Def.Name, prefix, after, limit)
	if err != nil {
		return err
	}
	docBytes, read := 0, 0
	if len(entries) > 0 {
		docBytes = len(entries[0].Record.Avro)
	}
	for _, e := range entries {
		read += recordBytes(e.Key, e.Record)
	}
	s.chargeRead(r, rep.DB, read)
	out := newListWriter(len(entries), docBytes)
	for _, e := range entries {
		if err := out.add(tg.table, e.Key, e.Record, opts); err != nil {
			return err
		}
	}
	var next string
	if more && len(entries) > 0 {
		next = base64.RawURLEncoding.EncodeToString(entries[len(entries)-1].Key)
	}
	return out.write(w, next)
}

func (s *Server) listItem(t *schema.Table, key []byte, rec partition.Record, opts readOptions) (listItem, error) {
	tuple, err := keys.DecodeTuple(key)
	if err != nil {
		return listItem{}, err
	}
	body, _, err := opts.render(t, rec)
	return listItem{Key: tuple, Document: body}, err
}

func (s *Server) multiGet(w http.ResponseWriter, r *http.Request, tg target, opts readOptions) error {
	rep, err := s.replicaFor(r, tg)
	if err != nil {
		return err
	}
	out := newListWriter(len(tg.multi), 0)
	seen := map[string]bool{}
	read := 0
	defer func() { s.chargeRead(r, rep.DB, read) }()
	for _, k := range tg.multi {
		enc, _ := keys.EncodeTuple(k)
		if seen[string(enc)] {
			continue
		}
		seen[string(enc)] = true
		rec, found, err := rep.Get(tg.table.Def.Name, enc)
		if err != nil {
			return err
		}
		read += recordBytes(enc, rec)
		if !found {
			continue
		}
		if err := out.add(tg.table, enc, rec, opts); err != nil {
			return err
		}
	}
	return out.write(w, "")
}

// conditions parses the write preconditions of a request.
func conditions(r *http.Request) (partition.Condition, error) {
	var c partition.Condition
	if v := r.Header.Get("If-Match"); v != "" {
		c.IfMatch = splitETags(v)
	}
	if v := r.Header.Get("If-None-Match"); v != "" {
		c.IfNoneMatch = splitETags(v)
	}
	if v := r.Header.Get("If-Unmodified-Since"); v != "" {
		t, err := http.ParseTime(v)
		if err != nil {
			return c, problem.Field(problem.Malformed, "If-Unmodified-Since", "If-Unmodified-Since %q is not an HTTP date", v)
		}
		c.IfUnmodifiedSince = t
	}
	return c, nil
}

func splitETags(v string) []string {
	var out []string
	for _, t := range strings.Split(v, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// writeBody is the answer to a single-document write.
type writeBody struct {
	Key     keys.Tuple `json:"key"`
	ETag    string     `json:"etag,omitempty"`
	SCN     string     `json:"scn"`
	Version uint32     `json:"version,omitempty"`
	Deleted int        `json:"deleted,omitempty"`
}

func (s *Server) execute(r *http.Request, tg target, ops ...partition.Operation) (partition.Result, error) {
	return s.executeRequest(r, tg, partition.Request{Ops: ops})
}

// executeRequest runs req at the leader of its partition.
func (s *Server) executeRequest(r *http.Request, tg target, req partition.Request) (partition.Result, error) {
	rep, err := s.registry.Locate(r.Context(), tg.db, req.Ops[0].Key[0], replicas.Access{})
	if err != nil {
		return partition.Result{}, err
	}
	res, err := s.executeCharged(r, rep, req)
	return res, s.registry.Redirect(rep.DB, rep.ID, err)
}

func (s *Server) answerWrite(w http.ResponseWriter, tg target, res partition.Result, status int) error {
	op := res.Ops[0]
	scn := res.SCN.String()
	h := w.Header()
	h.Set(headerSCN, scn)
	if op.ETag != "" {
		h.Set("ETag", op.ETag)
		h.Set("Last-Modified", httpDate(time.UnixMilli(res.Mtime)))
	}
	if status == http.StatusCreated {
		h.Set("Location", documentPath(tg.db.Name, tg.table.Def.Name, op.Key))
	}
	return writeJSON(w, status, writeBody{Key: op.Key, ETag: op.ETag, SCN: scn, Version: op.Version})
}

// documentPath is the URI path of a document.
func documentPath(db, table string, key keys.Tuple) string {
	var b strings.Builder
	b.WriteString("/" + url.PathEscape(db) + "/" + url.PathEscape(table))
	for _, v := range key {
		b.WriteByte('/')
		switch v := v.(type) {
		case string:
			b.WriteString(keySegment(v))
		case int64:
			b.WriteString(strconv.FormatInt(v, 10))
		}
	}
	return b.String()
}

var segmentEscaper = strings.NewReplacer("(", "%28", ")", "%29", ",", "%2C")

// keySegment escapes a string key part so the path addresses it and only
// it: "." and ".." would be refused as path tricks and "(…)" read as a
// multi-get, so their bytes are percent-encoded too.
func keySegment(v string) string {
	e := segmentEscaper.Replace(url.PathEscape(v))
	if e == "." || e == ".." {
		e = strings.ReplaceAll(e, ".", "%2E")
	}
	return e
}

func (s *Server) fullKeyTarget(ctx context.Context, p params, verb string) (target, error) {
	tg, err := s.target(ctx, p)
	if err != nil {
		return tg, err
	}
	if err := refuseDerived(tg.table); err != nil {
		return tg, err
	}
	if tg.multi != nil {
		return tg, problem.New(problem.Malformed, "%s addresses one document, not a list", verb)
	}
	if len(tg.key) != tg.table.Arity() {
		hint := ""
		if tg.table.AutoIncrement() && len(tg.key) == tg.table.Arity()-1 && verb == "PUT" {
			hint = "; POST to the collection to insert with an auto-increment key"
		}
		return tg, problem.New(problem.Malformed, "%s needs all %d key parts of %s, got %d%s", verb, tg.table.Arity(), tg.table.Def.Name, len(tg.key), hint)
	}
	return tg, nil
}

// documentWrite parses what every single-document write starts with: the
// full key, the conditional headers and the body.
func (s *Server) documentWrite(r *http.Request, p params, verb string) (target, partition.Condition, []byte, error) {
	tg, err := s.fullKeyTarget(r.Context(), p, verb)
	if err != nil {
		return tg, partition.Condition{}, nil, err
	}
	cond, err := conditions(r)
	if err != nil {
		return tg, cond, nil, err
	}
	body, err := readBody(r, s.cfg.MaxDocumentBytes)
	return tg, cond, body, err
}

func (s *Server) put(w http.ResponseWriter, r *http.Request, p params) error {
	tg, cond, body, err := s.documentWrite(r, p, "PUT")
	if err != nil {
		return err
	}
	doc, err := tg.table.DecodeJSON(body)
	if err != nil {
		return err
	}
	res, err := s.execute(r, tg, partition.Operation{Kind: partition.Put, Table: tg.table, Key: tg.key, Doc: doc, Cond: cond})
	if err != nil {
		return err
	}
	status := http.StatusOK
	if res.Ops[0].Created {
		status = http.StatusCreated
	}
	return s.answerWrite(w, tg, res, status)
}

func (s *Server) patch(w http.ResponseWriter, r *http.Request, p params) error {
	tg, cond, body, err := s.documentWrite(r, p, "PATCH")
	if err != nil {
		return err
	}
	pt, err := schema.ParsePatch(body)
	if err != nil {
		return err
	}
	res, err := s.execute(r, tg, partition.Operation{Kind: partition.Patch, Table: tg.table, Key: tg.key, Patch: pt, Cond: cond})
	if err != nil {
		return err
	}
	return s.answerWrite(w, tg, res, http.StatusOK)
}

func (s *Server) insert(w http.ResponseWriter, r *http.Request, p params) error {
	tg, err := s.target(r.Context(), p)
	if err != nil {
		return err
	}
	t := tg.table
	if err := refuseDerived(t); err != nil {
		return err
	}
	if !t.AutoIncrement() {
		return problem.New(problem.NotAllowed, "table %s has no auto-increment key part: PUT the document at its full key", t.Def.Name)
	}
	if tg.multi != nil || len(tg.key) != t.Arity()-1 {
		return problem.New(problem.Malformed, "POST to the collection: give the %d leading key parts of %s", t.Arity()-1, t.Def.Name)
	}
	body, err := readBody(r, s.cfg.MaxDocumentBytes)
	if err != nil {
		return err
	}
	doc, err := t.DecodeJSON(body)
	if err != nil {
		return err
	}
	id, err := s.requestIdempotency(r, body)
	if err != nil {
		return err
	}
	res, err := s.executeRequest(r, tg, partition.Request{Idempotency: id,
		Ops: []partition.Operation{{Kind: partition.Insert, Table: t, Key: tg.key, Doc: doc}}})
	if err != nil {
		return err
	}
	markReplayed(w, res)
	return s.answerWrite(w, tg, res, http.StatusCreated)
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request, p params) error {
	tg, err := s.target(r.Context(), p)
	if err != nil {
		return err
	}
	if err := refuseDerived(tg.table); err != nil {
		return err
	}
	if tg.multi != nil {
		return problem.New(problem.Malformed, "DELETE addresses one document or one collection, not a list")
	}
	cond, err := conditions(r)
	if err != nil {
		return err
	}
	op := partition.Operation{Kind: partition.Delete, Table: tg.table, Key: tg.key, Cond: cond}
	if len(tg.key) < tg.table.Arity() {
		if len(cond.IfMatch)+len(cond.IfNoneMatch) > 0 || !cond.IfUnmodifiedSince.IsZero() {
			return problem.New(problem.Malformed, "conditional headers apply to one document, not to a collection")
		}
		op.Kind = partition.DeleteCollection
	}
	res, err := s.execute(r, tg, op)
	if err != nil {
		return err
	}
	w.Header().Set(headerSCN, res.SCN.String())
	w.Header().Set(headerDeleted, strconv.Itoa(res.Ops[0].Deleted))
	w.WriteHeader(http.StatusNoContent)
	return nil
}
