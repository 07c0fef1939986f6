package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/peer"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/replicas"
	"github.com/doppio-db/doppio/internal/schema"
)

// A drop (DELETE /_schemas/{db}/{table}, DELETE /_schemas/{db}) runs in
// three steps: unless forced, every partition's leader is asked whether
// it holds a document of what is dropped (any answer yes refuses the
// drop, 409); the catalog removes the definitions and marks the drop
// under way (catalog.BeginTableDrop); each partition's leader replicates
// the drop's write set (partition.Replica.Drop), here or on its node
// through POST /_internal/drop/{db}/{partition}; the catalog ends the
// drop. A drop interrupted after its first step is finished by sending
// it again.

// dropStep is one partition's part of a drop, as the leader's node
// receives it: check only, or drop.
type dropStep struct {
	// Partitions is the database's partition count (its catalog entry
	// may be gone already).
	Partitions int      `json:"partitions"`
	Tables     []string `json:"tables"`
	// All drops every table's sections, whatever Tables names.
	All bool `json:"all,omitempty"`
	// Check asks only whether the partition holds a document of Tables
	// (or, with All, of any table).
	Check bool `json:"check,omitempty"`
}

// dropOutcome is a partition's answer to a dropStep.
type dropOutcome struct {
	Holds bool   `json:"holds,omitempty"`
	SCN   string `json:"scn,omitempty"`
}

// dropForce reads a drop's parameters: no body, and only ?force=.
func dropForce(r *http.Request) (bool, error) {
	return onlyBoolParam(r, "force", false, "a drop")
}

