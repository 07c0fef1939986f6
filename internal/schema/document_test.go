package schema

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/doppio-db/doppio/internal/problem"
	"github.com/hamba/avro/v2"
)

func TestDecodeJSONErrors(t *testing.T) {
	tb := mustTable(t, messageSchema)
	tests := []struct {
		body   string
		kind   problem.Kind
		field  string
		detail string
	}{
		{``, problem.Malformed, "", "empty body"},
		{`{"subject":`, problem.Malformed, "", "malformed JSON"},
		{`{"subject":"a"} x`, problem.Malformed, "", "unexpected data after the top-level value"},
		{`[1]`, problem.Invalid, "", "the document must be a JSON object, not array"},
		{`{}`, problem.Invalid, "subject", "subject: required field is missing"},
		{`{"subject":"a","bogus":1,"alpha":2}`, problem.Invalid, "alpha", "alpha: unknown field (not in record mail.Message)"},
		{`{"subject":1}`, problem.Invalid, "subject", "subject: expected string, got number 1"},
		{`{"subject":"a","count":2147483648}`, problem.Invalid, "count", "count: 2147483648 is out of range for int (32-bit)"},
		{`{"subject":"a","count":-2147483649}`, problem.Invalid, "count", "out of range for int"},
		{`{"subject":"a","count":1.5}`, problem.Invalid, "count", "count: 1.5 is not an integer (int)"},
		{`{"subject":"a","size":9223372036854775808}`, problem.Invalid, "size", "size: 9223372036854775808 is out of range for long"},
		{`{"subject":"a","score":1e39}`, problem.Invalid, "score", "out of range for float"},
		{`{"subject":"a","ratio":1e400}`, problem.Invalid, "ratio", "out of range for double"},
		{`{"subject":"a","unread":"yes"}`, problem.Invalid, "unread", "unread: expected boolean, got string"},
		{`{"subject":"a","status":"GONE"}`, problem.Invalid, "status", `status: "GONE" is not one of the symbols of enum mail.Status (NEW, READ, ARCHIVED)`},
		{`{"subject":"a","tags":["x",2]}`, problem.Invalid, "tags[1]", "tags[1]: expected string, got number 2"},
		{`{"subject":"a","tags":"x"}`, problem.Invalid, "tags", "tags: expected array, got string"},
		{`{"subject":"a","attrs":{"k":"v"}}`, problem.Invalid, "attrs.k", "attrs.k: expected long, got string"},
		{`{"subject":"a","blob":"***"}`, problem.Invalid, "blob", "blob: expected a base64 string (bytes), got an invalid one"},
		{`{"subject":"a","hash":"AQID"}`, problem.Invalid, "hash", "hash: expected exactly 4 bytes (fixed mail.MD5), got 3"},
		{`{"subject":"a","note":5}`, problem.Invalid, "note", "note: expected string, got number 5"},
		{`{"subject":"a","count":null}`, problem.Invalid, "count", "count: expected int, got null"},
		{`{"subject":"a","choice":true}`, problem.Invalid, "choice", "choice: boolean matches no branch of union [int, string, mail.Pt]"},
		{`{"subject":"a","choice":{"x":"1"}}`, problem.Invalid, "choice.x", "choice.x: expected int, got string"},
		{`{"subject":"a","choice":{"int":"1"}}`, problem.Invalid, "choice", "choice: expected int, got string"},
		{`{"subject":"a","choice":{"y":1}}`, problem.Invalid, "choice.y", "choice.y: unknown field (not in record mail.Pt)"},
		{`{"subject":"a","address":{"city":"x","zip":"1"}}`, problem.Invalid, "address.zip", "address.zip: unknown field (not in record mail.Address)"},
		{`{"subject":"a","address":{"geo":{}}}`, problem.Invalid, "address.geo.lat", "address.geo.lat: required field is missing"},
		{`{"subject":"a","address":{"geo":{"lat":"n"}}}`, problem.Invalid, "address.geo.lat", "expected double, got string"},
		{`{"subject":"a","next":{"subject":"b","next":{"subject":"c","tags":[1]}}}`, problem.Invalid, "next.next.tags[0]", "next.next.tags[0]: expected string"},
	}
	for _, tc := range tests {
		t.Run(tc.body, func(t *testing.T) {
			_, err := tb.DecodeJSON([]byte(tc.body))
			wantProblem(t, err, tc.kind, tc.field, tc.detail)
		})
	}
}

