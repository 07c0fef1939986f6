package index

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/doppio-db/doppio/internal/keys"
)

// Tags of the encodings of indexed values that keys does not define. Each
// encoding is self-delimiting, so an entry's document key starts right after
// its value, and byte order is value order within one type.
const (
	// tagPending begins a text list's pending entries (see PendingSpan):
	// before every value, and not a value itself.
	tagPending byte = 0x01
	tagString  byte = 0x02 // keys.AppendString
	tagInt     byte = 0x15 // keys.AppendInt
	tagFloat   byte = 0x21
	tagBool    byte = 0x26
)

// AppendValue appends the order-preserving encoding of an indexed value in
// normalized document form: string (string, enum, text term), []byte (bytes,
// fixed; ordered as strings), int64 (int, long and their logical types),
// float64 (float, double; -0 is 0, NaN sorts after +Inf) or bool (false
// before true). It reports false for any other value (nil, records, ...),
// which is not indexed.
func AppendValue(dst []byte, v any) ([]byte, bool) {
	switch v := v.(type) {
	case string:
		return keys.AppendString(dst, v), true
	case []byte:
		return keys.AppendString(dst, string(v)), true
	case int64:
		return keys.AppendInt(dst, v), true
	case float64:
		return appendFloat(dst, v), true
	case bool:
		b := byte(0)
		if v {
			b = 1
		}
		return append(dst, tagBool, b), true
	}
	return dst, false
}

// appendFloat encodes f so that byte order is numeric order: positive
// numbers get the sign bit set, negative numbers have every bit flipped.
func appendFloat(dst []byte, f float64) []byte {
	if f == 0 {
		f = 0 // -0 == 0: one encoding for both
	}
	if math.IsNaN(f) {
		f = math.NaN() // one NaN
	}
	u := math.Float64bits(f)
	if u&(1<<63) != 0 {
		u = ^u
	} else {
		u |= 1 << 63
	}
	return binary.BigEndian.AppendUint64(append(dst, tagFloat), u)
}

// appendStringPrefix appends the encoding of every string starting with p,
// without its terminator: the lower bound of a prefix scan.
func appendStringPrefix(dst []byte, p string) []byte {
	enc := keys.AppendString(dst, p)
	return enc[:len(enc)-2]
}

// valueLen returns the length of the encoded value at the start of b.
func valueLen(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, fmt.Errorf("index: empty value")
	}
	switch b[0] {
	case tagPending, tagFolded:
		return 1, nil // a document's text, not a value (field:* over a text list)
	case tagString:
		for i := 1; i+1 < len(b); i++ {
			if b[i] == 0 {
				if b[i+1] == 0x01 {
					return i + 2, nil
				}
				i++ // escaped 0x00 0xFF
			}
		}
		return 0, fmt.Errorf("index: unterminated string value")
	case tagInt, tagFloat:
		if len(b) < 9 {
			return 0, fmt.Errorf("index: short value")
		}
		return 9, nil
	case tagBool:
		if len(b) < 2 {
			return 0, fmt.Errorf("index: short value")
		}
		return 2, nil
	}
	return 0, fmt.Errorf("index: unknown value tag 0x%02x", b[0])
}
