package keys

import "testing"

func TestIsDocumentTellsDocumentKeysFromEveryOtherKey(t *testing.T) {
	for _, db := range []string{"mail", "", "a\x00b", "\x00", "x\xff\x00"} {
		p := PartitionPrefix(db, 3)
		doc := p.Document("Message", AppendString(nil, "box1"))
		if !IsDocument(doc) {
			t.Errorf("db %q: document key %x not recognised", db, doc)
		}
		if !IsDocument(p.Table("Message")) {
			t.Errorf("db %q: collection prefix not recognised", db)
		}
		for name, k := range map[string][]byte{
			"index":          p.Index("Message", AppendString(nil, "box1"), "body"),
			"auto-increment": p.AutoIncrement("Message", nil),
			"log":            p.Log(1, 2),
			"meta":           p.Meta("scn"),
			"partition":      p,
			"node":           Node("id"),
			"truncated":      doc[:len(p)],
		} {
			if IsDocument(k) {
				t.Errorf("db %q: %s key %x taken for a document", db, name, k)
			}
		}
	}
	if IsDocument(nil) || IsDocument([]byte{'p'}) {
		t.Error("short keys taken for documents")
	}
}

func TestMayHoldDocumentsIsFalseOnlyForSpansOfAnotherSection(t *testing.T) {
	for _, db := range []string{"mail", "", "a\x00b"} {
		p := PartitionPrefix(db, 3)
		q := PartitionPrefix(db, 4)
		for _, tc := range []struct {
			name       string
			start, end []byte
			want       bool
		}{
			{"raft log truncation", p.RaftLogPrefix(), p.RaftLog(100), false},
			{"raft log tail", p.RaftLog(7), p.RaftLog(9), false},
			{"change-log trim", p.LogPrefix(), append(p.Log(2, 9), 0), false},
			{"index entries", p.Index("Message", AppendString(nil, "box1"), "body"), PrefixEnd(p.Index("Message", AppendString(nil, "box1"), "body")), false},
			{"documents of a table", p.Table("Message"), PrefixEnd(p.Table("Message")), true},
			{"every document", p.DocumentPrefix(), PrefixEnd(p.DocumentPrefix()), true},
			{"auto-increment to log, across documents", p.AutoIncrementPrefix(), p.LogPrefix(), true},
			{"whole partition", p, p.End(), true},
			{"data spans", p.DataSpans()[0][0], p.DataSpans()[0][1], true},
			{"two partitions' logs", p.LogPrefix(), q.LogPrefix(), true},
			{"node keys", Node("a"), Node("b"), true},
		} {
			if got := MayHoldDocuments(tc.start, tc.end); got != tc.want {
				t.Errorf("db %q: %s [%x, %x): %v, want %v", db, tc.name, tc.start, tc.end, got, tc.want)
			}
		}
	}
}

// Every request encodes its key and builds its document key: each is one
// allocation of the exact size (appending to nil or to a slice sized two
// bytes short grew them several times per request).
func TestKeysAreBuiltInOneAllocation(t *testing.T) {
	p := Partition("\x01db\x00\x01\x02")
	tuple := Tuple{"user0001", int64(42), "profile"}
	var key []byte
	if n := testing.AllocsPerRun(100, func() { key, _ = EncodeTuple(tuple) }); n != 1 {
		t.Errorf("EncodeTuple: %v allocations, want 1", n)
	}
	if len(key) != cap(key) {
		t.Errorf("EncodeTuple: length %d, capacity %d: not sized exactly", len(key), cap(key))
	}
	for name, build := range map[string]func() []byte{
		"Document":      func() []byte { return p.Document("usertable", key) },
		"Table":         func() []byte { return p.Table("usertable") },
		"IndexTable":    func() []byte { return p.IndexTable("usertable") },
		"Index":         func() []byte { return p.Index("usertable", key, "address.city") },
		"AutoIncrement": func() []byte { return p.AutoIncrement("usertable", key) },
		"Meta":          func() []byte { return p.Meta("applied") },
	} {
		var b []byte
		if n := testing.AllocsPerRun(100, func() { b = build() }); n != 1 {
			t.Errorf("%s: %v allocations, want 1", name, n)
		}
		if len(b) != cap(b) {
			t.Errorf("%s: length %d, capacity %d: not sized exactly", name, len(b), cap(b))
		}
	}
	if got, want := p.Document("usertable", key), append(p.Table("usertable"), key...); string(got) != string(want) {
		t.Errorf("Document = %x, want the table prefix and the key %x", got, want)
	}
	if got, want := p.Index("usertable", key, "city"), AppendString(append(p.IndexTable("usertable"), key...), "city"); string(got) != string(want) {
		t.Errorf("Index = %x, want the table's index prefix, the group and the field %x", got, want)
	}
	// A string holding zero bytes is escaped, and still encoded right.
	zero, _ := EncodeTuple(Tuple{"a\x00b"})
	if want := []byte{tagString, 'a', 0, 0xFF, 'b', 0, 1}; string(zero) != string(want) {
		t.Errorf("EncodeTuple with a zero byte = %x, want %x", zero, want)
	}
}
