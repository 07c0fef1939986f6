package builder

import (
	"math/big"
	"reflect"
	"time"

	"github.com/hamba/avro/v2"
)

// nativeValue converts a value decoded from an Avro or Parquet input into
// the form schema.Table.Normalize takes (nil, bool, int64, float64,
// string, []byte, []any, map[string]any). s is the value's Avro schema in
// the input, when known: it resolves unions and logical types; without
// it, times are taken as milliseconds.
func nativeValue(s avro.Schema, v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	if u, ok := s.(*avro.UnionSchema); ok {
		if m, ok := v.(map[string]any); ok && len(m) == 1 {
			for name, x := range m {
				for _, b := range u.Types() {
					if branchName(b) == name {
						return nativeValue(b, x)
					}
				}
			}
		}
		return nativeValue(nonNull(u), v)
	}
	switch x := v.(type) {
	case bool, string, int64, float64, []byte:
		return x, nil
	case int:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case int16:
		return int64(x), nil
	case int8:
		return int64(x), nil
	case uint32:
		return int64(x), nil
	case uint16:
		return int64(x), nil
	case uint8:
		return int64(x), nil
	case uint64:
		if x > 1<<63-1 {
			return nil, reject("%d is out of range for long", x)
		}
		return int64(x), nil
	case float32:
		return float64(x), nil
	case time.Time:
		switch logical(s) {
		case avro.TimestampMicros, avro.LocalTimestampMicros:
			return x.UnixMicro(), nil
		case avro.Date:
			days := x.Unix() / 86400
			if x.Unix()%86400 < 0 {
				days--
			}
			return days, nil
		}
		return x.UnixMilli(), nil
	case time.Duration:
		if logical(s) == avro.TimeMicros {
			return x.Microseconds(), nil
		}
		return x.Milliseconds(), nil
	case *big.Rat:
		return nil, reject("decimal values are not supported in bulk inputs")
	case []any:
		var items avro.Schema
		if a, ok := s.(*avro.ArraySchema); ok {
			items = a.Items()
		}
		out := make([]any, len(x))
		for i, e := range x {
			c, err := nativeValue(items, e)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			var es avro.Schema
			switch s := s.(type) {
			case *avro.MapSchema:
				es = s.Values()
			case *avro.RecordSchema:
				for _, f := range s.Fields() {
					if f.Name() == k {
						es = f.Type()
					}
				}
			}
			c, err := nativeValue(es, e)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	}
	// Avro fixed values decode as byte arrays of their size.
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Array && rv.Type().Elem().Kind() == reflect.Uint8 {
		b := make([]byte, rv.Len())
		reflect.Copy(reflect.ValueOf(b), rv)
		return b, nil
	}
	return nil, reject("unsupported value of Go type %T", v)
}

// branchName is how hamba/avro names a union branch in a decoded value.
func branchName(s avro.Schema) string {
	if n, ok := s.(avro.NamedSchema); ok {
		return n.FullName()
	}
	if l := logical(s); l != "" {
		return string(s.Type()) + "." + string(l)
	}
	return string(s.Type())
}

func logical(s avro.Schema) avro.LogicalType {
	if l, ok := s.(avro.LogicalTypeSchema); ok && l.Logical() != nil {
		return l.Logical().Type()
	}
	return ""
}
