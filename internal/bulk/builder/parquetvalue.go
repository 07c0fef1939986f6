package builder

import (
	"reflect"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// parquetFields converts the members of group n (a Parquet row or
// struct as parquet-go decodes it into a map) into the form
// schema.Table.Normalize takes, each by its Parquet logical type and in
// the unit its Avro field (fields, by name) wants: parquet-go alone gives
// pointers for optional members, strings for binary columns and raw
// counts for dates and timestamps. A member's failure names it.
func parquetFields(n parquet.Node, fields map[string]avro.Schema, m map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(m))
	for _, f := range n.Fields() {
		v, ok := m[f.Name()]
		if !ok {
			continue
		}
		c, err := parquetValue(f, fields[f.Name()], v)
		if err != nil {
			return nil, reject("%s: %v", f.Name(), err)
		}
		out[f.Name()] = c
	}
	return out, nil
}

// parquetValue converts v, the value of Parquet node n, for the Avro
// schema want (nil when the table has no such field).
func parquetValue(n parquet.Node, want avro.Schema, v any) (any, error) {
	v = deref(v)
	if v == nil {
		return nil, nil
	}
	want = nonNull(want)
	var lt format.LogicalTypeValue
	if l := n.Type().LogicalType(); l != nil {
		lt = l.Value
	}
	_, isList := lt.(*format.ListType)
	_, isMap := lt.(*format.MapType)
	switch {
	case n.Leaf():
		return parquetLeaf(lt, want, v)
	case isList:
		elem := listElement(n)
		var items avro.Schema
		if a, ok := want.(*avro.ArraySchema); ok {
			items = a.Items()
		}
		return parquetList(elem, items, v)
	case isMap:
		var values avro.Schema
		if ms, ok := want.(*avro.MapSchema); ok {
			values = ms.Values()
		}
		return parquetMap(n, values, v)
	}
	if n.Repeated() {
		// A repeated field without the LIST annotation: its values are the items.
		var items avro.Schema
		if a, ok := want.(*avro.ArraySchema); ok {
			items = a.Items()
		}
		return parquetList(parquet.Required(n), items, v)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nativeValue(nil, v)
	}
	var fields map[string]avro.Schema
	if r, ok := want.(*avro.RecordSchema); ok {
		fields = make(map[string]avro.Schema, len(r.Fields()))
		for _, f := range r.Fields() {
			fields[f.Name()] = f.Type()
		}
	}
	return parquetFields(n, fields, m)
}

func parquetList(elem parquet.Node, items avro.Schema, v any) (any, error) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Slice || rv.Type().Elem().Kind() == reflect.Uint8 {
		return nativeValue(nil, v)
	}
	out := make([]any, rv.Len())
	for i := range out {
		c, err := parquetValue(elem, items, rv.Index(i).Interface())
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}

func parquetMap(n parquet.Node, values avro.Schema, v any) (any, error) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Map {
		return nativeValue(nil, v)
	}
	key, value := mapNodes(n)
	if k := key; rv.Len() > 0 && k != nil && k.Leaf() && k.Type().Kind() != parquet.ByteArray && k.Type().Kind() != parquet.FixedLenByteArray {
		// parquet-go makes text of other keys by their code point.
		return nil, reject("map keys must be strings, not Parquet %s", k.Type())
	}
	out := make(map[string]any, rv.Len())
	for it := rv.MapRange(); it.Next(); {
		k, ok := deref(it.Key().Interface()).(string)
		if !ok {
			return nil, reject("map keys must be strings, got %T", it.Key().Interface())
		}
		var c any
		var err error
		if value == nil {
			c, err = nativeValue(nil, it.Value().Interface())
		} else {
			c, err = parquetValue(value, values, it.Value().Interface())
		}
		if err != nil {
			return nil, err
		}
		out[k] = c
	}
	return out, nil
}

