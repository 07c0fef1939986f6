package exportfile

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/doppio-db/doppio/client/export"
	"github.com/hamba/avro/v2"
)

// column is one column of an exported row.
type column struct {
	name   string
	schema avro.Schema
}

// rowColumns lists the columns of t's rows in an export of kind: the key
// parts, the change columns, the document's fields.
func rowColumns(t export.Table, kind export.Kind) (*avro.RecordSchema, []column, error) {
	s, err := avro.ParseWithCache(string(t.Schema), "", &avro.SchemaCache{})
	if err != nil {
		return nil, nil, fmt.Errorf("the table's schema: %w", err)
	}
	rec, ok := s.(*avro.RecordSchema)
	if !ok {
		return nil, nil, fmt.Errorf("the table's schema is a %s, not a record", s.Type())
	}
	var cols []column
	for _, k := range t.Key {
		var typ avro.Type
		switch k.Type {
		case "string":
			typ = avro.String
		case "int":
			typ = avro.Int
		case "long":
			typ = avro.Long
		default:
			return nil, nil, fmt.Errorf("key part %s has type %q", k.Name, k.Type)
		}
		cols = append(cols, column{k.Name, avro.NewPrimitiveSchema(typ, nil)})
	}
	if kind == export.Changes {
		cols = append(cols,
			column{"_op", avro.NewPrimitiveSchema(avro.String, nil)},
			column{"_scn", avro.NewPrimitiveSchema(avro.String, nil)},
			column{"_mtime", avro.NewPrimitiveSchema(avro.Long, avro.NewPrimitiveLogicalSchema(avro.TimestampMillis))})
	}
	seen := map[string]bool{}
	for _, c := range cols {
		seen[c.name] = true
	}
	for _, f := range rec.Fields() {
		if seen[f.Name()] {
			return nil, nil, fmt.Errorf("field %s has the name of a key part or change column", f.Name())
		}
		typ := f.Type()
		if kind == export.Changes {
			if typ, err = withNull(typ); err != nil {
				return nil, nil, fmt.Errorf("field %s: %w", f.Name(), err)
			}
		}
		cols = append(cols, column{f.Name(), typ})
	}
	return rec, cols, nil
}

// withNull is s made nullable: a union with a null branch first.
func withNull(s avro.Schema) (avro.Schema, error) {
	branches := []avro.Schema{s}
	if u, ok := s.(*avro.UnionSchema); ok {
		for _, b := range u.Types() {
			if b.Type() == avro.Null {
				return s, nil
			}
		}
		branches = u.Types()
	}
	return avro.NewUnionSchema(append([]avro.Schema{avro.NewNullSchema()}, branches...))
}

// union is a union's value: the branch it takes.
type union struct {
	branch int
	v      any
}

// rowValues turns a row into one value per column, each typed by its
// column's schema: nil, bool, int32, int64, float32, float64, string,
// []byte (bytes and fixed), []any, map[string]any (maps and records) or
// union.
func rowValues(cols []column, keyParts int, kind export.Kind, r export.Row) ([]any, error) {
	out := make([]any, len(cols))
	i := 0
	for ; i < keyParts; i++ {
		v := r.Key[i]
		if n, ok := v.(int64); ok && cols[i].schema.Type() == avro.Int {
			v = int32(n)
		}
		out[i] = v
	}
	if kind == export.Changes {
		out[i], out[i+1], out[i+2] = r.Op, r.SCN, r.Mtime
		i += 3
	}
	var doc map[string]any // nil for a delete: every field null
	if r.Doc != nil {
		d := json.NewDecoder(bytes.NewReader(r.Doc))
		d.UseNumber()
		if err := d.Decode(&doc); err != nil {
			return nil, fmt.Errorf("document: %w", err)
		}
	}
	for ; i < len(cols); i++ {
		v, err := typed(cols[i].schema, doc[cols[i].name])
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", cols[i].name, err)
		}
		out[i] = v
	}
	return out, nil
}

