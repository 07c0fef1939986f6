package exportfile

import (
	"fmt"
	"io"
	"math/big"
	"reflect"
	"time"

	"github.com/doppio-db/doppio/client/export"
	"github.com/hamba/avro/v2"
	"github.com/hamba/avro/v2/ocf"
)

// Avro writes Avro object container files (deflate blocks) whose schema
// is the row record: record name <Table>Row, the table's namespace.
var Avro export.Format = avroFormat{}

type avroFormat struct{}

func (avroFormat) Name() string { return "avro" }

func (avroFormat) NewFile(w io.Writer, t export.Table, kind export.Kind) (export.FileWriter, error) {
	rec, cols, err := rowColumns(t, kind)
	if err != nil {
		return nil, err
	}
	fields := make([]*avro.Field, len(cols))
	for i, c := range cols {
		if fields[i], err = avro.NewField(c.name, c.schema); err != nil {
			return nil, fmt.Errorf("column %s: %w", c.name, err)
		}
	}
	row, err := avro.NewRecordSchema(rec.Name()+"Row", rec.Namespace(), fields)
	if err != nil {
		return nil, err
	}
	enc, err := ocf.NewEncoderWithSchema(row, w, ocf.WithCodec(ocf.Deflate))
	if err != nil {
		return nil, err
	}
	return &avroFile{enc: enc, cols: cols, keys: len(t.Key), kind: kind}, nil
}

type avroFile struct {
	enc  *ocf.Encoder
	cols []column
	keys int
	kind export.Kind
}

func (f *avroFile) Write(r export.Row) error {
	vals, err := rowValues(f.cols, f.keys, f.kind, r)
	if err != nil {
		return err
	}
	rec := make(map[string]any, len(f.cols))
	for i, c := range f.cols {
		v, err := avroValue(c.schema, vals[i])
		if err != nil {
			return fmt.Errorf("column %s: %w", c.name, err)
		}
		rec[c.name] = v
	}
	return f.enc.Encode(rec)
}

func (f *avroFile) Close() error { return f.enc.Close() }

// avroValue shapes a typed value the way the Avro library encodes it
// generically: a union as {branch name: value}, a fixed as a byte array,
// a decimal as a *big.Rat, a time-micros as a time.Duration.
func avroValue(s avro.Schema, v any) (any, error) {
	if r, ok := s.(*avro.RefSchema); ok {
		s = r.Schema()
	}
	switch s := s.(type) {
	case *avro.UnionSchema:
		u, ok := v.(union)
		if !ok {
			return nil, fmt.Errorf("%v is not a union value", v)
		}
		b := s.Types()[u.branch]
		x, err := avroValue(b, u.v)
		if err != nil {
			return nil, err
		}
		return map[string]any{branchName(b): x}, nil
	case *avro.RecordSchema:
		m := v.(map[string]any)
		out := make(map[string]any, len(m))
		for _, f := range s.Fields() {
			x, err := avroValue(f.Type(), m[f.Name()])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f.Name(), err)
			}
			out[f.Name()] = x
		}
		return out, nil
	case *avro.ArraySchema:
		a := v.([]any)
		out := make([]any, len(a))
		for i, e := range a {
			x, err := avroValue(s.Items(), e)
			if err != nil {
				return nil, err
			}
			out[i] = x
		}
		return out, nil
	case *avro.MapSchema:
		m := v.(map[string]any)
		out := make(map[string]any, len(m))
		for k, e := range m {
			x, err := avroValue(s.Values(), e)
			if err != nil {
				return nil, err
			}
			out[k] = x
		}
		return out, nil
	case *avro.FixedSchema:
		b := v.([]byte)
		if d, ok := s.Logical().(*avro.DecimalLogicalSchema); ok {
			return decimal(b, d.Scale()), nil
		}
		arr := reflect.New(reflect.ArrayOf(len(b), reflect.TypeFor[byte]())).Elem()
		reflect.Copy(arr, reflect.ValueOf(b))
		return arr.Interface(), nil
	case *avro.PrimitiveSchema:
		switch l := s.Logical().(type) {
		case *avro.DecimalLogicalSchema:
			return decimal(v.([]byte), l.Scale()), nil
		case nil:
		default:
			if l.Type() == avro.TimeMicros {
				return time.Duration(v.(int64)) * time.Microsecond, nil
			}
		}
	}
	return v, nil
}

// decimal is the value of an Avro decimal: its bytes are the big-endian
// two's-complement unscaled integer.
func decimal(b []byte, scale int) *big.Rat {
	n := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	return new(big.Rat).SetFrac(n, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil))
}

// branchName is how the Avro library names a union's branch.
func branchName(s avro.Schema) string {
	if r, ok := s.(*avro.RefSchema); ok {
		s = r.Schema()
	}
	if n, ok := s.(avro.NamedSchema); ok {
		return n.FullName()
	}
	name := string(s.Type())
	if ls, ok := s.(avro.LogicalTypeSchema); ok && ls.Logical() != nil && !reflect.ValueOf(ls.Logical()).IsNil() {
		name += "." + string(ls.Logical().Type())
	}
	return name
}
