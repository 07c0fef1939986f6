package schema

// The codec works directly between the normalized document form and Avro
// binary, walking the compiled nodes. hamba/avro parses schemas and checks
// compatibility, but its generic (map[string]any) form differs from
// Document (unions as {"type": v} maps, int vs int64, float32, [N]byte,
// time.Time for logical types), so converting on every call would cost
// more than encoding ourselves.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
)

// Encode returns the Avro binary of doc under the latest version. doc must
// be normalized (the output of DecodeJSON, Normalize, Decode at latest or
// ApplyPatch).
func (t *Table) Encode(doc Document) ([]byte, error) {
	// Start at about the size of the table's last document: a table's
	// documents are alike, and growing from 256 bytes copies a 1 KiB one
	// three times.
	size := max(int(t.encodeHint.Load()), 256)
	out, err := appendValue(make([]byte, 0, size), t.latest().root, map[string]any(doc))
	if err == nil {
		t.encodeHint.Store(int64(min(len(out)+len(out)/8, maxEncodeHint)))
	}
	return out, err
}

// maxEncodeHint caps Encode's first allocation, so one large document does
// not make every later encoding allocate as much.
const maxEncodeHint = 64 << 10

var errNotNormalized = errors.New("value is not normalized")

// appendValue appends the Avro binary of the normalized value v of type n.
func appendValue(dst []byte, n *node, v any) ([]byte, error) {
	switch n.kind {
	case kNull:
		if v != nil {
			return dst, fmt.Errorf("%w: %T for null", errNotNormalized, v)
		}
		return dst, nil
	case kBoolean:
		b, ok := v.(bool)
		if !ok {
			return dst, fmt.Errorf("%w: %T for boolean", errNotNormalized, v)
		}
		if b {
			return append(dst, 1), nil
		}
		return append(dst, 0), nil
	case kInt, kLong:
		i, ok := asInt64(v)
		if !ok {
			return dst, fmt.Errorf("%w: %T for %s", errNotNormalized, v, n.kind)
		}
		if n.kind == kInt && (i < math.MinInt32 || i > math.MaxInt32) {
			return dst, fmt.Errorf("%w: %d out of int range", errNotNormalized, i)
		}
		return appendLong(dst, i), nil
	case kFloat:
		f, ok := asFloat64(v)
		if !ok {
			return dst, fmt.Errorf("%w: %T for float", errNotNormalized, v)
		}
		return binary.LittleEndian.AppendUint32(dst, math.Float32bits(float32(f))), nil
	case kDouble:
		f, ok := asFloat64(v)
		if !ok {
			return dst, fmt.Errorf("%w: %T for double", errNotNormalized, v)
		}
		return binary.LittleEndian.AppendUint64(dst, math.Float64bits(f)), nil
	case kBytes:
		b, ok := v.([]byte)
		if !ok {
			return dst, fmt.Errorf("%w: %T for bytes", errNotNormalized, v)
		}
		return append(appendLong(dst, int64(len(b))), b...), nil
	case kFixed:
		b, ok := v.([]byte)
		if !ok || len(b) != n.size {
			return dst, fmt.Errorf("%w: %T for %s", errNotNormalized, v, n.typeName())
		}
		return append(dst, b...), nil
	case kString:
		s, ok := v.(string)
		if !ok {
			return dst, fmt.Errorf("%w: %T for string", errNotNormalized, v)
		}
		return append(appendLong(dst, int64(len(s))), s...), nil
	case kEnum:
		s, ok := v.(string)
		if !ok {
			return dst, fmt.Errorf("%w: %T for %s", errNotNormalized, v, n.typeName())
		}
		i, ok := n.symbolIndex[s]
		if !ok {
			return dst, fmt.Errorf("%w: %q is not a symbol of %s", errNotNormalized, s, n.typeName())
		}
		return appendLong(dst, int64(i)), nil
	case kArray:
		a, ok := v.([]any)
		if !ok {
			if v == nil {
				return append(dst, 0), nil
			}
			return dst, fmt.Errorf("%w: %T for array", errNotNormalized, v)
		}
		if len(a) > 0 {
			dst = appendLong(dst, int64(len(a)))
			for i, e := range a {
				var err error
				if dst, err = appendValue(dst, n.items, e); err != nil {
					return dst, fmt.Errorf("[%d]: %w", i, err)
				}
			}
		}
		return append(dst, 0), nil
	case kMap:
		m, ok := v.(map[string]any)
		if !ok {
			if v == nil {
				return append(dst, 0), nil
			}
			return dst, fmt.Errorf("%w: %T for map", errNotNormalized, v)
		}
		if len(m) > 0 {
			dst = appendLong(dst, int64(len(m)))
			// Entries in key order: the same document always encodes to
			// the same bytes (its ETag, a bulk build's partition files).
			for _, k := range slices.Sorted(maps.Keys(m)) {
				dst = append(appendLong(dst, int64(len(k))), k...)
				var err error
				if dst, err = appendValue(dst, n.values, m[k]); err != nil {
					return dst, fmt.Errorf("%s: %w", k, err)
				}
			}
		}
		return append(dst, 0), nil
	case kUnion:
		// Normalized unions carry no branch: the value goes to the first
		// branch that can hold it exactly.
		mark := len(dst)
		var firstErr error
		for i, b := range n.branches {
			if (v == nil) != (b.kind == kNull) {
				continue
			}
			if f, ok := v.(float64); ok && b.kind == kFloat && !fitsFloat(f) {
				continue // a double that a float would round
			}
			out, err := appendValue(appendLong(dst, int64(i)), b, v)
			if err == nil {
				return out, nil
			}
			if firstErr == nil {
				firstErr = err
			}
			dst = out[:mark]
		}
		if firstErr != nil {
			return dst, firstErr
		}
		return dst, fmt.Errorf("%w: %T fits no branch of %s", errNotNormalized, v, n.typeName())
	case kRecord:
		m, ok := v.(map[string]any)
		if !ok {
			return dst, fmt.Errorf("%w: %T for %s", errNotNormalized, v, n.typeName())
		}
		found := 0
		for _, f := range n.fields {
			e, ok := m[f.name]
			if ok {
				found++
			} else if f.hasDefault {
				e = f.def
			} else {
				return dst, fmt.Errorf("%w: field %s missing", errNotNormalized, f.name)
			}
			var err error
			if dst, err = appendValue(dst, f.typ, e); err != nil {
				return dst, fmt.Errorf("%s: %w", f.name, err)
			}
		}
		if found != len(m) {
			for k := range m {
				if _, ok := n.fieldIndex[k]; !ok {
					return dst, fmt.Errorf("%w: unknown field %s", errNotNormalized, k)
				}
			}
		}
		return dst, nil
	}
	return dst, fmt.Errorf("schema: unknown kind %d", n.kind)
}

