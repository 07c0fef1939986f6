package api

import (
	"context"
	"net/http"
	"strconv"

	"github.com/doppio-db/doppio/client/wire"
	"github.com/doppio-db/doppio/internal/problem"
)

// Checker runs consistency checks; the node's cluster view implements it.
type Checker interface {
	// CheckDatabase checks every partition of db, one after another, at
	// their leaders, and returns the result of each.
	CheckDatabase(ctx context.Context, db string, partitions int, repair bool) (wire.DatabaseCheck, error)
	// CheckPartition checks one partition at its leader. With local, only
	// this node may run it (it must lead the partition): the route other
	// nodes call.
	CheckPartition(ctx context.Context, db string, partition int, repair, local bool) (wire.PartitionCheck, error)
}

// checkParams validates a check request: no body, and only ?repair=.
func checkParams(r *http.Request) (repair bool, err error) {
	return onlyBoolParam(r, "repair", true, "a check")
}

func (s *Server) checker() (Checker, error) {
	c, ok := s.clusterInfo.(Checker)
	if !ok {
		return nil, problem.New(problem.NotFound, "this server runs no consistency checks")
	}
	return c, nil
}

// checkDatabase answers POST /_cluster/check/{db}.
func (s *Server) checkDatabase(w http.ResponseWriter, r *http.Request, p params) error {
	repair, err := checkParams(r)
	if err != nil {
		return err
	}
	d, err := s.database(r.Context(), p.db)
	if err != nil {
		return err
	}
	c, err := s.checker()
	if err != nil {
		return err
	}
	out, err := c.CheckDatabase(r.Context(), d.Name, d.Partitions, repair)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, out)
}

// checkPartition answers POST /_cluster/check/{db}/{partition} and, with
// local, POST /_internal/check/{db}/{partition}.
func (s *Server) checkPartition(w http.ResponseWriter, r *http.Request, p params, local bool) error {
	repair, err := checkParams(r)
	if err != nil {
		return err
	}
	d, err := s.database(r.Context(), p.db)
	if err != nil {
		return err
	}
	pi, err := strconv.Atoi(p.partition)
	if err != nil {
		return problem.New(problem.Malformed, "partition %q is not a number", p.partition)
	}
	if pi < 0 || pi >= d.Partitions {
		return problem.New(problem.NotFound, "database %q has partitions 0 to %d, not %d", d.Name, d.Partitions-1, pi)
	}
	c, err := s.checker()
	if err != nil {
		return err
	}
	out, err := c.CheckPartition(r.Context(), d.Name, pi, repair, local)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) checkOnePartition(w http.ResponseWriter, r *http.Request, p params) error {
	return s.checkPartition(w, r, p, false)
}

func (s *Server) checkLocalPartition(w http.ResponseWriter, r *http.Request, p params) error {
	return s.checkPartition(w, r, p, true)
}
