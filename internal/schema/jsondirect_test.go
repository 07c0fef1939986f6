package schema

import (
	"reflect"
	"testing"
)

// directCases are documents of messageSchema: the first ones take the
// direct way, the others (each with what sends it the long way) must not
// be answered by it.
var directCases = []struct {
	body   string
	direct bool
}{
	{benchDoc, true},
	{`{"subject":"x","choice":7}`, true},
	{`{"subject":"x","choice":"7"}`, true},
	{`{"subject":"x","choice":2147483648}`, false}, // fits no branch
	{`{"subject":"x","choice":true}`, false},       // fits no branch
	{`{"subject":"x","choice":null}`, false},       // no null branch
	{`{"subject":"x","choice":{"x":1}}`, false},    // an object in a union
	{`{"subject":"x","choice":{"int":1}}`, false},  // a union's JSON form
	{`{"subject":"x","blob":"AAECAwQ=","hash":"AQIDBA=="}`, true},
	{`{"subject":"x","hash":"AQID"}`, false}, // 3 bytes for a fixed of 4
	{`{"subject":"x","blob":"AAE"}`, false},  // not base64
	{`{"subject":"x"}`, true},
	{` {"subject" : "héllo \"w\" \u00e9\ud83d\ude00", "count":-2147483648, "size":-9223372036854775808,
	   "score":0.5, "ratio":1, "unread":false, "status":"READ", "tags":["a","b"], "attrs":{"a":1,"":-3},
	   "sent":1700000000000, "note":null, "views":7, "address":{"city":"Paris","geo":{"lat":48.85}},
	   "next":{"subject":"y","next":null}} `, true},
	{`{"subject":"x","tags":[],"attrs":{}}`, true},
	{`{"subject":"x","size":9223372036854775807}`, true},
	{`{"subject":"x","size":9223372036854775808}`, false},     // out of range
	{`{"subject":"x","size":-9223372036854775809}`, false},    // out of range
	{`{"subject":"x","size":12345678901234567890123}`, false}, // out of range
	{`{"subject":"x","count":2147483648}`, false},             // past an int
	{`{"subject":"x","count":1e3}`, false},                    // an exponent
	{`{"subject":"x","count":1.0}`, false},                    // a fraction
	{`{"subject":"x","count":01}`, false},                     // malformed
	{`{"subject":"x","count":-}`, false},                      // malformed
	{`{"subject":"x","subject":"y"}`, false},                  // a name twice
	{`{"sub\u006aect":"x"}`, false},                           // an escaped name
	{`{"subject":"x","nope":1}`, false},                       // unknown field
	{`{"count":1}`, false},                                    // a required field missing
	{`{"subject":"x","status":"GONE"}`, false},                // not a symbol
	{`{"subject":"x","attrs":{"a":1,"a":2}}`, false},          // a map key twice
	{`{"subject":"x","note":{"string":"y"}}`, false},          // a union's JSON form
	{`{"subject":"x","score":1e39}`, false},                   // past a float
	{`{"subject":"x","unread":nul}`, false},                   // malformed literal
	{`{"subject":"x"} x`, false},                              // trailing data
	{`{"subject":"x",}`, false},                               // a trailing comma
	{`[{"subject":"x"}]`, false},                              // not an object
	{``, false},
	{`{"subject":"x","tags":["a",1]}`, false}, // a number for a string
	{"{\"subject\":\"\xff\"}", true},          // an invalid byte: U+FFFD, as the long way
}

// TestDecodeDirect checks which documents the direct way takes, and that
// it gives what the long way gives for each of them.
func TestDecodeDirect(t *testing.T) {
	tb := mustTable(t, messageSchema)
	for _, c := range directCases {
		got, ok := decodeDirect(tb.latest().root, []byte(c.body))
		if ok != c.direct {
			t.Errorf("%s: taken directly = %v, want %v", c.body, ok, c.direct)
			continue
		}
		want, err := tb.decodeJSONLong([]byte(c.body))
		if ok && (err != nil || !reflect.DeepEqual(got, want)) {
			t.Errorf("%s: direct\n %#v\nlong way\n %#v (%v)", c.body, got, want, err)
		}
	}
}

// FuzzDecodeDirect holds the direct way to the long one: whatever it takes,
// the long way takes too and gives the same document.
func FuzzDecodeDirect(f *testing.F) {
	for _, c := range directCases {
		f.Add([]byte(c.body))
	}
	tb := mustTable(f, messageSchema)
	f.Fuzz(func(t *testing.T, body []byte) {
		got, ok := decodeDirect(tb.latest().root, body)
		if !ok {
			return
		}
		want, err := tb.decodeJSONLong(body)
		if err != nil {
			t.Fatalf("%q: taken directly, refused the long way: %v", body, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: direct\n %#v\nlong way\n %#v", body, got, want)
		}
	})
}
