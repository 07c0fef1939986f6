package schema

import (
	"encoding/base64"
	"math"
	"unicode/utf8"
)

// decodeDirect decodes body straight into the normalized document of
// record root, in one pass: no generic tree first, field names matched
// against the schema's without a string each, integers read without a
// json.Number each. It takes the documents the write path sees (records,
// arrays, maps, strings, enums, numbers, booleans, bytes, fixed, unions)
// when
// parseJSON and normalize would take them as they are; ok is false for
// anything else (malformed JSON, a value the schema refuses, a field named
// twice or with an escape, an object or array in a union other than
// [null, T], deep nesting),
// and the caller then decodes the long way, so every error, and every
// answer but the common one, is that way's. FuzzDecodeDirect holds the two
// ways to the same documents. The direct way exists because it allocates
// and costs a fraction of the long way (docs/benchmarks/micro.md).
func decodeDirect(root *node, body []byte) (Document, bool) {
	p := jsonParser{b: body}
	p.space()
	if root.kind != kRecord || p.i >= len(p.b) || p.b[p.i] != '{' {
		return nil, false
	}
	v, ok := p.direct(root, 0)
	if !ok {
		return nil, false
	}
	if p.space(); p.i < len(p.b) {
		return nil, false
	}
	return v.(map[string]any), true
}

// maxDirectDepth bounds the nesting decodeDirect takes (a recursive schema
// may nest without end); deeper documents go the long way.
const maxDirectDepth = 64

// direct decodes the value at p.i as n's normalized value.
func (p *jsonParser) direct(n *node, depth int) (any, bool) {
	if p.i >= len(p.b) || depth > maxDirectDepth {
		return nil, false
	}
	c := p.b[p.i]
	switch n.kind {
	case kNull:
		return nil, c == 'n' && p.literal("null") == nil
	case kBoolean:
		switch c {
		case 't':
			return true, p.literal("true") == nil
		case 'f':
			return false, p.literal("false") == nil
		}
	case kInt, kLong:
		i, ok := p.directInt()
		if !ok || n.kind == kInt && (i < math.MinInt32 || i > math.MaxInt32) {
			return nil, false
		}
		return i, true
	case kFloat, kDouble:
		if c != '-' && (c < '0' || c > '9') {
			return nil, false
		}
		num, err := p.number()
		if err != nil {
			return nil, false
		}
		f, err := normalizeFloat(n, num, nil)
		return f, err == nil
	case kString:
		if c != '"' {
			return nil, false
		}
		s, err := p.string()
		return s, err == nil && utf8.ValidString(s)
	case kEnum:
		if c != '"' {
			return nil, false
		}
		s, err := p.string()
		if err != nil {
			return nil, false
		}
		_, ok := n.symbolIndex[s]
		return s, ok
	case kBytes, kFixed:
		if c != '"' {
			return nil, false
		}
		s, err := p.string()
		if err != nil {
			return nil, false
		}
		b, err := base64.StdEncoding.DecodeString(s)
		return b, err == nil && (n.kind == kBytes || len(b) == n.size)
	case kArray:
		if c != '[' {
			return nil, false
		}
		return p.directArray(n, depth)
	case kMap:
		if c != '{' {
			return nil, false
		}
		return p.directMap(n, depth)
	case kRecord:
		if c != '{' {
			return nil, false
		}
		return p.directRecord(n, depth)
	case kUnion:
		return p.directUnion(n, c, depth)
	}
	return nil, false
}