func appendLong(dst []byte, v int64) []byte {
	return binary.AppendUvarint(dst, uint64(v<<1)^uint64(v>>63))
}

func asInt64(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case int:
		return int64(x), true
	case int32:
		return int64(x), true
	}
	return 0, false
}

func asFloat64(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	}
	return 0, false
}

// plan decodes a value written with schema w into the normalized form of
// reader schema r (Avro schema resolution). Plans are built once per
// (writer version, reader version) pair and shared.
type plan struct {
	w, r *node

	// record: one entry per writer field, then reader fields to default.
	fields []planField
	fill   []*field

	// enum: writer symbol index -> reader symbol index, -1 for the reader's
	// default (or an error if it has none).
	symbols []int

	elem *plan // array items, map values

	// union written: one plan per writer branch, nil when the branch cannot
	// be read (an error only if such a value is met).
	branches []*plan
}

type planField struct {
	name string // reader field name; "" to skip
	// jsonKey is name as a JSON member name with its colon, `"name":`,
	// what the renderer writes before the value.
	jsonKey string
	w       *node // writer field type, for skipping
	p       *plan
}

type planKey struct{ w, r *node }

// newPlan builds the resolution plan of w into r.
func newPlan(w, r *node, memo map[planKey]*plan) (*plan, error) {
	key := planKey{w, r}
	if p, ok := memo[key]; ok {
		return p, nil
	}
	p := &plan{w: w, r: r}
	switch {
	case w.kind == kUnion:
		memo[key] = p
		ok := false
		for _, wb := range w.branches {
			bp, err := newPlan(wb, r, memo)
			if err == nil {
				ok = true
			}
			p.branches = append(p.branches, bp)
		}
		if !ok {
			delete(memo, key)
			return nil, fmt.Errorf("no branch of %s can be read as %s", w.typeName(), r.typeName())
		}
		return p, nil
	case r.kind == kUnion:
		// A non-union written value is read by the first reader branch
		// that resolves; normalized unions are plain values.
		for _, rb := range r.branches {
			if bp, err := newPlan(w, rb, memo); err == nil {
				memo[key] = bp
				return bp, nil
			}
		}
		return nil, fmt.Errorf("%s cannot be read as %s", w.typeName(), r.typeName())
	case w.kind != r.kind:
		if !promotable(w.kind, r.kind) {
			return nil, fmt.Errorf("%s cannot be read as %s", w.typeName(), r.typeName())
		}
	case w.kind == kRecord || w.kind == kEnum || w.kind == kFixed:
		if w.name != r.name {
			return nil, fmt.Errorf("%s cannot be read as %s", w.typeName(), r.typeName())
		}
	}
	memo[key] = p
	var err error
	switch w.kind {
	case kFixed:
		if w.size != r.size {
			err = fmt.Errorf("%s has size %d, not %d", r.typeName(), r.size, w.size)
		}
	case kEnum:
		p.symbols = make([]int, len(w.symbols))
		for i, s := range w.symbols {
			j, ok := r.symbolIndex[s]
			if !ok {
				j = -1
			}
			p.symbols[i] = j
		}
	case kArray:
		p.elem, err = newPlan(w.items, r.items, memo)
	case kMap:
		p.elem, err = newPlan(w.values, r.values, memo)
	case kRecord:
		err = p.planRecord(memo)
	}
	if err != nil {
		delete(memo, key)
		return nil, err
	}
	return p, nil
}

