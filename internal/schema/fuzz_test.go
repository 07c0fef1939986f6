package schema

import (
	"reflect"
	"testing"

	"github.com/doppio-db/doppio/internal/problem"
)

// roundTrip checks that a normalized doc encodes, decodes to an equal doc
// and renders as JSON that decodes to the same doc again.
func roundTrip(t *testing.T, tb *Table, doc Document) {
	t.Helper()
	bin, err := tb.Encode(doc)
	if err != nil {
		t.Fatalf("accepted doc does not encode: %v\n%#v", err, doc)
	}
	back, err := tb.Decode(bin, tb.Latest(), 0)
	if err != nil {
		t.Fatalf("encoded doc does not decode: %v", err)
	}
	if !reflect.DeepEqual(back, doc) {
		t.Fatalf("round trip changed the doc:\n got %#v\nwant %#v", back, doc)
	}
	direct, err := tb.AppendAvroAsJSON(nil, bin, tb.Latest(), 0)
	if want := tb.AppendJSON(nil, doc, 0); err != nil || string(direct) != string(want) {
		t.Fatalf("AppendAvroAsJSON = %s (%v)\nwant AppendJSON  %s", direct, err, want)
	}
	js, err := MarshalDocument(doc)
	if err != nil {
		t.Fatalf("MarshalDocument: %v", err)
	}
	again, err := tb.DecodeJSON(js)
	if err != nil {
		t.Fatalf("rendered JSON %s does not decode: %v", js, err)
	}
	if !reflect.DeepEqual(again, doc) {
		t.Fatalf("JSON round trip changed the doc:\n got %#v\nwant %#v", again, doc)
	}
}

func checkProblem(t *testing.T, err error) {
	t.Helper()
	if _, ok := problem.As(err); !ok {
		t.Fatalf("error is not a *problem.Error: %T %v", err, err)
	}
}

func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{
		patchDoc,
		`{"subject":"x","choice":{"x":1},"next":{"subject":"y","choice":"s"},"hash":"AQIDBA==","score":0.1}`,
		`{"subject":"x","choice":{"string":"1"},"attrs":{"a":1,"b":-9223372036854775808},"blob":"AP8="}`,
		`{"subject":"x","count":1e3,"tags":[]}`,
		`{"subject":"\u00e9\ud83d\ude00","status":"READ","score":3.4028234663852886e38}`,
		`[]`, `null`, `{"subject":`,
	} {
		f.Add([]byte(s))
	}
	tb := mustTable(f, messageSchema)
	f.Fuzz(func(t *testing.T, body []byte) {
		doc, err := tb.DecodeJSON(body)
		if err != nil {
			checkProblem(t, err)
			return
		}
		roundTrip(t, tb, doc)
	})
}

func FuzzApplyPatch(f *testing.F) {
	for _, s := range []string{
		`{"$set":{"subject":"new","address.geo.lat":2}}`,
		`{"$set":{"address":{"geo":null}},"$inc":{"count":1}}`,
		`{"$unset":["tags","address.geo.hits","note"],"$inc":{"views":-1,"score":0.1}}`,
		`{"$inc":{"count":-4294967296,"size":9223372036854775807,"ratio":1e308}}`,
		`{"$set":{"choice":{"Pt":{"x":1}},"next":{"subject":"n"}}}`,
		`{"$set":{"next.subject":"x"}}`,
		`{"$set":{"a":1,"a.b":2}}`,
	} {
		f.Add([]byte(s))
	}
	tb := mustTable(f, messageSchema)
	base, err := tb.DecodeJSON([]byte(patchDoc))
	if err != nil {
		f.Fatal(err)
	}
	baseJSON, _ := MarshalDocument(base)
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := ParsePatch(body)
		if err != nil {
			checkProblem(t, err)
			return
		}
		doc, err := tb.ApplyPatch(base, p)
		if now, _ := MarshalDocument(base); string(now) != string(baseJSON) {
			t.Fatalf("ApplyPatch mutated its input: %s", now)
		}
		if err != nil {
			checkProblem(t, err)
			return
		}
		roundTrip(t, tb, doc)
	})
}

func FuzzDecodeBinary(f *testing.F) {
	tb := mustTable(f, messageSchema)
	doc, _ := tb.DecodeJSON([]byte(patchDoc))
	bin, _ := tb.Encode(doc)
	f.Add(bin)
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := tb.Decode(data, 1, 1)
		if err != nil {
			return
		}
		// Whatever decodes must encode back to the same bytes, except
		// where the input used a non-canonical form (blocks, varints).
		if _, err := tb.Encode(doc); err != nil {
			t.Fatalf("decoded doc does not encode: %v", err)
		}
	})
}
