package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/replicas"
	"github.com/doppio-db/doppio/internal/schema"
)

// opBody is one operation of a transaction or batch.
type opBody struct {
	Op       string          `json:"op"`
	Table    string          `json:"table"`
	Key      []any           `json:"key"`
	Document json.RawMessage `json:"document,omitempty"`
	Patch    json.RawMessage `json:"patch,omitempty"`
	// The conditions are pointers so that an empty one, which names no
	// ETag or date, is refused rather than read as absent.
	IfMatch           *string `json:"ifMatch,omitempty"`
	IfNoneMatch       *string `json:"ifNoneMatch,omitempty"`
	IfUnmodifiedSince *string `json:"ifUnmodifiedSince,omitempty"`
}

type opResult struct {
	Key     keys.Tuple `json:"key"`
	ETag    string     `json:"etag,omitempty"`
	Created bool       `json:"created,omitempty"`
	Deleted int        `json:"deleted,omitempty"`
}

// operation turns one parsed operation body into a partition operation.
func (s *Server) operation(ctx context.Context, db schema.Database, b opBody) (partition.Operation, error) {
	t, err := s.table(ctx, db.Name, b.Table)
	if err != nil {
		return partition.Operation{}, err
	}
	if err := refuseDerived(t); err != nil {
		return partition.Operation{}, err
	}
	if len(b.Key) == 0 {
		return partition.Operation{}, problem.Field(problem.Malformed, "key", "the operation needs a key")
	}
	key, err := t.ParseKeyJSON(b.Key)
	if err != nil {
		return partition.Operation{}, err
	}
	op := partition.Operation{Table: t, Key: key}
	if op.Cond, err = opConditions(b); err != nil {
		return op, err
	}
	full := len(key) == t.Arity()
	needs := func(what string, present bool) error {
		if !present {
			return problem.Field(problem.Malformed, what, "%s needs %q", b.Op, what)
		}
		return nil
	}
	forbids := func(what string, present bool) error {
		if present {
			return problem.Field(problem.Malformed, what, "%s takes no %q", b.Op, what)
		}
		return nil
	}
	switch b.Op {
	case "put", "insert":
		if err := firstErr(needs("document", len(b.Document) > 0), forbids("patch", len(b.Patch) > 0)); err != nil {
			return op, err
		}
		switch {
		case full:
			op.Kind = partition.Put
			if b.Op == "insert" {
				op.Cond.IfNoneMatch = []string{"*"}
			}
		case t.AutoIncrement() && len(key) == t.Arity()-1:
			op.Kind = partition.Insert
		default:
			return op, problem.Field(problem.Malformed, "key", "%s needs all %d key parts of %s", b.Op, t.Arity(), t.Def.Name)
		}
		if len(b.Document) > s.cfg.MaxDocumentBytes {
			return op, problem.New(problem.TooLarge, "document is larger than the limit of %d bytes", s.cfg.MaxDocumentBytes)
		}
		op.Doc, err = t.DecodeJSON(b.Document)
	case "patch":
		if err := firstErr(needs("patch", len(b.Patch) > 0), forbids("document", len(b.Document) > 0)); err != nil {
			return op, err
		}
		if !full {
			return op, problem.Field(problem.Malformed, "key", "patch needs all %d key parts of %s", t.Arity(), t.Def.Name)
		}
		op.Kind = partition.Patch
		op.Patch, err = schema.ParsePatch(b.Patch)
	case "delete":
		if err := firstErr(forbids("document", len(b.Document) > 0), forbids("patch", len(b.Patch) > 0)); err != nil {
			return op, err
		}
		op.Kind = partition.Delete
		if !full {
			// A collection delete evaluates no condition: refuse one
			// rather than delete unconditionally (as DELETE does).
			if b.IfMatch != nil || b.IfNoneMatch != nil || b.IfUnmodifiedSince != nil {
				return op, problem.Field(problem.Malformed, "key", "conditions apply to one document, not to a collection: give all %d key parts of %s", t.Arity(), t.Def.Name)
			}
			op.Kind = partition.DeleteCollection
		}
	default:
		return op, problem.Field(problem.Malformed, "op", "unknown operation %q (put, insert, patch, delete)", b.Op)
	}
	return op, err
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func opConditions(b opBody) (partition.Condition, error) {
	var c partition.Condition
	for _, f := range []struct {
		name string
		v    *string
	}{{"ifMatch", b.IfMatch}, {"ifNoneMatch", b.IfNoneMatch}, {"ifUnmodifiedSince", b.IfUnmodifiedSince}} {
		if f.v != nil && strings.TrimSpace(*f.v) == "" {
			return c, problem.Field(problem.Malformed, f.name, "%s is empty: give an ETag list (or *) or a date, or leave it out", f.name)
		}
	}
	if b.IfMatch != nil {
		c.IfMatch = splitETags(*b.IfMatch)
	}
	if b.IfNoneMatch != nil {
		c.IfNoneMatch = splitETags(*b.IfNoneMatch)
	}
	if b.IfUnmodifiedSince != nil {
		v := *b.IfUnmodifiedSince
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			if t, err = http.ParseTime(v); err != nil {
				return c, problem.Field(problem.Malformed, "ifUnmodifiedSince", "ifUnmodifiedSince %q is neither RFC 3339 nor an HTTP date", v)
			}
		}
		c.IfUnmodifiedSince = t
	}
	return c, nil
}

