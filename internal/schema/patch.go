package schema

import (
	"encoding/json"
	"errors"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/doppio-db/doppio/internal/problem"
)

// Patch is a parsed partial update.
type Patch struct {
	Set   map[string]any // dotted path -> raw JSON-decoded value
	Unset []string       // dotted paths
	Inc   map[string]any // dotted path -> json.Number
}

// ParsePatch parses {"$set":{…},"$unset":[…],"$inc":{…}}; unknown operators,
// empty patches, conflicting paths are Malformed.
func ParsePatch(body []byte) (Patch, error) {
	v, err := decodeJSONValue(body)
	if err != nil {
		return Patch{}, err
	}
	return ParsePatchValue(v)
}

// ParsePatchValue is ParsePatch for an already-decoded JSON value.
func ParsePatchValue(v any) (Patch, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return Patch{}, problem.New(problem.Malformed, `a patch is a JSON object such as {"$set":{…},"$unset":[…],"$inc":{…}}, not %s`, jsonType(v))
	}
	var p Patch
	seen := map[string]string{} // path -> operator
	add := func(op, path string) error {
		if err := checkPatchPath(path); err != nil {
			return err
		}
		if prev, ok := seen[path]; ok {
			if prev == op {
				return problem.Field(problem.Malformed, path, "path %q appears twice in %s", path, op)
			}
			return problem.Field(problem.Malformed, path, "path %q appears in both %s and %s", path, prev, op)
		}
		seen[path] = op
		return nil
	}
	for _, op := range slices.Sorted(maps.Keys(m)) {
		arg := m[op]
		switch op {
		case "$set":
			obj, ok := arg.(map[string]any)
			if !ok {
				return Patch{}, problem.Field(problem.Malformed, op, "$set takes an object of path: value, not %s", jsonType(arg))
			}
			p.Set = make(map[string]any, len(obj))
			for path, val := range obj {
				if err := add(op, path); err != nil {
					return Patch{}, err
				}
				p.Set[path] = val
			}
		case "$unset":
			arr, ok := arg.([]any)
			if !ok {
				return Patch{}, problem.Field(problem.Malformed, op, "$unset takes an array of paths, not %s", jsonType(arg))
			}
			for _, e := range arr {
				path, ok := e.(string)
				if !ok {
					return Patch{}, problem.Field(problem.Malformed, op, "$unset takes an array of paths (strings), found %s", jsonType(e))
				}
				if err := add(op, path); err != nil {
					return Patch{}, err
				}
				p.Unset = append(p.Unset, path)
			}
		case "$inc":
			obj, ok := arg.(map[string]any)
			if !ok {
				return Patch{}, problem.Field(problem.Malformed, op, "$inc takes an object of path: number, not %s", jsonType(arg))
			}
			p.Inc = make(map[string]any, len(obj))
			for path, val := range obj {
				if err := add(op, path); err != nil {
					return Patch{}, err
				}
				n, ok := asJSONNumber(val)
				if !ok {
					return Patch{}, problem.Field(problem.Malformed, path, "$inc of %q takes a number, not %s", path, jsonType(val))
				}
				p.Inc[path] = n
			}
		default:
			return Patch{}, problem.Field(problem.Malformed, op, "unknown patch operator %q: want $set, $unset or $inc", op)
		}
	}
	if len(seen) == 0 {
		return Patch{}, problem.New(problem.Malformed, "empty patch: give at least one path in $set, $unset or $inc")
	}
	// A path and a path inside it (a and a.b) would apply in an arbitrary
	// order.
	for path, op := range seen {
		for i := range len(path) {
			if path[i] != '.' {
				continue
			}
			if prevOp, ok := seen[path[:i]]; ok {
				return Patch{}, problem.Field(problem.Malformed, path, "path %q (%s) overlaps path %q (%s)", path, op, path[:i], prevOp)
			}
		}
	}
	return p, nil
}

func checkPatchPath(path string) error {
	if path == "" {
		return problem.New(problem.Malformed, "empty path in patch")
	}
	for seg := range strings.SplitSeq(path, ".") {
		if seg == "" {
			return problem.Field(problem.Malformed, path, "path %q has an empty segment", path)
		}
	}
	return nil
}

func asJSONNumber(v any) (json.Number, bool) {
	switch x := v.(type) {
	case json.Number:
		return x, true
	case float64:
		return json.Number(strconv.FormatFloat(x, 'g', -1, 64)), true
	case int64:
		return json.Number(strconv.FormatInt(x, 10)), true
	case int:
		return json.Number(strconv.Itoa(x)), true
	}
	return "", false
}

