package index

import (
	"bytes"
	"cmp"
	"math"
	"math/rand/v2"
	"testing"
)

func TestFloatEncodingOrder(t *testing.T) {
	special := []float64{math.Inf(-1), -math.MaxFloat64, -1, -math.SmallestNonzeroFloat64, math.Copysign(0, -1), 0,
		math.SmallestNonzeroFloat64, 1, math.MaxFloat64, math.Inf(1)}
	r := rand.New(rand.NewPCG(3, 4))
	vals := append([]float64{}, special...)
	for range 2000 {
		vals = append(vals, (r.Float64()-0.5)*math.Pow(10, float64(r.IntN(40)-20)))
	}
	for _, a := range vals {
		for _, b := range special {
			ea, _ := AppendValue(nil, a)
			eb, _ := AppendValue(nil, b)
			if got, want := bytes.Compare(ea, eb), cmp.Compare(a, b); got != want {
				t.Fatalf("%v vs %v: bytes %d, numbers %d", a, b, got, want)
			}
		}
	}
}

func TestValueEncodings(t *testing.T) {
	ordered := [][]any{
		{false, true},
		{int64(math.MinInt64), int64(-1), int64(0), int64(7), int64(math.MaxInt64)},
		{"", "\x00", "a", "a\x00", "ab", "b", "é"},
		{[]byte{}, []byte{0}, []byte{1, 2}},
	}
	for _, vs := range ordered {
		for i := range vs {
			ei, ok := AppendValue(nil, vs[i])
			if !ok {
				t.Fatalf("%v not encodable", vs[i])
			}
			if n, err := valueLen(append(ei, 0x15, 0x02)); err != nil || n != len(ei) {
				t.Fatalf("valueLen of %v = %d, %v; want %d", vs[i], n, err, len(ei))
			}
			if i > 0 {
				prev, _ := AppendValue(nil, vs[i-1])
				if bytes.Compare(prev, ei) >= 0 {
					t.Fatalf("%v does not encode before %v", vs[i-1], vs[i])
				}
			}
		}
	}
	for _, v := range []any{nil, map[string]any{}, []any{"a"}, int(1)} {
		if _, ok := AppendValue(nil, v); ok {
			t.Fatalf("%#v must not be indexable", v)
		}
	}
}
