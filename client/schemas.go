package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// DatabaseSpec is what a database is created or updated with; zero fields
// take the server's defaults (8 partitions, 1 replica, "hash").
type DatabaseSpec struct {
	Partitions  int    `json:"partitions,omitempty"`
	Replicas    int    `json:"replicas,omitempty"`
	Partitioner string `json:"partitioner,omitempty"`
}

// Database is a database's schema and a summary of its tables.
type Database struct {
	Name        string         `json:"name"`
	Partitions  int            `json:"partitions"`
	Replicas    int            `json:"replicas"`
	Partitioner string         `json:"partitioner"`
	Tables      []TableSummary `json:"tables"`
}

// TableSummary names a table, its key and its latest schema version.
type TableSummary struct {
	Name    string    `json:"name"`
	Key     []KeyPart `json:"key"`
	Version int       `json:"version"`
}

// KeyPart is one part of a table's key: Type is "string", "int" or "long";
// only the last part, an int or long, may be AutoIncrement.
type KeyPart struct {
	Name          string `json:"name"`
	Type          string `json:"type"`
	AutoIncrement bool   `json:"autoIncrement,omitempty"`
}

// TableSpec defines a table: its key and its document schema (an Avro
// record whose fields may carry "index":"attribute" or "index":"text").
type TableSpec struct {
	Key    []KeyPart       `json:"key"`
	Schema json.RawMessage `json:"schema"`
	// Kind is "derived" for a read-only table served in pushed versions.
	Kind string `json:"kind,omitempty"`
}

// Table is a table's current definition.
type Table struct {
	Database string          `json:"database"`
	Name     string          `json:"name"`
	Key      []KeyPart       `json:"key"`
	Version  int             `json:"version"`
	Schema   json.RawMessage `json:"schema"`
	Versions []VersionInfo   `json:"versions"`
	// Kind is "derived" for a derived table.
	Kind string `json:"kind,omitempty"`
	// Indexes are the table's indexes and how far each is built.
	Indexes []IndexStatus `json:"indexes"`
}

// IndexStatus is the build state of one index over a node's partitions.
type IndexStatus struct {
	Field    string  `json:"field"`
	Kind     string  `json:"kind"`  // "attribute" or "text"
	State    string  `json:"state"` // "ready" or "building"
	Progress float64 `json:"progress"`
	Done     int64   `json:"done"`
	Total    int64   `json:"total"`
}

// VersionInfo summarizes one registered document-schema version.
type VersionInfo struct {
	Version int       `json:"version"`
	Created time.Time `json:"created"`
}

// SchemaVersionDef is one registered document-schema version in full.
type SchemaVersionDef struct {
	Version int             `json:"version"`
	Schema  json.RawMessage `json:"schema"`
	Created time.Time       `json:"created"`
}

func schemaPath(parts ...string) string {
	p := "/_schemas"
	for _, s := range parts {
		p += "/" + url.PathEscape(s)
	}
	return p
}

// PutDatabase creates the database (created is true) or updates what may
// change of it.
func (c *Client) PutDatabase(ctx context.Context, name string, spec DatabaseSpec) (Database, bool, error) {
	r := newRequest(http.MethodPut, schemaPath(name))
	if err := r.jsonBody(spec); err != nil {
		return Database{}, false, err
	}
	var d Database
	res, err := c.call(ctx, r, &d)
	if err != nil {
		return Database{}, false, err
	}
	return d, res.status == http.StatusCreated, nil
}

// GetDatabase reads a database's schema and its tables.
func (c *Client) GetDatabase(ctx context.Context, name string) (Database, error) {
	var d Database
	_, err := c.call(ctx, newRequest(http.MethodGet, schemaPath(name)), &d)
	return d, err
}

// ListDatabases reads every database's schema.
func (c *Client) ListDatabases(ctx context.Context) ([]Database, error) {
	var out struct {
		Databases []Database `json:"databases"`
	}
	_, err := c.call(ctx, newRequest(http.MethodGet, schemaPath()), &out)
	return out.Databases, err
}

// PutTable creates the table (created is true) or registers spec.Schema as
// its next document-schema version; an incompatible schema or a changed key
// is a 409 (IsConflict) saying why.
func (c *Client) PutTable(ctx context.Context, db, table string, spec TableSpec) (Table, bool, error) {
	r := newRequest(http.MethodPut, schemaPath(db, table))
	if err := r.jsonBody(spec); err != nil {
		return Table{}, false, err
	}
	var t Table
	res, err := c.call(ctx, r, &t)
	if err != nil {
		return Table{}, false, err
	}
	return t, res.status == http.StatusCreated, nil
}

// GetTable reads a table's current definition and its versions.
func (c *Client) GetTable(ctx context.Context, db, table string) (Table, error) {
	var t Table
	_, err := c.call(ctx, newRequest(http.MethodGet, schemaPath(db, table)), &t)
	return t, err
}

// GetTableVersion reads version n of a table's document schema.
func (c *Client) GetTableVersion(ctx context.Context, db, table string, n int) (SchemaVersionDef, error) {
	var v SchemaVersionDef
	_, err := c.call(ctx, newRequest(http.MethodGet, schemaPath(db, table, "versions", strconv.Itoa(n))), &v)
	return v, err
}

// DropOptions modify DropTable and DropDatabase.
type DropOptions struct {
	// Force drops what holds documents, deleting them with it; without
	// it such a drop is a 409 (IsConflict) and changes nothing.
	Force bool
}

// DropTable drops the table and all its documents, index entries and
// auto-increment counters; created again, it starts empty. A drop that
// failed midway (503, 504) is finished by calling DropTable again.
func (c *Client) DropTable(ctx context.Context, db, table string, o DropOptions) error {
	return c.drop(ctx, schemaPath(db, table), o)
}

// DropDatabase drops the database, its tables and all their documents.
// Created again, the database keeps its partition count and partitioner.
func (c *Client) DropDatabase(ctx context.Context, db string, o DropOptions) error {
	return c.drop(ctx, schemaPath(db), o)
}

func (c *Client) drop(ctx context.Context, path string, o DropOptions) error {
	r := newRequest(http.MethodDelete, path)
	if o.Force {
		r.query["force"] = "true"
	}
	_, err := c.do(ctx, r)
	return err
}