// withOperation labels a problem with the index of the operation it is about.
func withOperation(err error, i int) error {
	pe, ok := problem.As(err)
	if !ok || pe.Operation >= 0 || partition.IsNotApplied(err) {
		// A routing failure stays what it is: forwarded or run again.
		return err
	}
	cp := *pe
	cp.Operation = i
	cp.Detail = "operation " + strconv.Itoa(i) + ": " + pe.Detail
	return &cp
}

func (s *Server) txn(w http.ResponseWriter, r *http.Request, p params) error {
	db, err := s.database(r.Context(), p.db)
	if err != nil {
		return err
	}
	var body struct {
		PartitionKey any      `json:"partitionKey"`
		Ops          []opBody `json:"ops"`
	}
	raw, err := readBody(r, s.cfg.MaxRequestBytes)
	if err != nil {
		return err
	}
	id, err := s.requestIdempotency(r, raw)
	if err != nil {
		return err
	}
	if err := decodeStrictBody(raw, &body); err != nil {
		return err
	}
	if len(body.Ops) == 0 {
		return problem.Field(problem.Malformed, "ops", "a transaction needs at least one operation")
	}
	if len(body.Ops) > s.cfg.MaxOps {
		return problem.New(problem.TooLarge, "a transaction has at most %d operations, got %d", s.cfg.MaxOps, len(body.Ops))
	}
	ops := make([]partition.Operation, len(body.Ops))
	for i, b := range body.Ops {
		op, err := s.operation(r.Context(), db, b)
		if err != nil {
			return withOperation(err, i)
		}
		if err := samePartitionKey(body.PartitionKey, op); err != nil {
			return withOperation(err, i)
		}
		if i > 0 && !equalPart(op.Key[0], ops[0].Key[0]) {
			return withOperation(problem.Field(problem.Malformed, "key", "key %s leaves the document group %s", op.Key, ops[0].Key[:1]), i)
		}
		ops[i] = op
	}
	rep, err := s.registry.Locate(r.Context(), db, ops[0].Key[0], replicas.Access{})
	if err != nil {
		return err
	}
	res, err := s.executeCharged(r, rep, partition.Request{Ops: ops, Idempotency: id})
	if err = s.registry.Redirect(rep.DB, rep.ID, err); err != nil {
		if len(ops) == 1 {
			return withOperation(err, 0)
		}
		return err
	}
	out := struct {
		SCN     string     `json:"scn"`
		Results []opResult `json:"results"`
	}{SCN: res.SCN.String(), Results: make([]opResult, len(res.Ops))}
	for i, o := range res.Ops {
		out.Results[i] = opResult{Key: o.Key, ETag: o.ETag, Created: o.Created, Deleted: o.Deleted}
	}
	w.Header().Set(headerSCN, out.SCN)
	markReplayed(w, res)
	return writeJSON(w, http.StatusOK, out)
}

