package schema

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/doppio-db/doppio/internal/problem"
)

// DecodeJSON parses a JSON document body and validates it against the latest
// version: unknown fields, missing fields without default, wrong types are
// Invalid (422) naming the dotted field path; malformed JSON is Malformed.
// Missing fields that have defaults are filled in.
func (t *Table) DecodeJSON(body []byte) (Document, error) {
	if d, ok := decodeDirect(t.latest().root, body); ok {
		return d, nil
	}
	return t.decodeJSONLong(body)
}

// decodeJSONLong is DecodeJSON the long way: parseJSON, then Normalize.
func (t *Table) decodeJSONLong(body []byte) (Document, error) {
	v, err := decodeJSONValue(body)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, problem.New(problem.Invalid, "the document must be a JSON object, not %s", jsonType(v))
	}
	return t.Normalize(m)
}

// decodeJSONValue decodes exactly one JSON value, numbers as json.Number
// (parseJSON), refusing anything else as Malformed.
func decodeJSONValue(body []byte) (any, error) {
	v, err := parseJSON(body)
	switch err {
	case nil:
		return v, nil
	case errEmptyJSON:
		return nil, problem.New(problem.Malformed, "%v", err)
	}
	return nil, problem.New(problem.Malformed, "malformed JSON: %v", err)
}

// Normalize validates an already JSON-decoded document (json.Number for
// numbers) against the latest version, same as DecodeJSON.
func (t *Table) Normalize(doc map[string]any) (Document, error) {
	v, err := normalize(t.latest().root, doc, nil)
	if err != nil {
		return nil, err
	}
	return v.(map[string]any), nil
}

// path is the location of a value in a document, built on the stack while
// walking and rendered only for an error message.
type path struct {
	up    *path
	name  string
	index int // array index, or -1 for a field
}

func (p *path) field(name string) *path { return &path{up: p, name: name, index: -1} }
func (p *path) elem(i int) *path        { return &path{up: p, index: i} }

func (p *path) String() string {
	if p == nil {
		return ""
	}
	var sb strings.Builder
	p.writeTo(&sb)
	return sb.String()
}

// writeTo writes the path from the root: recursively rather than by
// gathering the parts, so that p does not escape and a walk's paths stay
// on its stack.
func (p *path) writeTo(sb *strings.Builder) {
	if p.up != nil {
		p.up.writeTo(sb)
	}
	if p.index >= 0 {
		sb.WriteString("[" + strconv.Itoa(p.index) + "]")
		return
	}
	if sb.Len() > 0 {
		sb.WriteByte('.')
	}
	sb.WriteString(p.name)
}

// invalid is an Invalid problem about the value at p.
func invalid(p *path, format string, args ...any) *problem.Error {
	where := p.String()
	label := where
	if label == "" {
		label = "document"
	}
	e := problem.Field(problem.Invalid, where, format, args...)
	e.Detail = label + ": " + e.Detail
	return e
}

