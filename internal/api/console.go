package api

import (
	"net/http"

	"github.com/doppio-db/doppio/internal/console"
	"github.com/doppio-db/doppio/internal/problem"
)

// console serves the web console's files (internal/console): public,
// since they hold no data; every call the pages make is a REST request
// under the user's own credentials.
func (s *Server) console(w http.ResponseWriter, r *http.Request, p params) error {
	a, ok := console.Lookup(p.name)
	if !ok {
		return problem.New(problem.NotFound, "the console has no file %q", p.name)
	}
	h := w.Header()
	h.Set("Content-Type", a.Type)
	h.Set("ETag", a.ETag)
	// Revalidated on every load, so a node upgraded in place serves its
	// own pages at once; unchanged files answer 304.
	h.Set("Cache-Control", "no-cache")
	h.Set("Content-Security-Policy", console.SecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	if etagMatches(r.Header.Get("If-None-Match"), a.ETag) {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	if r.Method == http.MethodHead {
		return nil
	}
	_, err := w.Write(a.Body)
	return err
}

// etagMatches reports whether an If-None-Match value names etag.
func etagMatches(inm, etag string) bool {
	if inm == "" {
		return false
	}
	for _, t := range splitETags(inm) {
		if t == "*" || t == etag || t == "W/"+etag {
			return true
		}
	}
	return false
}
