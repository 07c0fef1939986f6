package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/doppio-db/doppio/internal/problem"
	"github.com/hamba/avro/v2"
)

// kind is the physical Avro type of a node. Logical types are carried as
// plain numbers/bytes, so only the physical type matters for the codec.
type kind uint8

const (
	kNull kind = iota
	kBoolean
	kInt
	kLong
	kFloat
	kDouble
	kBytes
	kString
	kRecord
	kEnum
	kArray
	kMap
	kUnion
	kFixed
)

var kindNames = [...]string{"null", "boolean", "int", "long", "float", "double", "bytes", "string", "record", "enum", "array", "map", "union", "fixed"}

func (k kind) String() string { return kindNames[k] }

// node is the compiled form of one Avro schema node: what the codec, the
// JSON normalizer, patches and projections walk. Named types are shared, so
// a recursive schema is a cyclic graph.
type node struct {
	kind    kind
	name    string // full name of a record, enum or fixed
	logical string // logical type descriptor, "" if none

	size int // fixed

	symbols     []string // enum
	symbolIndex map[string]int
	enumDefault int // index of the enum's default symbol, -1 if none

	items  *node // array
	values *node // map

	branches []*node // union
	nullable *node   // for a ["null", T] union (either order): T

	fields     []*field // record
	fieldIndex map[string]int
}

// field is one record field.
type field struct {
	name       string
	aliases    []string
	typ        *node
	hasDefault bool
	def        any    // normalized default
	index      string // "", "attribute" or "text"
}

// unionBranchName is the name a union branch goes by in Avro JSON
// ({"name": value}): the full name of a named type, else the type name.
func (n *node) unionBranchName() string {
	if n.name != "" {
		return n.name
	}
	return n.kind.String()
}

// typeName describes n for error messages.
func (n *node) typeName() string {
	switch n.kind {
	case kRecord, kEnum, kFixed:
		return n.kind.String() + " " + n.name
	case kArray:
		return "array of " + n.items.typeName()
	case kMap:
		return "map of " + n.values.typeName()
	case kUnion:
		if n.nullable != nil {
			return "nullable " + n.nullable.typeName()
		}
		names := make([]string, len(n.branches))
		for i, b := range n.branches {
			names[i] = b.unionBranchName()
		}
		return "union [" + strings.Join(names, ", ") + "]"
	}
	return n.kind.String()
}

// record returns the record n is, or the record of a nullable record union.
func (n *node) record() *node {
	if n.kind == kRecord {
		return n
	}
	if n.nullable != nil && n.nullable.kind == kRecord {
		return n.nullable
	}
	return nil
}

// hasNull reports whether n accepts null.
func (n *node) hasNull() bool {
	if n.kind == kNull {
		return true
	}
	if n.kind == kUnion {
		for _, b := range n.branches {
			if b.kind == kNull {
				return true
			}
		}
	}
	return false
}

// compiled is one parsed document-schema version.
type compiled struct {
	version   int
	avro      avro.Schema
	root      *node
	signature string
}

// compileSchema parses an Avro record schema and compiles it. Errors are
// Malformed.
func compileSchema(raw []byte) (*compiled, error) {
	// A private cache per parse: the default cache is process-wide, so named
	// types of one table (or an older version) would leak into another.
	s, err := parseAvro(raw)
	if err == nil {
		var v any
		if json.Unmarshal(raw, &v) == nil {
			err = noNullTypes(v)
		}
	}
	if err != nil {
		return nil, problem.Field(problem.Malformed, "schema", "invalid Avro schema: %s", strings.TrimPrefix(err.Error(), "avro: "))
	}
	if s.Type() != avro.Record {
		return nil, problem.Field(problem.Malformed, "schema", "the document schema must be an Avro record, not %s", s.Type())
	}
	b := builder{named: map[string]*node{}}
	root, err := b.build(s)
	if err != nil {
		return nil, err
	}
	if err := validateIndexes(root); err != nil {
		return nil, err
	}
	return &compiled{avro: s, root: root, signature: signature(root)}, nil
}

