package schema

import (
	"strings"

	"github.com/doppio-db/doppio/internal/problem"
)

// ParseFields parses a projection "a,b.c" and checks every path against the
// latest version (unknown field: Malformed naming it).
func (t *Table) ParseFields(spec string) ([][]string, error) {
	if spec == "" {
		return nil, problem.Field(problem.Malformed, "fields", "empty projection: list fields as a,b.c")
	}
	var out [][]string
	for item := range strings.SplitSeq(spec, ",") {
		if item == "" {
			return nil, problem.Field(problem.Malformed, "fields", "projection %q has an empty field", spec)
		}
		segs := strings.Split(item, ".")
		rec := t.latest().root
		for i, seg := range segs {
			dotted := strings.Join(segs[:i+1], ".")
			if seg == "" {
				return nil, problem.Field(problem.Malformed, item, "projection field %q has an empty segment", item)
			}
			if rec == nil {
				return nil, problem.Field(problem.Malformed, dotted, "projection field %q: %q is not a record", item, strings.Join(segs[:i], "."))
			}
			fi, ok := rec.fieldIndex[seg]
			if !ok {
				return nil, problem.Field(problem.Malformed, dotted, "unknown field %q in projection", dotted)
			}
			rec = rec.fields[fi].typ.record()
		}
		out = append(out, segs)
	}
	return out, nil
}

// Project returns doc restricted to the given paths. Values are shared with
// doc, not copied.
func Project(doc Document, fields [][]string) Document {
	root := projection{}
	for _, f := range fields {
		root.add(f)
	}
	return root.apply(doc)
}

// projection is a trie of projected paths; a nil subtree means the whole
// value, which absorbs any longer path under it.
type projection map[string]projection

func (p projection) add(path []string) {
	if len(path) == 0 {
		return
	}
	sub, seen := p[path[0]]
	if seen && sub == nil {
		return // the whole value is already projected
	}
	if len(path) == 1 {
		p[path[0]] = nil
		return
	}
	if sub == nil {
		sub = projection{}
		p[path[0]] = sub
	}
	sub.add(path[1:])
}

func (p projection) apply(src map[string]any) map[string]any {
	out := make(map[string]any, len(p))
	for name, sub := range p {
		v, ok := src[name]
		if !ok {
			continue
		}
		if sub == nil {
			out[name] = v
			continue
		}
		// A missing or null record on the way omits the path.
		if child, ok := v.(map[string]any); ok {
			out[name] = sub.apply(child)
		}
	}
	return out
}
