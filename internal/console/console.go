// Package console holds the web console: static pages, embedded in the
// binary, that show and operate a cluster through the public REST API
// alone, with the credentials of the user in the browser.
//
// Every node and router serves the files at /_console (internal/api);
// the pages need no CDN, no build step and no server-side state. A page
// is a JavaScript module under assets/ that renders from REST answers:
// the overview and long operations from GET /_cluster, schemas from
// /_schemas, documents and queries from the document routes, the change
// stream from GET /_changes/{db}, datastreams from /_datastreams, charts
// from /metrics parsed in the browser. In secure mode the console logs
// in with POST /_auth/login and keeps the session token in the tab's
// sessionStorage, never in a cookie, so no other site can use it.
package console

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"path"
)

//go:embed assets
var files embed.FS

// Asset is one file of the console.
type Asset struct {
	Body []byte
	// Type is the file's media type, for Content-Type.
	Type string
	// ETag is a strong entity tag of Body.
	ETag string
}

// Index is the name of the console's page, served at /_console itself.
const Index = "index.html"

var assets = load()

func load() map[string]Asset {
	out := map[string]Asset{}
	entries, err := fs.ReadDir(files, "assets")
	if err != nil {
		panic(err) // the embedded directory is part of the binary
	}
	for _, e := range entries {
		b, err := files.ReadFile("assets/" + e.Name())
		if err != nil {
			panic(err)
		}
		sum := sha256.Sum256(b)
		out[e.Name()] = Asset{Body: b, Type: mediaType(e.Name()), ETag: `"` + hex.EncodeToString(sum[:8]) + `"`}
	}
	return out
}

// mediaType is a file's Content-Type by its extension; the JavaScript
// modules need a JavaScript type, or the browser refuses to run them.
func mediaType(name string) string {
	switch path.Ext(name) {
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".html":
		return "text/html; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	}
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return "application/octet-stream"
}

// Lookup returns the console's file name ("" for the page itself).
func Lookup(name string) (Asset, bool) {
	if name == "" {
		name = Index
	}
	a, ok := assets[name]
	return a, ok
}

// Names lists the console's files.
func Names() []string {
	out := make([]string, 0, len(assets))
	for n := range assets {
		out = append(out, n)
	}
	return out
}

// SecurityPolicy is the Content-Security-Policy of every console answer:
// scripts, styles and requests only from the node that served the page,
// and no framing, so neither injected markup nor another site can act
// with the user's token.
const SecurityPolicy = "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
