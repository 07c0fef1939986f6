package api_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/doppio-db/doppio/internal/console"
)

// TestConsoleServesItsEmbeddedFiles fetches the console's page and every
// file of it over HTTP: the embedded bytes, a media type the browser runs,
// the content security policy, and 304 for a revalidation that matches.
func TestConsoleServesItsEmbeddedFiles(t *testing.T) {
	page := send(t, "GET", "/_console", nil)
	expect(t, page, 200, "GET /_console")
	index, _ := console.Lookup(console.Index)
	if !bytes.Equal(page.body, index.Body) || page.header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("GET /_console: %q, %d bytes; want the embedded index.html", page.header.Get("Content-Type"), len(page.body))
	}
	if got := page.header.Get("Content-Security-Policy"); got != console.SecurityPolicy {
		t.Errorf("Content-Security-Policy %q", got)
	}
	if page.header.Get("Cache-Control") != "no-cache" || page.header.Get("ETag") != index.ETag {
		t.Errorf("Cache-Control %q, ETag %q (want no-cache, %s)", page.header.Get("Cache-Control"), page.header.Get("ETag"), index.ETag)
	}
	wantType := map[string]string{".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8", ".html": "text/html; charset=utf-8"}
	for _, name := range console.Names() {
		a := send(t, "GET", "/_console/"+name, nil)
		expect(t, a, 200, name)
		f, _ := console.Lookup(name)
		ext := name[strings.LastIndex(name, "."):]
		if !bytes.Equal(a.body, f.Body) || a.header.Get("Content-Type") != wantType[ext] {
			t.Errorf("%s: %q, %d bytes; want %q, %d bytes", name, a.header.Get("Content-Type"), len(a.body), wantType[ext], len(f.Body))
		}
		again := send(t, "GET", "/_console/"+name, nil, "If-None-Match", f.ETag)
		if again.status != 304 || len(again.body) != 0 {
			t.Errorf("%s with If-None-Match %s: %d, %d bytes", name, f.ETag, again.status, len(again.body))
		}
	}
	for _, p := range []string{"/_console/missing.js", "/_console/assets/console.js", "/_console/..%2Fconsole.go"} {
		a := send(t, "GET", p, nil)
		if a.status != 404 || a.header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("GET %s: %d %q %s, want a 404 problem", p, a.status, a.header.Get("Content-Type"), a.body)
		}
	}
	if a := send(t, "POST", "/_console", "{}"); a.status != 405 || a.header.Get("Allow") != "GET" {
		t.Errorf("POST /_console: %d, Allow %q", a.status, a.header.Get("Allow"))
	}
}
