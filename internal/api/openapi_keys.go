package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/schema"
	"sigs.k8s.io/yaml"
)

// keyPath is the document path whose {key} spans one or more segments.
const keyPath = "/{db}/{table}/{key}"

// openAPISplitKeys is OpenAPI with keyPath expanded into one path per key
// arity, /{key1} to /{key1}/…/{key8}. OpenAPI has no path parameter that
// spans segments, so a generator percent-encodes the "/" of a {key} and
// the server reads one key part; with one parameter per part, a
// generated client's encoding is the server's. Built once, on first use.
var openAPISplitKeys = sync.OnceValues(func() ([]byte, error) {
	return splitKeys(OpenAPI, schema.MaxKeyParts)
})

// openapi answers GET /_openapi: the document as written, or with
// ?keys=split the form for client generators.
func (s *Server) openapi(w http.ResponseWriter, r *http.Request, _ params) error {
	doc := OpenAPI
	q := r.URL.Query()
	for name := range q {
		if name != "keys" {
			return problem.Field(problem.Malformed, name, "unknown parameter %q; /_openapi takes keys", name)
		}
	}
	if vs, ok := q["keys"]; ok {
		switch v := vs[len(vs)-1]; v {
		case "spanning":
		case "split":
			var err error
			if doc, err = openAPISplitKeys(); err != nil {
				return err
			}
		default:
			return problem.Field(problem.Malformed, "keys", "keys is spanning or split, not %q", v)
		}
	}
	w.Header().Set("Content-Type", "application/yaml")
	_, err := w.Write(doc)
	return err
}

// splitKeys rewrites doc's keyPath into paths of 1 to maxParts key-part
// parameters, each operation's ID suffixed with its arity (putDocument2),
// and says so in the info.
func splitKeys(doc []byte, maxParts int) ([]byte, error) {
	var d map[string]any
	if err := yaml.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	paths, _ := d["paths"].(map[string]any)
	item, ok := paths[keyPath].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("openapi: no path %s", keyPath)
	}
	delete(paths, keyPath)
	path := strings.TrimSuffix(keyPath, "{key}")
	for n := 1; n <= maxParts; n++ {
		path += fmt.Sprintf("{key%d}", n)
		split, err := splitItem(item, n)
		if err != nil {
			return nil, err
		}
		paths[path] = split
		path += "/"
	}
	info, _ := d["info"].(map[string]any)
	if info != nil {
		desc, _ := info["description"].(string)
		info["description"] = desc + "\n\nThis is the form for client generators (`GET /_openapi?keys=split`): " +
			"a document key's parts are separate path parameters, `key1` to `keyN`, " +
			"one path per number of parts, each operation's ID suffixed with it. " +
			"A multi-get's `(a,b,c)` segment is not expressible here; `GET /_openapi` has it.\n"
	}
	return yaml.Marshal(d)
}

// splitItem is a deep copy of the keyPath item for keys of n parts.
func splitItem(item map[string]any, n int) (map[string]any, error) {
	b, err := json.Marshal(item)
	if err != nil {
		return nil, err
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, err
	}
	params, _ := c["parameters"].([]any)
	var out []any
	for _, p := range params {
		if ref, _ := p.(map[string]any)["$ref"].(string); ref == "#/components/parameters/key" {
			for i := 1; i <= n; i++ {
				out = append(out, keyPartParam(i, n))
			}
			continue
		}
		out = append(out, p)
	}
	c["parameters"] = out
	for _, m := range openAPIMethods {
		op, ok := c[m].(map[string]any)
		if !ok {
			continue
		}
		id, _ := op["operationId"].(string)
		op["operationId"] = fmt.Sprintf("%s%d", id, n)
	}
	return c, nil
}

// openAPIMethods are the operation keys of an OpenAPI path item.
var openAPIMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// keyPartParam is the path parameter of key part i of n.
func keyPartParam(i, n int) map[string]any {
	return map[string]any{
		"name":     fmt.Sprintf("key%d", i),
		"in":       "path",
		"required": true,
		"description": fmt.Sprintf("Key part %d of the %d given: all of a table's key parts address one document, "+
			"leading ones a collection. Parsed by the part's key type (`string`: any non-empty UTF-8, "+
			"at most %d bytes, `/` and every other byte percent-encoded; `int`, `long`: an optional `-` then decimal digits).",
			i, n, schema.MaxKeyStringBytes),
		"schema": map[string]any{"type": "string", "minLength": 1},
	}
}