func (p *plan) planRecord(memo map[planKey]*plan) error {
	taken := make([]bool, len(p.r.fields))
	for _, wf := range p.w.fields {
		ri := readerField(p.r, wf.name)
		if ri < 0 || taken[ri] {
			p.fields = append(p.fields, planField{w: wf.typ})
			continue
		}
		rf := p.r.fields[ri]
		fp, err := newPlan(wf.typ, rf.typ, memo)
		if err != nil {
			// Only possible between non-adjacent versions (a field removed
			// and later re-added with another type): the reader's default
			// stands in, as it would reading through the versions between.
			if !rf.hasDefault {
				return fmt.Errorf("field %s: %w", rf.name, err)
			}
			p.fields = append(p.fields, planField{w: wf.typ})
			continue
		}
		taken[ri] = true
		p.fields = append(p.fields, planField{name: rf.name, jsonKey: string(appendJSONString(nil, rf.name)) + ":", w: wf.typ, p: fp})
	}
	for i, rf := range p.r.fields {
		if taken[i] {
			continue
		}
		if !rf.hasDefault {
			return fmt.Errorf("field %s is not written and has no default", rf.name)
		}
		p.fill = append(p.fill, rf)
	}
	return nil
}

// readerField finds the reader field that reads writer field name: by name,
// else by the reader field's aliases.
func readerField(r *node, name string) int {
	if i, ok := r.fieldIndex[name]; ok {
		return i
	}
	for i, f := range r.fields {
		for _, a := range f.aliases {
			if a == name {
				return i
			}
		}
	}
	return -1
}

func promotable(w, r kind) bool {
	switch w {
	case kInt:
		return r == kLong || r == kFloat || r == kDouble
	case kLong:
		return r == kFloat || r == kDouble
	case kFloat:
		return r == kDouble
	case kString:
		return r == kBytes
	case kBytes:
		return r == kString
	}
	return false
}

var errCorrupt = errors.New("schema: corrupt Avro data")

type reader struct {
	b []byte
	i int
}

func (rd *reader) long() (int64, error) {
	u, n := binary.Uvarint(rd.b[rd.i:])
	if n <= 0 {
		return 0, errCorrupt
	}
	rd.i += n
	return int64(u>>1) ^ -int64(u&1), nil
}

// length reads a byte or block length and checks it against the remaining
// input, so corrupt data cannot make us allocate more than we were given.
func (rd *reader) length() (int, error) {
	l, err := rd.long()
	if err != nil {
		return 0, err
	}
	if l < 0 || l > int64(len(rd.b)-rd.i) {
		return 0, errCorrupt
	}
	return int(l), nil
}

