package replication

import (
	"bytes"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/doppio-db/doppio/internal/storage"
)

// TestAppendedEntriesReadBackFromTheStore: entries appended in one batch,
// each encoded in the same reused buffer, read back intact from Pebble by
// a storage loaded afresh (no in-memory tail).
func TestAppendedEntriesReadBackFromTheStore(t *testing.T) {
	e, err := storage.Open(t.TempDir(), storage.Options{CacheBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	p := testPartition(0)
	st, err := loadStorage(e, p)
	if err != nil {
		t.Fatal(err)
	}
	var ents []*raftpb.Entry
	for i := uint64(1); i <= 4; i++ {
		// Lengths that shrink and grow, so a stale tail of a longer
		// encoding would show.
		data := bytes.Repeat([]byte{byte('a' + i)}, int([]uint64{0, 3000, 10, 70000, 5}[i]))
		ents = append(ents, &raftpb.Entry{Term: proto.Uint64(1), Index: proto.Uint64(i), Data: data})
	}
	b := e.NewBatch()
	st.append(b, ents)
	if err := e.Commit(b); err != nil {
		t.Fatal(err)
	}
	fresh, err := loadStorage(e, p)
	if err != nil {
		t.Fatal(err)
	}
	got, err := fresh.Entries(1, 5, 1<<30)
	if err != nil || len(got) != 4 {
		t.Fatalf("Entries(1, 5): %d entries, %v", len(got), err)
	}
	for i, g := range got {
		if g.GetIndex() != ents[i].GetIndex() || !bytes.Equal(g.GetData(), ents[i].GetData()) {
			t.Fatalf("entry %d read back with index %d and %d bytes, want %d and %d", i, g.GetIndex(), len(g.GetData()), ents[i].GetIndex(), len(ents[i].GetData()))
		}
	}
}
