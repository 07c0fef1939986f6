package schema

import (
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"testing"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/problem"
)

const patchDoc = `{"subject":"s","count":2147483646,"size":5,"score":1.5,"ratio":0.5,"views":null,
	"tags":["a"],"address":{"city":"Paris","geo":{"lat":1,"hits":3}},"attrs":{"k":1}}`

func TestParsePatchErrors(t *testing.T) {
	tests := []struct {
		body   string
		field  string
		detail string
	}{
		{`{}`, "", "empty patch"},
		{`{"$set":{},"$unset":[]}`, "", "empty patch"},
		{`[]`, "", "a patch is a JSON object"},
		{`{"$push":{"a":1}}`, "$push", `unknown patch operator "$push"`},
		{`{"$set":[1]}`, "$set", "$set takes an object"},
		{`{"$unset":"a"}`, "$unset", "$unset takes an array of paths"},
		{`{"$unset":[1]}`, "$unset", "found number"},
		{`{"$inc":{"a":"1"}}`, "a", `$inc of "a" takes a number, not string`},
		{`{"$set":{"a":1},"$inc":{"a":1}}`, "a", `path "a" appears in both $inc and $set`},
		{`{"$unset":["a","a"]}`, "a", `path "a" appears twice in $unset`},
		{`{"$set":{"a":{},"a.b":1}}`, "a.b", `path "a.b" ($set) overlaps path "a" ($set)`},
		{`{"$set":{"a.b.c":1},"$unset":["a.b"]}`, "a.b.c", `overlaps path "a.b" ($unset)`},
		{`{"$set":{"a..b":1}}`, "a..b", "has an empty segment"},
		{`{"$set":{"":1}}`, "", "empty path"},
		{`{"$set":`, "", "malformed JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.body, func(t *testing.T) {
			_, err := ParsePatch([]byte(tc.body))
			wantProblem(t, err, problem.Malformed, tc.field, tc.detail)
		})
	}
	p, err := ParsePatch([]byte(`{"$set":{"a":1,"ab.c":"x"},"$unset":["b"],"$inc":{"c":2}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := Patch{Set: map[string]any{"a": json.Number("1"), "ab.c": "x"}, Unset: []string{"b"}, Inc: map[string]any{"c": json.Number("2")}}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("got %#v want %#v", p, want)
	}
}

func TestApplyPatch(t *testing.T) {
	tb := mustTable(t, messageSchema)
	base, err := tb.DecodeJSON([]byte(patchDoc))
	if err != nil {
		t.Fatal(err)
	}
	baseJSON := mustJSON(t, base)
	tests := []struct {
		name  string
		patch string
		check map[string]any // dotted path -> expected JSON value
		kind  problem.Kind
		field string
		err   string
	}{
		{name: "set top", patch: `{"$set":{"subject":"new","tags":["x","y"]}}`,
			check: map[string]any{"subject": "new", "tags": []any{"x", "y"}}},
		{name: "set nested", patch: `{"$set":{"address.city":"Rome","address.geo.lat":2.5}}`,
			check: map[string]any{"address.city": "Rome", "address.geo.lat": 2.5, "address.geo.hits": 3.0}},
		{name: "set whole record fills defaults", patch: `{"$set":{"address":{"geo":{"lat":9}}}}`,
			check: map[string]any{"address.city": "", "address.geo.hits": 0.0}},
		{name: "set nullable record to null", patch: `{"$set":{"address.geo":null}}`,
			check: map[string]any{"address.geo": nil}},
		{name: "set wrong type", patch: `{"$set":{"count":"x"}}`, kind: problem.Invalid, field: "count", err: "count: expected int, got string"},
		{name: "set unknown", patch: `{"$set":{"address.zip":"1"}}`, kind: problem.Invalid, field: "address.zip", err: "address.zip: unknown field (not in record mail.Address)"},
		{name: "set inside non-record", patch: `{"$set":{"tags.x":"1"}}`, kind: problem.Invalid, field: "tags", err: "tags: is array of string, not a record"},
		{name: "set inside map is not supported", patch: `{"$set":{"attrs.k":2}}`, kind: problem.Invalid, field: "attrs", err: "not a record"},
		{name: "set inside null record", patch: `{"$set":{"next.subject":"x"}}`, kind: problem.Invalid, field: "next", err: `next: is null: "next.subject" cannot reach inside it`},
		{name: "set nested bad value", patch: `{"$set":{"address":{"geo":{"lat":"x"}}}}`, kind: problem.Invalid, field: "address.geo.lat", err: "address.geo.lat: expected double"},
		{name: "unset to default", patch: `{"$unset":["count","tags","address.city"]}`,
			check: map[string]any{"count": 0.0, "tags": []any{}, "address.city": ""}},
		{name: "unset nullable without default", patch: `{"$unset":["address.geo.hits"]}`,
			check: map[string]any{"address.geo.hits": 0.0}},
		{name: "unset required", patch: `{"$unset":["subject"]}`, kind: problem.Invalid, field: "subject", err: "subject: cannot $unset: the field has no default and is not nullable"},
		{name: "unset required nested", patch: `{"$unset":["address.geo.lat"]}`, kind: problem.Invalid, field: "address.geo.lat", err: "cannot $unset"},
		{name: "inc int", patch: `{"$inc":{"count":1,"size":-10}}`,
			check: map[string]any{"count": float64(math.MaxInt32), "size": -5.0}},
		{name: "inc nested", patch: `{"$inc":{"address.geo.hits":4}}`, check: map[string]any{"address.geo.hits": 7.0}},
		{name: "inc nullable null counts as zero", patch: `{"$inc":{"views":3}}`, check: map[string]any{"views": 3.0}},
		{name: "inc float", patch: `{"$inc":{"score":0.25,"ratio":-1}}`, check: map[string]any{"score": 1.75, "ratio": -0.5}},
		{name: "inc int overflow", patch: `{"$inc":{"count":2}}`, kind: problem.Invalid, field: "count", err: "count: $inc by 2 overflows int (current value 2147483646)"},
		{name: "inc long overflow", patch: `{"$inc":{"size":9223372036854775807}}`, kind: problem.Invalid, field: "size", err: "overflows long"},
		{name: "inc delta out of range", patch: `{"$inc":{"size":9223372036854775808}}`, kind: problem.Invalid, field: "size", err: "overflows long"},
		{name: "inc int by fraction", patch: `{"$inc":{"count":0.5}}`, kind: problem.Invalid, field: "count", err: "count: $inc of an int field takes an integer, not 0.5"},
		{name: "inc float overflow", patch: `{"$inc":{"score":1e39}}`, kind: problem.Invalid, field: "score", err: "overflows float"},
		{name: "inc double large", patch: `{"$inc":{"ratio":1.7e308}}`, check: map[string]any{"ratio": 1.7e308 + 0.5}},
		{name: "inc string", patch: `{"$inc":{"subject":1}}`, kind: problem.Invalid, field: "subject", err: "subject: $inc needs a numeric field"},
		{name: "inc unknown", patch: `{"$inc":{"nope":1}}`, kind: problem.Invalid, field: "nope", err: "nope: unknown field"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParsePatch([]byte(tc.patch))
			if err != nil {
				t.Fatal(err)
			}
			got, err := tb.ApplyPatch(base, p)
			if mustJSON(t, base) != baseJSON {
				t.Fatal("ApplyPatch mutated its input")
			}
			if tc.err != "" {
				wantProblem(t, err, tc.kind, tc.field, tc.err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tb.Encode(got); err != nil {
				t.Fatalf("patched doc does not encode: %v", err)
			}
			var generic map[string]any
			json.Unmarshal([]byte(mustJSON(t, got)), &generic)
			for path, want := range tc.check {
				f, _ := tb.ParseFields(path)
				v := any(generic)
				for _, seg := range f[0] {
					v = v.(map[string]any)[seg]
				}
				if !reflect.DeepEqual(v, want) {
					t.Fatalf("%s = %#v, want %#v", path, v, want)
				}
			}
		})
	}
}

func TestParseFieldsAndProject(t *testing.T) {
	tb := mustTable(t, messageSchema)
	f, err := tb.ParseFields("subject,address.geo.lat,next.address.city")
	if err != nil {
		t.Fatal(err)
	}
	if want := [][]string{{"subject"}, {"address", "geo", "lat"}, {"next", "address", "city"}}; !reflect.DeepEqual(f, want) {
		t.Fatalf("got %v", f)
	}
	for _, tc := range []struct{ spec, field, detail string }{
		{"", "fields", "empty projection"},
		{"subject,,size", "fields", "has an empty field"},
		{"subject,", "fields", "has an empty field"},
		{"address..city", "address..city", "empty segment"},
		{"nope", "nope", `unknown field "nope"`},
		{"address.zip", "address.zip", `unknown field "address.zip"`},
		{"tags.x", "tags.x", `"tags" is not a record`},
	} {
		_, err := tb.ParseFields(tc.spec)
		wantProblem(t, err, problem.Malformed, tc.field, tc.detail)
	}

	doc, _ := tb.DecodeJSON([]byte(patchDoc))
	proj := func(spec string) string {
		f, err := tb.ParseFields(spec)
		if err != nil {
			t.Fatal(err)
		}
		return mustJSON(t, Project(doc, f))
	}
	for spec, want := range map[string]string{
		"subject,size":                   `{"size":5,"subject":"s"}`,
		"address.geo.lat":                `{"address":{"geo":{"lat":1}}}`,
		"address.geo.lat,address.city":   `{"address":{"city":"Paris","geo":{"lat":1}}}`,
		"address.geo.lat,address":        `{"address":{"city":"Paris","geo":{"hits":3,"lat":1}}}`,
		"address,address.geo.lat":        `{"address":{"city":"Paris","geo":{"hits":3,"lat":1}}}`,
		"next.subject,subject":           `{"subject":"s"}`,
		"next":                           `{"next":null}`,
		"views,address.geo.hits,nothing": `{"address":{"geo":{"hits":3}},"views":null}`,
	} {
		if spec == "views,address.geo.hits,nothing" {
			f, _ := tb.ParseFields("views,address.geo.hits")
			f = append(f, []string{"nothing"})
			if got := mustJSON(t, Project(doc, f)); got != want {
				t.Fatalf("%s: got %s want %s", spec, got, want)
			}
			continue
		}
		if got := proj(spec); got != want {
			t.Fatalf("%s: got %s want %s", spec, got, want)
		}
	}
	// Projection does not modify the document.
	_ = proj("address.geo.lat,address")
	if doc["address"].(map[string]any)["geo"].(map[string]any)["hits"] != int64(3) {
		t.Fatal("Project modified the document")
	}
}

func TestParseKeys(t *testing.T) {
	def := tableDef(simpleSchema)
	def.Key = []KeyPart{{Name: "box", Type: KeyString}, {Name: "n", Type: KeyInt}, {Name: "id", Type: KeyLong}}
	tb, err := Compile(def)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tb.ParseKeySegments([]string{"a/b é", "-2147483648", "9223372036854775807"})
	if err != nil {
		t.Fatal(err)
	}
	if want := (keys.Tuple{"a/b é", int64(math.MinInt32), int64(math.MaxInt64)}); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v", got)
	}
	if got, err := tb.ParseKeySegments([]string{"x"}); err != nil || !reflect.DeepEqual(got, keys.Tuple{"x"}) {
		t.Fatalf("prefix: %v %v", got, err)
	}
	long := string(make([]byte, 1025))
	for _, tc := range []struct {
		segs          []string
		field, detail string
	}{
		{[]string{"a", "1", "2", "3"}, "key", "has 3 key parts, 4 given"},
		{[]string{""}, "box", `key part "box" must not be empty`},
		{[]string{"\xff"}, "box", "not valid UTF-8"},
		{[]string{long}, "box", "1025 bytes long, more than 1024"},
		{[]string{"a", "2147483648"}, "n", "2147483648 is out of range for int"},
		{[]string{"a", "1", "9223372036854775808"}, "id", "out of range for long"},
		{[]string{"a", "+1"}, "n", `must be a decimal integer (int), got "+1"`},
		{[]string{"a", "0x1"}, "n", "decimal integer"},
		{[]string{"a", " 1"}, "n", "decimal integer"},
		{[]string{"a", "1 "}, "n", "decimal integer"},
		{[]string{"a", "-"}, "n", "decimal integer"},
		{[]string{"a", "1.0"}, "n", "decimal integer"},
		{[]string{"a", "1e3"}, "n", "decimal integer"},
	} {
		_, err := tb.ParseKeySegments(tc.segs)
		wantProblem(t, err, problem.Malformed, tc.field, tc.detail)
	}

	got, err = tb.ParseKeyJSON([]any{"a", json.Number("-7"), float64(1 << 53)})
	if err != nil {
		t.Fatal(err)
	}
	if want := (keys.Tuple{"a", int64(-7), int64(1 << 53)}); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v", got)
	}
	for _, tc := range []struct {
		parts         []any
		field, detail string
	}{
		{[]any{"a", json.Number("1"), json.Number("2"), "x"}, "key", "4 given"},
		{[]any{json.Number("1")}, "box", `key part "box" must be a string, got number 1`},
		{[]any{""}, "box", "must not be empty"},
		{[]any{"a", "1"}, "n", `key part "n" must be a number (int), got string`},
		{[]any{"a", json.Number("1.5")}, "n", "decimal integer"},
		{[]any{"a", json.Number("1e2")}, "n", "decimal integer"},
		{[]any{"a", 1.5}, "n", "must be an integer (int), got 1.5"},
		{[]any{"a", float64(1 << 40)}, "n", "out of range for int"},
		{[]any{"a", json.Number(strconv.Itoa(math.MaxInt32 + 1))}, "n", "out of range for int"},
		{[]any{"a", nil}, "n", "got null"},
		{[]any{"a", json.Number("1"), 1e19}, "id", "must be an integer (long)"},
	} {
		_, err := tb.ParseKeyJSON(tc.parts)
		wantProblem(t, err, problem.Malformed, tc.field, tc.detail)
	}
}
