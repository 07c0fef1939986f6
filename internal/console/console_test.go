package console

import (
	"regexp"
	"slices"
	"testing"
)

// TestEveryReferenceResolves reads the page and each module for the files
// they load (/_console/x in the page, './x.js' in imports): every one is
// embedded, so no page breaks on a missing file, and every embedded file
// is used.
func TestEveryReferenceResolves(t *testing.T) {
	names := Names()
	used := map[string]bool{Index: true}
	refs := regexp.MustCompile(`(?:/_console/|from '\./|import\('\./)([a-z]+\.(?:js|css))`)
	for _, name := range names {
		a, _ := Lookup(name)
		for _, m := range refs.FindAllStringSubmatch(string(a.Body), -1) {
			if !slices.Contains(names, m[1]) {
				t.Errorf("%s loads %s, which is not embedded", name, m[1])
			}
			used[m[1]] = true
		}
	}
	for _, name := range names {
		if !used[name] {
			t.Errorf("%s is embedded but nothing loads it", name)
		}
	}
	if len(names) < 10 {
		t.Errorf("embedded files: %v", names)
	}
}

// TestMediaTypes guards the types a browser needs to run the modules.
func TestMediaTypes(t *testing.T) {
	for name, want := range map[string]string{
		"a.js": "text/javascript; charset=utf-8", "a.css": "text/css; charset=utf-8",
		"index.html": "text/html; charset=utf-8", "a.svg": "image/svg+xml", "a.bin": "application/octet-stream",
	} {
		if got := mediaType(name); got != want {
			t.Errorf("mediaType(%q) = %q, want %q", name, got, want)
		}
	}
}
