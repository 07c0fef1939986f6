package exportfile

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/doppio-db/doppio/client"
	"github.com/doppio-db/doppio/client/export"
	"github.com/hamba/avro/v2/ocf"
)

const testSchema = `{"type":"record","name":"T","namespace":"x","fields":[
 {"name":"i","type":"int"},
 {"name":"c","type":{"type":"enum","name":"C","symbols":["A","B"]}},
 {"name":"h","type":{"type":"fixed","name":"H","size":2}},
 {"name":"u","type":["null","long","string"],"default":null},
 {"name":"t","type":{"type":"long","logicalType":"time-micros"}}]}`

var testTable = export.Table{Name: "T", Version: 1, Key: []client.KeyPart{{Name: "k", Type: "string"}}, Schema: json.RawMessage(testSchema)}

// A document that does not fit its column's type is refused naming the
// field, never written as something else.
func TestRowValuesRefuseWhatDoesNotFit(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{`{"i":2147483648,"c":"A","h":"AAA=","t":0}`, "field i: 2147483648 is out of an int's range"},
		{`{"i":1,"c":"Z","h":"AAA=","t":0}`, "field c: Z is not a symbol of enum C"},
		{`{"i":1,"c":"A","h":"AAAA","t":0}`, "field h: 3 bytes for a fixed of 2"},
		{`{"i":1,"c":"A","h":"AAA=","u":true,"t":0}`, "field u: true is none of the union's types"},
		{`{"i":1.5,"c":"A","h":"AAA=","t":0}`, "field i: 1.5 is not an integer"},
	} {
		_, cols, err := rowColumns(testTable, export.Snapshot)
		if err != nil {
			t.Fatal(err)
		}
		_, err = rowValues(cols, 1, export.Snapshot, export.Row{Key: []any{"k"}, Doc: json.RawMessage(c.doc)})
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: error %v, want %q", c.doc, err, c.want)
		}
	}
}

// An Avro change export reads back, through the Avro library's decoder,
// as the rows written: a delete with every field null, a general union
// by its branch, a time-micros as its microseconds.
func TestAvroChangeRowsReadBack(t *testing.T) {
	var buf bytes.Buffer
	fw, err := Avro.NewFile(&buf, testTable, export.Changes)
	if err != nil {
		t.Fatal(err)
	}
	rows := []export.Row{
		{Op: "insert", SCN: "1:5", Mtime: 1700000000000, Key: []any{"a"}, Doc: json.RawMessage(`{"i":-3,"c":"B","h":"AQI=","u":"s","t":1500}`)},
		{Op: "delete", SCN: "1:6", Mtime: 1700000000001, Key: []any{"a"}},
	}
	for _, r := range rows {
		if err := fw.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	dec, err := ocf.NewDecoder(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if s := dec.Schema().String(); !strings.Contains(s, `"name":"x.TRow"`) || !strings.Contains(s, `"name":"_mtime","type":{"type":"long","logicalType":"timestamp-millis"}`) {
		t.Fatalf("schema %s", s)
	}
	var got []map[string]any
	for dec.HasNext() {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		got = append(got, m)
	}
	if len(got) != 2 {
		t.Fatalf("read %d rows", len(got))
	}
	ins, del := got[0], got[1]
	// The library decodes a union of null and a named type as {name: v}.
	if c, ok := ins["c"].(map[string]any); !ok || c["x.C"] != "B" || ins["k"] != "a" || ins["_op"] != "insert" || ins["_scn"] != "1:5" || ins["i"] != -3 {
		t.Errorf("insert row %v", ins)
	}
	if ins["u"] != "s" || ins["t"] != 1500*time.Microsecond {
		t.Errorf("insert row's union %#v and time %#v, want \"s\" and 1.5ms", ins["u"], ins["t"])
	}
	if del["_op"] != "delete" || del["i"] != nil || del["c"] != nil || del["u"] != nil {
		t.Errorf("delete row %v: want its fields null", del)
	}
}
