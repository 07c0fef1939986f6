package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
)

// stdlibJSON is what parseJSON must equal: encoding/json's Decoder with
// UseNumber, one value, nothing but white space after it.
func stdlibJSON(body []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil, false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, false
	}
	return v, true
}

func checkLikeStdlib(t *testing.T, body []byte) {
	t.Helper()
	want, ok := stdlibJSON(body)
	got, err := parseJSON(body)
	if ok != (err == nil) {
		t.Fatalf("%q: parseJSON err %v, encoding/json ok %v", body, err, ok)
	}
	if ok && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: parseJSON %#v, encoding/json %#v", body, got, want)
	}
}

// TestParseJSONIsEncodingJSON: values, white space, escapes, surrogate
// pairs and lone surrogates, invalid UTF-8, repeated names, numbers at
// the grammar's edges, nesting at the depth limit, and malformed inputs
// decode (or fail) exactly as encoding/json decodes them.
func TestParseJSONIsEncodingJSON(t *testing.T) {
	for _, s := range []string{
		`{}`, `[]`, ` {"a" : [1, -2.5e+3, 0, -0, 1E9, true, false, null, "x"] } `, "\t\r\n{\"a\":{}}\n",
		`"plain"`, `"é\u00e9\ud83d\ude00\u2028"`, `"\ud83d"`, `"\ude00x"`, `"\ud83d\u0041"`, `"\ud83d\ud83d\ude00"`, `"\ud83d\"`, `"\ud83d\u12"`,
		"\"a\xffb\xe2\x82c\"", `"\"\\\/\b\f\n\r\t"`, `{"a":1,"a":2}`, `{"":0}`,
		`0`, `-0.0e-0`, `12345678901234567890123`, `1.`, `.5`, `01`, `-`, `+1`, `1e`, `1e+`, `0x1`, `NaN`,
		``, ` `, `{`, `{"a"`, `{"a":`, `{"a":1,}`, `[1,]`, `[1 2]`, `{"a" 1}`, `{a:1}`, `tru`, `nul`, `falsey`, `nullx`,
		`"\x"`, `"\u12G4"`, "\"a\x01\"", `"unterminated`, `{} {}`, `[] x`, "\xef\xbb\xbf{}",
		strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
		strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
		strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000),
	} {
		checkLikeStdlib(t, []byte(s))
	}
}

// TestParseJSONErrorsSayWhereAndWhy: a syntax error names the byte and
// the character as encoding/json does, at its offset.
func TestParseJSONErrorsSayWhereAndWhy(t *testing.T) {
	for in, want := range map[string]string{
		`{"subject":`:  "unexpected end of JSON input (at byte 11)",
		`{"a":1,}`:     "invalid character '}' looking for beginning of object key string (at byte 7)",
		`[1 2]`:        "invalid character '2' after array element (at byte 3)",
		`{"a":tru}`:    "invalid character '}' in literal true (expecting 'e') (at byte 8)",
		"\"a\x01\"":    `invalid character '\x01' in string literal (at byte 2)`,
		`1.x`:          "invalid character 'x' after decimal point in numeric literal (at byte 2)",
		`{"a":1} {}`:   "unexpected data after the top-level value",
		` `:            "empty body: expected a JSON object",
		`"\q"`:         `invalid character 'q' in string escape code (at byte 2)`,
		"\xff":         `invalid character '\xff' looking for beginning of value (at byte 0)`,
		`{"a":'x'}`:    `invalid character '\'' looking for beginning of value (at byte 5)`,
		`{"a":"\u12"}`: `invalid character '"' in \u hexadecimal character escape (at byte 10)`,
	} {
		if _, err := parseJSON([]byte(in)); err == nil || err.Error() != want {
			t.Errorf("%q: %v, want %q", in, err, want)
		}
	}
}

func FuzzParseJSON(f *testing.F) {
	for _, s := range []string{
		patchDoc, `{"a":[1,{"b":"\ud83d\ude00"}],"c":-1.5e-3}`, `"\ud83d\u0041"`, "\"\xff\"", `[1,]`, `{"a":1}x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkLikeStdlib(t, body) })
}

// BenchmarkParseJSON: parseJSON and the encoding/json decoding it
// replaced, on a message document and on YCSB's record of ten 100-byte
// strings.
func BenchmarkParseJSON(b *testing.B) {
	var fields []string
	for i := range 10 {
		fields = append(fields, fmt.Sprintf(`"field%d":%q`, i, strings.Repeat(string(rune('a'+i)), 100)))
	}
	for name, body := range map[string][]byte{"message": []byte(benchDoc), "ycsb": []byte("{" + strings.Join(fields, ",") + "}")} {
		b.Run(name+"/parseJSON", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := parseJSON(body); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/encoding-json", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := stdlibJSON(body); !ok {
					b.Fatal("does not decode")
				}
			}
		})
	}
}