// ApplyPatch returns a new normalized document: doc (normalized at the latest
// version) with p applied. Paths that do not exist in the schema, $inc on a
// non-numeric field, values of the wrong type, $unset of a field that has no
// default are Invalid naming the path. Integer overflow is Invalid.
func (t *Table) ApplyPatch(doc Document, p Patch) (Document, error) {
	out := maps.Clone(map[string]any(doc))
	if out == nil {
		out = map[string]any{}
	}
	root := t.latest().root
	for _, path := range slices.Sorted(maps.Keys(p.Set)) {
		parent, f, at, err := locate(root, out, path)
		if err != nil {
			return nil, err
		}
		v, err := normalize(f.typ, p.Set[path], at)
		if err != nil {
			return nil, err
		}
		parent[f.name] = v
	}
	for _, path := range p.Unset {
		parent, f, at, err := locate(root, out, path)
		if err != nil {
			return nil, err
		}
		switch {
		case f.hasDefault:
			parent[f.name] = cloneValue(f.def)
		case f.typ.hasNull():
			parent[f.name] = nil
		default:
			return nil, invalid(at, "cannot $unset: the field has no default and is not nullable")
		}
	}
	for _, path := range slices.Sorted(maps.Keys(p.Inc)) {
		parent, f, at, err := locate(root, out, path)
		if err != nil {
			return nil, err
		}
		v, err := increment(f.typ, parent[f.name], p.Inc[path], at)
		if err != nil {
			return nil, err
		}
		parent[f.name] = v
	}
	return out, nil
}

// locate walks a dotted path through nested records, copying every record
// map on the way (so the caller's document is never mutated), and returns
// the map holding the last field.
func locate(rec *node, doc map[string]any, dotted string) (map[string]any, *field, *path, error) {
	segs := strings.Split(dotted, ".")
	var at *path
	cur := doc
	for i, seg := range segs {
		at = at.field(seg)
		fi, ok := rec.fieldIndex[seg]
		if !ok {
			return nil, nil, at, invalid(at, "unknown field (not in %s)", rec.typeName())
		}
		f := rec.fields[fi]
		if i == len(segs)-1 {
			return cur, f, at, nil
		}
		next := f.typ.record()
		if next == nil {
			return nil, nil, at, invalid(at, "is %s, not a record: %q cannot reach inside it", f.typ.typeName(), dotted)
		}
		child, ok := cur[seg].(map[string]any)
		if !ok {
			if cur[seg] == nil {
				return nil, nil, at, invalid(at, "is null: %q cannot reach inside it; $set the whole record instead", dotted)
			}
			return nil, nil, at, invalid(at, "is not a record value")
		}
		child = maps.Clone(child)
		cur[seg] = child
		cur, rec = child, next
	}
	return nil, nil, at, invalid(at, "empty path")
}

// increment adds delta (a json.Number) to cur, a value of numeric type n
// (or nullable numeric, null counting as 0).
func increment(n *node, cur any, delta any, at *path) (any, error) {
	if n.nullable != nil {
		n = n.nullable
	}
	d, ok := asJSONNumber(delta)
	if !ok {
		return nil, invalid(at, "$inc takes a number, not %s", jsonType(delta))
	}
	switch n.kind {
	case kInt, kLong:
		by, err := strconv.ParseInt(string(d), 10, 64)
		if err != nil {
			if errors.Is(err, strconv.ErrRange) {
				return nil, invalid(at, "$inc by %s overflows %s", d, n.kind)
			}
			return nil, invalid(at, "$inc of an %s field takes an integer, not %s", n.kind, d)
		}
		var x int64
		if cur != nil {
			if x, ok = asInt64(cur); !ok {
				return nil, invalid(at, "current value is not an integer")
			}
		}
		sum := x + by
		if (by > 0 && sum < x) || (by < 0 && sum > x) ||
			(n.kind == kInt && (sum < math.MinInt32 || sum > math.MaxInt32)) {
			return nil, invalid(at, "$inc by %s overflows %s (current value %d)", d, n.kind, x)
		}
		return sum, nil
	case kFloat, kDouble:
		by, err := strconv.ParseFloat(string(d), 64)
		if err != nil {
			return nil, invalid(at, "$inc by %s overflows %s", d, n.kind)
		}
		var x float64
		if cur != nil {
			if x, ok = asFloat64(cur); !ok {
				return nil, invalid(at, "current value is not a number")
			}
		}
		sum := x + by
		if math.IsInf(sum, 0) || math.IsNaN(sum) || (n.kind == kFloat && overflowsFloat(sum)) {
			return nil, invalid(at, "$inc by %s overflows %s", d, n.kind)
		}
		return toFloat(n, sum), nil
	}
	return nil, invalid(at, "$inc needs a numeric field (int, long, float, double or a nullable one), not %s", n.typeName())
}
