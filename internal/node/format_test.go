package node

import (
	"encoding/binary"
	"testing"

	"github.com/doppio-db/doppio/internal/storage"
)

// TestStoreFormatGuard: a new store is stamped with this binary's format
// and opens again; a store of a newer format, or an unreadable one, is
// refused with the reason, and the check changes nothing in it.
func TestStoreFormatGuard(t *testing.T) {
	e, err := storage.Open(t.TempDir(), storage.Options{CacheBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	stamp := func(v []byte) {
		t.Helper()
		b := e.NewBatch()
		b.Set(storeFormatKey, v)
		if err := e.Commit(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := checkStoreFormat(e, "d"); err != nil {
		t.Fatalf("a new store: %v", err)
	}
	if v, err := e.Get(storeFormatKey); err != nil || string(v) != string(binary.AppendUvarint(nil, storeFormat)) {
		t.Fatalf("a new store's format = %x (%v), want %d", v, err, storeFormat)
	}
	if err := checkStoreFormat(e, "d"); err != nil {
		t.Fatalf("a store of this format: %v", err)
	}
	for _, c := range []struct {
		value []byte
		want  string
	}{
		{binary.AppendUvarint(nil, storeFormat+1), "data directory d was written by a newer version of Doppio (store format 3; this binary reads format 2 at most): start the newer version on it"},
		{[]byte{0xff}, "data directory d: unreadable store format ff"},
		{[]byte{1, 0}, "data directory d: unreadable store format 0100"},
	} {
		stamp(c.value)
		err := checkStoreFormat(e, "d")
		if err == nil || err.Error() != c.want {
			t.Errorf("format %x: %v, want %q", c.value, err, c.want)
		}
		if v, _ := e.Get(storeFormatKey); string(v) != string(c.value) {
			t.Errorf("format %x: the check rewrote it to %x", c.value, v)
		}
	}
}
