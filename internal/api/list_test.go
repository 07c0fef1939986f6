package api

import (
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/doppio-db/doppio/internal/keys"
)

// writeList must answer byte for byte what encoding/json writes for the
// same list, keys with characters JSON escapes included.
func TestWriteListMatchesEncodingJSON(t *testing.T) {
	for _, out := range []listBody{
		{Documents: []listItem{}},
		{Documents: []listItem{
			{Key: keys.Tuple{"a\"b<\u2028>", int64(-7)}, Document: json.RawMessage(`{"x":1,"s":"\u00e9"}`)},
			{Key: keys.Tuple{"m"}, Document: json.RawMessage(`{}`)},
			{Key: keys.Tuple{"plain key-1", int64(1) << 62, "é", "a&b", "\x7f"}, Document: json.RawMessage(`[]`)},
		}, Next: "AbC-_9"},
	} {
		rec := httptest.NewRecorder()
		if err := writeList(rec, out); err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(out)
		if err != nil {
			t.Fatal(err)
		}
		if got := rec.Body.String(); got != string(want)+"\n" {
			t.Fatalf("writeList wrote\n%s\nencoding/json writes\n%s", got, want)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Fatalf("Content-Type %q", ct)
		}
		if cl := rec.Header().Get("Content-Length"); cl != strconv.Itoa(rec.Body.Len()) {
			t.Fatalf("Content-Length %q for %d bytes", cl, rec.Body.Len())
		}
	}
}
