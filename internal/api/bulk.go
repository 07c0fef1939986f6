package api

import (
	"net/http"

	"github.com/doppio-db/doppio/client/wire"
	"github.com/doppio-db/doppio/internal/bulkload"
	"github.com/doppio-db/doppio/internal/problem"
)

// AttachLoads gives the server the node's bulk-load manager; a router
// has none and relays /_bulk requests to a node.
func (s *Server) AttachLoads(m *bulkload.Manager) { s.loads = m }

func (s *Server) bulkLoads() (*bulkload.Manager, error) {
	if s.loads == nil {
		return nil, &problem.Error{Kind: problem.Unavailable, Operation: -1, RetryAfter: 1, Detail: "bulk loads are not running on this node yet"}
	}
	return s.loads, nil
}

// maxLoadRequestBytes bounds POST /_bulk/loads: a source and two options.
const maxLoadRequestBytes = 64 << 10

func (s *Server) startLoad(w http.ResponseWriter, r *http.Request, _ params) error {
	m, err := s.bulkLoads()
	if err != nil {
		return err
	}
	if err := onlyParams(r.URL.Query()); err != nil {
		return err
	}
	var req wire.LoadRequest
	if err := decodeStrict(r, maxLoadRequestBytes, &req); err != nil {
		return err
	}
	l, started, err := m.Start(r.Context(), req)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if started {
		status = http.StatusAccepted
		w.Header().Set("Location", "/_bulk/loads/"+l.ID)
	}
	return writeJSON(w, status, l)
}

func (s *Server) listLoads(w http.ResponseWriter, r *http.Request, _ params) error {
	m, err := s.bulkLoads()
	if err != nil {
		return err
	}
	if err := onlyParams(r.URL.Query()); err != nil {
		return err
	}
	ls, err := m.List(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"loads": ls})
}

func (s *Server) getLoad(w http.ResponseWriter, r *http.Request, p params) error {
	m, err := s.bulkLoads()
	if err != nil {
		return err
	}
	if err := onlyParams(r.URL.Query()); err != nil {
		return err
	}
	l, err := m.Get(r.Context(), p.name)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, l)
}

func (s *Server) cancelLoad(w http.ResponseWriter, r *http.Request, p params) error {
	m, err := s.bulkLoads()
	if err != nil {
		return err
	}
	if err := onlyParams(r.URL.Query()); err != nil {
		return err
	}
	l, err := m.Cancel(r.Context(), p.name)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, l)
}
