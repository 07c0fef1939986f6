package schema

import (
	"encoding/base64"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// AppendJSON appends the JSON of doc, a normalized document of schema
// version (0 or out of range: the latest), with record fields in schema
// order. Fields absent from doc (projected away) are left out.
func (t *Table) AppendJSON(dst []byte, doc Document, version int) []byte {
	c := t.latest()
	if version >= 1 && version <= len(t.versions) {
		c = t.versions[version-1]
	}
	return appendJSONRecord(dst, c.root, doc)
}

func appendJSONRecord(dst []byte, n *node, m map[string]any) []byte {
	dst = append(dst, '{')
	first := true
	for _, f := range n.fields {
		v, ok := m[f.name]
		if !ok {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = appendJSONString(dst, f.name)
		dst = append(dst, ':')
		dst = appendJSONValue(dst, f.typ, v)
	}
	if len(m) > len(n.fields) || first && len(m) > 0 {
		// Keys the schema does not know cannot occur in a normalized
		// document; render them anyway rather than drop data silently.
		for _, k := range sortedKeys(m) {
			if _, known := n.fieldIndex[k]; known {
				continue
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = appendJSONString(dst, k)
			dst = append(dst, ':')
			dst = appendJSONValue(dst, nil, m[k])
		}
	}
	return append(dst, '}')
}

// appendJSONValue renders v; n guides record field order and may be nil.
func appendJSONValue(dst []byte, n *node, v any) []byte {
	if n != nil && n.kind == kUnion {
		n = unionBranchOf(n, v)
	}
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...)
	case bool:
		return strconv.AppendBool(dst, x)
	case int64:
		return strconv.AppendInt(dst, x, 10)
	case float64:
		return appendJSONFloat(dst, x, n != nil && n.kind == kFloat)
	case string:
		return appendJSONString(dst, x)
	case []byte:
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, x)
		return append(dst, '"')
	case []any:
		var items *node
		if n != nil && n.kind == kArray {
			items = n.items
		}
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONValue(dst, items, e)
		}
		return append(dst, ']')
	case map[string]any:
		if n != nil && n.kind == kRecord {
			return appendJSONRecord(dst, n, x)
		}
		var values *node
		if n != nil && n.kind == kMap {
			values = n.values
		}
		dst = append(dst, '{')
		for i, k := range sortedKeys(x) {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, k)
			dst = append(dst, ':')
			dst = appendJSONValue(dst, values, x[k])
		}
		return append(dst, '}')
	}
	return append(dst, "null"...)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// appendJSONFloat formats like encoding/json: shortest representation, plain
// notation for ordinary magnitudes. Avro floats print at 32-bit precision.
func appendJSONFloat(dst []byte, f float64, single bool) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	bits := 64
	if single {
		bits = 32
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	return strconv.AppendFloat(dst, f, format, -1, bits)
}

const hexDigits = "0123456789abcdef"

// plainJSON marks the ASCII bytes a JSON string holds as they are.
var plainJSON = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// load64 returns the 8 bytes of s at i as a little-endian word (one load).
func load64[T string | []byte](s T, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// plainWord reports whether each of the 8 bytes of w is plainJSON: none
// below 0x20, none '"' or '\\', none with the top bit set. Each test is the
// classic "has a byte less than n" (x - n*0x01..01) &^ x & 0x80..80, which
// is non-zero exactly when some byte matches (a zero byte, for equality
// tests on w XOR the byte repeated).
func plainWord(w uint64) bool {
	const ones, tops = 0x0101010101010101, 0x8080808080808080
	q, b := w^('"'*ones), w^('\\'*ones)
	below := (w - 0x20*ones) &^ w
	quote := (q - ones) &^ q
	slash := (b - ones) &^ b
	return (below|quote|slash|w)&tops == 0
}

// appendJSONString writes s as a JSON string; invalid UTF-8 becomes U+FFFD.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		// Runs of bytes written as they are: most of a text, eight at a
		// time while they last.
		for i+8 <= len(s) && plainWord(load64(s, i)) {
			i += 8
		}
		for i < len(s) && plainJSON[s[i]] {
			i++
		}
		if i == len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// unionBranchOf is the branch of union n a normalized value renders by: the
// non-null branch of a nullable union; for a record value, the first record
// branch that has all its fields (so fields keep their schema order); nil
// otherwise (the value renders by its own type).
func unionBranchOf(n *node, v any) *node {
	if n.nullable != nil {
		return n.nullable
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	for _, b := range n.branches {
		if b.kind != kRecord || len(b.fields) != len(m) {
			continue
		}
		all := true
		for k := range m {
			if _, ok := b.fieldIndex[k]; !ok {
				all = false
				break
			}
		}
		if all {
			return b
		}
	}
	return nil
}
