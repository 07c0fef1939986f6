package schema

import (
	"fmt"
	"strings"
	"testing"
)

const benchDoc = `{"subject":"quarterly report","count":12,"size":123456,"score":0.5,"ratio":0.25,"unread":false,
	"status":"READ","tags":["work","finance","q3"],"attrs":{"a":1,"b":2},"blob":"AAECAwQ=","hash":"AQIDBA==",
	"sent":1700000000000,"note":"see attachment","views":42,"choice":"s",
	"address":{"city":"Paris","geo":{"lat":48.85,"hits":3}}}`

// plainDoc is benchDoc without the values that send a document the long
// way (bytes, fixed, a three-way union): what decodeDirect takes.
const plainDoc = `{"subject":"quarterly report","count":12,"size":123456,"score":0.5,"ratio":0.25,"unread":false,
	"status":"READ","tags":["work","finance","q3"],"attrs":{"a":1,"b":2},
	"sent":1700000000000,"note":"see attachment","views":42,
	"address":{"city":"Paris","geo":{"lat":48.85,"hits":3}}}`

func BenchmarkDecodeJSON(b *testing.B) {
	tb := mustTable(b, messageSchema)
	for _, c := range []struct {
		name string
		body string
		fn   func([]byte) (Document, error)
	}{
		{"mixed", benchDoc, tb.DecodeJSON},
		{"plain", plainDoc, tb.DecodeJSON},
		{"plain-long", plainDoc, tb.decodeJSONLong},
	} {
		b.Run(c.name, func(b *testing.B) {
			body := []byte(c.body)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.fn(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkEncodeDecode(b *testing.B) {
	tb := mustTable(b, messageSchema)
	doc, err := tb.DecodeJSON([]byte(benchDoc))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		bin, err := tb.Encode(doc)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tb.Decode(bin, 1, 1); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeResolved(b *testing.B) {
	const v2 = `{"type":"record","name":"Message","namespace":"mail","fields":[{"name":"subject","type":"string"},{"name":"extra","type":"int","default":1}]}`
	def, _, err := NextVersion(tableDef(`{"type":"record","name":"Message","namespace":"mail","fields":[{"name":"subject","type":"string"}]}`), []byte(v2))
	if err != nil {
		b.Fatal(err)
	}
	tb, err := Compile(def)
	if err != nil {
		b.Fatal(err)
	}
	bin := []byte{4, 'h', 'i'}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tb.Decode(bin, 1, 2); err != nil {
			b.Fatal(err)
		}
	}
}

// ycsbRecord is YCSB's record: ten 100-byte string fields, the documents
// of bench/ycsb.
func ycsbRecord(tb testing.TB) (*Table, []byte) {
	tb.Helper()
	var fields, doc []string
	for i := range 10 {
		fields = append(fields, fmt.Sprintf(`{"name":"field%d","type":"string","default":""}`, i))
		doc = append(doc, fmt.Sprintf(`"field%d":%q`, i, strings.Repeat(string(rune('!'+i)), 50)+`"\ and more text to make it 100 b`+strings.Repeat("x", 16)))
	}
	t := mustTable(tb, `{"type":"record","name":"UserRecord","fields":[`+strings.Join(fields, ",")+`]}`)
	d, err := t.DecodeJSON([]byte("{" + strings.Join(doc, ",") + "}"))
	if err != nil {
		tb.Fatal(err)
	}
	bin, err := t.Encode(d)
	if err != nil {
		tb.Fatal(err)
	}
	return t, bin
}

// BenchmarkAppendAvroAsJSON is the read path's rendering of a stored
// document as JSON (GET of one document without a projection).
func BenchmarkAppendAvroAsJSON(b *testing.B) {
	t, bin := ycsbRecord(b)
	b.SetBytes(int64(len(bin)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := t.AppendAvroAsJSON(nil, bin, 1, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncode is the write path's encoding of a normalized document
// (PUT, and PATCH after the patch is applied).
func BenchmarkEncode(b *testing.B) {
	t, bin := ycsbRecord(b)
	doc, err := t.Decode(bin, 1, 1)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := t.Encode(doc); err != nil {
			b.Fatal(err)
		}
	}
}
