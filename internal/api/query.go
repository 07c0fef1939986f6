package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"

	"github.com/doppio-db/doppio/internal/index"
	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/query"
	"github.com/doppio-db/doppio/internal/quota"
	"github.com/doppio-db/doppio/internal/schema"
)

// isQuery reports whether a collection read is a secondary-index query.
func isQuery(q url.Values) bool { return q.Has("query") || q.Has("sort") || q.Has("count") }

func parseLimit(q url.Values) (int, error) {
	v := q.Get("limit")
	if v == "" {
		return defaultLimit, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxLimit {
		return 0, problem.Field(problem.Malformed, "limit", "limit %q must be an integer from 1 to %d", v, maxLimit)
	}
	return n, nil
}

// queryRequest is a parsed query read.
type queryRequest struct {
	plan  *query.Plan
	opts  index.Options
	count bool
}

func parseQuery(q url.Values, t *schema.Table) (queryRequest, error) {
	limit, err := parseLimit(q)
	if err != nil {
		return queryRequest{}, err
	}
	var count bool
	if v := q.Get("count"); v != "" {
		if count, err = strconv.ParseBool(v); err != nil {
			return queryRequest{}, problem.Field(problem.Malformed, "count", "count %q must be true or false", v)
		}
	}
	plan, err := query.Compile(q.Get("query"), q.Get("sort"), query.SchemaOf(t))
	if err != nil {
		return queryRequest{}, err
	}
	return queryRequest{
		plan:  plan,
		count: count,
		opts:  index.Options{Sort: plan.Sort, Limit: limit, Cursor: q.Get("cursor"), Count: count},
	}, nil
}

// queryGroup answers a query over one document group (the target's leading
// key parts, the first being the partition key).
func (s *Server) queryGroup(w http.ResponseWriter, r *http.Request, tg target, opts readOptions) error {
	qr, err := parseQuery(r.URL.Query(), tg.table)
	if err != nil {
		return err
	}
	rep, err := s.replicaFor(r, tg)
	if err != nil {
		return err
	}
	if err := s.indexesReady(rep, tg.table, qr.plan); err != nil {
		return err
	}
	enc, _ := keys.EncodeTuple(tg.key)
	group, _ := keys.EncodeTuple(tg.key[:1])
	if qr.count {
		res, err := rep.Query(tg.table.Def.Name, group, enc[len(group):], qr.plan.Op, qr.opts)
		if err != nil {
			return err
		}
		s.chargeRead(r, rep.DB, res.Count*indexEntryBytes)
		return writeJSON(w, http.StatusOK, map[string]int{"count": res.Count})
	}
	var buf []byte
	if p, ok := docBuffers.Get().(*[]byte); ok {
		buf = *p
	}
	res, recs, buf, err := rep.QueryDocuments(tg.table.Def.Name, group, enc[len(group):], qr.plan.Op, qr.opts, buf)
	defer func() {
		// The records' bytes, rendered (or not) by now.
		if cap(buf) <= maxPooledList {
			docBuffers.Put(&buf)
		}
	}()
	if err != nil {
		return err
	}
	read := 0
	for i, rest := range res.Keys {
		read += len(rest) + recordBytes(rest, recs[i]) // its index entry, then the document
	}
	s.chargeRead(r, rep.DB, read)
	docBytes := 0
	if len(recs) > 0 {
		docBytes = len(recs[0].Avro)
	}
	out := newListWriter(len(recs), docBytes)
	full := slices.Clip(group)
	for i, rest := range res.Keys {
		full = append(full[:len(group)], rest...)
		if err := out.add(tg.table, full, recs[i], opts); err != nil {
			return err
		}
	}
	return out.write(w, res.Next)
}

// lookup reads one document for a result list; a document deleted between
// the index read and this read is left out. It adds the bytes it read to
// *read.
func (s *Server) lookup(rep *partition.Replica, t *schema.Table, key []byte, opts readOptions, read *int) (listItem, bool, error) {
	rec, found, err := rep.Get(t.Def.Name, key)
	*read += recordBytes(key, rec)
	if err != nil || !found {
		return listItem{}, false, err
	}
	item, err := s.listItem(t, key, rec, opts)
	return item, err == nil, err
}

// indexesReady refuses a query that reads an index still being built in
// this partition (409 naming the field and the progress).
func (s *Server) indexesReady(rep *partition.Replica, t *schema.Table, plan *query.Plan) error {
	for _, f := range plan.Fields {
		if st := rep.IndexState(t.Def.Name, f); !st.Ready {
			return problem.Field(problem.Conflict, f, "the index on %s.%s is being built (%.0f%% of partition %d done); retry when it is ready", t.Def.Name, f, st.Progress()*100, rep.ID)
		}
	}
	return nil
}

// databaseTable looks up the database and the table a query's path names,
// either missing being NotFound.
func (s *Server) databaseTable(ctx context.Context, p params) (schema.Database, *schema.Table, error) {
	d, err := s.database(ctx, p.db)
	if err != nil {
		return d, nil, err
	}
	t, err := s.table(ctx, p.db, p.table)
	return d, t, err
}

// queryAll answers a query without a partition key: every partition
// searches all its document groups, and the pages merge in the same order,
// limit and cursor semantics as a one-group query. A partition led here is
// searched here; any other is asked of its leader's node.
func (s *Server) queryAll(w http.ResponseWriter, r *http.Request, p params) error {
	d, t, err := s.databaseTable(r.Context(), p)
	if err != nil {
		return err
	}
	if t, err = s.readVersion(w, r, t); err != nil {
		return err
	}
	q := r.URL.Query()
	if !isQuery(q) {
		return problem.Field(problem.Malformed, "query", "reading a whole table needs a query (query=*, with sort and limit, for everything) or a partition key in the path")
	}
	opts, err := s.readOptions(r, t)
	if err != nil {
		return err
	}
	qr, err := parseQuery(q, t)
	if err != nil {
		return err
	}
	a, err := access(r)
	if err != nil {
		return err
	}
	pages := make([]index.Result, d.Partitions)
	docs := make([]map[string]json.RawMessage, d.Partitions) // of pages from other nodes
	reps := make([]*partition.Replica, d.Partitions)         // of pages searched here
	errs := make([]error, d.Partitions)
	var wg sync.WaitGroup
	for i := range d.Partitions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep, err := s.registry.Route(r.Context(), d, i, a)
			to, isElsewhere := partition.AsNotApplied(err, partition.Elsewhere)
			switch {
			case isElsewhere:
				page, err := s.fetchPage(r, to, p.table)
				if err != nil {
					errs[i] = err
					return
				}
				pages[i] = index.Result{Keys: page.Keys, SortValues: page.SortValues, Count: page.Count, Next: page.Next}
				docs[i] = make(map[string]json.RawMessage, len(page.Keys))
				for j, k := range page.Keys {
					docs[i][string(k)] = page.Documents[j]
				}
			case err != nil:
				errs[i] = err
			default:
				if errs[i] = s.admit(r, d.Name, quota.Read); errs[i] != nil {
					return
				}
				if errs[i] = s.indexesReady(rep, t, qr.plan); errs[i] != nil {
					return
				}
				reps[i] = rep
				pages[i], errs[i] = rep.QueryAll(t.Def.Name, qr.plan.Op, qr.opts)
			}
		}()
	}
	wg.Wait()
	if err := firstError(errs); err != nil {
		return err
	}
	// The partitions read here are charged here; the others by the nodes
	// that read them (queryPartition).
	read := 0
	defer func() {
		if read > 0 {
			s.chargeRead(r, d.Name, read)
		}
	}()
	for i, rep := range reps {
		if rep != nil {
			read += pageBytes(pages[i], qr.count)
		}
	}
	res := index.Merge(qr.plan.Sort, qr.opts.Limit, pages...)
	if qr.count {
		return writeJSON(w, http.StatusOK, map[string]int{"count": res.Count})
	}
	out := struct {
		Documents []json.RawMessage `json:"documents"`
		Next      string            `json:"next,omitempty"`
	}{Documents: make([]json.RawMessage, 0, len(res.Keys)), Next: res.Next}
	for _, key := range res.Keys {
		_, rest, err := keys.DecodeOne(key)
		if err != nil {
			return err
		}
		pi := keys.PartitionOf(key[:len(key)-len(rest)], d.Partitions)
		if rep := reps[pi]; rep != nil {
			item, ok, err := s.lookup(rep, t, key, opts, &read)
			if err != nil {
				return err
			}
			if ok {
				js, err := json.Marshal(item)
				if err != nil {
					return err
				}
				out.Documents = append(out.Documents, js)
			}
			continue
		}
		if js := docs[pi][string(key)]; len(js) > 0 && string(js) != "null" {
			out.Documents = append(out.Documents, js)
		}
	}
	return writeJSON(w, http.StatusOK, out)
}