// parseAvro parses with a private cache, turning a panic of the parser
// into an error: the schema comes from a client, and hamba/avro indexes
// into what it was given (a defaulted field of an empty union, found by
// FuzzRequest, panicked).
func parseAvro(raw []byte) (s avro.Schema, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("the Avro parser could not read it (%v); check unions (at least one branch, a default of the first) and defaults", r)
		}
	}()
	return avro.ParseBytesWithCache(raw, "", &avro.SchemaCache{})
}

// noNullTypes refuses a JSON null where the schema v names a type: Avro
// types are names, unions or objects, and the parser read null as "null".
func noNullTypes(v any) error {
	switch t := v.(type) {
	case nil:
		return errors.New("a type is JSON null; write \"null\" for Avro's null type")
	case []any:
		for _, b := range t {
			if err := noNullTypes(b); err != nil {
				return err
			}
		}
	case map[string]any:
		typ, ok := t["type"]
		if !ok {
			return nil
		}
		switch typ {
		case "record", "error":
			fields, ok := t["fields"].([]any)
			if !ok {
				return errors.New("a record's fields are a JSON array")
			}
			for _, f := range fields {
				if fm, ok := f.(map[string]any); ok {
					if err := noNullTypes(fm["type"]); err != nil {
						return fmt.Errorf("field %v: %w", fm["name"], err)
					}
				}
			}
		case "array":
			return noNullTypes(t["items"])
		case "map":
			return noNullTypes(t["values"])
		default:
			if _, named := typ.(string); !named {
				return noNullTypes(typ)
			}
		}
	}
	return nil
}

type builder struct {
	named map[string]*node
}

func (b *builder) build(s avro.Schema) (*node, error) {
	if ref, ok := s.(*avro.RefSchema); ok {
		s = ref.Schema()
	}
	if ns, ok := s.(avro.NamedSchema); ok {
		if n, ok := b.named[ns.FullName()]; ok {
			return n, nil
		}
	}
	n := &node{logical: logicalOf(s)}
	switch s := s.(type) {
	case *avro.NullSchema:
		n.kind = kNull
	case *avro.PrimitiveSchema:
		switch s.Type() {
		case avro.Null:
			n.kind = kNull
		case avro.Boolean:
			n.kind = kBoolean
		case avro.Int:
			n.kind = kInt
		case avro.Long:
			n.kind = kLong
		case avro.Float:
			n.kind = kFloat
		case avro.Double:
			n.kind = kDouble
		case avro.Bytes:
			n.kind = kBytes
		case avro.String:
			n.kind = kString
		default:
			return nil, fmt.Errorf("schema: unexpected primitive %s", s.Type())
		}
	case *avro.FixedSchema:
		n.kind, n.name, n.size = kFixed, s.FullName(), s.Size()
		b.named[n.name] = n
	case *avro.EnumSchema:
		n.kind, n.name, n.symbols, n.enumDefault = kEnum, s.FullName(), s.Symbols(), -1
		n.symbolIndex = make(map[string]int, len(n.symbols))
		for i, sym := range n.symbols {
			n.symbolIndex[sym] = i
		}
		if s.HasDefault() {
			n.enumDefault = n.symbolIndex[s.Default()]
		}
		b.named[n.name] = n
	case *avro.ArraySchema:
		n.kind = kArray
		items, err := b.build(s.Items())
		if err != nil {
			return nil, err
		}
		n.items = items
	case *avro.MapSchema:
		n.kind = kMap
		values, err := b.build(s.Values())
		if err != nil {
			return nil, err
		}
		n.values = values
	case *avro.UnionSchema:
		n.kind = kUnion
		if len(s.Types()) == 0 {
			// No value has this type: a document with the field could
			// never be written.
			return nil, problem.Field(problem.Malformed, "schema", "invalid Avro schema: a union needs at least one branch")
		}
		for _, t := range s.Types() {
			bn, err := b.build(t)
			if err != nil {
				return nil, err
			}
			n.branches = append(n.branches, bn)
		}
		if len(n.branches) == 2 {
			if n.branches[0].kind == kNull {
				n.nullable = n.branches[1]
			} else if n.branches[1].kind == kNull {
				n.nullable = n.branches[0]
			}
		}
	case *avro.RecordSchema:
		n.kind, n.name = kRecord, s.FullName()
		// Register before the fields so a recursive reference finds it.
		b.named[n.name] = n
		n.fieldIndex = make(map[string]int, len(s.Fields()))
		for i, f := range s.Fields() {
			ft, err := b.build(f.Type())
			if err != nil {
				return nil, err
			}
			fl := &field{name: f.Name(), aliases: f.Aliases(), typ: ft, hasDefault: f.HasDefault()}
			if idx, ok := f.Props()["index"]; ok {
				str, isString := idx.(string)
				if !isString || (str != "attribute" && str != "text") {
					return nil, problem.Field(problem.Malformed, f.Name(), `field %q: "index" must be "attribute" or "text", not %s`, f.Name(), jsonString(idx))
				}
				fl.index = str
			}
			n.fields = append(n.fields, fl)
			n.fieldIndex[fl.name] = i
		}
		// Defaults are converted once every field type (including recursive
		// references) is built.
		for i, f := range s.Fields() {
			fl := n.fields[i]
			if !fl.hasDefault {
				continue
			}
			def, err := normalizeDefault(fl.typ, f.Default())
			if err != nil {
				return nil, problem.Field(problem.Malformed, fl.name, "field %q: invalid default: %v", fl.name, err)
			}
			fl.def = def
		}
	default:
		return nil, fmt.Errorf("schema: unexpected Avro schema %T", s)
	}
	return n, nil
}

