package api

import (
	"context"
	"net/http"
	"strconv"

	"github.com/doppio-db/doppio/client/wire"
	"github.com/doppio-db/doppio/internal/derived"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/schema"
)

// headerVersion names the version of a derived table a read answers
// from; a read may send it to pin a staged, current or backup version.
const headerVersion = "X-Doppio-Version"

// AttachDerived gives the server the node's derived-table manager; a
// router has none and relays /_derived requests to a node.
func (s *Server) AttachDerived(m *derived.Manager) { s.derived = m }

func (s *Server) derivedTables() (*derived.Manager, error) {
	if s.derived == nil {
		return nil, &problem.Error{Kind: problem.Unavailable, Operation: -1, RetryAfter: 1, Detail: "derived tables are not running on this node yet"}
	}
	return s.derived, nil
}

// readVersion turns a read of derived table t into a read of one of its
// versions: the one the request names, else the current one. The
// request keeps the version in its header, so a retry or a forward to
// another node reads the same one, and the answer names it.
func (s *Server) readVersion(w http.ResponseWriter, r *http.Request, t *schema.Table) (*schema.Table, error) {
	if !t.Derived() || s.derived == nil {
		return t, nil
	}
	pinned := 0
	if h := r.Header.Get(headerVersion); h != "" {
		n, err := strconv.Atoi(h)
		if err != nil || n < 1 {
			return nil, problem.Field(problem.Malformed, headerVersion, "%s %q is not a version number", headerVersion, h)
		}
		pinned = n
	}
	v, stored, err := s.derived.Resolve(r.Context(), t, pinned)
	if err != nil {
		return nil, err
	}
	r.Header.Set(headerVersion, strconv.Itoa(v))
	w.Header().Set(headerVersion, strconv.Itoa(v))
	return stored, nil
}

// refuseDerived refuses a document write to a derived table.
func refuseDerived(t *schema.Table) error {
	if !t.Derived() {
		return nil
	}
	return problem.Field(problem.Conflict, "table", "table %s.%s is derived: its documents change only by pushing a version (POST /_derived/%s/%s/versions)",
		t.Def.Database, t.Def.Name, t.Def.Database, t.Def.Name)
}

// maxPushBytes bounds POST /_derived/{db}/{table}/versions.
const maxPushBytes = 64 << 10

func (s *Server) pushVersion(w http.ResponseWriter, r *http.Request, p params) error {
	m, err := s.derivedTables()
	if err != nil {
		return err
	}
	if err := onlyParams(r.URL.Query()); err != nil {
		return err
	}
	var req wire.DerivedPush
	if err := decodeStrict(r, maxPushBytes, &req); err != nil {
		return err
	}
	v, err := m.Push(r.Context(), p.db, p.table, req)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/_derived/"+p.db+"/"+p.table)
	return writeJSON(w, http.StatusAccepted, v)
}

func (s *Server) derivedStatus(w http.ResponseWriter, r *http.Request, p params) error {
	m, err := s.derivedTables()
	if err != nil {
		return err
	}
	if err := onlyParams(r.URL.Query()); err != nil {
		return err
	}
	v, err := m.Status(r.Context(), p.db, p.table)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, v)
}

func (s *Server) swapVersion(w http.ResponseWriter, r *http.Request, p params) error {
	return s.moveVersion(w, r, p, (*derived.Manager).Swap)
}

func (s *Server) rollbackVersion(w http.ResponseWriter, r *http.Request, p params) error {
	return s.moveVersion(w, r, p, (*derived.Manager).Rollback)
}

func (s *Server) rollForwardVersion(w http.ResponseWriter, r *http.Request, p params) error {
	return s.moveVersion(w, r, p, (*derived.Manager).RollForward)
}

func (s *Server) moveVersion(w http.ResponseWriter, r *http.Request, p params, move func(*derived.Manager, context.Context, string, string) (wire.DerivedTable, error)) error {
	m, err := s.derivedTables()
	if err != nil {
		return err
	}
	if err := onlyParams(r.URL.Query()); err != nil {
		return err
	}
	v, err := move(m, r.Context(), p.db, p.table)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, v)
}

// discardVersion deletes a staged version: ?version=N names it, else the
// staged one.
func (s *Server) discardVersion(w http.ResponseWriter, r *http.Request, p params) error {
	m, err := s.derivedTables()
	if err != nil {
		return err
	}
	q := r.URL.Query()
	if err := onlyParams(q, "version"); err != nil {
		return err
	}
	version := 0
	if q.Has("version") {
		n, err := strconv.Atoi(q.Get("version"))
		if err != nil || n < 1 {
			return problem.Field(problem.Malformed, "version", "version %q is not a version number", q.Get("version"))
		}
		version = n
	}
	v, err := m.Discard(r.Context(), p.db, p.table, version)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, v)
}
