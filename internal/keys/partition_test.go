package keys

import "testing"

// Stored data lies in the partition this function chose when it was
// written, and clients route with it: a change of hash moves every
// document group, so the mapping is pinned.
func TestPartitionOfIsStable(t *testing.T) {
	cases := []struct {
		key        Tuple
		partitions int
		want       int
	}{
		{Tuple{"box1"}, 8, 5}, {Tuple{"box1"}, 64, 21}, {Tuple{"box1"}, 1024, 277},
		{Tuple{"g0"}, 8, 6}, {Tuple{"g0"}, 64, 62}, {Tuple{"g0"}, 1024, 1022},
		{Tuple{int64(42)}, 8, 5}, {Tuple{int64(42)}, 64, 21}, {Tuple{int64(42)}, 1024, 469},
		{Tuple{"ann"}, 1, 0},
	}
	for _, c := range cases {
		enc, err := EncodeTuple(c.key)
		if err != nil {
			t.Fatal(err)
		}
		if got := PartitionOf(enc, c.partitions); got != c.want {
			t.Errorf("PartitionOf(%v, %d) = %d, want %d", c.key, c.partitions, got, c.want)
		}
	}
}