// directUnion decodes a union's value as normalizeUnion does: null as null;
// a [null, T] union's other values as T's; another union's scalar (a
// string, number or boolean) as that of its first branch that takes it.
// There a branch refuses a scalar exactly when normalize does, so trying
// them in turn gives normalize's choice; an object or an array could be
// refused for its form alone (a name twice), and goes the long way.
func (p *jsonParser) directUnion(n *node, c byte, depth int) (any, bool) {
	switch {
	case c == 'n':
		return nil, n.hasNull() && p.literal("null") == nil
	case n.nullable != nil:
		return p.direct(n.nullable, depth)
	case c == '{' || c == '[':
		return nil, false
	}
	start := p.i
	for _, b := range n.branches {
		if b.kind == kNull {
			continue
		}
		if v, ok := p.direct(b, depth); ok {
			return v, true
		}
		p.i = start
	}
	return nil, false
}

func (p *jsonParser) directArray(n *node, depth int) (any, bool) {
	out := []any{}
	ok := p.members(']', func() bool {
		v, ok := p.direct(n.items, depth+1)
		if ok {
			out = append(out, v)
		}
		return ok
	})
	if !ok {
		return nil, false
	}
	return out, true
}

func (p *jsonParser) directMap(n *node, depth int) (any, bool) {
	out := map[string]any{}
	ok := p.members('}', func() bool {
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return false
		}
		k, err := p.string()
		if err != nil {
			return false
		}
		if _, twice := out[k]; twice || !utf8.ValidString(k) || !p.colon() {
			return false
		}
		v, ok := p.direct(n.values, depth+1)
		if ok {
			out[k] = v
		}
		return ok
	})
	if !ok {
		return nil, false
	}
	return out, true
}

func (p *jsonParser) directRecord(n *node, depth int) (any, bool) {
	if len(n.fields) > 64 {
		return nil, false // the fields met are a 64-bit set
	}
	out := make(map[string]any, len(n.fields))
	var met uint64
	ok := p.members('}', func() bool {
		name, ok := p.plainKey()
		if !ok {
			return false
		}
		i, known := n.fieldIndex[string(name)]
		if !known || met&(1<<i) != 0 || !p.colon() {
			return false
		}
		met |= 1 << i
		f := n.fields[i]
		v, ok := p.direct(f.typ, depth+1)
		if ok {
			out[f.name] = v
		}
		return ok
	})
	if !ok {
		return nil, false
	}
	for i, f := range n.fields {
		if met&(1<<i) == 0 {
			if !f.hasDefault {
				return nil, false
			}
			out[f.name] = cloneValue(f.def)
		}
	}
	return out, true
}

// plainKey reads an object key of printable ASCII without escapes and
// returns its bytes (not a copy); anything else is not read.
func (p *jsonParser) plainKey() ([]byte, bool) {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return nil, false
	}
	for j := p.i + 1; j < len(p.b); j++ {
		switch c := p.b[j]; {
		case c == '"':
			k := p.b[p.i+1 : j]
			p.i = j + 1
			return k, true
		case c == '\\' || c < ' ' || c >= utf8.RuneSelf:
			return nil, false
		}
	}
	return nil, false
}

// colon reads the colon after an object key, with the space around it.
func (p *jsonParser) colon() bool {
	if p.space(); p.i >= len(p.b) || p.b[p.i] != ':' {
		return false
	}
	p.i++
	p.space()
	return true
}

// directInt reads a JSON number written as an integer (no fraction, no
// exponent: strconv.ParseInt's refusals) that fits in 64 bits.
func (p *jsonParser) directInt() (int64, bool) {
	neg := p.i < len(p.b) && p.b[p.i] == '-'
	if neg {
		p.i++
	}
	start := p.i
	if !p.intPart() {
		return 0, false
	}
	if p.i-start > 19 {
		return 0, false // past any int64; the long way words the error
	}
	if p.i < len(p.b) && (p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		return 0, false
	}
	var u uint64
	for _, d := range p.b[start:p.i] {
		u = u*10 + uint64(d-'0') // 19 digits fit in a uint64
	}
	switch {
	case neg && u <= 1<<63:
		return int64(-u), true // -(1<<63) wraps to math.MinInt64
	case !neg && u <= math.MaxInt64:
		return int64(u), true
	}
	return 0, false
}
