package api

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/doppio-db/doppio/internal/auth"
)

func parseOpenAPI(t *testing.T) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := yaml.Unmarshal(OpenAPI, &doc); err != nil {
		t.Fatalf("openapi.yaml does not parse: %v", err)
	}
	return doc
}

// TestOpenAPIMatchesRoutes guards that the OpenAPI document describes
// exactly the served routes: every (method, path) of routes() is documented
// and nothing else is.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	doc := parseOpenAPI(t)
	paths, ok := doc["paths"].(map[string]any)
	if !ok {
		t.Fatalf("openapi.yaml has no paths object")
	}
	documented := map[string]bool{}
	for path, item := range paths {
		ops, ok := item.(map[string]any)
		if !ok {
			t.Fatalf("path %s is not an object", path)
		}
		for m := range ops {
			if slices.Contains(openAPIMethods, m) {
				documented[strings.ToUpper(m)+" "+path] = true
			}
		}
	}
	served := map[string]bool{}
	for _, r := range routes() {
		served[r.method+" "+r.pattern] = true
	}
	var missing, extra []string
	for k := range served {
		if !documented[k] {
			missing = append(missing, k)
		}
	}
	for k := range documented {
		if !served[k] {
			extra = append(extra, k)
		}
	}
	slices.Sort(missing)
	slices.Sort(extra)
	if len(missing) > 0 {
		t.Errorf("routes not in openapi.yaml:\n  %s", strings.Join(missing, "\n  "))
	}
	if len(extra) > 0 {
		t.Errorf("openapi.yaml operations that are not routes:\n  %s", strings.Join(extra, "\n  "))
	}
}

// TestOpenAPIIsValid checks what a client generator relies on: the version,
// an operationId (unique) and responses on every operation, declared path
// parameters, and $refs that resolve.
func TestOpenAPIIsValid(t *testing.T) {
	doc := parseOpenAPI(t)
	if v, _ := doc["openapi"].(string); !strings.HasPrefix(v, "3.1.") {
		t.Errorf("openapi = %q, want 3.1.x", v)
	}
	if info, _ := doc["info"].(map[string]any); info["title"] == nil || info["version"] == nil {
		t.Errorf("info needs title and version")
	}
	paths, _ := doc["paths"].(map[string]any)
	ids := map[string]string{}
	for path, item := range paths {
		ops := item.(map[string]any)
		declared := map[string]bool{}
		collect := func(ps any) {
			list, _ := ps.([]any)
			for _, p := range list {
				pm := resolve(t, doc, p)
				if pm["in"] == "path" {
					declared[pm["name"].(string)] = true
				}
			}
		}
		collect(ops["parameters"])
		for m, op := range ops {
			if !slices.Contains(openAPIMethods, m) {
				continue
			}
			where := strings.ToUpper(m) + " " + path
			o, ok := op.(map[string]any)
			if !ok {
				t.Errorf("%s: operation is not an object", where)
				continue
			}
			id, _ := o["operationId"].(string)
			switch {
			case id == "":
				t.Errorf("%s: no operationId", where)
			case ids[id] != "":
				t.Errorf("%s: operationId %q already used by %s", where, id, ids[id])
			default:
				ids[id] = where
			}
			resps, _ := o["responses"].(map[string]any)
			if len(resps) == 0 {
				t.Errorf("%s: no responses", where)
			}
			opDeclared := map[string]bool{}
			for k := range declared {
				opDeclared[k] = true
			}
			list, _ := o["parameters"].([]any)
			for _, p := range list {
				pm := resolve(t, doc, p)
				if pm["in"] == "path" {
					opDeclared[pm["name"].(string)] = true
				}
			}
			for _, seg := range strings.Split(path, "/") {
				if strings.HasPrefix(seg, "{") {
					name := strings.Trim(seg, "{}")
					if !opDeclared[name] {
						t.Errorf("%s: path parameter %s is not declared", where, name)
					}
				}
			}
		}
	}
	// Every $ref points at something.
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch x := v.(type) {
		case map[string]any:
			if ref, ok := x["$ref"].(string); ok {
				if _, err := lookup(doc, ref); err != nil {
					t.Errorf("%s: %v", at, err)
				}
			}
			for k, c := range x {
				walk(c, at+"/"+k)
			}
		case []any:
			for i, c := range x {
				walk(c, fmt.Sprintf("%s/%d", at, i))
			}
		}
	}
	walk(doc, "#")
}

func resolve(t *testing.T, doc map[string]any, v any) map[string]any {
	t.Helper()
	m, _ := v.(map[string]any)
	if ref, ok := m["$ref"].(string); ok {
		r, err := lookup(doc, ref)
		if err != nil {
			t.Fatal(err)
		}
		m, _ = r.(map[string]any)
	}
	return m
}

func lookup(doc map[string]any, ref string) (any, error) {
	if !strings.HasPrefix(ref, "#/") {
		return nil, fmt.Errorf("$ref %q is not local", ref)
	}
	var cur any = doc
	for _, seg := range strings.Split(ref[2:], "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("$ref %q does not resolve", ref)
		}
		if cur, ok = m[seg]; !ok {
			return nil, fmt.Errorf("$ref %q does not resolve", ref)
		}
	}
	return cur, nil
}

// TestPrivilegesMatchOpenAPI guards the privilege table: every operation
// of the OpenAPI document states x-doppio-privilege, and it is the
// privilege its route needs, so no route escapes authorization unnoticed.
func TestPrivilegesMatchOpenAPI(t *testing.T) {
	paths, _ := parseOpenAPI(t)["paths"].(map[string]any)
	served := map[string]*route{}
	for _, r := range routes() {
		served[r.method+" "+r.pattern] = r
		if r.priv == auth.Closed {
			t.Errorf("%s %s names no privilege: it is closed to every user", r.method, r.pattern)
		}
	}
	for path, item := range paths {
		for m, op := range item.(map[string]any) {
			if !slices.Contains(openAPIMethods, m) {
				continue
			}
			where := strings.ToUpper(m) + " " + path
			name, _ := op.(map[string]any)["x-doppio-privilege"].(string)
			p, ok := auth.ParsePrivilege(name)
			if !ok {
				t.Errorf("%s: x-doppio-privilege %q is not a privilege", where, name)
				continue
			}
			rt := served[where]
			if rt == nil {
				continue // TestOpenAPIMatchesRoutes reports it
			}
			if rt.priv != p {
				t.Errorf("%s: the route needs %s, the document says %s", where, rt.priv, p)
			}
			if p.PerDatabase() && !strings.Contains(path, "{db}") {
				t.Errorf("%s: privilege %s needs a {db} in the path", where, p)
			}
		}
	}
}

// TestOpenAPIMarksNodeOnlyRoutes: exactly the operations of node-only
// routes carry x-doppio-node-only, so a reader (and the privilege table)
// can tell what the REST port never serves.
func TestOpenAPIMarksNodeOnlyRoutes(t *testing.T) {
	paths, _ := parseOpenAPI(t)["paths"].(map[string]any)
	for _, r := range routes() {
		op, _ := paths[r.pattern].(map[string]any)[strings.ToLower(r.method)].(map[string]any)
		if op == nil {
			t.Errorf("%s %s is not documented", r.method, r.pattern)
			continue
		}
		if marked, _ := op["x-doppio-node-only"].(bool); marked != r.nodeOnly {
			t.Errorf("%s %s: x-doppio-node-only is %v, the route is node-only: %v", r.method, r.pattern, marked, r.nodeOnly)
		}
	}
}
