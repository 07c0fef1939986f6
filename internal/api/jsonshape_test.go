package api

import (
	"reflect"
	"strings"
	"testing"
)

// TestConformReadsBodiesAsTheContractsSchemas guards the JSON Schema
// reading of request bodies: integral numbers of any spelling are
// integers, and no typed member is null.
func TestConformReadsBodiesAsTheContractsSchemas(t *testing.T) {
	type inner struct {
		Every *string `json:"every"`
	}
	type body struct {
		Retain int            `json:"retain"`
		Parts  []int          `json:"parts"`
		Name   string         `json:"name"`
		Inner  inner          `json:"inner"`
		Any    any            `json:"any"`
		Rates  map[string]int `json:"rates"`
	}
	typ := reflect.TypeFor[body]()
	for _, c := range []struct{ in, want, err string }{
		{in: `{"retain":4705804161065.0,"parts":[1e0,2],"rates":{"a":3.0}}`, want: `{"parts":[1,2],"rates":{"a":3},"retain":4705804161065}`},
		{in: `{"retain":4,"name":"x"}`, want: `{"retain":4,"name":"x"}`},
		{in: `{"retain":4.5}`, want: `{"retain":4.5}`},
		{in: `{"any":null,"name":"x"}`, want: `{"any":null,"name":"x"}`},
		{in: `{"name":null}`, err: "name must not be null"},
		{in: `{"inner":{"every":null}}`, err: "inner.every must not be null"},
		{in: `{"parts":[null]}`, err: "parts[] must not be null"},
		{in: `null`, err: "invalid JSON body: null, not a JSON object"},
	} {
		got, err := conform([]byte(c.in), typ)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || string(got) != c.want {
			t.Errorf("%s: %s %v, want %s", c.in, got, err, c.want)
		}
	}
}
