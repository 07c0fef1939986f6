package schema

// THIS FILE IS A PLACEHOLDER: the signatures below are the contract; the
// implementation replaces this file.

import (
	"github.com/doppio-db/doppio/internal/keys"
)

// Table is a compiled, immutable table definition: its key types and the
// parsed Avro schema of every version. Safe for concurrent use.
type Table struct {
	Def TableDef
}

// Compile validates def (names, key parts, every version's schema and its
// "index" annotations) and compiles it. Errors are *problem.Error (Malformed
// for a bad definition).
func Compile(def TableDef) (*Table, error) { panic("todo") }

// ValidateDatabase checks a database definition (name, partitions 1..4096,
// replicas 1..5, partitioner "hash"), filling defaults (partitions 8,
// replicas 1, partitioner "hash"). Errors are *problem.Error (Malformed).
func ValidateDatabase(d *Database) error { panic("todo") }

// NextVersion returns def with schema appended as a new version if it is
// compatible both ways with the latest one, def unchanged with changed=false
// if schema equals the latest (canonical form), or a *problem.Error: Conflict
// naming the field and the reason when incompatible, Malformed when schema
// is not a valid Avro record schema.
func NextVersion(def TableDef, schema []byte) (next TableDef, changed bool, err error) {
	panic("todo")
}

// Latest is the newest version number (versions start at 1).
func (t *Table) Latest() int { panic("todo") }

// Arity is the number of key parts.
func (t *Table) Arity() int { return len(t.Def.Key) }

// AutoIncrement reports whether the last key part is auto-increment.
func (t *Table) AutoIncrement() bool { panic("todo") }

// ParseKeySegments parses percent-decoded URI path segments into the leading
// key parts they name (len(segs) <= Arity), by the key types. Errors:
// Malformed naming the key part (wrong type, out of int range, not UTF-8,
// empty string, too many parts).
func (t *Table) ParseKeySegments(segs []string) (keys.Tuple, error) { panic("todo") }

// ParseKeyJSON parses a key given as a JSON array (strings and numbers, as
// decoded with json.Decoder.UseNumber) into leading key parts; same errors.
func (t *Table) ParseKeyJSON(parts []any) (keys.Tuple, error) { panic("todo") }

// DecodeJSON parses a JSON document body and validates it against the latest
// version: unknown fields, missing fields without default, wrong types are
// Invalid (422) naming the dotted field path; malformed JSON is Malformed.
// Missing fields that have defaults are filled in.
func (t *Table) DecodeJSON(body []byte) (Document, error) { panic("todo") }

// Normalize validates an already JSON-decoded document (json.Number for
// numbers) against the latest version, same as DecodeJSON.
func (t *Table) Normalize(doc map[string]any) (Document, error) { panic("todo") }

// Encode returns the Avro binary of doc under the latest version. doc must
// be normalized (the output of DecodeJSON, Normalize, Decode at latest or
// ApplyPatch).
func (t *Table) Encode(doc Document) ([]byte, error) { panic("todo") }

// Decode reads Avro binary written with writerVersion and resolves it to
// readerVersion (0 = as written). An unknown reader version is NotFound.
func (t *Table) Decode(data []byte, writerVersion, readerVersion int) (Document, error) {
	panic("todo")
}

// MarshalJSON renders doc as JSON (bytes as base64 strings).
func MarshalDocument(doc Document) ([]byte, error) { panic("todo") }

// Patch is a parsed partial update.
type Patch struct {
	Set   map[string]any // dotted path -> raw JSON-decoded value
	Unset []string       // dotted paths
	Inc   map[string]any // dotted path -> json.Number
}

// ParsePatch parses {"$set":{…},"$unset":[…],"$inc":{…}}; unknown operators,
// empty patches, conflicting paths are Malformed.
func ParsePatch(body []byte) (Patch, error) { panic("todo") }

// ParsePatchValue is ParsePatch for an already-decoded JSON value.
func ParsePatchValue(v any) (Patch, error) { panic("todo") }

// ApplyPatch returns a new normalized document: doc (normalized at the latest
// version) with p applied. Paths that do not exist in the schema, $inc on a
// non-numeric field, values of the wrong type, $unset of a field that has no
// default are Invalid naming the path. Integer overflow is Invalid.
func (t *Table) ApplyPatch(doc Document, p Patch) (Document, error) { panic("todo") }

// ParseFields parses a projection "a,b.c" and checks every path against the
// latest version (unknown field: Malformed naming it).
func (t *Table) ParseFields(spec string) ([][]string, error) { panic("todo") }

// Project returns doc restricted to the given paths.
func Project(doc Document, fields [][]string) Document { panic("todo") }