// samePartitionKey checks an operation's key against the transaction's
// declared partition key, parsed by the operation's table key type.
func samePartitionKey(declared any, op partition.Operation) error {
	if declared == nil {
		return nil
	}
	pk, err := op.Table.ParseKeyJSON([]any{declared})
	if err != nil {
		return problem.Field(problem.Malformed, "partitionKey", "partitionKey: %v", err)
	}
	if !equalPart(pk[0], op.Key[0]) {
		return problem.Field(problem.Malformed, "key", "key %s leaves the document group of partitionKey %s", op.Key, pk)
	}
	return nil
}

func equalPart(a, b any) bool { return a == b }

// batchResult is the outcome of one operation of a batch.
type batchResult struct {
	Status  int          `json:"status"`
	SCN     string       `json:"scn,omitempty"`
	Result  *opResult    `json:"result,omitempty"`
	Problem *problemBody `json:"problem,omitempty"`
	// replayed: the outcome is the one remembered under the batch's
	// Idempotency-Key; nothing ran now. Said by a header, not in the body,
	// so that a retry's body is the first attempt's.
	replayed bool
}

// batch applies independent operations, each atomically on its own and in
// order, and reports each outcome; one failing does not stop the others.
func (s *Server) batch(w http.ResponseWriter, r *http.Request, p params) error {
	db, err := s.database(r.Context(), p.db)
	if err != nil {
		return err
	}
	var body struct {
		Ops []opBody `json:"ops"`
	}
	if err := decodeStrict(r, int64(s.cfg.MaxRequestBytes), &body); err != nil {
		return err
	}
	if len(body.Ops) == 0 {
		return problem.Field(problem.Malformed, "ops", "a batch needs at least one operation")
	}
	if len(body.Ops) > s.cfg.MaxOps {
		return problem.New(problem.TooLarge, "a batch has at most %d operations, got %d", s.cfg.MaxOps, len(body.Ops))
	}
	if _, err := idempotencyKey(r); err != nil {
		return err
	}
	// A condition that cannot be read makes the body itself malformed:
	// refuse the whole batch before any operation runs.
	for i, b := range body.Ops {
		if _, err := opConditions(b); err != nil {
			return withOperation(err, i)
		}
	}
	results := make([]batchResult, len(body.Ops))
	var refused error
	replayed := true
	for i, b := range body.Ops {
		results[i], refused = s.batchOpRetrying(r, db, i, b)
		replayed = replayed && results[i].replayed
	}
	if replayed {
		// Every operation answered its remembered outcome.
		w.Header().Set(headerReplayed, "true")
	}
	if len(results) == 1 && refused != nil && r.Header.Get(headerForwardedBy) != "" {
		// The forwarding node may route this batch of one again.
		w.Header().Set(headerNotApplied, "true")
	}
	return writeJSON(w, http.StatusOK, map[string]any{"results": results})
}

// batchOpRetrying runs one operation of a batch like serve runs a request:
// a failure that proves nothing was applied runs it again, routed afresh,
// within the request's deadline. It returns that failure when it is the
// operation's final answer.
func (s *Server) batchOpRetrying(r *http.Request, db schema.Database, i int, b opBody) (batchResult, error) {
	deadline, _ := r.Context().Deadline()
	bo := retryBackoff()
	for {
		res, err := s.batchOp(r, db, i, b)
		if err == nil || !notApplied(r, err) || r.Context().Err() != nil {
			return res, nil
		}
		_, isElsewhere := partition.AsNotApplied(err, partition.Elsewhere)
		if isElsewhere || time.Until(deadline) < bo.Peek()+retryMargin(deadline) {
			return res, err
		}
		if !s.pause(r, err, bo.Next()) {
			return res, err
		}
	}
}