func TestNormalizeRejectsInvalidUTF8(t *testing.T) {
	tb := mustTable(t, messageSchema)
	_, err := tb.Normalize(map[string]any{"subject": "a\xffb"})
	wantProblem(t, err, problem.Invalid, "subject", "not valid UTF-8")
}

func TestRoundTrip(t *testing.T) {
	tb := mustTable(t, messageSchema)
	tests := []struct{ in, want string }{
		{`{"subject":"hi"}`, `{"address":{"city":"","geo":null},"attrs":{},"blob":"","choice":0,"count":0,"hash":null,"next":null,"note":null,"ratio":0,"score":0,"sent":0,"size":0,"status":"NEW","subject":"hi","tags":[],"unread":true,"views":null}`},
		{`{"subject":"<é>","count":-2147483648,"size":9223372036854775807,"score":0.1,"ratio":-2.5e-300,"unread":false,
		   "status":"ARCHIVED","tags":["a","b"],"attrs":{"x":-1},"blob":"AP8=","hash":"AQIDBA==","sent":1700000000000,
		   "note":"n","views":7,"choice":"s","address":{"city":"Paris","geo":{"lat":48.8}},
		   "next":{"subject":"child","next":{"subject":"grandchild"}}}`, ``},
		{`{"subject":"u","choice":{"x":5}}`, ``},
		{`{"subject":"u","choice":{"mail.Pt":{"x":5}}}`, `{"subject":"u","choice":{"x":5}}`},
		{`{"subject":"u","choice":{"Pt":{"x":5}}}`, `{"subject":"u","choice":{"x":5}}`},
		{`{"subject":"u","choice":{"string":"7"}}`, `{"subject":"u","choice":"7"}`},
		{`{"subject":"u","choice":12}`, ``},
		{`{"subject":"u","note":{"string":"x"}}`, `{"subject":"u","note":{"string":"x"}}`},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			if strings.Contains(tc.in, `"note":{"string"`) {
				// A nullable union takes the plain value only.
				_, err := tb.DecodeJSON([]byte(tc.in))
				wantProblem(t, err, problem.Invalid, "note", "expected string, got object")
				return
			}
			doc, err := tb.DecodeJSON([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			bin, err := tb.Encode(doc)
			if err != nil {
				t.Fatal(err)
			}
			back, err := tb.Decode(bin, 1, 1)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(doc, back) {
				t.Fatalf("decoded %#v\nwant %#v", back, doc)
			}
			out := mustJSON(t, back)
			want := tc.want
			if want == "" {
				want = tc.in
			}
			// Compare the given fields only; defaults fill the rest.
			var got, exp map[string]any
			json.Unmarshal([]byte(out), &got)
			json.Unmarshal([]byte(want), &exp)
			if !subset(exp, got) {
				t.Fatalf("got %s\nwant a superset of %s", out, want)
			}
			if strings.HasPrefix(want, `{"address"`) && out != want {
				t.Fatalf("got %s\nwant %s", out, want)
			}
		})
	}
}

