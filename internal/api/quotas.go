package api

import (
	"net/http"
	"slices"
	"strings"

	"github.com/doppio-db/doppio/internal/auth"
	"github.com/doppio-db/doppio/internal/certs"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/quota"
	"github.com/doppio-db/doppio/internal/schema"
)

// indexEntryBytes is what a count query charges per match: it reads an
// index entry for each, whose size it does not learn.
const indexEntryBytes = 32

// AttachQuotas gives the server the node's quotas: their store answers
// /_quotas and their limiter is charged by document reads and writes. A
// server without them (a router) limits nothing.
func (s *Server) AttachQuotas(st *quota.Store) { s.quotas = st }

// user is the user a request is charged to: "" when nobody is
// authenticated (an insecure node), and then only database quotas apply.
func user(r *http.Request) string {
	c, _ := auth.CallerFrom(r.Context())
	return c.User
}

// admit refuses, with 429, a request of r's caller on db that would
// consume unit while a quota of theirs is spent. Call it where the work is
// about to start, at the partition's leader (or the replica serving a
// stale read): never on a node that forwards.
func (s *Server) admit(r *http.Request, db string, u quota.Unit) error {
	if s.quotas == nil {
		return nil
	}
	return s.quotas.Limiter().Admit(db, user(r), u)
}

// chargeRead charges r's caller and db the read units of n bytes read.
func (s *Server) chargeRead(r *http.Request, db string, n int) {
	if s.quotas != nil {
		s.quotas.Limiter().Charge(db, user(r), quota.Read, quota.ReadUnits(n))
	}
}

// recordBytes is what reading one stored document costs: its key and
// bytes.
func recordBytes(key []byte, rec partition.Record) int { return len(key) + len(rec.Avro) }

// executeCharged runs req at rep, the partition's leader here, within the
// write quotas of its database and of r's caller: refused before any work
// while one is spent, charged the write set it replicated after. A request
// refused without being evaluated (not the leader any more, a schema that
// changed under it) costs nothing: it runs again, and is charged then.
func (s *Server) executeCharged(r *http.Request, rep *partition.Replica, req partition.Request) (partition.Result, error) {
	if err := s.admit(r, rep.DB, quota.Write); err != nil {
		return partition.Result{}, err
	}
	res, err := rep.Execute(r.Context(), req)
	if s.quotas != nil && !partition.IsNotApplied(err) && err != partition.ErrSchemaChanged {
		s.quotas.Limiter().Charge(rep.DB, user(r), quota.Write, quota.WriteUnits(res.WriteSetBytes))
	}
	return res, err
}

// quotaView is a quota as the API shows it: 0 is unlimited.
type quotaView struct {
	Name                string `json:"name"`
	ReadUnitsPerSecond  int64  `json:"readUnitsPerSecond"`
	WriteUnitsPerSecond int64  `json:"writeUnitsPerSecond"`
}

func (s *Server) quotaStore() (*quota.Store, error) {
	if s.quotas == nil {
		return nil, &problem.Error{Kind: problem.Unavailable, Operation: -1, RetryAfter: 1, Detail: "quotas are not loaded on this node yet"}
	}
	return s.quotas, nil
}

// quotaTarget reads which quota a /_quotas/{scope}/… request is about,
// checking its name and that it has no parameters.
func (s *Server) quotaTarget(r *http.Request, p params) (*quota.Store, quota.Scope, string, error) {
	st, err := s.quotaStore()
	if err != nil {
		return nil, 0, "", err
	}
	if err := onlyParams(r.URL.Query()); err != nil {
		return nil, 0, "", err
	}
	if p.name != "" { // /_quotas/users/{name}
		if err := certs.ValidUser(p.name); err != nil {
			return nil, 0, "", problem.Field(problem.Malformed, "name", "%v", err)
		}
		return st, quota.User, p.name, nil
	}
	if !schema.ValidName(p.db) {
		return nil, 0, "", problem.Field(problem.Malformed, "db", "database name %q is not valid", p.db)
	}
	return st, quota.Database, p.db, nil
}

func viewOf(name string, q quota.Quota) quotaView {
	return quotaView{Name: name, ReadUnitsPerSecond: q.ReadUnitsPerSecond, WriteUnitsPerSecond: q.WriteUnitsPerSecond}
}

func (s *Server) getQuota(w http.ResponseWriter, r *http.Request, p params) error {
	st, sc, name, err := s.quotaTarget(r, p)
	if err != nil {
		return err
	}
	q, ok, err := st.Get(r.Context(), sc, name)
	if err != nil {
		return err
	}
	if !ok {
		return problem.New(problem.NotFound, "%s %s has no quota", sc, name)
	}
	return writeJSON(w, http.StatusOK, viewOf(name, q))
}

func (s *Server) putQuota(w http.ResponseWriter, r *http.Request, p params) error {
	st, sc, name, err := s.quotaTarget(r, p)
	if err != nil {
		return err
	}
	var q quota.Quota
	if err := decodeStrict(r, maxSchemaBytes, &q); err != nil {
		return err
	}
	if field, err := q.Validate(); err != nil {
		return problem.Field(problem.Invalid, field, "%v", err)
	}
	if sc == quota.Database {
		if _, ok := s.catalog.LookupDatabase(r.Context(), name); !ok {
			return problem.New(problem.NotFound, "database %s does not exist", name)
		}
	}
	created, err := st.Put(r.Context(), sc, name, q)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", r.URL.EscapedPath())
	}
	return writeJSON(w, status, viewOf(name, q))
}

func (s *Server) deleteQuota(w http.ResponseWriter, r *http.Request, p params) error {
	st, sc, name, err := s.quotaTarget(r, p)
	if err != nil {
		return err
	}
	existed, err := st.Delete(r.Context(), sc, name)
	if err != nil {
		return err
	}
	if !existed {
		return problem.New(problem.NotFound, "%s %s has no quota", sc, name)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) listQuotas(w http.ResponseWriter, r *http.Request, _ params) error {
	st, err := s.quotaStore()
	if err != nil {
		return err
	}
	if err := onlyParams(r.URL.Query()); err != nil {
		return err
	}
	all, err := st.List(r.Context())
	if err != nil {
		return err
	}
	views := func(qs map[string]quota.Quota) []quotaView {
		out := make([]quotaView, 0, len(qs))
		for name, q := range qs {
			out = append(out, viewOf(name, q))
		}
		slices.SortFunc(out, func(a, b quotaView) int { return strings.Compare(a.Name, b.Name) })
		return out
	}
	return writeJSON(w, http.StatusOK, map[string][]quotaView{"databases": views(all[quota.Database]), "users": views(all[quota.User])})
}
