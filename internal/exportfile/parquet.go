package exportfile

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/doppio-db/doppio/client/export"
	"github.com/hamba/avro/v2"
	"github.com/parquet-go/parquet-go"
)

// Parquet writes Parquet files (Snappy pages) whose schema is the row
// record mapped as the package comment says.
var Parquet export.Format = parquetFormat{}

type parquetFormat struct{}

func (parquetFormat) Name() string { return "parquet" }

func (parquetFormat) NewFile(w io.Writer, t export.Table, kind export.Kind) (export.FileWriter, error) {
	_, cols, err := rowColumns(t, kind)
	if err != nil {
		return nil, err
	}
	root := &pnode{kind: pGroup}
	group := parquet.Group{}
	for _, c := range cols {
		n, err := shape(c.schema, 0)
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", c.name, err)
		}
		root.fields = append(root.fields, pfield{name: c.name, node: n})
		group[c.name] = n.node
	}
	root.node = group
	root.finish(0)
	pw := parquet.NewWriter(w, parquet.NewSchema(t.Name, group), parquet.Compression(&parquet.Snappy))
	return &parquetFile{w: pw, root: root, cols: cols, keys: len(t.Key), kind: kind, columns: make([][]parquet.Value, root.leaves)}, nil
}

type parquetFile struct {
	w       *parquet.Writer
	root    *pnode
	cols    []column
	keys    int
	kind    export.Kind
	columns [][]parquet.Value
	row     []parquet.Row
}

func (f *parquetFile) Write(r export.Row) error {
	vals, err := rowValues(f.cols, f.keys, f.kind, r)
	if err != nil {
		return err
	}
	m := make(map[string]any, len(vals))
	for i, c := range f.cols {
		m[c.name] = vals[i]
	}
	for i := range f.columns {
		f.columns[i] = f.columns[i][:0]
	}
	if err := f.root.shred(f.columns, m, 0, 0, 0); err != nil {
		return err
	}
	var row parquet.Row
	for _, c := range f.columns {
		row = append(row, c...)
	}
	f.row = append(f.row[:0], row)
	_, err = f.w.WriteRows(f.row)
	return err
}

func (f *parquetFile) Close() error { return f.w.Close() }

type pkind uint8

const (
	pLeaf pkind = iota
	pGroup
	pUnion // a group with one optional field per non-null branch
	pList
	pMap
)

// pnode is one node of a Parquet schema with what writing a value to it
// needs: its first column and how many leaves it has.
type pnode struct {
	node     parquet.Node
	kind     pkind
	optional bool
	// nullable: the value is a union of null and this node's type.
	nullable bool
	leaf     parquet.Kind
	fields   []pfield // group, union: in the Parquet library's (name) order
	elem     *pnode   // list element, map value
	col      int
	leaves   int
}

type pfield struct {
	name   string
	branch int // union: the branch this field holds
	node   *pnode
}

