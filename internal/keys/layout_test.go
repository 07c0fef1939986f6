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
