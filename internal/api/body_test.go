package api_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
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

// rawExchange sends raw on a connection of its own, half-closes it if
// told to, and reads every answer that comes back until the connection
// closes.
func rawExchange(t *testing.T, raw string, halfClose bool) []*http.Response {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	if halfClose {
		c.(*net.TCPConn).CloseWrite()
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	var out []*http.Response
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return out
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body = io.NopCloser(bytes.NewReader(b))
		out = append(out, resp)
	}
}

// TestAfterAChunkedUploadABadTargetStillGetsProblemJSON: a chunked upload
// is served like any request, so a malformed target sent after it on the
// same connection gets the API's problem+json 400 (before chunked bodies
// were served by internal/http1, the connection went to net/http, which
// answered in plain text).
func TestAfterAChunkedUploadABadTargetStillGetsProblemJSON(t *testing.T) {
	db := newDB(t)
	doc := `{"name":"chunked"}`
	resps := rawExchange(t, fmt.Sprintf("PUT /%s/Mailbox/c1 HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", db, len(doc), doc)+
		fmt.Sprintf("GET /%s/Mailbox/%%zz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", db), false)
	if len(resps) != 2 || resps[0].StatusCode != 201 {
		t.Fatalf("answers %v, want 201 then 400", statuses(resps))
	}
	if resps[1].StatusCode != 400 || resps[1].Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("bad target after a chunked upload: %d %s, want a problem+json 400", resps[1].StatusCode, resps[1].Header.Get("Content-Type"))
	}
	if m := decode(t, send(t, "GET", "/"+db+"/Mailbox/c1", nil).body); m["name"] != "chunked" {
		t.Fatalf("read back %v", m)
	}
}

// TestBodiesCutShortOrMisframedAre400AndWriteNothing: a body that ends
// before its declared length, or whose chunked framing is broken, is the
// client's error (400 problem+json), and nothing is written.
func TestBodiesCutShortOrMisframedAre400AndWriteNothing(t *testing.T) {
	db := newDB(t)
	for key, raw := range map[string]string{
		"short":       "Content-Length: 40\r\n\r\n{\"name\":\"cut\"",
		"bad-chunk":   "Transfer-Encoding: chunked\r\n\r\nzz\r\n{\"name\":\"x\"}\r\n0\r\n\r\n",
		"chunk-short": "Transfer-Encoding: chunked\r\n\r\n40\r\n{\"name\":\"cut\"",
	} {
		resps := rawExchange(t, fmt.Sprintf("PUT /%s/Mailbox/%s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n%s", db, key, raw), true)
		if len(resps) != 1 || resps[0].StatusCode != 400 || resps[0].Header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("%s: answers %v, want one problem+json 400", key, statuses(resps))
		}
		if b, _ := io.ReadAll(resps[0].Body); !strings.Contains(string(b), "the request body cannot be read") {
			t.Errorf("%s: %s", key, b)
		}
		expect(t, send(t, "GET", "/"+db+"/Mailbox/"+key, nil), 404, key+": nothing written")
	}
}

func statuses(resps []*http.Response) []int {
	var out []int
	for _, r := range resps {
		out = append(out, r.StatusCode)
	}
	return out
}

// TestARestoreTableOverTheRequestLimitIsRefusedUnread: the restore route
// is on the public port and takes a backup table in memory whole; like
// every route with a body, it reads at most the request limit (16 MiB; a
// backup table is about 4), and a body declared longer is refused with 413
// before any of it is read.
func TestARestoreTableOverTheRequestLimitIsRefusedUnread(t *testing.T) {
	db := newDB(t)
	resps := rawExchange(t, fmt.Sprintf("POST /_cluster/restore/%s/0?session=s&step=load&from=%s&sha256=%s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n",
		db, db, strings.Repeat("ab", 32), 16<<20+1), true)
	if len(resps) != 1 || resps[0].StatusCode != 413 || resps[0].Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("answers %v, want one problem+json 413", statuses(resps))
	}
}

// TestMalformedHTTPGetsProblemJSONAndWritesNothing: requests net/http
// would refuse before any handler (no Host, a field that does not parse,
// an unsupported transfer coding or version, an Expect other than
// 100-continue, a header too long) get a problem+json answer with the
// precise status and type, and nothing is written.
func TestMalformedHTTPGetsProblemJSONAndWritesNothing(t *testing.T) {
	db := newDB(t)
	put := func(key, fields string) string {
		return fmt.Sprintf("PUT /%s/Mailbox/%s HTTP/1.1\r\n%sContent-Type: application/json\r\nContent-Length: 13\r\n\r\n{\"name\":\"x\"}", db, key, fields)
	}
	for _, c := range []struct {
		key, raw string
		status   int
		slug     string
	}{
		{"nohost", put("nohost", ""), 400, "malformed"},
		{"badfield", put("badfield", "Host: x\r\nX: a\x01b\r\n"), 400, "malformed"},
		{"gzip", strings.Replace(put("gzip", "Host: x\r\nTransfer-Encoding: gzip\r\n"), "Content-Length: 13\r\n", "", 1), 501, "not-implemented"},
		{"h2", strings.Replace(put("h2", "Host: x\r\n"), "HTTP/1.1", "HTTP/2.0", 1), 505, "version-not-supported"},
		{"expect", put("expect", "Host: x\r\nExpect: 200-ok\r\n"), 417, "expectation-failed"},
		{"long", put("long", "Host: x\r\nX: "+strings.Repeat("a", 70<<10)+"\r\n"), 431, "header-too-large"},
	} {
		resps := rawExchange(t, c.raw, false)
		if len(resps) != 1 || resps[0].StatusCode != c.status || resps[0].Header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("%s: answers %v, want one problem+json %d", c.key, statuses(resps), c.status)
		}
		var p problemDoc
		if b, _ := io.ReadAll(resps[0].Body); json.Unmarshal(b, &p) != nil || p.Status != c.status || p.Type != "https://doppio.dev/problems/"+c.slug || p.Detail == "" {
			t.Errorf("%s: problem %s, want type %s", c.key, b, c.slug)
		}
		expect(t, send(t, "GET", "/"+db+"/Mailbox/"+c.key, nil), 404, c.key+": nothing written")
	}
}
