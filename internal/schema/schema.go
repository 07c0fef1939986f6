// Package schema defines databases, tables and document schemas, and turns
// documents between their JSON form, their normalized in-memory form and Avro
// binary, resolving between schema versions.
//
// A table's document schema is an Avro record; each registered change makes a
// new version, accepted only if old and new resolve each other both ways.
// Documents are stored as Avro binary tagged with the writer's version and
// resolved to the reader's version on read.
package schema

import (
	"encoding/json"
	"time"
)

// KeyType is the type of one key part.
type KeyType string

const (
	KeyString KeyType = "string"
	KeyInt    KeyType = "int"
	KeyLong   KeyType = "long"
)

// KeyPart is one part of a table's key; the first is the partition key.
type KeyPart struct {
	Name          string  `json:"name"`
	Type          KeyType `json:"type"`
	AutoIncrement bool    `json:"autoIncrement,omitempty"`
}

// Database is a database's definition as stored in the catalog.
type Database struct {
	Name        string `json:"name"`
	Partitions  int    `json:"partitions"`
	Replicas    int    `json:"replicas"`
	Partitioner string `json:"partitioner"`
}

// Version is one registered document-schema version of a table.
type Version struct {
	Version int             `json:"version"`
	Schema  json.RawMessage `json:"schema"`
	Created time.Time       `json:"created"`
}

// TableDef is a table's definition as stored in the catalog.
type TableDef struct {
	Database string    `json:"database"`
	Name     string    `json:"name"`
	Key      []KeyPart `json:"key"`
	Versions []Version `json:"versions"`
	// Kind is KindDerived for a derived table, whose documents change
	// only by pushing versions (docs/design/derived.md); empty otherwise.
	Kind string `json:"kind,omitempty"`
	// Cache, when set, makes the table cacheable (docs/design/cache.md).
	Cache *CacheSettings `json:"cache,omitempty"`
	// CacheGeneration names the table's entries in the cache tier: an
	// etcd revision taken when the table was created, raised by every
	// change of its documents that bypasses the change log (a bulk load,
	// a restore), which orphans every entry written before.
	CacheGeneration int64 `json:"cacheGeneration,omitempty"`
}

// KindDerived is the kind of a read-only table served in versions.
const KindDerived = "derived"

// Document is a document in normalized form: a map of field name to value,
// where a value is nil, bool, int64 (int, long and their logical types),
// float64 (float, double), string (string, enum), []byte (bytes, fixed),
// []any (array), map[string]any (map, record).
type Document = map[string]any
