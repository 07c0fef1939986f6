package mailboxdata

import (
	"encoding/json"
	"testing"
)

// A bulk build's input record is one flat object: the key parts by name
// beside every field of the document.
func TestRecordIsFlatWithTheKeyParts(t *testing.T) {
	var got []map[string]any
	err := Each(1, "A", 2, 3, func(r Record) error {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			return err
		}
		got = append(got, m)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 6 {
		t.Fatalf("%d records, want 6", len(got))
	}
	var spec struct {
		Schema struct{ Fields []struct{ Name string } }
	}
	if err := json.Unmarshal([]byte(Schema), &spec); err != nil {
		t.Fatal(err)
	}
	last := got[5]
	if last["mailboxId"] != "A000001" || last["messageId"] != 3.0 || len(last) != 2+len(spec.Schema.Fields) {
		t.Fatalf("last record: mailboxId %v, messageId %v, %d names; want A000001, 3 and %d names", last["mailboxId"], last["messageId"], len(last), 2+len(spec.Schema.Fields))
	}
	for _, f := range spec.Schema.Fields {
		if _, ok := last[f.Name]; !ok {
			t.Errorf("field %s missing from the record", f.Name)
		}
	}
}
