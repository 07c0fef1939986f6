package api

import (
	"bytes"
	"encoding"
	"encoding/json"
	"math/big"
	"reflect"
	"strings"

	"github.com/doppio-db/doppio/internal/problem"
)

// The contract's request schemas are JSON Schema, whose integers include
// 4.0 and 4e0 and whose typed members never hold null; encoding/json
// refuses the first and reads the second as the zero value. conform holds
// a request body to the schema's reading before it is decoded.

var (
	rawMessageType  = reflect.TypeFor[json.RawMessage]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textType        = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// conform refuses a JSON null where t has no place for one (only an
// interface or a json.RawMessage has: a pointer marks a member optional,
// not nullable, and one that is absent stays nil) and rewrites integral
// numbers bound for Go integers as integer literals; it returns body
// unchanged when it rewrote nothing.
func conform(body []byte, t reflect.Type) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return body, nil // the strict decode reports it
	}
	changed := false
	v, err := conformValue(v, t, "", &changed)
	if err != nil || !changed {
		return body, err
	}
	return json.Marshal(v)
}

func conformValue(v any, t reflect.Type, at string, changed *bool) (any, error) {
	if t == rawMessageType || t.Kind() == reflect.Interface {
		return v, nil
	}
	if v == nil {
		if at == "" {
			return nil, problem.New(problem.Malformed, "invalid JSON body: null, not a JSON object")
		}
		return nil, problem.Field(problem.Malformed, at, "%s must not be null", at)
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) ||
		t.Implements(textType) || reflect.PointerTo(t).Implements(textType) {
		return v, nil // the type reads its own JSON
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := v.(json.Number)
		if !ok || !strings.ContainsAny(string(n), ".eE") {
			return v, nil
		}
		if r, ok := new(big.Rat).SetString(string(n)); ok && r.IsInt() {
			*changed = true
			return json.Number(r.Num().String()), nil
		}
	case reflect.Slice, reflect.Array:
		items, ok := v.([]any)
		if !ok {
			return v, nil
		}
		for i, item := range items {
			var err error
			if items[i], err = conformValue(item, t.Elem(), at+"[]", changed); err != nil {
				return nil, err
			}
		}
	case reflect.Map:
		members, ok := v.(map[string]any)
		if !ok {
			return v, nil
		}
		for k, m := range members {
			var err error
			if members[k], err = conformValue(m, t.Elem(), join(at, k), changed); err != nil {
				return nil, err
			}
		}
	case reflect.Struct:
		members, ok := v.(map[string]any)
		if !ok {
			return v, nil
		}
		for k, m := range members {
			f, ok := fieldByJSONName(t, k)
			if !ok {
				continue // DisallowUnknownFields reports it
			}
			var err error
			if members[k], err = conformValue(m, f.Type, join(at, k), changed); err != nil {
				return nil, err
			}
		}
	}
	return v, nil
}

// fieldByJSONName finds the field encoding/json decodes member name into,
// through embedded structs.
func fieldByJSONName(t reflect.Type, name string) (reflect.StructField, bool) {
	var fold reflect.StructField
	found := false
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || f.Anonymous && f.Type.Kind() == reflect.Struct && f.Tag.Get("json") == "" {
			continue
		}
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" {
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		if tag == name {
			return f, true
		}
		if !found && strings.EqualFold(tag, name) {
			fold, found = f, true
		}
	}
	return fold, found
}

func join(at, k string) string {
	if at == "" {
		return k
	}
	return at + "." + k
}
