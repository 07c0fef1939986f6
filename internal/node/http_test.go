package node

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestNodeServesWithNetHTTPAlone: a node started with NetHTTPOnly serves
// the API (a database, a schema, a document written and read back), and
// net/http, not the fast path, answers: a request without Host gets
// net/http's plain-text 400 rather than the fast path's problem+json.
func TestNodeServesWithNetHTTPAlone(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := Start(ctx, Config{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", NetHTTPOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	base := "http://" + n.Addr()
	for _, s := range []struct{ method, path, body string }{
		{"PUT", "/_schemas/db", `{"partitions":1,"replicas":1}`},
		{"PUT", "/_schemas/db/T", `{"key":[{"name":"id","type":"string"}],"schema":{"type":"record","name":"T","fields":[{"name":"v","type":"long"}]}}`},
		{"PUT", "/db/T/a", `{"v":7}`},
	} {
		req, _ := http.NewRequestWithContext(ctx, s.method, base+s.path, strings.NewReader(s.body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			t.Fatalf("%s %s: %d %s", s.method, s.path, resp.StatusCode, b)
		}
	}
	resp, err := http.Get(base + "/db/T/a")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"v":7`) {
		t.Fatalf("GET /db/T/a: %d %s", resp.StatusCode, b)
	}

	c, err := net.Dial("tcp", n.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /db/T/a HTTP/1.1\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err = http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || string(b) != "400 Bad Request: missing required Host header" {
		t.Errorf("no Host: %d %q, want net/http's own 400", resp.StatusCode, b)
	}
}