func (rd *reader) take(n int) ([]byte, error) {
	if n < 0 || n > len(rd.b)-rd.i {
		return nil, errCorrupt
	}
	b := rd.b[rd.i : rd.i+n]
	rd.i += n
	return b, nil
}

// blockCount reads the item count of the next array or map block. A negative
// count is followed by the block's byte size, which we don't need.
func (rd *reader) blockCount(minItem int) (int, error) {
	c, err := rd.long()
	if err != nil {
		return 0, err
	}
	if c < 0 {
		if c == math.MinInt64 {
			return 0, errCorrupt
		}
		c = -c
		if _, err := rd.long(); err != nil {
			return 0, err
		}
	}
	// Items take at least minItem bytes.
	limit := int64(len(rd.b) - rd.i)
	if minItem == 0 {
		limit = maxEmptyItems
	} else {
		limit /= int64(minItem)
	}
	if c > limit {
		return 0, errCorrupt
	}
	return int(c), nil
}

// minSize is a lower bound of the encoded size of a value of type n (0 or 1
// is all that matters: whether a block count bounds the input consumed).
func minSize(n *node) int { return minSizeDepth(n, 0) }

func minSizeDepth(n *node, depth int) int {
	switch n.kind {
	case kNull:
		return 0
	case kFixed:
		return min(n.size, 1)
	case kRecord:
		if depth > 32 {
			return 0
		}
		for _, f := range n.fields {
			if minSizeDepth(f.typ, depth+1) > 0 {
				return 1
			}
		}
		return 0
	}
	return 1
}

// maxEmptyItems caps the items of an array whose items may encode as
// nothing, so a few bytes of corrupt input cannot claim billions of them.
const maxEmptyItems = 1 << 16

func (p *plan) decode(rd *reader) (any, error) {
	w := p.w
	switch w.kind {
	case kNull:
		return nil, nil
	case kBoolean:
		b, err := rd.take(1)
		if err != nil {
			return nil, err
		}
		if b[0] > 1 {
			return nil, errCorrupt
		}
		return b[0] == 1, nil
	case kInt, kLong:
		i, err := rd.long()
		if err != nil {
			return nil, err
		}
		if w.kind == kInt && (i < math.MinInt32 || i > math.MaxInt32) {
			return nil, errCorrupt
		}
		if p.r.kind == kFloat || p.r.kind == kDouble {
			return toFloat(p.r, float64(i)), nil
		}
		return i, nil
	case kFloat:
		b, err := rd.take(4)
		if err != nil {
			return nil, err
		}
		return toFloat(p.r, float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))), nil
	case kDouble:
		b, err := rd.take(8)
		if err != nil {
			return nil, err
		}
		return math.Float64frombits(binary.LittleEndian.Uint64(b)), nil
	case kBytes, kString:
		l, err := rd.length()
		if err != nil {
			return nil, err
		}
		b, _ := rd.take(l)
		if p.r.kind == kString {
			return string(b), nil
		}
		return append([]byte{}, b...), nil
	case kFixed:
		b, err := rd.take(w.size)
		if err != nil {
			return nil, err
		}
		return append([]byte{}, b...), nil
	case kEnum:
		i, err := rd.long()
		if err != nil {
			return nil, err
		}
		if i < 0 || i >= int64(len(p.symbols)) {
			return nil, errCorrupt
		}
		j := p.symbols[i]
		if j < 0 {
			j = p.r.enumDefault
		}
		if j < 0 {
			return nil, fmt.Errorf("schema: symbol %q of %s is unknown to the reader", w.symbols[i], w.name)
		}
		return p.r.symbols[j], nil
	case kArray:
		out := []any{}
		min := minSize(w.items)
		for {
			c, err := rd.blockCount(min)
			if err != nil {
				return nil, err
			}
			if c == 0 {
				return out, nil
			}
			if min == 0 && len(out)+c > maxEmptyItems {
				return nil, errCorrupt
			}
			for range c {
				v, err := p.elem.decode(rd)
				if err != nil {
					return nil, err
				}
				out = append(out, v)
			}
		}
	case kMap:
		out := map[string]any{}
		for {
			c, err := rd.blockCount(1)
			if err != nil {
				return nil, err
			}
			if c == 0 {
				return out, nil
			}
			for range c {
				l, err := rd.length()
				if err != nil {
					return nil, err
				}
				k, _ := rd.take(l)
				v, err := p.elem.decode(rd)
				if err != nil {
					return nil, err
				}
				out[string(k)] = v
			}
		}
	case kUnion:
		i, err := rd.long()
		if err != nil {
			return nil, err
		}
		if i < 0 || i >= int64(len(p.branches)) {
			return nil, errCorrupt
		}
		bp := p.branches[i]
		if bp == nil {
			return nil, fmt.Errorf("schema: branch %s of %s cannot be read as %s", w.branches[i].unionBranchName(), w.typeName(), p.r.typeName())
		}
		return bp.decode(rd)
	case kRecord:
		out := make(map[string]any, len(p.r.fields))
		for _, f := range p.fields {
			if f.name == "" {
				if err := skip(rd, f.w); err != nil {
					return nil, err
				}
				continue
			}
			v, err := f.p.decode(rd)
			if err != nil {
				return nil, err
			}
			out[f.name] = v
		}
		for _, f := range p.fill {
			out[f.name] = cloneValue(f.def)
		}
		return out, nil
	}
	return nil, fmt.Errorf("schema: unknown kind %d", w.kind)
}