// parquetLeaf converts a leaf column's value: binary by its annotation
// (text when STRING, ENUM or JSON, or when the field wants a string),
// dates and timestamps to the unit of the field's logical type.
func parquetLeaf(lt format.LogicalTypeValue, want avro.Schema, v any) (any, error) {
	switch lt := lt.(type) {
	case *format.DateType:
		days, ok := asInt64(v)
		if !ok {
			if t, isTime := v.(time.Time); isTime {
				days, ok = floorDiv(t.Unix(), 86400), true
			}
		}
		if !ok {
			return nativeValue(nil, v)
		}
		return fromNanos(want, days*int64(24*time.Hour), avro.Date), nil
	case *format.TimestampType:
		unit := time.Millisecond
		if lt.Unit.Value != nil {
			unit = lt.Unit.Value.Duration()
		}
		if t, ok := v.(time.Time); ok {
			return fromNanos(want, t.UnixNano(), ""), nil
		}
		raw, ok := asInt64(v)
		if !ok {
			return nativeValue(nil, v)
		}
		if want == nil || logical(want) == "" {
			// No logical type to follow: the stored count, in the column's unit.
			return raw, nil
		}
		return fromNanos(want, raw*int64(unit), ""), nil
	}
	switch x := v.(type) {
	case string:
		var text bool
		switch lt.(type) {
		case *format.StringType, *format.EnumType, *format.JsonType:
			text = true
		}
		if !text && want != nil {
			text = want.Type() == avro.String || want.Type() == avro.Enum
		}
		if text {
			return x, nil
		}
		return []byte(x), nil
	case []byte:
		if want != nil && (want.Type() == avro.String || want.Type() == avro.Enum) {
			return string(x), nil
		}
		return x, nil
	}
	return nativeValue(nil, v)
}

// fromNanos is the instant ns (nanoseconds since the epoch) in the unit
// of want's logical type; plain is the logical type it is counted by when
// want has none (avro.Date: days, else milliseconds).
func fromNanos(want avro.Schema, ns int64, plain avro.LogicalType) int64 {
	l := logical(want)
	if l == "" {
		l = plain
	}
	switch l {
	case avro.Date:
		return floorDiv(ns, int64(24*time.Hour))
	case avro.TimestampMicros, avro.LocalTimestampMicros:
		return floorDiv(ns, int64(time.Microsecond))
	}
	return floorDiv(ns, int64(time.Millisecond))
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

func asInt64(v any) (int64, bool) {
	switch x := v.(type) {
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case int:
		return int64(x), true
	}
	return 0, false
}

// deref follows pointers, which parquet-go uses for optional values.
func deref(v any) any {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface {
		if rv.IsNil() {
			return nil
		}
		rv = rv.Elem()
	}
	if !rv.IsValid() {
		return nil
	}
	return rv.Interface()
}

// nonNull is s without its null branch when s is a union of null and one
// other type; any other union is left to the value.
func nonNull(s avro.Schema) avro.Schema {
	u, ok := s.(*avro.UnionSchema)
	if !ok {
		return s
	}
	var only avro.Schema
	for _, b := range u.Types() {
		if b.Type() != avro.Null {
			if only != nil {
				return nil
			}
			only = b
		}
	}
	return only
}

// listElement is the element node of a LIST-annotated group (its one
// repeated child, or that child's one field in the three-level form).
func listElement(n parquet.Node) parquet.Node {
	fs := n.Fields()
	if len(fs) != 1 {
		return n
	}
	rep := fs[0]
	if rep.Leaf() || len(rep.Fields()) != 1 {
		return parquet.Required(rep)
	}
	return rep.Fields()[0]
}

// mapNodes are the key and value nodes of a MAP-annotated group, nil
// when the group is not the standard key_value form.
func mapNodes(n parquet.Node) (key, value parquet.Node) {
	fs := n.Fields()
	if len(fs) != 1 {
		return nil, nil
	}
	for _, f := range fs[0].Fields() {
		switch f.Name() {
		case "key":
			key = f
		case "value":
			value = f
		}
	}
	return key, value
}