// dropTable answers DELETE /_schemas/{db}/{table}.
func (s *Server) dropTable(w http.ResponseWriter, r *http.Request, p params) error {
	force, err := dropForce(r)
	if err != nil {
		return err
	}
	d, err := s.database(r.Context(), p.db)
	if err != nil {
		return err
	}
	step := dropStep{Partitions: d.Partitions, Tables: []string{p.table}}
	if _, exists := s.catalog.LookupTable(r.Context(), p.db, p.table); exists && !force {
		if err := s.refuseUnlessEmpty(r, d, step, fmt.Sprintf("table %q", p.table)); err != nil {
			return err
		}
	}
	if err := s.catalog.BeginTableDrop(r.Context(), p.db, p.table); err != nil {
		return err
	}
	if err := s.dropPartitions(r, d, step); err != nil {
		return err
	}
	if err := s.catalog.EndTableDrop(r.Context(), p.db, p.table); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// dropDatabase answers DELETE /_schemas/{db}.
func (s *Server) dropDatabase(w http.ResponseWriter, r *http.Request, p params) error {
	force, err := dropForce(r)
	if err != nil {
		return err
	}
	if d, exists := s.catalog.LookupDatabase(r.Context(), p.db); exists && !force {
		step := dropStep{Partitions: d.Partitions, All: true}
		if err := s.refuseUnlessEmpty(r, d, step, fmt.Sprintf("database %q", p.db)); err != nil {
			return err
		}
	}
	rec, err := s.catalog.BeginDatabaseDrop(r.Context(), p.db)
	if err != nil {
		return err
	}
	step := dropStep{Partitions: rec.Database.Partitions, Tables: rec.Tables, All: true}
	if err := s.dropPartitions(r, rec.Database, step); err != nil {
		return err
	}
	if err := s.catalog.EndDatabaseDrop(r.Context(), rec); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// refuseUnlessEmpty asks every partition whether it holds a document of
// what step drops, and refuses (409) if one does.
func (s *Server) refuseUnlessEmpty(r *http.Request, d schema.Database, step dropStep, what string) error {
	step.Check = true
	for part := range d.Partitions {
		out, err := s.dropStepAtLeader(r, d, part, step)
		if err != nil {
			return err
		}
		if out.Holds {
			return problem.New(problem.Conflict, "%s holds documents (partition %d has some): drop it with ?force=true to delete them with it", what, part)
		}
	}
	return nil
}

// dropPartitions drops what step names in every partition of d.
func (s *Server) dropPartitions(r *http.Request, d schema.Database, step dropStep) error {
	for part := range d.Partitions {
		if _, err := s.dropStepAtLeader(r, d, part, step); err != nil {
			return err
		}
	}
	return nil
}

// dropStepAtLeader runs step on partition part's leader, here or on its
// node, routing again (within the request's deadline) while the failure
// proves nothing was applied. A drop is idempotent, so a step sent twice
// does no harm.
func (s *Server) dropStepAtLeader(r *http.Request, d schema.Database, part int, step dropStep) (dropOutcome, error) {
	deadline, _ := r.Context().Deadline()
	bo := retryBackoff()
	for {
		rep, err := s.registry.Route(r.Context(), d, part, replicas.Access{})
		var out dropOutcome
		if err == nil {
			out, err = runDropStep(r.Context(), rep, step)
			err = s.registry.Redirect(d.Name, part, err)
		}
		if to, ok := partition.AsNotApplied(err, partition.Elsewhere); ok {
			out, err = s.forwardDropStep(r, to, step)
		}
		if err == nil || !partition.IsNotApplied(err) || r.Context().Err() != nil {
			return out, err
		}
		if time.Until(deadline) < bo.Peek()+retryMargin(deadline) || !s.pause(r, err, bo.Next()) {
			return out, err
		}
	}
}

// runDropStep runs step on the partition's leader replica rep.
func runDropStep(ctx context.Context, rep *partition.Replica, step dropStep) (dropOutcome, error) {
	if step.Check {
		table := ""
		if !step.All {
			table = step.Tables[0]
		}
		holds, err := rep.HoldsDocuments(ctx, table)
		return dropOutcome{Holds: holds}, err
	}
	scn, err := rep.Drop(ctx, step.Tables, step.All)
	return dropOutcome{SCN: scn.String()}, err
}

// forwardDropStep sends step to the node leading the partition, as this
// node (the route is node-only: the caller was authorized here).
func (s *Server) forwardDropStep(r *http.Request, to *partition.NotAppliedError, step dropStep) (dropOutcome, error) {
	var out dropOutcome
	js, err := json.Marshal(step)
	if err != nil {
		return out, err
	}
	resp, err := s.postThere(r, to, "/_internal/drop/"+url.PathEscape(to.DB)+"/"+strconv.Itoa(to.Partition), js, false, nil)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	if err := refusedThere(r, resp, to); err != nil {
		return out, err
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return out, err
	}
	if resp.StatusCode != http.StatusOK {
		var pb problemBody
		_ = json.Unmarshal(b, &pb)
		return out, &problem.Error{Kind: problem.Unavailable, Operation: -1, RetryAfter: 1,
			Detail: fmt.Sprintf("partition %s/%d on node %s answered the drop with status %d: %s", to.DB, to.Partition, to.Node, resp.StatusCode, pb.Detail)}
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return out, fmt.Errorf("partition %s/%d on node %s: %w", to.DB, to.Partition, to.Node, err)
	}
	return out, nil
}

// postThere posts the JSON body to path on the peer listener of the node
// to names, as r's caller when asCaller (else as this node), within what
// is left of r's deadline; a failed exchange is forwardError's.
func (s *Server) postThere(r *http.Request, to *partition.NotAppliedError, path string, body []byte, asCaller bool, header http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, s.peers.URL(to.Peer, path), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	if asCaller {
		peer.SetCaller(r.Context(), req)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(headerForwardedBy, s.cfg.NodeID)
	if deadline, ok := r.Context().Deadline(); ok {
		req.Header.Set(headerTimeout, (time.Until(deadline) - retryMargin(deadline)).String())
	}
	resp, err := s.peers.Do(req)
	if err != nil {
		return nil, forwardError(r, to, err)
	}
	return resp, nil
}

// internalDrop answers POST /_internal/drop/{db}/{partition}: another
// node's drop step for a partition led here. It never forwards: a leader
// elsewhere is a 503 the sending node routes again.
func (s *Server) internalDrop(w http.ResponseWriter, r *http.Request, p params) error {
	var step dropStep
	if err := decodeStrict(r, maxSchemaBytes, &step); err != nil {
		return err
	}
	part, err := strconv.Atoi(p.partition)
	if err != nil {
		return problem.New(problem.Malformed, "partition %q is not a number", p.partition)
	}
	if len(step.Tables) == 0 && !step.All {
		return problem.Field(problem.Malformed, "tables", "a drop names at least one table, or all")
	}
	d := schema.Database{Name: p.db, Partitions: step.Partitions}
	rep, err := s.registry.Route(r.Context(), d, part, replicas.Access{})
	if err != nil {
		return err
	}
	out, err := runDropStep(r.Context(), rep, step)
	if err != nil {
		return s.registry.Redirect(d.Name, part, err)
	}
	return writeJSON(w, http.StatusOK, out)
}

// onlyBoolParam reads the one boolean query parameter name a request of
// what may carry (def when absent), refusing any other parameter and a
// request body.
func onlyBoolParam(r *http.Request, name string, def bool, what string) (bool, error) {
	if r.Body != nil {
		if b, _ := io.ReadAll(io.LimitReader(r.Body, 1)); len(b) > 0 {
			return false, problem.New(problem.Malformed, "%s takes no request body", what)
		}
	}
	v := def
	for k, vs := range r.URL.Query() {
		if k != name {
			return false, problem.Field(problem.Malformed, k, "unknown parameter %q (%s takes only %s)", k, what, name)
		}
		b, err := strconv.ParseBool(vs[len(vs)-1])
		if err != nil || len(vs) > 1 {
			return false, problem.Field(problem.Malformed, name, "%s must be true or false, once", name)
		}
		v = b
	}
	return v, nil
}
