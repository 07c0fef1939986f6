package main

import "testing"

// The store's keys are distinct, so every record survives the build (a
// repeated key would reject every copy).
func TestKeysAreDistinct(t *testing.T) {
	seen := map[string]bool{}
	for i := range 100_000 {
		k := key(i)
		if len(k) != 16 || seen[k] {
			t.Fatalf("key(%d) = %q: repeated or not 16 characters", i, k)
		}
		seen[k] = true
	}
}