// firstError prefers a client's error (e.g. an index being built, 409)
// over an unavailable partition, so the answer names what to fix.
func firstError(errs []error) error {
	var first error
	for _, err := range errs {
		if err == nil {
			continue
		}
		if pe, ok := problem.As(err); ok && pe.Kind != problem.Unavailable {
			return err
		}
		if first == nil {
			first = err
		}
	}
	return first
}

// queryPartition answers one partition's page of a query over all document
// groups, with its sort values and documents, for the node that merges
// (GET /_internal/query/{db}/{table}/{partition}).
func (s *Server) queryPartition(w http.ResponseWriter, r *http.Request, p params) error {
	d, t, err := s.databaseTable(r.Context(), p)
	if err != nil {
		return err
	}
	if t, err = s.readVersion(w, r, t); err != nil {
		return err
	}
	pi, err := strconv.Atoi(p.partition)
	if err != nil {
		return problem.New(problem.Malformed, "partition %q is not a number", p.partition)
	}
	opts, err := s.readOptions(r, t)
	if err != nil {
		return err
	}
	qr, err := parseQuery(r.URL.Query(), t)
	if err != nil {
		return err
	}
	a, err := access(r)
	if err != nil {
		return err
	}
	rep, err := s.registry.Route(r.Context(), d, pi, a)
	if err != nil {
		to, isElsewhere := partition.AsNotApplied(err, partition.Elsewhere)
		if isElsewhere {
			// Never forwarded twice: the asking node retries.
			return to.Unwrap()
		}
		return err
	}
	if err := s.admit(r, d.Name, quota.Read); err != nil {
		return err
	}
	if err := s.indexesReady(rep, t, qr.plan); err != nil {
		return err
	}
	res, err := rep.QueryAll(t.Def.Name, qr.plan.Op, qr.opts)
	if err != nil {
		return err
	}
	read := pageBytes(res, qr.count)
	defer func() { s.chargeRead(r, d.Name, read) }()
	page := partitionPage{Keys: res.Keys, SortValues: res.SortValues, Count: res.Count, Next: res.Next, Documents: make([]json.RawMessage, len(res.Keys))}
	if page.Keys == nil {
		page.Keys = [][]byte{}
	}
	if !qr.count {
		for i, key := range res.Keys {
			item, ok, err := s.lookup(rep, t, key, opts, &read)
			if err != nil {
				return err
			}
			if ok {
				if page.Documents[i], err = json.Marshal(item); err != nil {
					return err
				}
			} else {
				page.Documents[i] = json.RawMessage("null")
			}
		}
	} else {
		for i := range page.Documents {
			page.Documents[i] = json.RawMessage("null")
		}
	}
	return writeJSON(w, http.StatusOK, page)
}

// pageBytes is what a partition's page of a query read in its index: an
// entry per key listed, or per match counted.
func pageBytes(res index.Result, count bool) int {
	if count {
		return res.Count * indexEntryBytes
	}
	n := 0
	for _, k := range res.Keys {
		n += len(k)
	}
	return n
}