// shape maps an Avro schema to its Parquet node.
func shape(s avro.Schema, depth int) (*pnode, error) {
	if depth > 64 {
		return nil, fmt.Errorf("the schema nests deeper than 64 levels (a recursive record cannot be a Parquet column)")
	}
	if r, ok := s.(*avro.RefSchema); ok {
		s = r.Schema()
	}
	switch s := s.(type) {
	case *avro.UnionSchema:
		if s.Nullable() && len(s.Types()) == 2 {
			for _, b := range s.Types() {
				if b.Type() != avro.Null {
					p, err := shape(b, depth+1)
					if err != nil {
						return nil, err
					}
					p.optional, p.nullable, p.node = true, true, parquet.Optional(p.node)
					return p, nil
				}
			}
		}
		p := &pnode{kind: pUnion}
		g := parquet.Group{}
		for i, b := range s.Types() {
			if b.Type() == avro.Null {
				continue
			}
			c, err := shape(b, depth+1)
			if err != nil {
				return nil, err
			}
			c.optional, c.node = true, parquet.Optional(c.node)
			name := string(b.Type())
			if n, ok := b.(avro.NamedSchema); ok {
				name = n.Name()
			}
			p.fields = append(p.fields, pfield{name: name, branch: i, node: c})
			g[name] = c.node
		}
		p.node = g
		return p, nil
	case *avro.RecordSchema:
		p := &pnode{kind: pGroup}
		g := parquet.Group{}
		for _, f := range s.Fields() {
			c, err := shape(f.Type(), depth+1)
			if err != nil {
				return nil, err
			}
			p.fields = append(p.fields, pfield{name: f.Name(), node: c})
			g[f.Name()] = c.node
		}
		p.node = g
		return p, nil
	case *avro.ArraySchema:
		e, err := shape(s.Items(), depth+1)
		if err != nil {
			return nil, err
		}
		return &pnode{kind: pList, elem: e, node: parquet.List(e.node)}, nil
	case *avro.MapSchema:
		e, err := shape(s.Values(), depth+1)
		if err != nil {
			return nil, err
		}
		return &pnode{kind: pMap, elem: e, node: parquet.Map(parquet.String(), e.node)}, nil
	case *avro.EnumSchema:
		return &pnode{leaf: parquet.ByteArray, node: parquet.String()}, nil
	case *avro.FixedSchema:
		typ := parquet.FixedLenByteArrayType(s.Size())
		if d, ok := s.Logical().(*avro.DecimalLogicalSchema); ok {
			return &pnode{leaf: parquet.FixedLenByteArray, node: parquet.Decimal(d.Scale(), d.Precision(), typ)}, nil
		}
		return &pnode{leaf: parquet.FixedLenByteArray, node: parquet.Leaf(typ)}, nil
	case *avro.PrimitiveSchema:
		return primitiveNode(s)
	}
	return nil, fmt.Errorf("unsupported schema %s", s.Type())
}

func primitiveNode(s *avro.PrimitiveSchema) (*pnode, error) {
	var lt avro.LogicalType
	if l := s.Logical(); l != nil {
		lt = l.Type()
	}
	switch s.Type() {
	case avro.Boolean:
		return &pnode{leaf: parquet.Boolean, node: parquet.Leaf(parquet.BooleanType)}, nil
	case avro.Int:
		p := &pnode{leaf: parquet.Int32, node: parquet.Leaf(parquet.Int32Type)}
		switch lt {
		case avro.Date:
			p.node = parquet.Date()
		case avro.TimeMillis:
			p.node = parquet.Time(parquet.Millisecond)
		}
		return p, nil
	case avro.Long:
		p := &pnode{leaf: parquet.Int64, node: parquet.Leaf(parquet.Int64Type)}
		switch lt {
		case avro.TimestampMillis:
			p.node = parquet.Timestamp(parquet.Millisecond)
		case avro.TimestampMicros:
			p.node = parquet.Timestamp(parquet.Microsecond)
		case avro.LocalTimestampMillis:
			p.node = parquet.TimestampAdjusted(parquet.Millisecond, false)
		case avro.LocalTimestampMicros:
			p.node = parquet.TimestampAdjusted(parquet.Microsecond, false)
		case avro.TimeMicros:
			p.node = parquet.Time(parquet.Microsecond)
		}
		return p, nil
	case avro.Float:
		return &pnode{leaf: parquet.Float, node: parquet.Leaf(parquet.FloatType)}, nil
	case avro.Double:
		return &pnode{leaf: parquet.Double, node: parquet.Leaf(parquet.DoubleType)}, nil
	case avro.String:
		return &pnode{leaf: parquet.ByteArray, node: parquet.String()}, nil
	case avro.Bytes:
		if d, ok := s.Logical().(*avro.DecimalLogicalSchema); ok {
			// Plain: some readers (DuckDB) decode a decimal's bytes only so.
			return &pnode{leaf: parquet.ByteArray, node: parquet.Encoded(parquet.Decimal(d.Scale(), d.Precision(), parquet.ByteArrayType), &parquet.Plain)}, nil
		}
		return &pnode{leaf: parquet.ByteArray, node: parquet.Leaf(parquet.ByteArrayType)}, nil
	}
	return nil, fmt.Errorf("unsupported type %s", s.Type())
}

