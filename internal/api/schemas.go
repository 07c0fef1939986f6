package api

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/doppio-db/doppio/internal/catalog"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/schema"
)

// maxSchemaBytes bounds a schema request body.
const maxSchemaBytes = 1 << 20

// decodeStrict parses a JSON body into v, rejecting unknown fields and
// trailing data.
func decodeStrict(r *http.Request, limit int64, v any) error {
	if err := checkJSONContentType(r); err != nil {
		return err
	}
	body, err := readLimited(r, limit)
	if err != nil {
		return err
	}
	return decodeStrictBody(body, v)
}

// decodeStrictBody is decodeStrict of a body already read.
func decodeStrictBody(body []byte, v any) error {
	body, err := conform(body, reflect.TypeOf(v).Elem())
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return problem.New(problem.Malformed, "invalid JSON body: %v", err)
	}
	if dec.More() {
		return problem.New(problem.Malformed, "invalid JSON body: data after the JSON value")
	}
	return nil
}

type databaseView struct {
	schema.Database
	Tables []tableSummary `json:"tables"`
}

type tableSummary struct {
	Name    string           `json:"name"`
	Key     []schema.KeyPart `json:"key"`
	Version int              `json:"version"`
}

func (s *Server) databaseView(d schema.Database) databaseView {
	v := databaseView{Database: d, Tables: []tableSummary{}}
	for _, t := range s.catalog.Tables(d.Name) {
		v.Tables = append(v.Tables, tableSummary{Name: t.Def.Name, Key: t.Def.Key, Version: t.Latest()})
	}
	return v
}

func (s *Server) listDatabases(w http.ResponseWriter, r *http.Request, _ params) error {
	out := []databaseView{}
	for _, d := range s.catalog.Databases() {
		if s.mayRead(r, d.Name) {
			out = append(out, s.databaseView(d))
		}
	}
	return writeJSON(w, http.StatusOK, map[string]any{"databases": out})
}

func (s *Server) database(ctx context.Context, name string) (schema.Database, error) {
	d, ok := s.catalog.LookupDatabase(ctx, name)
	if !ok {
		return d, problem.New(problem.NotFound, "database %q does not exist", name)
	}
	return d, nil
}

func (s *Server) getDatabase(w http.ResponseWriter, r *http.Request, p params) error {
	d, err := s.database(r.Context(), p.db)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, s.databaseView(d))
}

func (s *Server) putDatabase(w http.ResponseWriter, r *http.Request, p params) error {
	// Raw fields: an absent setting takes its default, but an explicit 0,
	// null or "" is a mistake, not a request for the default.
	var body struct {
		Partitions  json.RawMessage `json:"partitions"`
		Replicas    json.RawMessage `json:"replicas"`
		Partitioner json.RawMessage `json:"partitioner"`
	}
	if err := decodeStrict(r, maxSchemaBytes, &body); err != nil {
		return err
	}
	partitions, err := positiveSetting(body.Partitions, "partitions")
	if err != nil {
		return err
	}
	replicas, err := positiveSetting(body.Replicas, "replicas")
	if err != nil {
		return err
	}
	var partitioner string
	if body.Partitioner != nil {
		if err := json.Unmarshal(body.Partitioner, &partitioner); err != nil || partitioner == "" {
			return problem.Field(problem.Malformed, "partitioner", "partitioner must be \"hash\", not %s", body.Partitioner)
		}
	}
	d, created, err := s.catalog.PutDatabase(r.Context(), schema.Database{
		Name: p.db, Partitions: partitions, Replicas: replicas, Partitioner: partitioner,
	})
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", "/_schemas/"+d.Name)
	}
	return writeJSON(w, status, s.databaseView(d))
}

