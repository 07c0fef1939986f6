package index_test

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"slices"
	"testing"

	"github.com/doppio-db/doppio/internal/index"
	"github.com/doppio-db/doppio/internal/keys"
)

func TestEntriesLayout(t *testing.T) {
	tb := mustCompile(t, messageSchema)
	p := keys.PartitionPrefix("db", 3)
	group, rest := str("m1"), tuple(int64(7))
	doc := mustJSON(t, tb, `{"subject":"Hello hello, world","isInbox":true,"createdOn":5,"tags":["b","a","b"],"from":{"city":"Paris"}}`)
	got := index.Entries(tb.Indexes(), p, "T", group, rest, doc)
	entry := func(field string, value []byte) []byte {
		return append(append(p.Index("T", group, field), value...), rest...)
	}
	val := func(v any) []byte { b, _ := index.AppendValue(nil, v); return b }
	positions := func(ps ...uint64) []byte {
		var b []byte
		for _, d := range ps {
			b = binary.AppendUvarint(b, d)
		}
		return b
	}
	want := map[string][]byte{
		string(entry("subject", val("hello"))):    positions(0, 1), // positions 0 and 1, delta-encoded
		string(entry("subject", val("world"))):    positions(2),
		string(entry("isInbox", val(true))):       {},
		string(entry("createdOn", val(int64(5)))): {},
		string(entry("tags", val("a"))):           {},
		string(entry("tags", val("b"))):           {}, // once, though twice in the array
		string(entry("folder", val("INBOX"))):     {},
		string(entry("from.city", val("Paris"))):  {},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d entries, want %d (size is null: no entry)", len(got), len(want))
	}
	for i, e := range got {
		if i > 0 && bytes.Compare(got[i-1].Key, e.Key) >= 0 {
			t.Fatal("entries are not sorted by key")
		}
		w, ok := want[string(e.Key)]
		if !ok || !bytes.Equal(w, e.Value) {
			t.Fatalf("unexpected entry %x = %x", e.Key, e.Value)
		}
	}
}

func TestDiffTouchesOnlyChangedEntries(t *testing.T) {
	tb := mustCompile(t, messageSchema)
	p := keys.PartitionPrefix("db", 3)
	ix := tb.Indexes()
	group, rest := str("m1"), tuple(int64(7))
	before := mustJSON(t, tb, `{"subject":"hello world","isInbox":true,"createdOn":5,"tags":["a","b"],"from":{"city":"Paris"}}`)
	after := mustJSON(t, tb, `{"subject":"world hello","isInbox":true,"createdOn":5,"tags":["b","c"],"from":{"city":"Paris"},"note":"x"}`)
	puts, dels, _ := index.Diff(ix, p, "T", group, rest, before, after, absent)
	key := func(field string, v any) []byte {
		b, _ := index.AppendValue(p.Index("T", group, field), v)
		return append(b, rest...)
	}
	var putKeys [][]byte
	for _, e := range puts {
		putKeys = append(putKeys, e.Key)
	}
	pendingStart, _ := index.PendingSpan(p.Index("T", group, "subject"))
	pendingKey := append(pendingStart, rest...)
	// The terms moved (their positions changed): the subject's pending
	// entry is rewritten, and its terms' entries deleted in case it was
	// folded; tag a went, tag c came; isInbox, createdOn, folder,
	// from.city and tag b are untouched.
	wantPuts := [][]byte{pendingKey, key("tags", "c")}
	wantDels := [][]byte{key("subject", "hello"), key("subject", "world"), key("tags", "a")}
	sortKeys(wantPuts)
	if !reflect.DeepEqual(putKeys, wantPuts) || !reflect.DeepEqual(dels, wantDels) {
		t.Fatalf("puts %x\ndels %x\nwant puts %x\ndels %x", putKeys, dels, wantPuts, wantDels)
	}
	if puts, dels, _ := index.Diff(ix, p, "T", group, rest, before, before, absent); len(puts)+len(dels) != 0 {
		t.Fatal("an unchanged document must write nothing")
	}
	// A delete removes every entry in both forms: the final one and the
	// pending entry.
	all := index.Entries(ix, p, "T", group, rest, before)
	if puts, dels, _ := index.Diff(ix, p, "T", group, rest, before, nil, absent); len(puts) != 0 || len(dels) != len(all)+1 || !slices.ContainsFunc(dels, func(k []byte) bool { return bytes.Equal(k, pendingKey) }) {
		t.Fatalf("a delete removes every entry: %d puts %d dels of %d and the pending one", len(puts), len(dels), len(all))
	}
	// A document a fold put in a segment: its changed text deletes the
	// folded entry Diff looked up and writes the dead posting that hides
	// it in that segment (list, 0x05, segment id, rest); its unchanged
	// text looks nothing up.
	seg := []byte{0, 0, 0, 0, 0, 0, 0, 42}
	var asked [][]byte
	folded := func(k []byte) ([]byte, error) {
		asked = append(asked, slices.Clone(k))
		return append(slices.Clone(seg), "terms"...), nil
	}
	puts, dels, err := index.Diff(ix, p, "T", group, rest, before, after, folded)
	if err != nil || len(asked) != 1 {
		t.Fatalf("a changed text looks its folded entry up once: %d lookups, %v", len(asked), err)
	}
	list := p.Index("T", group, "subject")
	dead := append(append(append(slices.Clone(list), 0x05), seg...), rest...)
	if !slices.ContainsFunc(dels, func(k []byte) bool { return bytes.Equal(k, asked[0]) }) ||
		!slices.ContainsFunc(puts, func(e index.Entry) bool { return bytes.Equal(e.Key, dead) && len(e.Value) == 0 }) {
		t.Fatalf("a folded text changed: the folded entry %x deleted and the dead posting %x put; got puts %v dels %x", asked[0], dead, puts, dels)
	}
	asked = nil
	if puts, dels, _ := index.Diff(ix, p, "T", group, rest, before, before, folded); len(puts)+len(dels)+len(asked) != 0 {
		t.Fatal("an unchanged folded document must look up and write nothing")
	}
	start, end := index.GroupSpan(p, "T", group)
	for _, e := range all {
		if bytes.Compare(e.Key, start) < 0 || bytes.Compare(e.Key, end) >= 0 {
			t.Fatal("GroupSpan does not cover the group's entries")
		}
	}
}

// absent is a partition holding no folded entry.
func absent([]byte) ([]byte, error) { return nil, nil }

func sortKeys(ks [][]byte) {
	for i := range ks {
		for j := i + 1; j < len(ks); j++ {
			if bytes.Compare(ks[j], ks[i]) < 0 {
				ks[i], ks[j] = ks[j], ks[i]
			}
		}
	}
}