// normalize validates the JSON-decoded value v against n and returns its
// normalized form.
func normalize(n *node, v any, p *path) (any, error) {
	switch n.kind {
	case kNull:
		if v != nil {
			return nil, invalid(p, "expected null, got %s", jsonType(v))
		}
		return nil, nil
	case kBoolean:
		b, ok := v.(bool)
		if !ok {
			return nil, invalid(p, "expected boolean, got %s", jsonType(v))
		}
		return b, nil
	case kInt, kLong:
		return normalizeInteger(n, v, p)
	case kFloat, kDouble:
		return normalizeFloat(n, v, p)
	case kString:
		s, ok := v.(string)
		if !ok {
			return nil, invalid(p, "expected string, got %s", jsonType(v))
		}
		if !utf8.ValidString(s) {
			return nil, invalid(p, "string is not valid UTF-8")
		}
		return v, nil // v holds s already: no new interface value
	case kEnum:
		s, ok := v.(string)
		if !ok {
			return nil, invalid(p, "expected one of the symbols of %s, got %s", n.typeName(), jsonType(v))
		}
		if _, ok := n.symbolIndex[s]; !ok {
			return nil, invalid(p, "%s is not one of the symbols of %s (%s)", strconv.Quote(s), n.typeName(), strings.Join(n.symbols, ", "))
		}
		return s, nil
	case kBytes, kFixed:
		var b []byte
		switch x := v.(type) {
		case string:
			var err error
			if b, err = base64.StdEncoding.DecodeString(x); err != nil {
				return nil, invalid(p, "expected a base64 string (%s), got an invalid one", n.typeName())
			}
		case []byte:
			b = append([]byte{}, x...)
		default:
			return nil, invalid(p, "expected a base64 string (%s), got %s", n.typeName(), jsonType(v))
		}
		if n.kind == kFixed && len(b) != n.size {
			return nil, invalid(p, "expected exactly %d bytes (%s), got %d", n.size, n.typeName(), len(b))
		}
		return b, nil
	case kArray:
		a, ok := v.([]any)
		if !ok {
			return nil, invalid(p, "expected array, got %s", jsonType(v))
		}
		out := make([]any, len(a))
		at := path{up: p} // declared outside the loop so that it stays on the stack
		for i, e := range a {
			at.index = i
			x, err := normalize(n.items, e, &at)
			if err != nil {
				return nil, err
			}
			out[i] = x
		}
		return out, nil
	case kMap:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, invalid(p, "expected object (map), got %s", jsonType(v))
		}
		out := make(map[string]any, len(m))
		at := path{up: p, index: -1}
		for k, e := range m {
			if !utf8.ValidString(k) {
				return nil, invalid(p, "map key is not valid UTF-8")
			}
			at.name = k
			x, err := normalize(n.values, e, &at)
			if err != nil {
				return nil, err
			}
			out[k] = x
		}
		return out, nil
	case kUnion:
		return normalizeUnion(n, v, p)
	case kRecord:
		return normalizeRecord(n, v, p)
	}
	return nil, invalid(p, "unsupported type %s", n.kind)
}

func normalizeRecord(n *node, v any, p *path) (any, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, invalid(p, "expected object (%s), got %s", n.typeName(), jsonType(v))
	}
	out := make(map[string]any, len(n.fields))
	found := 0
	at := path{up: p, index: -1} // the path of each field in turn, on the stack
	for _, f := range n.fields {
		e, ok := m[f.name]
		if !ok {
			if !f.hasDefault {
				// A misspelt field is the likelier cause: name it first.
				if k, ok := unknownField(n, m); ok {
					return nil, invalid(&path{up: p, name: k, index: -1}, "unknown field (not in %s)", n.typeName())
				}
				return nil, invalid(&path{up: p, name: f.name, index: -1}, "required field is missing")
			}
			out[f.name] = cloneValue(f.def)
			continue
		}
		found++
		at.name = f.name
		x, err := normalize(f.typ, e, &at)
		if err != nil {
			return nil, err
		}
		out[f.name] = x
	}
	if found != len(m) {
		k, _ := unknownField(n, m)
		return nil, invalid(&path{up: p, name: k, index: -1}, "unknown field (not in %s)", n.typeName())
	}
	return out, nil
}

