package api_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestBodiesOfEitherFraming: a document sent with a Content-Length and
// the same document sent chunked (no declared length) are both read whole,
// and a body over the limit is refused with 413 either way, changing
// nothing.
func TestBodiesOfEitherFraming(t *testing.T) {
	db := newDB(t)
	big := `{"name":"` + strings.Repeat("x", 2<<20) + `"}`
	for _, c := range []struct {
		name    string
		chunked bool
	}{{"length", false}, {"chunked", true}} {
		put := func(key, body string) int {
			t.Helper()
			var rd io.Reader = strings.NewReader(body)
			if c.chunked {
				rd = struct{ io.Reader }{rd} // no length: sent chunked
			}
			req, err := http.NewRequest("PUT", fmt.Sprintf("http://%s/%s/Mailbox/%s", addr, db, key), rd)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			io.Copy(io.Discard, resp.Body)
			if (req.ContentLength == -1 || req.ContentLength == 0) != c.chunked {
				t.Fatalf("%s: request sent with Content-Length %d", c.name, req.ContentLength)
			}
			return resp.StatusCode
		}
		name := strings.Repeat("long name ", 300)
		if got := put(c.name, `{"name":"`+name+`"}`); got != 201 {
			t.Fatalf("%s: PUT answered %d, want 201", c.name, got)
		}
		if m := decode(t, send(t, "GET", "/"+db+"/Mailbox/"+c.name, nil).body); m["name"] != name {
			t.Fatalf("%s: read back %q", c.name, m["name"])
		}
		if got := put(c.name+"-big", big); got != 413 {
			t.Fatalf("%s: PUT of %d bytes answered %d, want 413", c.name, len(big), got)
		}
		expect(t, send(t, "GET", "/"+db+"/Mailbox/"+c.name+"-big", nil), 404, c.name+": the refused document")
	}
}