// typed converts a JSON value (as decoded with UseNumber) to the Go value
// of schema s; see rowValues. The JSON is the REST API's rendering: a
// union's value unwrapped, bytes and fixed in standard base64.
func typed(s avro.Schema, v any) (any, error) {
	if r, ok := s.(*avro.RefSchema); ok {
		s = r.Schema()
	}
	switch s := s.(type) {
	case *avro.NullSchema:
		if v != nil {
			return nil, fmt.Errorf("%v is not null", v)
		}
		return nil, nil
	case *avro.UnionSchema:
		if v == nil {
			for i, b := range s.Types() {
				if b.Type() == avro.Null {
					return union{branch: i}, nil
				}
			}
			return nil, fmt.Errorf("null is none of the union's types")
		}
		for i, b := range s.Types() {
			if b.Type() == avro.Null {
				continue
			}
			if x, err := typed(b, v); err == nil {
				return union{branch: i, v: x}, nil
			}
		}
		return nil, fmt.Errorf("%v is none of the union's types", v)
	case *avro.RecordSchema:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%v is not a record", v)
		}
		out := make(map[string]any, len(s.Fields()))
		for _, f := range s.Fields() {
			x, err := typed(f.Type(), m[f.Name()])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f.Name(), err)
			}
			out[f.Name()] = x
		}
		return out, nil
	case *avro.ArraySchema:
		a, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("%v is not an array", v)
		}
		out := make([]any, len(a))
		for i, e := range a {
			x, err := typed(s.Items(), e)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			out[i] = x
		}
		return out, nil
	case *avro.MapSchema:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%v is not a map", v)
		}
		out := make(map[string]any, len(m))
		for k, e := range m {
			x, err := typed(s.Values(), e)
			if err != nil {
				return nil, fmt.Errorf("[%q]: %w", k, err)
			}
			out[k] = x
		}
		return out, nil
	case *avro.EnumSchema:
		str, ok := v.(string)
		if !ok || !hasSymbol(s, str) {
			return nil, fmt.Errorf("%v is not a symbol of enum %s", v, s.Name())
		}
		return str, nil
	case *avro.FixedSchema:
		b, err := base64Of(v)
		if err != nil {
			return nil, err
		}
		if len(b) != s.Size() {
			return nil, fmt.Errorf("%d bytes for a fixed of %d", len(b), s.Size())
		}
		return b, nil
	case *avro.PrimitiveSchema:
		return primitive(s.Type(), v)
	}
	return nil, fmt.Errorf("unsupported schema %s", s.Type())
}

func hasSymbol(s *avro.EnumSchema, sym string) bool {
	for _, x := range s.Symbols() {
		if x == sym {
			return true
		}
	}
	return false
}

func base64Of(v any) ([]byte, error) {
	str, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("%v is not base64 bytes", v)
	}
	return base64.StdEncoding.DecodeString(str)
}

func primitive(t avro.Type, v any) (any, error) {
	switch t {
	case avro.Boolean:
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case avro.String:
		if s, ok := v.(string); ok {
			return s, nil
		}
	case avro.Bytes:
		return base64Of(v)
	case avro.Int, avro.Long:
		n, ok := v.(json.Number)
		if !ok {
			break
		}
		i, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s is not an integer", n)
		}
		if t == avro.Long {
			return i, nil
		}
		if i < math.MinInt32 || i > math.MaxInt32 {
			return nil, fmt.Errorf("%d is out of an int's range", i)
		}
		return int32(i), nil
	case avro.Float, avro.Double:
		var f float64
		switch x := v.(type) {
		case json.Number:
			var err error
			if f, err = strconv.ParseFloat(string(x), 64); err != nil {
				return nil, fmt.Errorf("%s is not a number", x)
			}
		case string: // NaN and the infinities are not JSON numbers
			switch x {
			case "NaN":
				f = math.NaN()
			case "Infinity":
				f = math.Inf(1)
			case "-Infinity":
				f = math.Inf(-1)
			default:
				return nil, fmt.Errorf("%q is not a number", x)
			}
		default:
			return nil, fmt.Errorf("%v is not a number", v)
		}
		if t == avro.Float {
			return float32(f), nil
		}
		return f, nil
	}
	return nil, fmt.Errorf("%v is not a %s", v, t)
}