func logicalOf(s avro.Schema) string {
	lts, ok := s.(avro.LogicalTypeSchema)
	if !ok {
		return ""
	}
	ls := lts.Logical()
	if ls == nil || reflect.ValueOf(ls).IsNil() {
		return ""
	}
	if d, ok := ls.(*avro.DecimalLogicalSchema); ok {
		return fmt.Sprintf("decimal(%d,%d)", d.Precision(), d.Scale())
	}
	return string(ls.Type())
}

// normalizeDefault converts a default as hamba parsed it (int, float32,
// [N]byte, ...) to the normalized form.
func normalizeDefault(n *node, v any) (any, error) {
	switch n.kind {
	case kNull:
		// Inside record defaults hamba stands for null with an empty struct.
		if v != nil && reflect.TypeOf(v).Size() != 0 {
			return nil, fmt.Errorf("%v is not null", v)
		}
		return nil, nil
	case kBoolean:
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case kInt, kLong:
		switch x := v.(type) {
		case int:
			return int64(x), nil
		case int32:
			return int64(x), nil
		case int64:
			return x, nil
		case float64:
			return int64(x), nil
		}
	case kFloat, kDouble:
		switch x := v.(type) {
		case float32:
			return float32Value(x), nil
		case float64:
			return toFloat(n, x), nil
		}
	case kString, kEnum:
		if s, ok := v.(string); ok {
			return s, nil
		}
	case kBytes, kFixed:
		switch x := v.(type) {
		case []byte:
			return append([]byte{}, x...), nil
		case string:
			return []byte(x), nil
		}
		rv := reflect.ValueOf(v)
		if rv.Kind() == reflect.Array && rv.Type().Elem().Kind() == reflect.Uint8 {
			out := make([]byte, rv.Len())
			reflect.Copy(reflect.ValueOf(out), rv)
			return out, nil
		}
	case kArray:
		if a, ok := v.([]any); ok {
			out := make([]any, len(a))
			for i, e := range a {
				x, err := normalizeDefault(n.items, e)
				if err != nil {
					return nil, err
				}
				out[i] = x
			}
			return out, nil
		}
	case kMap:
		if m, ok := v.(map[string]any); ok {
			out := make(map[string]any, len(m))
			for k, e := range m {
				x, err := normalizeDefault(n.values, e)
				if err != nil {
					return nil, err
				}
				out[k] = x
			}
			return out, nil
		}
	case kUnion:
		// Avro: a union's default is a value of its first branch.
		return normalizeDefault(n.branches[0], v)
	case kRecord:
		if m, ok := v.(map[string]any); ok {
			out := make(map[string]any, len(n.fields))
			for _, f := range n.fields {
				e, ok := m[f.name]
				if !ok {
					if !f.hasDefault {
						return nil, fmt.Errorf("record %s: field %q missing", n.name, f.name)
					}
					out[f.name] = cloneValue(f.def)
					continue
				}
				x, err := normalizeDefault(f.typ, e)
				if err != nil {
					return nil, err
				}
				out[f.name] = x
			}
			return out, nil
		}
	}
	return nil, fmt.Errorf("%s is not a %s", jsonString(v), n.typeName())
}

