package node

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/redistest"
)

// TestStalenessBoundedReadsAreServedByTheCacheTier drives one node with a
// real Redis and a hot-key cache: reads without X-Doppio-Staleness never
// touch the tier; bounded ones miss, fill both tiers, then hit; the
// answer is rendered as the node renders it (projection, 304); a delete
// is answered 404 once the bound has passed and never comes back.
func TestStalenessBoundedReadsAreServedByTheCacheTier(t *testing.T) {
	rc := redistest.Start(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n, err := Start(ctx, Config{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0",
		Cache: CacheConfig{Redis: rc.Addrs(), LocalBytes: 1 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	base := "http://" + n.Addr()
	do := func(method, path, body string, hdr ...string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	for _, s := range []struct{ method, path, body string }{
		{"PUT", "/_schemas/db", `{"partitions":2,"replicas":1}`},
		{"PUT", "/_schemas/db/T", `{"key":[{"name":"id","type":"string"}],"cache":{"ttl":"1m"},
		  "schema":{"type":"record","name":"T","fields":[{"name":"v","type":"long"},{"name":"w","type":"string"}]}}`},
		{"PUT", "/_schemas/db/Plain", `{"key":[{"name":"id","type":"string"}],"schema":{"type":"record","name":"P","fields":[{"name":"v","type":"long"}]}}`},
		{"PUT", "/db/T/a", `{"v":7,"w":"x"}`},
		{"PUT", "/db/Plain/a", `{"v":1}`},
	} {
		if resp, b := do(s.method, s.path, s.body); resp.StatusCode >= 300 {
			t.Fatalf("%s %s: %d %s", s.method, s.path, resp.StatusCode, b)
		}
	}
	dbsize := func() string {
		v, err := rc.Primary.Do("DBSIZE")
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	// Without the header: today's read, no tier.
	resp, body := do("GET", "/db/T/a", "")
	if resp.StatusCode != 200 || resp.Header.Get("X-Doppio-Cache") != "" || resp.Header.Get("X-Doppio-As-Of") == "" {
		t.Fatalf("unbounded read: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	if got := dbsize(); got != "0" {
		t.Fatalf("an unbounded read put %s keys in Redis", got)
	}
	// Not cacheable: bypass.
	if resp, _ := do("GET", "/db/Plain/a", "", "X-Doppio-Staleness", "5s"); resp.Header.Get("X-Doppio-Cache") != "bypass" {
		t.Fatalf("read of a table that is not cacheable: X-Doppio-Cache %q, want bypass", resp.Header.Get("X-Doppio-Cache"))
	}

	first, firstBody := do("GET", "/db/T/a", "", "X-Doppio-Staleness", "5s")
	if first.StatusCode != 200 || first.Header.Get("X-Doppio-Cache") != "miss" || first.Header.Get("X-Doppio-Age") != "" {
		t.Fatalf("first bounded read: %d %v", first.StatusCode, first.Header)
	}
	hit, hitBody := do("GET", "/db/T/a", "", "X-Doppio-Staleness", "5s")
	if hit.Header.Get("X-Doppio-Cache") != "local" || hit.Header.Get("X-Doppio-Age") == "" {
		t.Fatalf("second bounded read: %v, want a local hit with an age", hit.Header)
	}
	for _, h := range []string{"ETag", "Last-Modified", "X-Doppio-SCN", "X-Doppio-Schema-Version", "Content-Type"} {
		if first.Header.Get(h) != hit.Header.Get(h) {
			t.Errorf("%s: %q from the node, %q from the cache", h, first.Header.Get(h), hit.Header.Get(h))
		}
	}
	if hitBody != firstBody {
		t.Errorf("cached body %q, node's %q", hitBody, firstBody)
	}
	deadline := time.Now().Add(5 * time.Second)
	for dbsize() == "0" {
		if time.Now().After(deadline) {
			t.Fatal("the miss never filled Redis")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, b := do("GET", "/db/T/a?fields=w", "", "X-Doppio-Staleness", "5s"); strings.TrimSpace(b) != `{"w":"x"}` {
		t.Errorf("projection from the cache: %s", b)
	}
	if r, _ := do("GET", "/db/T/a", "", "X-Doppio-Staleness", "5s", "If-None-Match", first.Header.Get("ETag")); r.StatusCode != 304 || r.Header.Get("X-Doppio-Cache") != "local" {
		t.Errorf("conditional read from the cache: %d %v, want 304", r.StatusCode, r.Header)
	}

	// A router with its own hot-key cache asks the node for the record
	// on a miss and renders the same answer; then its cache answers.
	rt, err := StartRouter(ctx, RouterConfig{HTTPAddr: "127.0.0.1:0", EtcdEndpoints: n.etcdEndpoints(),
		Cache: CacheConfig{LocalBytes: 1 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	nodeBase := base
	base = "http://" + rt.Addr()
	for i, want := range []string{"miss", "local"} {
		r, b := do("GET", "/db/T/a", "", "X-Doppio-Staleness", "5s")
		if r.StatusCode != 200 || r.Header.Get("X-Doppio-Cache") != want || b != firstBody {
			t.Fatalf("router read %d: %d %q %s, want %s and the node's body", i, r.StatusCode, r.Header.Get("X-Doppio-Cache"), b, want)
		}
		for _, h := range []string{"ETag", "Last-Modified", "X-Doppio-SCN", "X-Doppio-Schema-Version"} {
			if first.Header.Get(h) != r.Header.Get(h) {
				t.Errorf("router read %d: %s %q, node's %q", i, h, r.Header.Get(h), first.Header.Get(h))
			}
		}
	}
	if r, _ := do("GET", "/db/T/nobody", "", "X-Doppio-Staleness", "5s"); r.StatusCode != 404 || r.Header.Get("X-Doppio-SCN") == "" || r.Header.Get("X-Doppio-Cache") != "miss" {
		t.Fatalf("router read of an absent document: %d %v", r.StatusCode, r.Header)
	}
	// Its tombstone answers the next read, saying so.
	if r, _ := do("GET", "/db/T/nobody", "", "X-Doppio-Staleness", "5s"); r.StatusCode != 404 || r.Header.Get("X-Doppio-Cache") != "local" || r.Header.Get("X-Doppio-Age") == "" {
		t.Fatalf("router read of an absent document, again: %d %v", r.StatusCode, r.Header)
	}
	base = nodeBase

	// A delete: a read whose bound starts after it never shows the
	// document, from any tier.
	if r, b := do("DELETE", "/db/T/a", ""); r.StatusCode != 204 {
		t.Fatalf("delete: %d %s", r.StatusCode, b)
	}
	time.Sleep(300 * time.Millisecond)
	for range 3 {
		r, b := do("GET", "/db/T/a", "", "X-Doppio-Staleness", "200ms")
		if r.StatusCode != 404 {
			t.Fatalf("read bounded 200ms, 300ms after the delete: %d %s (%s)", r.StatusCode, b, r.Header.Get("X-Doppio-Cache"))
		}
	}

	// Redis dies: bounded reads are answered by the node.
	rc.Primary.Kill()
	for i := range 30 {
		if r, b := do("PUT", "/db/T/k", `{"v":1,"w":"y"}`); r.StatusCode >= 300 {
			t.Fatalf("put %d: %d %s", i, r.StatusCode, b)
		}
		if r, b := do("GET", "/db/T/k", "", "X-Doppio-Staleness", "1ms"); r.StatusCode != 200 {
			t.Fatalf("read %d with Redis down: %d %s", i, r.StatusCode, b)
		}
	}
}