// finish puts group fields in the Parquet library's order and numbers
// the leaves from col; it returns the next free column.
func (p *pnode) finish(col int) int {
	p.col = col
	switch p.kind {
	case pLeaf:
		col++
	case pGroup, pUnion:
		slices.SortFunc(p.fields, func(a, b pfield) int { return strings.Compare(a.name, b.name) })
		for _, f := range p.fields {
			col = f.node.finish(col)
		}
	case pList:
		col = p.elem.finish(col)
	case pMap:
		col = p.elem.finish(col + 1) // the key's column first
	}
	p.leaves = col - p.col
	return col
}

// shred appends v's values to each column of p, Dremel style: r is the
// repetition level of the first value, d the definition level reached,
// depth the repetition depth of p.
func (p *pnode) shred(cols [][]parquet.Value, v any, r, d, depth int) error {
	if p.nullable {
		u, ok := v.(union)
		if !ok && v != nil {
			return fmt.Errorf("%v is not a union value", v)
		}
		v = u.v
	}
	if p.optional {
		if v == nil {
			p.nulls(cols, r, d)
			return nil
		}
		d++
	}
	switch p.kind {
	case pLeaf:
		val, err := leafValue(p.leaf, v)
		if err != nil {
			return err
		}
		cols[p.col] = append(cols[p.col], val.Level(r, d, p.col))
	case pGroup:
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%v is not a record", v)
		}
		for _, f := range p.fields {
			if err := f.node.shred(cols, m[f.name], r, d, depth); err != nil {
				return fmt.Errorf("%s: %w", f.name, err)
			}
		}
	case pUnion:
		u, ok := v.(union)
		if !ok {
			return fmt.Errorf("%v is not a union value", v)
		}
		for _, f := range p.fields {
			var x any
			if f.branch == u.branch {
				x = u.v
			}
			if err := f.node.shred(cols, x, r, d, depth); err != nil {
				return err
			}
		}
	case pList:
		items, ok := v.([]any)
		if !ok {
			return fmt.Errorf("%v is not an array", v)
		}
		if len(items) == 0 {
			p.nulls(cols, r, d)
			return nil
		}
		for i, it := range items {
			rr := r
			if i > 0 {
				rr = depth + 1
			}
			if err := p.elem.shred(cols, it, rr, d+1, depth+1); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
	case pMap:
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%v is not a map", v)
		}
		if len(m) == 0 {
			p.nulls(cols, r, d)
			return nil
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			rr := r
			if i > 0 {
				rr = depth + 1
			}
			cols[p.col] = append(cols[p.col], parquet.ByteArrayValue([]byte(k)).Level(rr, d+1, p.col))
			if err := p.elem.shred(cols, m[k], rr, d+1, depth+1); err != nil {
				return fmt.Errorf("[%q]: %w", k, err)
			}
		}
	}
	return nil
}

// nulls writes a null at definition level d to every column of p.
func (p *pnode) nulls(cols [][]parquet.Value, r, d int) {
	for c := p.col; c < p.col+p.leaves; c++ {
		cols[c] = append(cols[c], parquet.NullValue().Level(r, d, c))
	}
}

func leafValue(k parquet.Kind, v any) (parquet.Value, error) {
	switch x := v.(type) {
	case bool:
		if k == parquet.Boolean {
			return parquet.BooleanValue(x), nil
		}
	case int32:
		if k == parquet.Int32 {
			return parquet.Int32Value(x), nil
		}
	case int64:
		if k == parquet.Int64 {
			return parquet.Int64Value(x), nil
		}
	case float32:
		if k == parquet.Float {
			return parquet.FloatValue(x), nil
		}
	case float64:
		if k == parquet.Double {
			return parquet.DoubleValue(x), nil
		}
	case string:
		if k == parquet.ByteArray {
			return parquet.ByteArrayValue([]byte(x)), nil
		}
	case []byte:
		switch k {
		case parquet.ByteArray:
			return parquet.ByteArrayValue(x), nil
		case parquet.FixedLenByteArray:
			return parquet.FixedLenByteArrayValue(x), nil
		}
	}
	return parquet.Value{}, fmt.Errorf("%v (%T) is not a %s", v, v, k)
}
