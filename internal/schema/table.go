package schema

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/doppio-db/doppio/internal/problem"
)

// Table is a compiled, immutable table definition: its key types and the
// parsed Avro schema of every version. Safe for concurrent use.
type Table struct {
	Def TableDef

	versions []*compiled // versions[i] is version i+1
	plans    sync.Map    // planKey{writer, reader root} -> *plan

	encodeHint atomic.Int64 // Encode's first allocation: about the last document's size

	indexesOnce sync.Once
	indexes     []Index
}

// Limits of a table definition.
const (
	MaxKeyParts = 8
)

var nameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,63}$`)

// ValidName reports whether s is a valid database, table or key part name.
func ValidName(s string) bool { return nameRE.MatchString(s) }

// Compile validates def (names, key parts, every version's schema and its
// "index" annotations) and compiles it. Errors are *problem.Error (Malformed
// for a bad definition).
func Compile(def TableDef) (*Table, error) {
	if !ValidName(def.Database) {
		return nil, problem.Field(problem.Malformed, "database", "invalid database name %q: want a letter then up to 63 letters, digits or _", def.Database)
	}
	if !ValidName(def.Name) {
		return nil, problem.Field(problem.Malformed, "table", "invalid table name %q: want a letter then up to 63 letters, digits or _", def.Name)
	}
	if err := validateKey(def.Key); err != nil {
		return nil, err
	}
	if len(def.Versions) == 0 {
		return nil, problem.Field(problem.Malformed, "schema", "table %s has no document schema", def.Name)
	}
	t := &Table{Def: def}
	for i, v := range def.Versions {
		if v.Version != i+1 {
			return nil, problem.Field(problem.Malformed, "versions", "schema versions must be numbered 1, 2, …: found %d at position %d", v.Version, i+1)
		}
		c, err := compileSchema(v.Schema)
		if err != nil {
			if len(def.Versions) > 1 {
				if e, ok := problem.As(err); ok {
					e.Detail = fmt.Sprintf("schema version %d: %s", v.Version, e.Detail)
				}
			}
			return nil, err
		}
		c.version = v.Version
		t.versions = append(t.versions, c)
	}
	return t, nil
}

func validateKey(key []KeyPart) error {
	if len(key) == 0 || len(key) > MaxKeyParts {
		return problem.Field(problem.Malformed, "key", "a table key has 1 to %d parts, not %d", MaxKeyParts, len(key))
	}
	seen := map[string]bool{}
	for i, k := range key {
		if !ValidName(k.Name) {
			return problem.Field(problem.Malformed, "key", "key part %d: invalid name %q: want a letter then up to 63 letters, digits or _", i+1, k.Name)
		}
		if seen[k.Name] {
			return problem.Field(problem.Malformed, k.Name, "key part %q appears twice", k.Name)
		}
		seen[k.Name] = true
		switch k.Type {
		case KeyString, KeyInt, KeyLong:
		default:
			return problem.Field(problem.Malformed, k.Name, "key part %q: type must be string, int or long, not %q", k.Name, k.Type)
		}
		if !k.AutoIncrement {
			continue
		}
		switch {
		case i != len(key)-1:
			return problem.Field(problem.Malformed, k.Name, "key part %q: only the last key part may be autoIncrement", k.Name)
		case k.Type == KeyString:
			return problem.Field(problem.Malformed, k.Name, "key part %q: an autoIncrement key part must be int or long", k.Name)
		case len(key) == 1:
			return problem.Field(problem.Malformed, k.Name, "key part %q: the partition key cannot be autoIncrement; add a leading key part", k.Name)
		}
	}
	return nil
}

// ValidateDatabase checks a database definition (name, partitions 1..4096,
// replicas 1..5, partitioner "hash"), filling defaults (partitions 8,
// replicas 1, partitioner "hash"). Errors are *problem.Error (Malformed).
func ValidateDatabase(d *Database) error {
	if !ValidName(d.Name) {
		return problem.Field(problem.Malformed, "name", "invalid database name %q: want a letter then up to 63 letters, digits or _", d.Name)
	}
	if d.Partitions == 0 {
		d.Partitions = 8
	}
	if d.Replicas == 0 {
		d.Replicas = 1
	}
	if d.Partitioner == "" {
		d.Partitioner = "hash"
	}
	if d.Partitions < 1 || d.Partitions > 4096 {
		return problem.Field(problem.Malformed, "partitions", "partitions must be 1 to 4096, not %d", d.Partitions)
	}
	if d.Replicas < 1 || d.Replicas > 5 {
		return problem.Field(problem.Malformed, "replicas", "replicas must be 1 to 5, not %d", d.Replicas)
	}
	if d.Partitioner != "hash" {
		return problem.Field(problem.Malformed, "partitioner", "partitioner must be \"hash\", not %q", d.Partitioner)
	}
	return nil
}

// Latest is the newest version number (versions start at 1).
func (t *Table) Latest() int { return len(t.versions) }

func (t *Table) latest() *compiled { return t.versions[len(t.versions)-1] }

// Arity is the number of key parts.
func (t *Table) Arity() int { return len(t.Def.Key) }

// AutoIncrement reports whether the last key part is auto-increment.
func (t *Table) AutoIncrement() bool {
	return len(t.Def.Key) > 0 && t.Def.Key[len(t.Def.Key)-1].AutoIncrement
}

// Decode reads Avro binary written with writerVersion and resolves it to
// readerVersion (0 = as written). An unknown reader version is NotFound.
func (t *Table) Decode(data []byte, writerVersion, readerVersion int) (Document, error) {
	if readerVersion == 0 {
		readerVersion = writerVersion
	}
	if readerVersion < 1 || readerVersion > len(t.versions) {
		return nil, problem.Field(problem.NotFound, "version", "table %s has no schema version %d", t.Def.Name, readerVersion)
	}
	if writerVersion < 1 || writerVersion > len(t.versions) {
		return nil, fmt.Errorf("schema: table %s: data written with unknown schema version %d", t.Def.Name, writerVersion)
	}
	p, err := t.plan(writerVersion, readerVersion)
	if err != nil {
		return nil, err
	}
	rd := reader{b: data}
	v, err := p.decode(&rd)
	if err != nil {
		return nil, fmt.Errorf("schema: table %s version %d: %w", t.Def.Name, writerVersion, err)
	}
	if rd.i != len(data) {
		return nil, fmt.Errorf("schema: table %s version %d: %w: %d trailing bytes", t.Def.Name, writerVersion, errCorrupt, len(data)-rd.i)
	}
	return v.(map[string]any), nil
}

// plan returns the cached resolution plan from version w to version r.
func (t *Table) plan(w, r int) (*plan, error) {
	key := [2]int{w, r}
	if p, ok := t.plans.Load(key); ok {
		return p.(*plan), nil
	}
	p, err := newPlan(t.versions[w-1].root, t.versions[r-1].root, map[planKey]*plan{})
	if err != nil {
		return nil, fmt.Errorf("schema: table %s: version %d cannot be read as version %d: %w", t.Def.Name, w, r, err)
	}
	actual, _ := t.plans.LoadOrStore(key, p)
	return actual.(*plan), nil
}

// Index is a field of the latest document schema that carries an "index"
// annotation.
type Index struct {
	Path []string // field names from the top-level record
	Kind string   // "attribute" or "text"

	// Type is the Avro type of the indexed values: "boolean", "int",
	// "long", "float", "double", "string", "bytes" or "enum" (of the
	// elements, for an array).
	Type string
	// Logical is the Avro logical type of the values ("timestamp-millis",
	// ...), or "".
	Logical string
	// Array reports that the field holds an array: every element is
	// indexed.
	Array bool
	// Nullable reports that the field's type accepts null (never indexed).
	Nullable bool
}

// Indexes lists the indexed fields of the latest version, in schema order.
// The slice is shared (computed once): callers must not modify it.
func (t *Table) Indexes() []Index {
	t.indexesOnce.Do(func() { t.indexes = t.findIndexes() })
	return t.indexes
}

func (t *Table) findIndexes() []Index {
	var out []Index
	seen := map[*node]bool{}
	var walk func(n *node, prefix []string)
	walk = func(n *node, prefix []string) {
		r := n.record()
		if r == nil || seen[r] {
			return
		}
		seen[r] = true
		for _, f := range r.fields {
			p := append(append([]string{}, prefix...), f.name)
			if f.index != "" {
				out = append(out, indexOf(p, f))
			}
			walk(f.typ, p)
		}
		seen[r] = false
	}
	walk(t.latest().root, nil)
	return out
}

// indexOf describes the indexed field f at path p. Compile has checked the
// shape: a scalar, an array of scalars, or a nullable one of those.
func indexOf(p []string, f *field) Index {
	ix := Index{Path: p, Kind: f.index}
	n := f.typ
	if n.nullable != nil {
		ix.Nullable, n = true, n.nullable
	}
	if n.kind == kArray {
		ix.Array, n = true, n.items
	}
	ix.Type, ix.Logical = n.kind.String(), n.logical
	return ix
}

// String renders an index path in dotted form.
func (i Index) String() string { return strings.Join(i.Path, ".") }