// unknownField returns the first (in sort order) key of m that is not a
// field of record n.
func unknownField(n *node, m map[string]any) (string, bool) {
	var unknown []string
	for k := range m {
		if _, ok := n.fieldIndex[k]; !ok {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return "", false
	}
	return slices.Min(unknown), true
}

func normalizeUnion(n *node, v any, p *path) (any, error) {
	if v == nil {
		if n.hasNull() {
			return nil, nil
		}
		return nil, invalid(p, "expected %s, got null", n.typeName())
	}
	if n.nullable != nil {
		return normalize(n.nullable, v, p)
	}
	// Avro JSON form {"branch": value}, unless the union also holds
	// objects, where a one-key object could be a plain value.
	var namedErr error
	if m, ok := v.(map[string]any); ok && len(m) == 1 {
		holdsObjects := false
		for _, b := range n.branches {
			holdsObjects = holdsObjects || b.kind == kRecord || b.kind == kMap
		}
		for k, e := range m {
			if b := n.branchNamed(k); b != nil {
				x, err := normalize(b, e, p)
				if err == nil || !holdsObjects {
					return x, err
				}
				namedErr = err
			}
		}
	}
	var candidate error
	candidates := 0
	for _, b := range n.branches {
		if b.kind == kNull {
			continue
		}
		x, err := normalize(b, v, p)
		if err == nil {
			return x, nil
		}
		if jsonFits(b, v) {
			candidates++
			candidate = err
		}
	}
	// An object naming a branch most likely meant it; else, when the JSON
	// type picks exactly one branch, its error is the precise one.
	if namedErr != nil {
		return nil, namedErr
	}
	if candidates == 1 {
		return nil, candidate
	}
	return nil, invalid(p, "%s matches no branch of %s", jsonType(v), n.typeName())
}

// branchNamed finds a union branch by its Avro JSON name (full or short name
// of a named type, else the type name).
func (n *node) branchNamed(name string) *node {
	for _, b := range n.branches {
		bn := b.unionBranchName()
		if bn == name || (b.name != "" && bn[strings.LastIndexByte(bn, '.')+1:] == name) {
			return b
		}
	}
	return nil
}

// jsonFits reports whether the JSON type of v is the one n's values have.
func jsonFits(n *node, v any) bool {
	switch v.(type) {
	case map[string]any:
		return n.kind == kRecord || n.kind == kMap
	case []any:
		return n.kind == kArray
	case string:
		return n.kind == kString || n.kind == kEnum || n.kind == kBytes || n.kind == kFixed
	case bool:
		return n.kind == kBoolean
	case json.Number, float64, int64, int:
		return n.kind == kInt || n.kind == kLong || n.kind == kFloat || n.kind == kDouble
	}
	return false
}

func normalizeInteger(n *node, v any, p *path) (any, error) {
	var i int64
	switch x := v.(type) {
	case json.Number:
		var err error
		i, err = strconv.ParseInt(string(x), 10, 64)
		if err != nil {
			if errors.Is(err, strconv.ErrRange) {
				return nil, invalid(p, "%s is out of range for %s", x, n.kind)
			}
			return nil, invalid(p, "%s is not an integer (%s)", x, n.kind)
		}
	case float64:
		if x != math.Trunc(x) || math.IsInf(x, 0) {
			return nil, invalid(p, "%v is not an integer (%s)", x, n.kind)
		}
		if x < -(1<<63) || x >= 1<<63 {
			return nil, invalid(p, "%v is out of range for %s", x, n.kind)
		}
		i = int64(x)
	case int64:
		i = x
	case int:
		i = int64(x)
	default:
		return nil, invalid(p, "expected %s, got %s", n.kind, jsonType(v))
	}
	if n.kind == kInt && (i < math.MinInt32 || i > math.MaxInt32) {
		return nil, invalid(p, "%d is out of range for int (32-bit)", i)
	}
	return i, nil
}

func normalizeFloat(n *node, v any, p *path) (any, error) {
	var f float64
	switch x := v.(type) {
	case json.Number:
		var err error
		f, err = strconv.ParseFloat(string(x), 64)
		if err != nil {
			return nil, invalid(p, "%s is out of range for %s", x, n.kind)
		}
	case float64:
		f = x
	case int64:
		f = float64(x)
	case int:
		f = float64(x)
	default:
		return nil, invalid(p, "expected %s, got %s", n.kind, jsonType(v))
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, invalid(p, "%v is not a finite number", f)
	}
	if n.kind == kFloat {
		if overflowsFloat(f) {
			return nil, invalid(p, "%v is out of range for float", f)
		}
		// Keep exactly what a float stores, so the document reads back equal.
		f = toFloat(n, f)
	}
	return f, nil
}

// jsonType names the JSON type of a decoded value for error messages.
func jsonType(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		return "number " + string(x)
	case float64, int64, int:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "unsupported value"
}

// MarshalDocument renders doc as JSON (bytes as base64 strings).
func MarshalDocument(doc Document) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// cloneValue deep-copies a normalized value.
func cloneValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = cloneValue(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = cloneValue(e)
		}
		return out
	case []byte:
		return append([]byte{}, x...)
	}
	return v
}
