package main

import (
	"encoding/json"
	"testing"
)

// TestProfilesHaveTheirSizesAndReplay holds the generator to the sizes
// the report states and to the same bytes for one (profile, revision).
func TestProfilesHaveTheirSizesAndReplay(t *testing.T) {
	const lo, hi = 2048, 24576
	for i := range 300 {
		size := profileSize(i, lo, hi)
		if size < lo || size > hi {
			t.Fatalf("profile %d: size %d outside [%d, %d]", i, size, lo, hi)
		}
		a, _ := json.Marshal(makeProfile(i, 3, size))
		b, _ := json.Marshal(makeProfile(i, 3, size))
		if string(a) != string(b) {
			t.Fatalf("profile %d revision 3 differs between two makes", i)
		}
		if n := len(a); n < size || n > size+32 {
			t.Fatalf("profile %d: %d bytes of JSON for a size of %d", i, n, size)
		}
	}
}