func TestMarshalDocument(t *testing.T) {
	got, err := MarshalDocument(Document{"b": []byte{1, 2}, "a": "<&>", "n": nil, "f": 0.1, "i": int64(-3), "l": []any{map[string]any{"x": true}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"a":"<&>","b":"AQI=","f":0.1,"i":-3,"l":[{"x":true}],"n":null}`; string(got) != want {
		t.Fatalf("got %s want %s", got, want)
	}
}

// The codec's binary is standard Avro: hamba reads ours, we read hamba's.
func TestBinaryMatchesHamba(t *testing.T) {
	const s = `{"type":"record","name":"R","fields":[
		{"name":"i","type":"int"},{"name":"l","type":"long"},{"name":"f","type":"float"},{"name":"d","type":"double"},
		{"name":"s","type":"string"},{"name":"b","type":"bytes"},{"name":"t","type":"boolean"},
		{"name":"e","type":{"type":"enum","name":"E","symbols":["X","Y"]}},
		{"name":"a","type":{"type":"array","items":"long"}},{"name":"m","type":{"type":"map","values":"string"}},
		{"name":"n","type":["null","string"]},
		{"name":"r","type":{"type":"record","name":"S","fields":[{"name":"x","type":"long"}]}}]}`
	tb := mustTable(t, s)
	doc, err := tb.DecodeJSON([]byte(`{"i":-5,"l":1234567890123,"f":1.5,"d":-0.25,"s":"héllo","b":"AAE=","t":true,"e":"Y",
		"a":[1,-2,300],"m":{"k":"v"},"n":"z","r":{"x":-9}}`))
	if err != nil {
		t.Fatal(err)
	}
	ours, err := tb.Encode(doc)
	if err != nil {
		t.Fatal(err)
	}
	type S struct {
		X int64 `avro:"x"`
	}
	type R struct {
		I int               `avro:"i"`
		L int64             `avro:"l"`
		F float32           `avro:"f"`
		D float64           `avro:"d"`
		S string            `avro:"s"`
		B []byte            `avro:"b"`
		T bool              `avro:"t"`
		E string            `avro:"e"`
		A []int64           `avro:"a"`
		M map[string]string `avro:"m"`
		N *string           `avro:"n"`
		R S                 `avro:"r"`
	}
	var r R
	if err := avro.Unmarshal(tb.latest().avro, ours, &r); err != nil {
		t.Fatalf("hamba cannot read our binary: %v", err)
	}
	z := "z"
	want := R{I: -5, L: 1234567890123, F: 1.5, D: -0.25, S: "héllo", B: []byte{0, 1}, T: true, E: "Y",
		A: []int64{1, -2, 300}, M: map[string]string{"k": "v"}, N: &z, R: S{X: -9}}
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("hamba read %+v\nwant %+v", r, want)
	}
	theirs, err := avro.Marshal(tb.latest().avro, want)
	if err != nil {
		t.Fatal(err)
	}
	back, err := tb.Decode(theirs, 1, 0)
	if err != nil {
		t.Fatalf("we cannot read hamba's binary: %v", err)
	}
	if !reflect.DeepEqual(back, doc) {
		t.Fatalf("read %v\nwant %v", back, doc)
	}
}

func TestDecodeErrors(t *testing.T) {
	tb := mustTable(t, messageSchema)
	doc, _ := tb.DecodeJSON([]byte(`{"subject":"hello","tags":["a"]}`))
	bin, _ := tb.Encode(doc)
	_, err := tb.Decode(bin, 1, 2)
	wantProblem(t, err, problem.NotFound, "version", "has no schema version 2")
	if _, err := tb.Decode(bin, 3, 1); err == nil {
		t.Fatal("unknown writer version accepted")
	}
	for i := range bin {
		if _, err := tb.Decode(bin[:i], 1, 1); err == nil {
			t.Fatalf("truncated at %d accepted", i)
		}
	}
	if _, err := tb.Decode(append(bin, 0), 1, 1); err == nil {
		t.Fatal("trailing byte accepted")
	}
}

func TestEncodeRejectsNonNormalized(t *testing.T) {
	tb := mustTable(t, messageSchema)
	doc, _ := tb.DecodeJSON([]byte(`{"subject":"x"}`))
	for _, mut := range []func(Document){
		func(d Document) { d["count"] = "1" },
		func(d Document) { d["count"] = int64(1 << 40) },
		func(d Document) { d["status"] = "NOPE" },
		func(d Document) { d["bogus"] = 1 },
		func(d Document) { d["hash"] = []byte{1} },
		func(d Document) { delete(d, "subject") },
	} {
		d := Document{}
		for k, v := range doc {
			d[k] = v
		}
		mut(d)
		if _, err := tb.Encode(d); err == nil {
			t.Fatalf("Encode accepted %v", d)
		}
	}
}

func TestResolution(t *testing.T) {
	const v1 = `{"type":"record","name":"M","fields":[
		{"name":"subject","type":"string"},
		{"name":"old","type":"int","default":4},
		{"name":"status","type":{"type":"enum","name":"S","symbols":["A","B"],"default":"A"}},
		{"name":"addr","type":{"type":"record","name":"Addr","fields":[{"name":"city","type":"string"}]}}]}`
	const v2 = `{"type":"record","name":"M","fields":[
		{"name":"subject","type":"string"},
		{"name":"unread","type":"boolean","default":true},
		{"name":"status","type":{"type":"enum","name":"S","symbols":["A","B","C"],"default":"A"}},
		{"name":"addr","type":{"type":"record","name":"Addr","fields":[{"name":"city","type":"string"},{"name":"zip","type":["null","string"],"default":null}]}},
		{"name":"tags","type":{"type":"array","items":"string"},"default":["t"]}]}`
	def, changed, err := NextVersion(tableDef(v1), []byte(v2))
	if err != nil || !changed {
		t.Fatalf("NextVersion: %v %v", changed, err)
	}
	old := mustTable(t, v1)
	tb, err := Compile(def)
	if err != nil {
		t.Fatal(err)
	}

	// Old to new: the removed field is dropped, new ones get defaults.
	d1, _ := old.DecodeJSON([]byte(`{"subject":"s","old":9,"status":"B","addr":{"city":"c"}}`))
	b1, _ := old.Encode(d1)
	got, err := tb.Decode(b1, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"addr":{"city":"c","zip":null},"status":"B","subject":"s","tags":["t"],"unread":true}`; mustJSON(t, got) != want {
		t.Fatalf("old->new %s\nwant %s", mustJSON(t, got), want)
	}
	// Defaults are copied, not shared between documents.
	got["tags"].([]any)[0] = "mutated"
	again, _ := tb.Decode(b1, 1, 2)
	if again["tags"].([]any)[0] != "t" {
		t.Fatal("default shared between documents")
	}

	// New to old: new fields are dropped, the removed one gets its default,
	// an unknown enum symbol becomes the enum default.
	d2, _ := tb.DecodeJSON([]byte(`{"subject":"s","unread":false,"status":"C","addr":{"city":"c","zip":"z"},"tags":["x"]}`))
	b2, err := tb.Encode(d2)
	if err != nil {
		t.Fatal(err)
	}
	got, err = tb.Decode(b2, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"addr":{"city":"c"},"old":4,"status":"A","subject":"s"}`; mustJSON(t, got) != want {
		t.Fatalf("new->old %s\nwant %s", mustJSON(t, got), want)
	}
	// As written.
	got, _ = tb.Decode(b2, 2, 0)
	if !reflect.DeepEqual(got, d2) {
		t.Fatalf("as written %v want %v", got, d2)
	}

	// Concurrent decoders share the cached plans.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if _, err := tb.Decode(b1, 1, 1+i%2); err != nil {
					t.Error(err)
					return
				}
				if _, err := tb.Decode(b2, 2, 1+i%2); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestResolutionAcrossVersionsReAddingAField(t *testing.T) {
	// x is removed in v2 and comes back with another type in v3: reading v1
	// data at v3 gives v3's default, as reading through v2 would.
	v1 := `{"type":"record","name":"M","fields":[{"name":"x","type":"string","default":"a"}]}`
	v2 := `{"type":"record","name":"M","fields":[]}`
	v3 := `{"type":"record","name":"M","fields":[{"name":"x","type":"int","default":7}]}`
	def := tableDef(v1)
	for _, s := range []string{v2, v3} {
		var err error
		if def, _, err = NextVersion(def, []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	tb, err := Compile(def)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tb.Decode([]byte{2, 'q'}, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	if mustJSON(t, got) != `{"x":7}` {
		t.Fatalf("got %s", mustJSON(t, got))
	}
}

// subset reports whether every field of want (recursively, for objects) is
// in got with the same value.
func subset(want, got any) bool {
	wm, ok := want.(map[string]any)
	if !ok {
		return reflect.DeepEqual(want, got)
	}
	gm, ok := got.(map[string]any)
	if !ok {
		return false
	}
	for k, v := range wm {
		if !subset(v, gm[k]) {
			return false
		}
	}
	return true
}

// TestEncodeWritesMapEntriesInKeyOrder: a document encodes to the same
// bytes every time (Go's map order is random), with a map's entries in
// key order, as the bulk builders and the ETag rely on.
func TestEncodeWritesMapEntriesInKeyOrder(t *testing.T) {
	tbl := mustTable(t, messageSchema)
	attrs := map[string]any{}
	for i := range 16 {
		attrs[string(rune('p'-i))] = int64(i)
	}
	doc, err := tbl.Normalize(map[string]any{"subject": "s", "attrs": attrs})
	if err != nil {
		t.Fatal(err)
	}
	first, err := tbl.Encode(doc)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		again, err := tbl.Encode(doc)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, first) {
			t.Fatalf("the same document encoded to %x, then %x", first, again)
		}
	}
	// attrs follows subject, count, size, score, ratio, unread, status
	// and an empty tags array: its entries start with the count 16, then
	// key "a" (length 1) holding 15.
	at := bytes.Index(first, []byte{32, 2, 'a', 30, 2, 'b', 28})
	if at < 0 {
		t.Fatalf("the map's entries are not in key order: %x", first)
	}
}
