package schema

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unsafe"
)

// AppendAvroAsJSON appends the JSON of an Avro document written with
// writerVersion, read at readerVersion (0 = as written): the same bytes as
// AppendJSON of Decode, without building the document in memory when the
// versions are equal. It is the read path's renderer.
func (t *Table) AppendAvroAsJSON(dst, data []byte, writerVersion, readerVersion int) ([]byte, error) {
	if readerVersion == 0 {
		readerVersion = writerVersion
	}
	if readerVersion != writerVersion {
		doc, err := t.Decode(data, writerVersion, readerVersion)
		if err != nil {
			return nil, err
		}
		return t.AppendJSON(dst, doc, readerVersion), nil
	}
	if writerVersion < 1 || writerVersion > len(t.versions) {
		return nil, fmt.Errorf("schema: table %s: data written with unknown schema version %d", t.Def.Name, writerVersion)
	}
	p, err := t.plan(writerVersion, writerVersion)
	if err != nil {
		return nil, err
	}
	// Size the output once: JSON is the Avro bytes plus names and quoting,
	// and growing from empty copies a 1 KiB document about eight times.
	est := len(data) + len(data)/8 + 16
	for _, f := range p.fields {
		est += len(f.name) + 4
	}
	if cap(dst)-len(dst) < est {
		dst = slices.Grow(dst, est)
	}
	rd := reader{b: data}
	out, err := p.transcode(dst, &rd)
	if err != nil {
		return nil, fmt.Errorf("schema: table %s version %d: %w", t.Def.Name, writerVersion, err)
	}
	if rd.i != len(data) {
		return nil, fmt.Errorf("schema: table %s version %d: %w: %d trailing bytes", t.Def.Name, writerVersion, errCorrupt, len(data)-rd.i)
	}
	return out, nil
}

// transcode reads one value of an identity plan (writer = reader) and
// writes its JSON as appendJSONValue would.
func (p *plan) transcode(dst []byte, rd *reader) ([]byte, error) {
	w := p.w
	switch w.kind {
	case kNull:
		return append(dst, "null"...), nil
	case kBoolean:
		b, err := rd.take(1)
		if err != nil {
			return nil, err
		}
		if b[0] > 1 {
			return nil, errCorrupt
		}
		return strconv.AppendBool(dst, b[0] == 1), nil
	case kInt, kLong:
		i, err := rd.long()
		if err != nil {
			return nil, err
		}
		if w.kind == kInt && (i < math.MinInt32 || i > math.MaxInt32) {
			return nil, errCorrupt
		}
		return strconv.AppendInt(dst, i, 10), nil
	case kFloat:
		b, err := rd.take(4)
		if err != nil {
			return nil, err
		}
		return appendJSONFloat(dst, float32Value(math.Float32frombits(binary.LittleEndian.Uint32(b))), true), nil
	case kDouble:
		b, err := rd.take(8)
		if err != nil {
			return nil, err
		}
		return appendJSONFloat(dst, math.Float64frombits(binary.LittleEndian.Uint64(b)), false), nil
	case kString:
		l, err := rd.length()
		if err != nil {
			return nil, err
		}
		b, _ := rd.take(l)
		// The string only lives for the call, which copies it into dst:
		// no copy of its own (string(b) allocated for every field).
		return appendJSONString(dst, unsafe.String(unsafe.SliceData(b), len(b))), nil
	case kBytes, kFixed:
		n := w.size
		if w.kind == kBytes {
			l, err := rd.length()
			if err != nil {
				return nil, err
			}
			n = l
		}
		b, err := rd.take(n)
		if err != nil {
			return nil, err
		}
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, b)
		return append(dst, '"'), nil
	case kEnum:
		i, err := rd.long()
		if err != nil {
			return nil, err
		}
		if i < 0 || i >= int64(len(w.symbols)) {
			return nil, errCorrupt
		}
		return appendJSONString(dst, w.symbols[i]), nil
	case kArray:
		dst = append(dst, '[')
		min := minSize(w.items)
		n := 0
		for {
			c, err := rd.blockCount(min)
			if err != nil {
				return nil, err
			}
			if c == 0 {
				return append(dst, ']'), nil
			}
			if min == 0 && n+c > maxEmptyItems {
				return nil, errCorrupt
			}
			for range c {
				if n > 0 {
					dst = append(dst, ',')
				}
				n++
				if dst, err = p.elem.transcode(dst, rd); err != nil {
					return nil, err
				}
			}
		}
	case kUnion:
		i, err := rd.long()
		if err != nil {
			return nil, err
		}
		if i < 0 || i >= int64(len(p.branches)) || p.branches[i] == nil {
			return nil, errCorrupt
		}
		return p.branches[i].transcode(dst, rd)
	case kRecord:
		dst = append(dst, '{')
		for i, f := range p.fields {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, f.jsonKey...)
			var err error
			if dst, err = f.p.transcode(dst, rd); err != nil {
				return nil, err
			}
		}
		return append(dst, '}'), nil
	}
	// Maps render with sorted keys: decode them, then render.
	v, err := p.decode(rd)
	if err != nil {
		return nil, err
	}
	return appendJSONValue(dst, p.r, v), nil
}
