package schema

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/doppio-db/doppio/internal/problem"
)

// messageSchema exercises every Avro type the codec handles.
const messageSchema = `{"type":"record","name":"Message","namespace":"mail","fields":[
 {"name":"subject","type":"string","index":"text"},
 {"name":"count","type":"int","default":0},
 {"name":"size","type":"long","default":0},
 {"name":"score","type":"float","default":0},
 {"name":"ratio","type":"double","default":0},
 {"name":"unread","type":"boolean","default":true,"index":"attribute"},
 {"name":"status","type":{"type":"enum","name":"Status","symbols":["NEW","READ","ARCHIVED"]},"default":"NEW"},
 {"name":"tags","type":{"type":"array","items":"string"},"default":[],"index":"attribute"},
 {"name":"attrs","type":{"type":"map","values":"long"},"default":{}},
 {"name":"blob","type":"bytes","default":""},
 {"name":"hash","type":["null",{"type":"fixed","name":"MD5","size":4}],"default":null},
 {"name":"sent","type":{"type":"long","logicalType":"timestamp-millis"},"default":0},
 {"name":"note","type":["null","string"],"default":null},
 {"name":"views","type":["null","long"],"default":null},
 {"name":"choice","type":["int","string",{"type":"record","name":"Pt","fields":[{"name":"x","type":"int"}]}],"default":0},
 {"name":"address","type":{"type":"record","name":"Address","fields":[
   {"name":"city","type":"string","default":"","index":"attribute"},
   {"name":"geo","type":["null",{"type":"record","name":"Geo","fields":[
     {"name":"lat","type":"double"},
     {"name":"hits","type":"int","default":0}]}],"default":null}]},
  "default":{}},
 {"name":"next","type":["null","Message"],"default":null}
]}`

func tableDef(schemas ...string) TableDef {
	def := TableDef{
		Database: "mail",
		Name:     "messages",
		Key:      []KeyPart{{Name: "mailboxId", Type: KeyString}, {Name: "messageId", Type: KeyLong, AutoIncrement: true}},
	}
	for i, s := range schemas {
		def.Versions = append(def.Versions, Version{Version: i + 1, Schema: json.RawMessage(s)})
	}
	return def
}

func mustTable(t testing.TB, schemas ...string) *Table {
	t.Helper()
	tb, err := Compile(tableDef(schemas...))
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return tb
}

// wantProblem checks err is a *problem.Error of kind k about field whose
// detail contains detail.
func wantProblem(t testing.TB, err error, k problem.Kind, field, detail string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want kind %v field %q detail %q", k, field, detail)
	}
	e, ok := problem.As(err)
	if !ok {
		t.Fatalf("got %T %v, want *problem.Error", err, err)
	}
	if e.Kind != k || e.Field != field || !strings.Contains(e.Detail, detail) {
		t.Fatalf("got kind %v field %q detail %q\nwant kind %v field %q detail containing %q", e.Kind, e.Field, e.Detail, k, field, detail)
	}
}

func mustJSON(t testing.TB, doc Document) string {
	t.Helper()
	b, err := MarshalDocument(doc)
	if err != nil {
		t.Fatalf("MarshalDocument: %v", err)
	}
	return string(b)
}

// canonicalJSON re-encodes a JSON text with sorted keys.
func canonicalJSON(t testing.TB, s string) string {
	t.Helper()
	var v any
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		t.Fatalf("bad JSON %s: %v", s, err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}
