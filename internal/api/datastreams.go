package api

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/doppio-db/doppio/internal/datastream"
	"github.com/doppio-db/doppio/internal/problem"
)

// AttachDatastreams gives the server the node's datastream manager; a
// router has none and relays datastream requests to a node.
func (s *Server) AttachDatastreams(m *datastream.Manager) { s.streams = m }

func (s *Server) datastreams() (*datastream.Manager, error) {
	if s.streams == nil {
		return nil, &problem.Error{Kind: problem.Unavailable, Operation: -1, RetryAfter: 1, Detail: "datastreams are not running on this node yet"}
	}
	return s.streams, nil
}

// onlyParams refuses query parameters other than allowed.
func onlyParams(q url.Values, allowed ...string) error {
	for k := range q {
		if !slices.Contains(allowed, k) {
			return problem.Field(problem.Malformed, k, "unknown parameter %q", k)
		}
		if len(q[k]) > 1 {
			return problem.Field(problem.Malformed, k, "parameter %s is given %d times", k, len(q[k]))
		}
	}
	return nil
}

func (s *Server) putDatastream(w http.ResponseWriter, r *http.Request, p params) error {
	m, err := s.datastreams()
	if err != nil {
		return err
	}
	if err := onlyParams(r.URL.Query()); err != nil {
		return err
	}
	body, err := readBody(r, maxSchemaBytes)
	if err != nil {
		return err
	}
	def, err := datastream.Parse(r.Context(), p.name, body, s.catalog)
	if err != nil {
		return err
	}
	v, created, err := m.Put(r.Context(), def)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", "/_datastreams/"+def.Name)
	}
	return writeJSON(w, status, v)
}

func (s *Server) listDatastreams(w http.ResponseWriter, r *http.Request, _ params) error {
	m, err := s.datastreams()
	if err != nil {
		return err
	}
	vs, err := m.List(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"datastreams": vs})
}

func (s *Server) getDatastream(w http.ResponseWriter, r *http.Request, p params) error {
	m, err := s.datastreams()
	if err != nil {
		return err
	}
	v, err := m.Get(r.Context(), p.name)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, v)
}

func (s *Server) deleteDatastream(w http.ResponseWriter, r *http.Request, p params) error {
	m, err := s.datastreams()
	if err != nil {
		return err
	}
	if err := m.Delete(r.Context(), p.name); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// streamPartitions parses ?partitions=0,3 (absent: the whole stream).
func streamPartitions(r *http.Request) ([]int, error) {
	q := r.URL.Query()
	if err := onlyParams(q, "partitions"); err != nil {
		return nil, err
	}
	if !q.Has("partitions") {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(q.Get("partitions"), ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, problem.Field(problem.Malformed, "partitions", "partition %q is not a partition number", f)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

func (s *Server) pauseDatastream(w http.ResponseWriter, r *http.Request, p params) error {
	return s.switchDatastream(w, r, p, (*datastream.Manager).Pause)
}

func (s *Server) resumeDatastream(w http.ResponseWriter, r *http.Request, p params) error {
	return s.switchDatastream(w, r, p, (*datastream.Manager).Resume)
}

// switchDatastream pauses or resumes the datastream, or the partitions
// the request lists.
func (s *Server) switchDatastream(w http.ResponseWriter, r *http.Request, p params,
	do func(*datastream.Manager, context.Context, string, []int) (datastream.View, error)) error {
	m, err := s.datastreams()
	if err != nil {
		return err
	}
	ps, err := streamPartitions(r)
	if err != nil {
		return err
	}
	v, err := do(m, r.Context(), p.name, ps)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, v)
}

func (s *Server) datastreamStatus(w http.ResponseWriter, r *http.Request, p params) error {
	m, err := s.datastreams()
	if err != nil {
		return err
	}
	st, err := m.Status(r.Context(), p.name)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, st)
}
