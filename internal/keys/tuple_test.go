package keys

import (
	"bytes"
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func compareTuples(a, b Tuple) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		var c int
		switch x := a[i].(type) {
		case string:
			y, ok := b[i].(string)
			if !ok {
				return -1 // strings sort before integers
			}
			c = cmp.Compare(x, y)
		case int64:
			y, ok := b[i].(int64)
			if !ok {
				return 1
			}
			c = cmp.Compare(x, y)
		}
		if c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a), len(b))
}

func TestTupleRoundTrip(t *testing.T) {
	cases := []Tuple{
		{"a"}, {""}, {"a\x00b"}, {"\x00"}, {"\xff\x00\xff"}, {"héllo", int64(7)},
		{int64(math.MinInt64)}, {int64(-1)}, {int64(0)}, {int64(math.MaxInt64)},
		{"m1", int64(42), "x/y,(z)"},
	}
	for _, tc := range cases {
		b, err := EncodeTuple(tc)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeTuple(b)
		if err != nil {
			t.Fatalf("%v: %v", tc, err)
		}
		if !slices.Equal(got, tc) {
			t.Fatalf("round trip of %v gave %v", tc, got)
		}
	}
}

func TestTupleOrderMatchesByteOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	randPart := func() any {
		if r.IntN(2) == 0 {
			b := make([]byte, r.IntN(4))
			for i := range b {
				b[i] = []byte{0, 1, 'a', 'b', 0xff}[r.IntN(5)]
			}
			return string(b)
		}
		return int64(r.IntN(7) - 3)
	}
	for range 20000 {
		a, b := Tuple{randPart(), randPart()}, Tuple{randPart()}
		if r.IntN(2) == 0 {
			b = append(b, randPart())
		}
		ea, _ := EncodeTuple(a)
		eb, _ := EncodeTuple(b)
		if got, want := bytes.Compare(ea, eb), compareTuples(a, b); got != want {
			t.Fatalf("order of %v vs %v: bytes say %d, tuples say %d", a, b, got, want)
		}
	}
}

func TestLeadingPartsArePrefix(t *testing.T) {
	full, _ := EncodeTuple(Tuple{"mbox\x00", int64(5), "x"})
	lead, _ := EncodeTuple(Tuple{"mbox\x00", int64(5)})
	if !bytes.HasPrefix(full, lead) {
		t.Fatal("encoding of leading parts is not a prefix of the full key")
	}
	other, _ := EncodeTuple(Tuple{"mbox\x00x"})
	short, _ := EncodeTuple(Tuple{"mbox"})
	if bytes.HasPrefix(other, short) {
		t.Fatal("a longer string's encoding must not extend a shorter string's encoding")
	}
}

func TestPrefixEnd(t *testing.T) {
	for _, tc := range []struct{ in, want []byte }{
		{[]byte{1, 2}, []byte{1, 3}},
		{[]byte{1, 0xff}, []byte{2}},
		{[]byte{0xff, 0xff}, nil},
	} {
		if got := PrefixEnd(tc.in); !bytes.Equal(got, tc.want) {
			t.Fatalf("PrefixEnd(%x) = %x, want %x", tc.in, got, tc.want)
		}
	}
}

func TestLogKeysOrderBySCN(t *testing.T) {
	p := PartitionPrefix("db", 3)
	a, b := p.Log(1, 255), p.Log(1, 256)
	c := p.Log(2, 1)
	if bytes.Compare(a, b) >= 0 || bytes.Compare(b, c) >= 0 {
		t.Fatal("log keys do not sort by (generation, sequence)")
	}
	g, s, ok := p.ParseLog(b)
	if !ok || g != 1 || s != 256 {
		t.Fatalf("ParseLog = %d %d %v", g, s, ok)
	}
	if !bytes.HasPrefix(p.Document("T", []byte{1}), p) || bytes.HasPrefix(PartitionPrefix("db", 30), p) {
		t.Fatal("partition prefixes must nest their keys and not each other")
	}
}

// FuzzTuple checks that decoding never panics, that anything decoded
// re-encodes to the same bytes, and that encoding preserves order.
func FuzzTuple(f *testing.F) {
	for _, s := range []string{"\x02a\x00\x01", "\x02\x00\xff\x00\x01\x15\x80\x00\x00\x00\x00\x00\x00\x01", "\x15", "\x02", "\x03"} {
		f.Add([]byte(s), "x", int64(1))
	}
	f.Fuzz(func(t *testing.T, b []byte, s string, n int64) {
		if tup, err := DecodeTuple(b); err == nil {
			again, err := EncodeTuple(tup)
			if err != nil || !bytes.Equal(again, b) {
				t.Fatalf("decode/encode of %x gave %x (%v)", b, again, err)
			}
		}
		x, _ := EncodeTuple(Tuple{s, n})
		y, _ := EncodeTuple(Tuple{s + "\x00", n})
		if bytes.Compare(x, y) >= 0 {
			t.Fatalf("%q < %q but encodings compare %d", s, s+"\x00", bytes.Compare(x, y))
		}
	})
}
