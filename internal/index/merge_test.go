package index_test

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/doppio-db/doppio/internal/index"
)

func TestMergePlan(t *testing.T) {
	seg := func(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }
	segs := func(docs ...int) []index.SegmentInfo {
		var out []index.SegmentInfo
		for i, d := range docs {
			out = append(out, index.SegmentInfo{ID: seg(uint64(i + 1)), Docs: d})
		}
		return out
	}
	for _, c := range []struct {
		name string
		segs []index.SegmentInfo
		max  int
		want []uint64 // ids (1-based positions in segs)
	}{
		{"no segment", nil, 8192, nil},
		{"seven of tier 0", segs(256, 256, 256, 256, 256, 256, 256), 8192, nil},
		{"eight of tier 0", segs(256, 10, 256, 256, 256, 256, 256, 256), 8192, []uint64{2, 1, 3, 4, 5, 6, 7, 8}},
		{"eight of nine in tier 0, smallest first", segs(256, 200, 100, 256, 256, 256, 256, 256, 50), 8192, []uint64{9, 3, 2, 1, 4, 5, 6, 7}},
		{"tiers apart: 4 of tier 0, 4 of tier 1", segs(256, 300, 256, 300, 256, 300, 256, 300), 8192, nil},
		{"the lowest full tier first", segs(2048, 2048, 2048, 2048, 2048, 2048, 2048, 2048, 1, 1, 1, 1, 1, 1, 1, 1), 1 << 20, []uint64{9, 10, 11, 12, 13, 14, 15, 16}},
		{"tier 1, as many as fit in the bound", segs(2000, 2000, 2000, 2000, 2000, 2000, 2000, 2000), 8192, []uint64{1, 2, 3, 4}},
		{"nothing fits two", segs(5000, 5000, 5000, 5000, 5000, 5000, 5000, 5000), 8192, nil},
	} {
		var want [][]byte
		for _, id := range c.want {
			want = append(want, seg(id))
		}
		if got := index.MergePlan(c.segs, 256, c.max); !slices.EqualFunc(got, want, slices.Equal) {
			t.Errorf("%s: MergePlan = %x, want %x", c.name, got, want)
		}
	}
}
