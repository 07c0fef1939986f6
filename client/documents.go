package client

import (
	"bytes"
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Document is a stored document as read.
type Document struct {
	// Key is the document's full key.
	Key Key
	// Body is the document's JSON, as projected and resolved for the reader.
	Body json.RawMessage
	// ETag, LastModified, SchemaVersion and SCN are set by Get (not by list
	// reads): the entity tag to use in IfMatch, the last write time (second
	// precision), the schema version Body follows and the commit number of
	// the last write.
	ETag          string
	LastModified  time.Time
	SchemaVersion int
	SCN           string
	// Version is, on a derived table, the version Get read.
	Version int
}

// Decode unmarshals the document's body into v.
func (d *Document) Decode(v any) error { return json.Unmarshal(d.Body, v) }

// ReadOption adjusts a read.
type ReadOption interface{ applyRead(*request) }

// WriteOption adds a condition to a write.
type WriteOption interface{ applyWrite(*request) }

// Condition is an option valid on reads and writes.
type Condition interface {
	ReadOption
	WriteOption
}

type readFunc func(*request)

func (f readFunc) applyRead(r *request) { f(r) }

type writeFunc func(*request)

func (f writeFunc) applyWrite(r *request) { f(r) }

type header struct{ name, value string }

func (h header) applyRead(r *request)  { r.header.Set(h.name, h.value) }
func (h header) applyWrite(r *request) { r.header.Set(h.name, h.value) }

// Fields projects a read onto the given fields; a dotted path reaches into
// nested records ("address.city").
func Fields(fields ...string) ReadOption {
	return readFunc(func(r *request) {
		if len(fields) > 0 {
			r.query["fields"] = strings.Join(fields, ",")
		}
	})
}

// SchemaVersion reads documents resolved to schema version n of their table
// (0 = as written).
func SchemaVersion(n int) ReadOption {
	return readFunc(func(r *request) { r.header.Set("X-Doppio-Schema-Version", strconv.Itoa(n)) })
}

// IfNoneMatch on a read answers ErrNotModified when the document's ETag is
// etag; on a write it fails with 412 when the document's ETag is etag, and
// IfNoneMatch("*") makes a write create-only.
func IfNoneMatch(etag string) Condition { return header{"If-None-Match", etag} }

// IfMatch makes a write fail with 412 unless the document's ETag is etag.
func IfMatch(etag string) WriteOption { return header{"If-Match", etag} }

// IfUnmodifiedSince makes a write fail with 412 when the document was
// written after t (second precision).
func IfUnmodifiedSince(t time.Time) WriteOption {
	return header{"If-Unmodified-Since", t.UTC().Format(http.TimeFormat)}
}

// Get reads the document at the full key. A missing document is a 404
// (IsNotFound); with IfNoneMatch it may be ErrNotModified.
func (c *Client) Get(ctx context.Context, db, table string, key Key, opts ...ReadOption) (*Document, error) {
	path, err := documentPath(db, table, key)
	if err != nil {
		return nil, err
	}
	r := newRequest(http.MethodGet, path).routed(db, key)
	for _, o := range opts {
		o.applyRead(r)
	}
	res, err := c.do(ctx, r)
	if err != nil {
		return nil, err
	}
	if res.status == http.StatusNotModified {
		return nil, ErrNotModified
	}
	d := &Document{Body: json.RawMessage(bytes.TrimSpace(res.body)), ETag: res.header.Get("ETag"), SCN: res.header.Get("X-Doppio-SCN")}
	d.Key = make(Key, len(key))
	for i, p := range key {
		d.Key[i] = normalizePart(p)
	}
	d.SchemaVersion, _ = strconv.Atoi(res.header.Get("X-Doppio-Schema-Version"))
	d.Version, _ = strconv.Atoi(res.header.Get("X-Doppio-Version"))
	d.LastModified, _ = http.ParseTime(res.header.Get("Last-Modified"))
	return d, nil
}

// ListOptions page through a collection.
type ListOptions struct {
	// Limit is the page size (server default 100, at most 1000).
	Limit int
	// Cursor continues after the page that returned it as Next.
	Cursor string
	// Fields projects each document, as the Fields read option.
	Fields []string
	// Query, when set, makes the read a secondary-index query over the
	// collection (Lucene-like syntax, see the REST API).
	Query string
	// Sort orders query results by an attribute-indexed field ("-f" for
	// descending).
	Sort string
}

// Page is one page of a collection.
type Page struct {
	Documents []Document
	// Next is the cursor of the following page, "" on the last one.
	Next string
}

type listItem struct {
	Key      Key             `json:"key"`
	Document json.RawMessage `json:"document"`
}

type listBody struct {
	Documents []listItem `json:"documents"`
	Next      string     `json:"next"`
}

func (b listBody) page() *Page {
	p := &Page{Documents: make([]Document, len(b.Documents)), Next: b.Next}
	for i, it := range b.Documents {
		p.Documents[i] = Document{Key: it.Key, Body: it.Document}
	}
	return p
}

// List reads one page of the collection under prefix (leading key parts,
// at least the partition key), in key order.
//
// With an empty prefix and a Query, the query runs over every document group
// of the table (all partitions, merged).
func (c *Client) List(ctx context.Context, db, table string, prefix Key, o ListOptions) (*Page, error) {
	path, err := collectionPath(db, table, prefix, o.Query != "" || o.Sort != "")
	if err != nil {
		return nil, err
	}
	r := newRequest(http.MethodGet, path).routed(db, prefix)
	if o.Limit > 0 {
		r.query["limit"] = strconv.Itoa(o.Limit)
	}
	if o.Cursor != "" {
		r.query["cursor"] = o.Cursor
	}
	if o.Query != "" {
		r.query["query"] = o.Query
	}
	if o.Sort != "" {
		r.query["sort"] = o.Sort
	}
	Fields(o.Fields...).applyRead(r)
	var b listBody
	if _, err := c.call(ctx, r, &b); err != nil {
		return nil, err
	}
	return b.page(), nil
}

// ListAll yields every document of the collection under prefix, following
// cursors from o.Cursor on with pages of o.Limit. It stops after yielding
// the first error.
func (c *Client) ListAll(ctx context.Context, db, table string, prefix Key, o ListOptions) iter.Seq2[Document, error] {
	return func(yield func(Document, error) bool) {
		for {
			p, err := c.List(ctx, db, table, prefix, o)
			if err != nil {
				yield(Document{}, err)
				return
			}
			for _, d := range p.Documents {
				if !yield(d, nil) {
					return
				}
			}
			if p.Next == "" {
				return
			}
			o.Cursor = p.Next
		}
	}
}

// MultiGet reads the documents whose keys are leading followed by each of
// lastParts, in that order; absent ones are left out.
func (c *Client) MultiGet(ctx context.Context, db, table string, leading Key, lastParts []any, opts ...ReadOption) ([]Document, error) {
	items := make([]string, len(lastParts))
	for i, p := range lastParts {
		s, err := escapePart(p)
		if err != nil {
			return nil, err
		}
		items[i] = s
	}
	path, err := documentPath(db, table, leading)
	if err != nil {
		return nil, err
	}
	r := newRequest(http.MethodGet, path+"/("+strings.Join(items, ",")+")").routed(db, leading)
	for _, o := range opts {
		o.applyRead(r)
	}
	var b listBody
	if _, err := c.call(ctx, r, &b); err != nil {
		return nil, err
	}
	return b.page().Documents, nil
}

// WriteResult is the outcome of a single-document write.
type WriteResult struct {
	Key  Key    `json:"key"`
	ETag string `json:"etag,omitempty"`
	SCN  string `json:"scn"`
	// Version is the schema version the document was written with.
	Version int `json:"version,omitempty"`
	// Created is true when the write created the document.
	Created bool `json:"created"`
}

func (c *Client) write(ctx context.Context, route *request, method, path string, body any, opts []WriteOption) (*WriteResult, error) {
	r := newRequest(method, path)
	r.route = route.route
	if err := r.jsonBody(body); err != nil {
		return nil, err
	}
	for _, o := range opts {
		o.applyWrite(r)
	}
	var w WriteResult
	res, err := c.call(ctx, r, &w)
	if err != nil {
		return nil, err
	}
	w.Created = res.status == http.StatusCreated
	return &w, nil
}

// Put creates or replaces the document at the full key. doc is marshalled
// as JSON unless it is already json.RawMessage or []byte.
func (c *Client) Put(ctx context.Context, db, table string, key Key, doc any, opts ...WriteOption) (*WriteResult, error) {
	path, err := documentPath(db, table, key)
	if err != nil {
		return nil, err
	}
	return c.write(ctx, (&request{}).routed(db, key), http.MethodPut, path, doc, opts)
}

// Patch is a partial update. Paths are field names, dotted to reach into
// nested records.
type Patch struct {
	Set   map[string]any `json:"$set,omitempty"`
	Unset []string       `json:"$unset,omitempty"`
	Inc   map[string]any `json:"$inc,omitempty"`
}

// Patch updates part of the document at the full key; the document must
// exist.
func (c *Client) Patch(ctx context.Context, db, table string, key Key, p Patch, opts ...WriteOption) (*WriteResult, error) {
	path, err := documentPath(db, table, key)
	if err != nil {
		return nil, err
	}
	return c.write(ctx, (&request{}).routed(db, key), http.MethodPatch, path, p, opts)
}

// Insert adds doc under leading, all key parts but the last, which the
// server assigns from the table's auto-increment counter; the result holds
// the full key. It is sent under an Idempotency-Key (IdempotencyKey, or
// one of the client's own), so its retries insert it once.
func (c *Client) Insert(ctx context.Context, db, table string, leading Key, doc any, opts ...WriteOption) (*WriteResult, error) {
	path, err := documentPath(db, table, leading)
	if err != nil {
		return nil, err
	}
	return c.write(ctx, (&request{}).routed(db, leading), http.MethodPost, path, doc, append(opts, writeFunc((*request).idempotent)))
}

// Delete removes the document at the full key; a missing document is a 404.
func (c *Client) Delete(ctx context.Context, db, table string, key Key, opts ...WriteOption) error {
	path, err := documentPath(db, table, key)
	if err != nil {
		return err
	}
	r := newRequest(http.MethodDelete, path).routed(db, key)
	for _, o := range opts {
		o.applyWrite(r)
	}
	_, err = c.do(ctx, r)
	return err
}

// DeleteCollection atomically removes every document under leading and
// returns how many there were.
func (c *Client) DeleteCollection(ctx context.Context, db, table string, leading Key) (int, error) {
	path, err := documentPath(db, table, leading)
	if err != nil {
		return 0, err
	}
	res, err := c.do(ctx, newRequest(http.MethodDelete, path).routed(db, leading))
	if err != nil {
		return 0, err
	}
	n, _ := strconv.Atoi(res.header.Get("X-Doppio-Deleted"))
	return n, nil
}

// Count returns how many documents of the collection under prefix (empty:
// the whole table) match the secondary-index query q.
func (c *Client) Count(ctx context.Context, db, table string, prefix Key, q string) (int, error) {
	path, err := collectionPath(db, table, prefix, true)
	if err != nil {
		return 0, err
	}
	r := newRequest(http.MethodGet, path).routed(db, prefix)
	r.query["query"] = q
	r.query["count"] = "true"
	var b struct {
		Count int `json:"count"`
	}
	_, err = c.call(ctx, r, &b)
	return b.Count, err
}

// collectionPath is the path of a collection, or of the whole table for a
// query without a partition key.
func collectionPath(db, table string, prefix Key, query bool) (string, error) {
	if len(prefix) == 0 && query {
		return "/" + url.PathEscape(db) + "/" + url.PathEscape(table), nil
	}
	return documentPath(db, table, prefix)
}
