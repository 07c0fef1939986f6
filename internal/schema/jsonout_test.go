package schema

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestAppendJSONKeepsSchemaOrderAndRoundTrips(t *testing.T) {
	tb := mustTable(t, `{"type":"record","name":"R","fields":[
		{"name":"z","type":"string"},
		{"name":"a","type":"long"},
		{"name":"f","type":"float","default":0.1},
		{"name":"nested","type":{"type":"record","name":"N","fields":[{"name":"y","type":"boolean"},{"name":"b","type":["null","bytes"],"default":null}]}},
		{"name":"tags","type":{"type":"array","items":"string"},"default":[]},
		{"name":"m","type":{"type":"map","values":"double"},"default":{}}]}`)
	in := `{"z":"q\"\\\n\u0001é\u2028","a":-9007199254740993,"nested":{"y":true,"b":"AAE="},"tags":["x"],"m":{"k2":1.5,"k1":1e300}}`
	doc, err := tb.DecodeJSON([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	out := tb.AppendJSON(nil, doc, 0)
	want := `{"z":"q\"\\\n\u0001é\u2028","a":-9007199254740993,"f":0.1,"nested":{"y":true,"b":"AAE="},"tags":["x"],"m":{"k1":1e+300,"k2":1.5}}`
	if string(out) != want {
		t.Fatalf("AppendJSON\n got %s\nwant %s", out, want)
	}
	again, err := tb.DecodeJSON(out)
	if err != nil || !reflect.DeepEqual(again, doc) {
		t.Fatalf("re-decoding the output: %v, equal=%v", err, reflect.DeepEqual(again, doc))
	}
	var generic map[string]any
	if err := json.Unmarshal(out, &generic); err != nil {
		t.Fatalf("output is not JSON: %v", err)
	}
	if got := string(tb.AppendJSON(nil, Project(doc, [][]string{{"nested", "y"}, {"a"}}), 0)); got != `{"a":-9007199254740993,"nested":{"y":true}}` {
		t.Fatalf("projection rendered %s", got)
	}
}

func TestRecordsInUnionsRenderInSchemaOrderBothWays(t *testing.T) {
	tb := mustTable(t, `{"type":"record","name":"R","fields":[
		{"name":"u","type":["string",{"type":"record","name":"P","fields":[{"name":"z","type":"int"},{"name":"a","type":"int"}]},
		  {"type":"map","values":"int"}]},
		{"name":"m","type":{"type":"map","values":"long"}}]}`)
	for _, in := range []string{
		`{"u":{"P":{"z":1,"a":2}},"m":{"b":1,"a":2}}`,
		`{"u":"s","m":{}}`,
		`{"u":{"map":{"y":1,"x":2}},"m":{"k":3}}`,
	} {
		doc, err := tb.DecodeJSON([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		bin, err := tb.Encode(doc)
		if err != nil {
			t.Fatal(err)
		}
		want := string(tb.AppendJSON(nil, doc, 0))
		got, err := tb.AppendAvroAsJSON(nil, bin, 1, 0)
		if err != nil || string(got) != want {
			t.Fatalf("%s: AppendAvroAsJSON %s (%v), AppendJSON %s", in, got, err, want)
		}
	}
	doc, _ := tb.DecodeJSON([]byte(`{"u":{"P":{"z":1,"a":2}},"m":{}}`))
	if got := string(tb.AppendJSON(nil, doc, 0)); got != `{"u":{"z":1,"a":2},"m":{}}` {
		t.Fatalf("record in a union rendered %s", got)
	}
}

// TestAvroAsJSONRendersInOneAllocation guards the read path's rendering of
// a stored document: the output is sized once (no growing copies) and
// string fields are escaped straight from the Avro bytes; what dst held
// stays in front.
func TestAvroAsJSONRendersInOneAllocation(t *testing.T) {
	tb, bin := ycsbRecord(t)
	doc, err := tb.Decode(bin, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := string(tb.AppendJSON(nil, doc, 0))
	got, err := tb.AppendAvroAsJSON([]byte("prefix:"), bin, 1, 0)
	if err != nil || string(got) != "prefix:"+want {
		t.Fatalf("AppendAvroAsJSON = %s (%v), want prefix:%s", got, err, want)
	}
	if !strings.Contains(want, `"field0":"!!!`) || !strings.Contains(want, `\"\\ and more`) {
		t.Fatalf("rendered %s", want)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := tb.AppendAvroAsJSON(nil, bin, 1, 0); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 1 && !raceEnabled {
		t.Fatalf("AppendAvroAsJSON of a 10-field document: %v allocations, want 1", allocs)
	}
}

// TestEncodeAllocatesOnceForAlikeDocuments: Encode starts at the size of
// the table's previous document, so alike documents encode in one
// allocation, and a larger or smaller one after it still encodes exactly.
func TestEncodeAllocatesOnceForAlikeDocuments(t *testing.T) {
	tb, bin := ycsbRecord(t)
	doc, err := tb.Decode(bin, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	small := Document{}
	for k := range doc {
		small[k] = "s"
	}
	for _, d := range []Document{doc, small, doc, small} {
		out, err := tb.Encode(d)
		if err != nil {
			t.Fatal(err)
		}
		back, err := tb.Decode(out, 1, 1)
		if err != nil || !reflect.DeepEqual(back, d) {
			t.Fatalf("Encode then Decode = %v (%v), want %v", back, err, d)
		}
	}
	if _, err := tb.Encode(doc); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := tb.Encode(doc); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 1 && !raceEnabled {
		t.Fatalf("Encode of a 10-field document: %v allocations, want 1", allocs)
	}
}

// TestPlainWordIsPlainJSONOfEachByte: the eight-byte test agrees with the
// byte table for every byte value at every position, among plain bytes
// and next to each of the bytes that end a run.
func TestPlainWordIsPlainJSONOfEachByte(t *testing.T) {
	for _, fill := range []byte{'a', ' ', '~', '"', 0x1f, 0x80} {
		for c := range 256 {
			for pos := range 8 {
				w := []byte(strings.Repeat(string(fill), 8))
				w[pos] = byte(c)
				want := true
				for _, b := range w {
					want = want && plainJSON[b]
				}
				if got := plainWord(load64(string(w), 0)); got != want {
					t.Fatalf("plainWord(%q) = %v, want %v", w, got, want)
				}
			}
		}
	}
}

// TestJSONStringsRoundTrip: random strings of plain, escaped, multi-byte
// and invalid bytes, at every alignment, read back by encoding/json as
// the string with each invalid byte replaced by U+FFFD.
func TestJSONStringsRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(20261125, 2))
	pieces := []string{"a", "xyz01234", " ", "~", `"`, `\`, "\n", "\r", "\t", "\x00", "\x1f", "\x7f", "é", "€", "\u2028", "\u2029", "😀", "\xff", "\xe2\x82", "\xc3"}
	for range 20000 {
		var b strings.Builder
		for n := rng.IntN(40); n > 0; n-- {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		s := b.String()
		var want []rune
		for i := 0; i < len(s); {
			r, size := utf8.DecodeRuneInString(s[i:])
			want = append(want, r)
			i += size
		}
		out := appendJSONString(nil, s)
		var got string
		if err := json.Unmarshal(out, &got); err != nil || got != string(want) {
			t.Fatalf("%q: wrote %s, read back %q (%v), want %q", s, out, got, err, string(want))
		}
		if bytes.ContainsAny(out, "\u2028\u2029") || !utf8.Valid(out) {
			t.Fatalf("%q: wrote %q", s, out)
		}
	}
}
