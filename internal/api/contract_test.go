package api

import (
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/problem"
)

// TestOpenAPIListsEveryProblemType holds the Problem schema's list of
// types equal to what the server can answer: every problem.Kind and the
// internal failure, so a generated client can switch on all of them.
func TestOpenAPIListsEveryProblemType(t *testing.T) {
	doc := parseOpenAPI(t)
	p, err := lookup(doc, "#/components/schemas/Problem/properties/type/enum")
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, v := range p.([]any) {
		listed = append(listed, v.(string))
	}
	want := []string{problem.InternalType}
	for _, k := range problem.Kinds() {
		if !slices.Contains(want, k.Type()) {
			want = append(want, k.Type())
		}
	}
	slices.Sort(listed)
	slices.Sort(want)
	if !slices.Equal(listed, want) {
		t.Errorf("Problem.type enum:\n  %s\nwant:\n  %s", strings.Join(listed, "\n  "), strings.Join(want, "\n  "))
	}
}

// TestOpenAPIRequestBodiesHaveExamples guards that every request body a
// generator or a reader meets comes with an example to start from (the
// body or its schema).
func TestOpenAPIRequestBodiesHaveExamples(t *testing.T) {
	doc := parseOpenAPI(t)
	paths, _ := doc["paths"].(map[string]any)
	for path, item := range paths {
		for m, op := range item.(map[string]any) {
			if !slices.Contains(openAPIMethods, m) {
				continue
			}
			body, ok := op.(map[string]any)["requestBody"]
			if !ok {
				continue
			}
			content, _ := resolve(t, doc, body)["content"].(map[string]any)
			for media, mt := range content {
				if !hasExample(t, doc, mt.(map[string]any)) {
					t.Errorf("%s %s: request body %s has no example", strings.ToUpper(m), path, media)
				}
			}
		}
	}
}

// hasExample reports whether a media type object, or the schema it
// names, carries an example.
func hasExample(t *testing.T, doc, mt map[string]any) bool {
	if mt["example"] != nil || mt["examples"] != nil {
		return true
	}
	s := resolve(t, doc, mt["schema"])
	// Opaque bytes (a backup's sstable) have no example worth printing.
	return s["example"] != nil || s["examples"] != nil || s["format"] == "binary"
}

// nodeHeaders pass only between nodes (and routers): clients never send
// or see them, so the description of forwarding names them instead of an
// operation.
var nodeHeaders = []string{"X-Doppio-Forwarded-By", "X-Doppio-Catalog-Revision", "X-Doppio-Caller", "X-Doppio-Not-Applied", "X-Doppio-Idempotency-Op"}

// TestOpenAPIDeclaresEveryHeader finds the Doppio headers (and
// Retry-After) the server's code reads or writes and requires each to be
// declared as a header parameter or a response header of some operation,
// or, for the node-to-node ones, described in the document's introduction.
func TestOpenAPIDeclaresEveryHeader(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`"(X-Doppio-[A-Za-z-]+|Retry-After)"`)
	used := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(src), -1) {
			used[m[1]] = true
		}
	}
	for _, h := range []string{"X-Doppio-Timeout", "X-Doppio-Staleness", "X-Doppio-SCN", "X-Doppio-Schema-Version", "Retry-After", "X-Doppio-Retry-After-Ms"} {
		if !used[h] {
			t.Errorf("the scan of the package's sources misses %s", h)
		}
	}
	doc := parseOpenAPI(t)
	declared := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if x["in"] == "header" {
				if n, ok := x["name"].(string); ok {
					declared[n] = true
				}
			}
			if hs, ok := x["headers"].(map[string]any); ok {
				for n := range hs {
					declared[n] = true
				}
			}
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(doc["paths"])
	walk(doc["components"])
	intro, _ := doc["info"].(map[string]any)["description"].(string)
	for h := range used {
		switch {
		case slices.Contains(nodeHeaders, h):
			if !strings.Contains(intro, "`"+h) {
				t.Errorf("node-to-node header %s is not described in info.description", h)
			}
		case !declared[h]:
			t.Errorf("header %s is not declared by any operation or response", h)
		}
	}
}

// TestOpenAPIDurationPatternsAreTheServers holds the patterns the
// document declares for the duration headers equal to the ones the
// server parses them by, so a generator's valid value is never refused.
func TestOpenAPIDurationPatternsAreTheServers(t *testing.T) {
	doc := parseOpenAPI(t)
	for param, want := range map[string]*regexp.Regexp{"Timeout": positiveDurationPattern, "Staleness": durationPattern} {
		got, err := lookup(doc, "#/components/parameters/"+param+"/schema/pattern")
		if err != nil {
			t.Fatal(err)
		}
		if got != want.String() {
			t.Errorf("%s pattern %q, the server's %q", param, got, want)
		}
	}
	for _, c := range []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{"2s", 2 * time.Second, true}, {"1m30s", 90 * time.Second, true}, {"1.5", 1500 * time.Millisecond, true},
		{"0.5s", 500 * time.Millisecond, true}, {"99999999999h", math.MaxInt64, true},
		{"0s", 0, false}, {"0", 0, false}, {"-1s", 0, false}, {"NaN", 0, false}, {"1e3", 0, false}, {"2 s", 0, false},
	} {
		got, ok := parseDuration(positiveDurationPattern, c.v)
		if got != c.want || ok != c.ok {
			t.Errorf("positive %q: %v %v, want %v %v", c.v, got, ok, c.want, c.ok)
		}
	}
	if d, ok := parseDuration(durationPattern, "0"); d != 0 || !ok {
		t.Errorf("staleness \"0\": %v %v, want 0 true", d, ok)
	}
}
