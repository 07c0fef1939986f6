// Package keys holds Doppio's order-preserving key encoding and the layout of
// every key a node writes to its storage engine.
//
// A document key is a tuple of typed parts (string or integer). Tuples are
// encoded so that byte order equals tuple order and the encoding of a tuple's
// leading parts is a prefix of the encoding of the whole tuple: a key prefix is
// a collection, and a range scan over it reads the collection in key order.
package keys

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
)

// Tag bytes of the tuple encoding. Strings sort before integers; a table's
// key parts have fixed types, so mixed comparisons never matter in practice.
const (
	tagString byte = 0x02
	tagInt    byte = 0x15
)

// Tuple is a decoded key: each element is a string or an int64.
type Tuple []any

// String renders a tuple for logs and error messages.
func (t Tuple) String() string {
	b := []byte{'['}
	for i, v := range t {
		if i > 0 {
			b = append(b, ',')
		}
		switch v := v.(type) {
		case string:
			b = strconv.AppendQuote(b, v)
		case int64:
			b = strconv.AppendInt(b, v, 10)
		default:
			b = fmt.Appendf(b, "%v", v)
		}
	}
	return string(append(b, ']'))
}

// ErrInvalidKey is wrapped by every decoding error.
var ErrInvalidKey = errors.New("invalid key encoding")

// AppendString appends the encoding of s. Zero bytes are escaped as 0x00 0xFF
// and the string ends with 0x00 0x01: byte order equals string order, and no
// string's encoding is a prefix of another's, so the encoding of a key's
// leading parts is a prefix only of keys that have exactly those parts.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, tagString)
	for i := 0; i < len(s); i++ {
		c := s[i]
		dst = append(dst, c)
		if c == 0 {
			dst = append(dst, 0xFF)
		}
	}
	return append(dst, 0x00, 0x01)
}

// AppendInt appends the encoding of v: big-endian with the sign bit flipped,
// so negative numbers sort before positive ones.
func AppendInt(dst []byte, v int64) []byte {
	dst = append(dst, tagInt)
	return binary.BigEndian.AppendUint64(dst, uint64(v)^(1<<63))
}

// AppendTuple appends the encoding of every element of t.
func AppendTuple(dst []byte, t Tuple) ([]byte, error) {
	for _, v := range t {
		switch v := v.(type) {
		case string:
			dst = AppendString(dst, v)
		case int64:
			dst = AppendInt(dst, v)
		default:
			return nil, fmt.Errorf("%w: unsupported key part type %T", ErrInvalidKey, v)
		}
	}
	return dst, nil
}

// EncodeTuple returns the encoding of t, in one allocation unless a string
// holds zero bytes (appending to nil grew the slice several times per
// part, and every request encodes its key this way).
func EncodeTuple(t Tuple) ([]byte, error) { return AppendTuple(make([]byte, 0, tupleSize(t)), t) }

// tupleSize is the length of t's encoding when no string holds a zero byte.
func tupleSize(t Tuple) int {
	n := 0
	for _, v := range t {
		if s, ok := v.(string); ok {
			n += len(s) + 3
		} else {
			n += 9
		}
	}
	return n
}

// DecodeOne decodes the first element of b and returns the rest.
func DecodeOne(b []byte) (any, []byte, error) {
	if len(b) == 0 {
		return nil, nil, fmt.Errorf("%w: empty", ErrInvalidKey)
	}
	switch b[0] {
	case tagString:
		out := make([]byte, 0, len(b))
		for i := 1; i < len(b); i++ {
			c := b[i]
			if c != 0 {
				out = append(out, c)
				continue
			}
			if i+1 >= len(b) {
				break
			}
			switch b[i+1] {
			case 0xFF:
				out = append(out, 0)
				i++
				continue
			case 0x01:
				return string(out), b[i+2:], nil
			}
			return nil, nil, fmt.Errorf("%w: bad escape in string", ErrInvalidKey)
		}
		return nil, nil, fmt.Errorf("%w: unterminated string", ErrInvalidKey)
	case tagInt:
		if len(b) < 9 {
			return nil, nil, fmt.Errorf("%w: short integer", ErrInvalidKey)
		}
		return int64(binary.BigEndian.Uint64(b[1:9]) ^ (1 << 63)), b[9:], nil
	default:
		return nil, nil, fmt.Errorf("%w: unknown tag 0x%02x", ErrInvalidKey, b[0])
	}
}

// DecodeTuple decodes a whole encoded tuple.
func DecodeTuple(b []byte) (Tuple, error) {
	var t Tuple
	for len(b) > 0 {
		v, rest, err := DecodeOne(b)
		if err != nil {
			return nil, err
		}
		t = append(t, v)
		b = rest
	}
	return t, nil
}

// PrefixEnd returns the smallest key greater than every key that starts with
// prefix, or nil when there is none (prefix is all 0xFF).
func PrefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}
