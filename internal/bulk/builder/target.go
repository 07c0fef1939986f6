package builder

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/doppio-db/doppio/internal/bulk"
	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/schema"
	"github.com/hamba/avro/v2"
)

// Target is what a build encodes for: one table at one schema version,
// in a database of a given partition count.
type Target struct {
	Database   string
	Table      string
	Partitions int
	Version    int

	table  *schema.Table          // compiled so that its latest version is Version
	fields map[string]avro.Schema // the top-level fields of Version, for CSV cells
	keyIdx map[string]int         // key part name -> position
}

// Spec is a table definition as PUT /_schemas/{db}/{table} takes it.
type Spec struct {
	Key    []schema.KeyPart `json:"key"`
	Schema json.RawMessage  `json:"schema"`
}

// ParseSpec decodes a table definition file, refusing unknown members.
func ParseSpec(b []byte) (Spec, error) {
	var s Spec
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return s, fmt.Errorf("table definition: %w", err)
	}
	if len(s.Schema) == 0 {
		return s, fmt.Errorf("table definition: no \"schema\"")
	}
	return s, nil
}

// NewTarget compiles the table whose version-th document schema is
// spec.Schema. Validation and encoding then happen at that version
// exactly as a PUT does at the latest.
func NewTarget(db, table string, partitions, version int, spec Spec) (*Target, error) {
	if partitions < 1 || partitions > 4096 {
		return nil, fmt.Errorf("partitions must be 1 to 4096, not %d", partitions)
	}
	if version < 1 {
		return nil, fmt.Errorf("schema version must be positive, not %d", version)
	}
	// schema.Table validates and encodes at its latest version; earlier
	// versions only serve reads, so they may repeat the one we build at.
	def := schema.TableDef{Database: db, Name: table, Key: spec.Key}
	for v := 1; v <= version; v++ {
		def.Versions = append(def.Versions, schema.Version{Version: v, Schema: spec.Schema})
	}
	t, err := schema.Compile(def)
	if err != nil {
		return nil, fmt.Errorf("table %s.%s: %w", db, table, err)
	}
	parsed, err := avro.ParseBytesWithCache(spec.Schema, "", &avro.SchemaCache{})
	if err != nil {
		return nil, fmt.Errorf("table %s.%s: %w", db, table, err)
	}
	rec, ok := parsed.(*avro.RecordSchema)
	if !ok {
		return nil, fmt.Errorf("table %s.%s: the document schema is not a record", db, table)
	}
	tg := &Target{Database: db, Table: table, Partitions: partitions, Version: version, table: t,
		fields: map[string]avro.Schema{}, keyIdx: map[string]int{}}
	for _, f := range rec.Fields() {
		tg.fields[f.Name()] = f.Type()
	}
	for i, k := range spec.Key {
		tg.keyIdx[k.Name] = i
	}
	return tg, nil
}

// manifest is the skeleton of the build's manifest.
func (t *Target) manifest() *bulk.Manifest {
	return &bulk.Manifest{
		Format:        bulk.Format,
		Database:      t.Database,
		Table:         t.Table,
		SchemaVersion: t.Version,
		Partitions:    t.Partitions,
		Partitioner:   bulk.PartitionerHash,
	}
}

// keyNames are the table's key part names in key order.
func (t *Target) keyNames() []string {
	out := make([]string, len(t.table.Def.Key))
	for i, k := range t.table.Def.Key {
		out[i] = k.Name
	}
	return out
}

// rejection is a record's failure: it goes to the rejects file.
type rejection string

func (r rejection) Error() string { return string(r) }

func reject(format string, args ...any) error { return rejection(fmt.Sprintf(format, args...)) }

