package builder

import (
	"reflect"
	"testing"
)

// FuzzFromJSONPathsAgree holds the fast JSON Lines path equal to the
// slow one: the same key and document, or the same failure.
func FuzzFromJSONPathsAgree(f *testing.F) {
	for _, s := range []string{
		`{"user":"x","n":1,"kind":"k"}`,
		` { "kind" : "k" , "n" : -7 , "user" : "a b" , "score" : 1.5 } `,
		`{"user":"x","n":01,"kind":"k"}`,
		`{"user":"x","n":1.0,"kind":"k"}`,
		`{"user":"x\u0041","n":1,"kind":"k"}`,
		`{"user":"x","user":"y","n":1,"kind":"k"}`,
		`{"user":"x","n":1,"kind":"k","kind":"j"}`,
		`{"user":"x","n":1,"kind":"k"} x`,
		`{"user":"x","n":1,"kind":"k",}`,
		`{"user":"x","n":1,"kind":["a",{"b":"}"}]}`,
		`{"user":"x","n":1,"kind":"\"}"}`,
		`{"user":"x","n":,"kind":"k"}`,
		`{"user":"x","n":1,"kind":"k","count":2147483648}`,
		`{}`, `[]`, `null`, `{"user":null,"n":1,"kind":"k"}`,
		"{\"user\":\"\xff\",\"n\":1,\"kind\":\"k\"}",
		"{\"user\":\"x\",\"n\":1,\"kind\":\"\xff\"}",
	} {
		f.Add([]byte(s))
	}
	tg := testTarget(f, 4)
	f.Fuzz(func(t *testing.T, line []byte) {
		k1, d1, e1 := tg.fromJSON(line)
		k2, d2, e2 := tg.fromJSONSlow(line)
		if !reflect.DeepEqual(k1, k2) || !reflect.DeepEqual(d1, d2) || (e1 == nil) != (e2 == nil) || (e1 != nil && e1.Error() != e2.Error()) {
			t.Fatalf("%q:\nfast %v %v %v\nslow %v %v %v", line, k1, d1, e1, k2, d2, e2)
		}
	})
}
