package api

import (
	"fmt"
	"strings"
	"testing"

	"github.com/doppio-db/doppio/internal/schema"
	"sigs.k8s.io/yaml"
)

// TestSplitKeysGivesEachKeyPartItsOwnParameter guards the generators'
// form of the document: the spanning {key} path is gone, and for every
// arity from 1 to MaxKeyParts there is one path whose key parts are
// required path parameters key1..keyN, in order, with operation IDs
// suffixed by N and unique across the document.
func TestSplitKeysGivesEachKeyPartItsOwnParameter(t *testing.T) {
	b, err := openAPISplitKeys()
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("the split document does not parse: %v", err)
	}
	paths := doc["paths"].(map[string]any)
	if _, ok := paths[keyPath]; ok {
		t.Fatalf("the split document still has %s", keyPath)
	}
	whole := parseOpenAPI(t)["paths"].(map[string]any)
	if len(paths) != len(whole)-1+schema.MaxKeyParts {
		t.Fatalf("split document has %d paths, want %d", len(paths), len(whole)-1+schema.MaxKeyParts)
	}
	ids := map[string]string{}
	for path, item := range paths {
		for m, op := range item.(map[string]any) {
			if o, ok := op.(map[string]any); ok {
				if id, _ := o["operationId"].(string); id != "" {
					if prev, dup := ids[id]; dup {
						t.Errorf("operationId %s on %s and %s %s", id, prev, m, path)
					}
					ids[id] = m + " " + path
				}
			}
		}
	}
	for n := 1; n <= schema.MaxKeyParts; n++ {
		var segs []string
		for i := 1; i <= n; i++ {
			segs = append(segs, fmt.Sprintf("{key%d}", i))
		}
		path := "/{db}/{table}/" + strings.Join(segs, "/")
		item, ok := paths[path].(map[string]any)
		if !ok {
			t.Fatalf("no path %s", path)
		}
		var keys []string
		for _, p := range item["parameters"].([]any) {
			pm := p.(map[string]any)
			if name, _ := pm["name"].(string); strings.HasPrefix(name, "key") {
				if pm["in"] != "path" || pm["required"] != true {
					t.Errorf("%s: %s is not a required path parameter: %v", path, name, pm)
				}
				keys = append(keys, "{"+name+"}")
			}
		}
		if strings.Join(keys, "/") != strings.Join(segs, "/") {
			t.Errorf("%s: key parameters %v", path, keys)
		}
		for m, want := range map[string]string{"get": "readDocuments", "put": "putDocument", "patch": "patchDocument", "post": "insertDocument", "delete": "deleteDocuments"} {
			op := item[m].(map[string]any)
			if got := op["operationId"]; got != fmt.Sprintf("%s%d", want, n) {
				t.Errorf("%s %s: operationId %v, want %s%d", m, path, got, want, n)
			}
			if op["x-doppio-privilege"] == nil {
				t.Errorf("%s %s lost its privilege", m, path)
			}
		}
	}
}
