package schema

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/problem"
)

// MaxKeyStringBytes is the longest string key part, in bytes.
const MaxKeyStringBytes = 1024

// ParseKeySegments parses percent-decoded URI path segments into the leading
// key parts they name (len(segs) <= Arity), by the key types. Errors:
// Malformed naming the key part (wrong type, out of int range, not UTF-8,
// empty string, too many parts).
func (t *Table) ParseKeySegments(segs []string) (keys.Tuple, error) {
	if len(segs) > len(t.Def.Key) {
		return nil, problem.Field(problem.Malformed, "key", "table %s has %d key parts, %d given", t.Def.Name, len(t.Def.Key), len(segs))
	}
	out := make(keys.Tuple, len(segs))
	for i, s := range segs {
		kp := t.Def.Key[i]
		if kp.Type == KeyString {
			if err := checkKeyString(kp, s); err != nil {
				return nil, err
			}
			out[i] = s
			continue
		}
		v, err := parseKeyInteger(kp, s)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// ParseKeyJSON parses a key given as a JSON array (strings and numbers, as
// decoded with json.Decoder.UseNumber) into leading key parts; same errors.
func (t *Table) ParseKeyJSON(parts []any) (keys.Tuple, error) {
	if len(parts) > len(t.Def.Key) {
		return nil, problem.Field(problem.Malformed, "key", "table %s has %d key parts, %d given", t.Def.Name, len(t.Def.Key), len(parts))
	}
	out := make(keys.Tuple, len(parts))
	for i, p := range parts {
		kp := t.Def.Key[i]
		if kp.Type == KeyString {
			s, ok := p.(string)
			if !ok {
				return nil, problem.Field(problem.Malformed, kp.Name, "key part %q must be a string, got %s", kp.Name, jsonType(p))
			}
			if err := checkKeyString(kp, s); err != nil {
				return nil, err
			}
			out[i] = s
			continue
		}
		var v int64
		switch x := p.(type) {
		case json.Number:
			var err error
			if v, err = parseKeyInteger(kp, string(x)); err != nil {
				return nil, err
			}
		case float64:
			if x != math.Trunc(x) || x < -(1<<63) || x >= 1<<63 {
				return nil, problem.Field(problem.Malformed, kp.Name, "key part %q must be an integer (%s), got %v", kp.Name, kp.Type, x)
			}
			v = int64(x)
		case int64:
			v = x
		case int:
			v = int64(x)
		default:
			// A string of digits is a type mismatch too: the key's JSON
			// form is as typed as the document's.
			return nil, problem.Field(problem.Malformed, kp.Name, "key part %q must be a number (%s), got %s", kp.Name, kp.Type, jsonType(p))
		}
		if kp.Type == KeyInt && (v < math.MinInt32 || v > math.MaxInt32) {
			return nil, problem.Field(problem.Malformed, kp.Name, "key part %q: %d is out of range for int (32-bit)", kp.Name, v)
		}
		out[i] = v
	}
	return out, nil
}

func checkKeyString(kp KeyPart, s string) error {
	switch {
	case s == "":
		return problem.Field(problem.Malformed, kp.Name, "key part %q must not be empty", kp.Name)
	case !utf8.ValidString(s):
		return problem.Field(problem.Malformed, kp.Name, "key part %q is not valid UTF-8", kp.Name)
	case len(s) > MaxKeyStringBytes:
		return problem.Field(problem.Malformed, kp.Name, "key part %q is %d bytes long, more than %d", kp.Name, len(s), MaxKeyStringBytes)
	}
	return nil
}

// parseKeyInteger parses a decimal integer key part: an optional minus sign
// then digits, nothing else.
func parseKeyInteger(kp KeyPart, s string) (int64, error) {
	digits := s
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	ok := len(digits) > 0
	for i := 0; i < len(digits) && ok; i++ {
		ok = digits[i] >= '0' && digits[i] <= '9'
	}
	if !ok {
		return 0, problem.Field(problem.Malformed, kp.Name, "key part %q must be a decimal integer (%s), got %q", kp.Name, kp.Type, s)
	}
	bits := 64
	if kp.Type == KeyInt {
		bits = 32
	}
	v, err := strconv.ParseInt(s, 10, bits)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return 0, problem.Field(problem.Malformed, kp.Name, "key part %q: %s is out of range for %s", kp.Name, s, kp.Type)
		}
		return 0, problem.Field(problem.Malformed, kp.Name, "key part %q must be a decimal integer (%s), got %q", kp.Name, kp.Type, s)
	}
	return v, nil
}