func jsonString(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// validateIndexes checks the "index" annotations of every record field
// reachable from root. Indexed fields must be reachable through records (and
// nullable records) only: a field inside an array or map has no single value
// per document to index.
func validateIndexes(root *node) error {
	seen := map[*node]bool{}
	var walk func(n *node, path string, reachable bool) error
	walk = func(n *node, path string, reachable bool) error {
		switch n.kind {
		case kRecord:
			if seen[n] {
				return nil
			}
			seen[n] = true
			for _, f := range n.fields {
				p := joinPath(path, f.name)
				switch {
				case f.index != "" && !reachable:
					return problem.Field(problem.Malformed, p, `field %q: an "index" is only allowed on fields reached through records, not inside an array, map or union`, p)
				case f.index == "text" && !textIndexable(f.typ):
					return problem.Field(problem.Malformed, p, `field %q: a "text" index needs a string, an array of strings or a nullable string, not %s`, p, f.typ.typeName())
				case f.index == "attribute" && !attributeIndexable(f.typ):
					return problem.Field(problem.Malformed, p, `field %q: an "attribute" index needs a primitive, an enum, an array of those or a nullable one of those, not %s`, p, f.typ.typeName())
				}
				if err := walk(f.typ, p, reachable); err != nil {
					return err
				}
			}
		case kArray:
			return walk(n.items, path, false)
		case kMap:
			return walk(n.values, path, false)
		case kUnion:
			for _, b := range n.branches {
				if err := walk(b, path, reachable && n.nullable != nil); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(root, "", true)
}

func textIndexable(n *node) bool {
	switch {
	case n.kind == kString:
		return true
	case n.kind == kArray:
		return n.items.kind == kString
	case n.nullable != nil:
		return n.nullable.kind == kString
	}
	return false
}

func attributeScalar(n *node) bool {
	switch n.kind {
	case kBoolean, kInt, kLong, kFloat, kDouble, kString, kBytes, kEnum:
		return true
	}
	return false
}

func attributeIndexable(n *node) bool {
	switch {
	case attributeScalar(n):
		return true
	case n.kind == kArray:
		return attributeScalar(n.items)
	case n.nullable != nil:
		return attributeScalar(n.nullable) || (n.nullable.kind == kArray && attributeScalar(n.nullable.items))
	}
	return false
}

func joinPath(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

// signature is a deterministic description of everything about a schema
// that matters to Doppio: the canonical Avro form plus field defaults,
// aliases and index annotations, which canonical form leaves out. Two
// versions with the same signature are the same version.
func signature(root *node) string {
	var sb strings.Builder
	seen := map[*node]bool{}
	var walk func(n *node)
	walk = func(n *node) {
		if n.name != "" && seen[n] {
			sb.WriteString(strconv.Quote(n.name))
			return
		}
		seen[n] = true
		sb.WriteString("{" + n.kind.String())
		if n.name != "" {
			sb.WriteString(" " + strconv.Quote(n.name))
		}
		if n.logical != "" {
			sb.WriteString(" logical=" + n.logical)
		}
		switch n.kind {
		case kFixed:
			sb.WriteString(" size=" + strconv.Itoa(n.size))
		case kEnum:
			sb.WriteString(" symbols=" + jsonString(n.symbols) + " default=" + strconv.Itoa(n.enumDefault))
		case kArray:
			walk(n.items)
		case kMap:
			walk(n.values)
		case kUnion:
			for _, b := range n.branches {
				walk(b)
			}
		case kRecord:
			for _, f := range n.fields {
				sb.WriteString(" field " + strconv.Quote(f.name) + " aliases=" + jsonString(f.aliases) + " index=" + f.index)
				if f.hasDefault {
					d, _ := MarshalDocument(Document{"": f.def})
					sb.WriteString(" default=" + string(d))
				}
				walk(f.typ)
			}
		}
		sb.WriteString("}")
	}
	walk(root)
	return sb.String()
}