// encode turns a validated key and document into a partition file record
// and the partition holding it, partitioned as the server routes a write:
// keys.PartitionOf over the encoded partition key.
func (t *Target) encode(key keys.Tuple, doc schema.Document, maxDoc int) (bulk.Record, int, error) {
	k, err := keys.EncodeTuple(key)
	if err != nil {
		return bulk.Record{}, 0, reject("%v", err)
	}
	pk, err := keys.EncodeTuple(key[:1])
	if err != nil {
		return bulk.Record{}, 0, reject("%v", err)
	}
	d, err := t.table.Encode(doc)
	if err != nil {
		return bulk.Record{}, 0, reject("%v", err)
	}
	if len(d) > maxDoc {
		return bulk.Record{}, 0, reject("document is %d bytes encoded, more than the limit of %d", len(d), maxDoc)
	}
	return bulk.Record{Key: k, Doc: d}, keys.PartitionOf(pk, t.Partitions), nil
}

// fromValues validates a record given as a map of field name to value
// (JSON-decoded values with json.Number, or int64, float64, []byte): the
// key parts are taken out by name and the rest is normalized as a PUT body.
func (t *Target) fromValues(m map[string]any) (keys.Tuple, schema.Document, error) {
	parts := make([]any, len(t.table.Def.Key))
	for i, name := range t.keyNames() {
		v, ok := m[name]
		if !ok || v == nil {
			return nil, nil, reject("missing key part %q", name)
		}
		parts[i] = v
		delete(m, name)
	}
	key, err := t.table.ParseKeyJSON(parts)
	if err != nil {
		return nil, nil, rejection(err.Error())
	}
	doc, err := t.table.Normalize(m)
	if err != nil {
		return nil, nil, rejection(err.Error())
	}
	return key, doc, nil
}

// fromJSON validates one JSON Lines record. The document is the line's
// object without its key members, decoded by the same parser as a PUT
// body. A syntax error is returned as is (the input is malformed, which
// fails the build); anything else is a rejection.
//
// The fast path cuts the line without decoding it and only ever
// succeeds; any failure is left to fromJSONSlow, so the two agree on
// what fails and why (FuzzFromJSONPathsAgree).
func (t *Target) fromJSON(line []byte) (keys.Tuple, schema.Document, error) {
	parts, body, ok := t.splitLine(line)
	if !ok {
		return t.fromJSONSlow(line)
	}
	vals := make([]any, len(parts))
	for i, raw := range parts {
		if vals[i], ok = simpleKeyValue(raw); !ok {
			return t.fromJSONSlow(line)
		}
	}
	key, err := t.table.ParseKeyJSON(vals)
	if err != nil {
		return t.fromJSONSlow(line)
	}
	doc, err := t.table.DecodeJSON(body)
	if err != nil {
		return t.fromJSONSlow(line)
	}
	return key, doc, nil
}

// fromJSONSlow is fromJSON decoding the line with encoding/json first.
func (t *Target) fromJSONSlow(line []byte) (keys.Tuple, schema.Document, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(line, &members); err != nil {
		if _, ok := err.(*json.SyntaxError); ok {
			return nil, nil, err
		}
		return nil, nil, reject("the record must be a JSON object")
	}
	if members == nil {
		return nil, nil, reject("the record must be a JSON object, not null")
	}
	parts := make([]any, len(t.table.Def.Key))
	for i, name := range t.keyNames() {
		raw, ok := members[name]
		if !ok {
			return nil, nil, reject("missing key part %q", name)
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&parts[i]); err != nil {
			return nil, nil, reject("key part %q: %v", name, err)
		}
		if parts[i] == nil {
			return nil, nil, reject("missing key part %q", name)
		}
		delete(members, name)
	}
	key, err := t.table.ParseKeyJSON(parts)
	if err != nil {
		return nil, nil, rejection(err.Error())
	}
	names := make([]string, 0, len(members))
	for n := range members {
		names = append(names, n)
	}
	slices.Sort(names)
	body := []byte{'{'}
	for i, n := range names {
		if i > 0 {
			body = append(body, ',')
		}
		q, _ := json.Marshal(n)
		body = append(append(append(body, q...), ':'), members[n]...)
	}
	body = append(body, '}')
	doc, err := t.table.DecodeJSON(body)
	if err != nil {
		return nil, nil, rejection(err.Error())
	}
	return key, doc, nil
}
