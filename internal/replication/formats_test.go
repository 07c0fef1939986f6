package replication

import "testing"

// Every kind of normal entry (a write set, a restore step, a check marker)
// is told apart by its first byte, whatever its length: a marker is never
// taken for a restore step with an empty payload, nor the reverse.
func TestEntryFormatsAreDistinct(t *testing.T) {
	id := proposalID{node: 7, seq: 9}
	formats := map[string]byte{"write set": entryFormat, "restore step": entryRestoreFormat, "check marker": checkFormat}
	seen := map[byte]string{}
	for name, f := range formats {
		if other, dup := seen[f]; dup {
			t.Fatalf("%s and %s share format byte %d", name, other, f)
		}
		seen[f] = name
	}
	marker := encodeCheckEntry(id)
	if _, _, _, err := decodeEntry(marker); err == nil {
		t.Fatalf("a check marker decodes as a write set or restore step")
	}
	for _, f := range []byte{entryFormat, entryRestoreFormat} {
		e := frameEntry(f, id, nil) // 17 bytes, like a marker
		if _, ok := decodeCheckEntry(e); ok {
			t.Fatalf("an empty entry of format %d decodes as a check marker", f)
		}
		got, format, _, err := decodeEntry(e)
		if err != nil || got != id || format != f {
			t.Fatalf("format %d: decoded %v %d %v", f, got, format, err)
		}
	}
	if got, ok := decodeCheckEntry(marker); !ok || got != id {
		t.Fatalf("marker decoded %v %v", got, ok)
	}
}
