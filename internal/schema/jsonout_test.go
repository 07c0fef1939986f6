package schema

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestAppendJSONKeepsSchemaOrderAndRoundTrips(t *testing.T) {
	tb := mustTable(t, `{"type":"record","name":"R","fields":[
		{"name":"z","type":"string"},
		{"name":"a","type":"long"},
		{"name":"f","type":"float","default":0.1},
		{"name":"nested","type":{"type":"record","name":"N","fields":[{"name":"y","type":"boolean"},{"name":"b","type":["null","bytes"],"default":null}]}},
		{"name":"tags","type":{"type":"array","items":"string"},"default":[]},
		{"name":"m","type":{"type":"map","values":"double"},"default":{}}]}`)
	in := `{"z":"q\"\\\n\u0001é\u2028","a":-9007199254740993,"nested":{"y":true,"b":"AAE="},"tags":["x"],"m":{"k2":1.5,"k1":1e300}}`
	doc, err := tb.DecodeJSON([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	out := tb.AppendJSON(nil, doc, 0)
	want := `{"z":"q\"\\\n\u0001é\u2028","a":-9007199254740993,"f":0.1,"nested":{"y":true,"b":"AAE="},"tags":["x"],"m":{"k1":1e+300,"k2":1.5}}`
	if string(out) != want {
		t.Fatalf("AppendJSON\n got %s\nwant %s", out, want)
	}
	again, err := tb.DecodeJSON(out)
	if err != nil || !reflect.DeepEqual(again, doc) {
		t.Fatalf("re-decoding the output: %v, equal=%v", err, reflect.DeepEqual(again, doc))
	}
	var generic map[string]any
	if err := json.Unmarshal(out, &generic); err != nil {
		t.Fatalf("output is not JSON: %v", err)
	}
	if got := string(tb.AppendJSON(nil, Project(doc, [][]string{{"nested", "y"}, {"a"}}), 0)); got != `{"a":-9007199254740993,"nested":{"y":true}}` {
		t.Fatalf("projection rendered %s", got)
	}
}