// toFloat is f as a value of r (float or double).
func toFloat(r *node, f float64) float64 {
	if r.kind == kFloat {
		return float32Value(float32(f))
	}
	return f
}

// float32Value is the normalized form of a float: the double nearest to the
// shortest decimal that identifies f, so 0.1f reads back as 0.1 rather than
// 0.10000000149011612, and converts back to the same float.
func float32Value(f float32) float64 {
	if f == 0 || math.IsInf(float64(f), 0) || math.IsNaN(float64(f)) {
		return float64(f)
	}
	d, err := strconv.ParseFloat(strconv.FormatFloat(float64(f), 'g', -1, 32), 64)
	if err != nil {
		return float64(f)
	}
	return d
}

// fitsFloat reports whether the double f is held exactly by a float.
func fitsFloat(f float64) bool {
	if overflowsFloat(f) {
		return false
	}
	f32 := float32(f)
	return float64(f32) == f || float32Value(f32) == f
}

// skip reads past a value of type n.
func skip(rd *reader, n *node) error {
	switch n.kind {
	case kNull:
		return nil
	case kBoolean:
		_, err := rd.take(1)
		return err
	case kInt, kLong, kEnum:
		_, err := rd.long()
		return err
	case kFloat:
		_, err := rd.take(4)
		return err
	case kDouble:
		_, err := rd.take(8)
		return err
	case kBytes, kString:
		l, err := rd.length()
		if err != nil {
			return err
		}
		_, err = rd.take(l)
		return err
	case kFixed:
		_, err := rd.take(n.size)
		return err
	case kArray, kMap:
		elem, min := n.items, 0
		if n.kind == kMap {
			elem, min = n.values, 1
		} else {
			min = minSize(elem)
		}
		total := 0
		for {
			c, err := rd.blockCount(min)
			if err != nil {
				return err
			}
			if c == 0 {
				return nil
			}
			if total += c; min == 0 && total > maxEmptyItems {
				return errCorrupt
			}
			for range c {
				if n.kind == kMap {
					if err := skip(rd, &node{kind: kString}); err != nil {
						return err
					}
				}
				if err := skip(rd, elem); err != nil {
					return err
				}
			}
		}
	case kUnion:
		i, err := rd.long()
		if err != nil {
			return err
		}
		if i < 0 || i >= int64(len(n.branches)) {
			return errCorrupt
		}
		return skip(rd, n.branches[i])
	case kRecord:
		for _, f := range n.fields {
			if err := skip(rd, f.typ); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("schema: unknown kind %d", n.kind)
}

// overflowsFloat reports whether the double f rounds to infinity as a float.
// (The shortest form of the largest float, 3.4028235e38, is a little above
// math.MaxFloat32 yet still rounds to it.)
func overflowsFloat(f float64) bool { return math.IsInf(float64(float32(f)), 0) }