// batchOp runs operation i of a batch; with its result it returns the
// error that made it fail, if any.
func (s *Server) batchOp(r *http.Request, db schema.Database, i int, b opBody) (batchResult, error) {
	fail := func(err error) (batchResult, error) {
		pe, ok := problem.As(err)
		if !ok {
			s.log.Error("batch operation failed", "err", err)
			body := internalProblem()
			return batchResult{Status: 500, Problem: &body}, err
		}
		return batchResult{Status: pe.Kind.Status(), Problem: &problemBody{
			Type: pe.Kind.Type(), Title: pe.Kind.Title(), Status: pe.Kind.Status(), Detail: pe.Detail, Field: pe.Field,
			RetryAfter: pe.RetryAfter,
		}}, err
	}
	op, err := s.operation(r.Context(), db, b)
	if err != nil {
		return fail(err)
	}
	id, err := s.batchOpIdempotency(r, db.Name, i, b)
	if err != nil {
		return fail(err)
	}
	rep, err := s.registry.Locate(r.Context(), db, op.Key[0], replicas.Access{})
	var res partition.Result
	if err == nil {
		res, err = s.executeCharged(r, rep, partition.Request{Ops: []partition.Operation{op}, Idempotency: id})
		err = s.registry.Redirect(rep.DB, rep.ID, err)
	}
	to, isElsewhere := partition.AsNotApplied(err, partition.Elsewhere)
	if isElsewhere && r.Header.Get(headerForwardedBy) == "" {
		out, ferr := s.forwardBatchOp(r, to, i, b)
		if ferr == nil {
			return out, nil
		}
		err = ferr
	}
	if err != nil {
		return fail(err)
	}
	o := res.Ops[0]
	status := http.StatusOK
	switch {
	case o.Created:
		status = http.StatusCreated
	case op.Kind == partition.Delete || op.Kind == partition.DeleteCollection:
		status = http.StatusNoContent
	}
	return batchResult{Status: status, SCN: res.SCN.String(), Result: &opResult{Key: o.Key, ETag: o.ETag, Created: o.Created, Deleted: o.Deleted},
		replayed: res.Replayed}, nil
}

// forwardBatchOp runs operation i of a batch on the node leading its
// partition, as a batch of one (under the batch's Idempotency-Key and
// the operation's index, when it has one).
func (s *Server) forwardBatchOp(r *http.Request, to *partition.NotAppliedError, i int, b opBody) (batchResult, error) {
	js, err := json.Marshal(map[string]any{"ops": []opBody{b}})
	if err != nil {
		return batchResult{}, err
	}
	var h http.Header
	if k := r.Header.Get(headerIdempotencyKey); k != "" {
		h = http.Header{headerIdempotencyKey: {k}, headerIdempotencyOp: {strconv.Itoa(i)}}
	}
	resp, err := s.postThere(r, to, "/"+url.PathEscape(to.DB)+"/_batch", js, true, h)
	if err != nil {
		return batchResult{}, err
	}
	defer resp.Body.Close()
	if resp.Header.Get(headerNotApplied) != "" {
		return batchResult{}, &partition.NotAppliedError{Reason: partition.RefusedThere,
			Detail: fmt.Sprintf("%s, which could not run the operation there; routing is settling", to.Error())}
	}
	var out struct {
		Results []batchResult `json:"results"`
	}
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber() // key parts stay as written, not float64
	if resp.StatusCode != http.StatusOK || dec.Decode(&out) != nil || len(out.Results) != 1 {
		return batchResult{}, &problem.Error{Kind: problem.Unavailable, Operation: -1, RetryAfter: 1,
			Detail: fmt.Sprintf("%s, which answered the forwarded operation with status %d", to.Error(), resp.StatusCode)}
	}
	out.Results[0].replayed = resp.Header.Get(headerReplayed) != ""
	return out.Results[0], nil
}