// positiveSetting reads an optional whole-number setting of a database:
// 0 when absent (the default), else an integer of at least 1, written as
// JSON allows (8, 8.0 or 8e0).
func positiveSetting(raw json.RawMessage, field string) (int, error) {
	if raw == nil {
		return 0, nil
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil || f != math.Trunc(f) || f < 1 || f > math.MaxInt32 {
		return 0, problem.Field(problem.Malformed, field, "%s must be a whole number of at least 1, not %s", field, raw)
	}
	return int(f), nil
}

func (s *Server) table(ctx context.Context, db, name string) (*schema.Table, error) {
	if _, err := s.database(ctx, db); err != nil {
		return nil, err
	}
	var t *schema.Table
	var ok bool
	if since, forwarded := ctx.Value(catalogSince{}).(catalog.Position); forwarded {
		t, ok = s.catalog.LookupTableSince(ctx, db, name, since)
	} else {
		t, ok = s.catalog.LookupTable(ctx, db, name)
	}
	if !ok {
		return nil, problem.New(problem.NotFound, "table %q does not exist in database %q", name, db)
	}
	return t, nil
}

type versionSummary struct {
	Version int       `json:"version"`
	Created time.Time `json:"created"`
}

type tableView struct {
	Database string           `json:"database"`
	Name     string           `json:"name"`
	Key      []schema.KeyPart `json:"key"`
	Version  int              `json:"version"`
	Schema   json.RawMessage  `json:"schema"`
	Versions []versionSummary `json:"versions"`
	Indexes  []indexView      `json:"indexes"`
	Kind     string           `json:"kind,omitempty"`
	// Cache and CacheGeneration are shown for a cacheable table only.
	Cache           *schema.CacheSettings `json:"cache,omitempty"`
	CacheGeneration int64                 `json:"cacheGeneration,omitempty"`
}

// indexView is the state of one index over the partitions of this node.
type indexView struct {
	Field    string  `json:"field"`
	Kind     string  `json:"kind"`
	State    string  `json:"state"` // "ready" or "building"
	Progress float64 `json:"progress"`
	Done     int64   `json:"done"`
	Total    int64   `json:"total"`
}

// withIndexes adds the build state of t's indexes, summed over the
// database's partitions on this node.
func (s *Server) withIndexes(v tableView, db string, t *schema.Table) tableView {
	d, ok := s.catalog.Database(db)
	v.Indexes = []indexView{}
	if !ok {
		return v
	}
	reps := s.registry.Partitions(d.Name)
	for _, ix := range t.Indexes() {
		field := strings.Join(ix.Path, ".")
		iv := indexView{Field: field, Kind: ix.Kind, State: "ready"}
		for _, rep := range reps {
			st := rep.IndexState(t.Def.Name, field)
			if !st.Ready {
				iv.State = "building"
			}
			iv.Done += st.Done
			iv.Total += st.Total
		}
		iv.Progress = 1
		if iv.State != "ready" && iv.Total > 0 {
			iv.Progress = float64(iv.Done) / float64(iv.Total)
		} else if iv.State != "ready" {
			iv.Progress = 0
		}
		v.Indexes = append(v.Indexes, iv)
	}
	return v
}

func viewTable(t *schema.Table) tableView {
	def := t.Def
	v := tableView{Database: def.Database, Name: def.Name, Key: def.Key, Version: t.Latest(), Kind: def.Kind, Cache: def.Cache}
	if def.Cacheable() {
		v.CacheGeneration = def.CacheGeneration
	}
	for _, ver := range def.Versions {
		v.Versions = append(v.Versions, versionSummary{Version: ver.Version, Created: ver.Created})
		if ver.Version == t.Latest() {
			v.Schema = ver.Schema
		}
	}
	return v
}

func (s *Server) getTable(w http.ResponseWriter, r *http.Request, p params) error {
	t, err := s.table(r.Context(), p.db, p.table)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, s.withIndexes(viewTable(t), p.db, t))
}

func (s *Server) putTable(w http.ResponseWriter, r *http.Request, p params) error {
	var body struct {
		Key    []schema.KeyPart `json:"key"`
		Schema json.RawMessage  `json:"schema"`
		Kind   string           `json:"kind"`
		Cache  json.RawMessage  `json:"cache"`
	}
	if err := decodeStrict(r, maxSchemaBytes, &body); err != nil {
		return err
	}
	opts := catalog.TableOptions{Kind: body.Kind}
	if body.Cache != nil {
		c, err := schema.ParseCacheSettings(body.Cache)
		if err != nil {
			return err
		}
		opts.SetCache, opts.Cache = true, c
	}
	if len(body.Schema) == 0 && !opts.SetCache {
		return problem.Field(problem.Malformed, "schema", "the table needs a document schema")
	}
	if _, err := s.database(r.Context(), p.db); err != nil {
		return err
	}
	t, created, changed, err := s.catalog.PutTable(r.Context(), p.db, p.table, body.Key, body.Schema, opts)
	if err != nil {
		return err
	}
	if created || changed {
		// Before answering: a query after this answer must see the new
		// indexes' state (building, not silently incomplete).
		if err := s.registry.SyncIndexes(p.db); err != nil {
			return err
		}
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", "/_schemas/"+p.db+"/"+p.table)
	}
	return writeJSON(w, status, s.withIndexes(viewTable(t), p.db, t))
}

func (s *Server) getVersion(w http.ResponseWriter, r *http.Request, p params) error {
	t, err := s.table(r.Context(), p.db, p.table)
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(p.version)
	if err != nil || n < 1 {
		return problem.Field(problem.Malformed, "version", "version %q is not a positive integer", p.version)
	}
	for _, v := range t.Def.Versions {
		if v.Version == n {
			return writeJSON(w, http.StatusOK, v)
		}
	}
	return problem.New(problem.NotFound, "table %s has no version %d (latest is %d)", p.table, n, t.Latest())
}
