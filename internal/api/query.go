package api

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"sync"

	"github.com/doppio-db/doppio/internal/index"
	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/query"
	"github.com/doppio-db/doppio/internal/router"
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
	res, err := rep.Query(tg.table.Def.Name, group, enc[len(group):], qr.plan.Op, qr.opts)
	if err != nil {
		return err
	}
	if qr.count {
		return writeJSON(w, http.StatusOK, map[string]int{"count": res.Count})
	}
	out := listBody{Documents: make([]listItem, 0, len(res.Keys)), Next: res.Next}
	for _, rest := range res.Keys {
		full := append(append([]byte(nil), group...), rest...)
		item, ok, err := s.lookup(rep, tg.table, full, opts)
		if err != nil {
			return err
		}
		if ok {
			out.Documents = append(out.Documents, item)
		}
	}
	return writeJSON(w, http.StatusOK, out)
}

// lookup reads one document for a result list; a document deleted between
// the index read and this read is left out.
func (s *Server) lookup(rep *partition.Replica, t *schema.Table, key []byte, opts readOptions) (listItem, bool, error) {
	rec, found, err := rep.Get(t.Def.Name, key)
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

// queryAll answers a query without a partition key: every partition
// searches all its document groups, and the pages merge in the same order,
// limit and cursor semantics as a one-group query.
func (s *Server) queryAll(w http.ResponseWriter, r *http.Request, p params) error {
	d, err := s.database(p.db)
	if err != nil {
		return err
	}
	t, err := s.table(p.db, p.table)
	if err != nil {
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
	reps, err := s.router.Partitions(d)
	if err != nil {
		return err
	}
	for _, rep := range reps {
		if err := s.indexesReady(rep, t, qr.plan); err != nil {
			return err
		}
	}
	pages := make([]index.Result, len(reps))
	errs := make([]error, len(reps))
	var wg sync.WaitGroup
	for i, rep := range reps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pages[i], errs[i] = rep.QueryAll(t.Def.Name, qr.plan.Op, qr.opts)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	res := index.Merge(qr.plan.Sort, qr.opts.Limit, pages...)
	if qr.count {
		return writeJSON(w, http.StatusOK, map[string]int{"count": res.Count})
	}
	out := listBody{Documents: make([]listItem, 0, len(res.Keys)), Next: res.Next}
	for _, key := range res.Keys {
		_, rest, err := keys.DecodeOne(key)
		if err != nil {
			return err
		}
		rep := reps[router.PartitionOf(d, key[:len(key)-len(rest)])]
		item, ok, err := s.lookup(rep, t, key, opts)
		if err != nil {
			return err
		}
		if ok {
			out.Documents = append(out.Documents, item)
		}
	}
	return writeJSON(w, http.StatusOK, out)
}
