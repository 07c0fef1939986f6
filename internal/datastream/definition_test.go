package datastream

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/changes"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/schema"
)

// fakeCatalog knows database shop (8 partitions) with tables Order and Item.
type fakeCatalog struct{}

func (fakeCatalog) LookupDatabase(_ context.Context, name string) (schema.Database, bool) {
	if name == "shop" {
		return schema.Database{Name: "shop", Partitions: 8, Replicas: 1, Partitioner: "hash"}, true
	}
	return schema.Database{}, false
}

func (fakeCatalog) LookupTable(_ context.Context, db, table string) (*schema.Table, bool) {
	if db == "shop" && (table == "Order" || table == "Item") {
		return &schema.Table{}, true
	}
	return nil, false
}

const okSink = `"sink":{"type":"kafka","brokers":["127.0.0.1:9092"]}`

// TestParseNamesTheBadField: every invalid definition is refused with the
// kind and the exact field at fault.
func TestParseNamesTheBadField(t *testing.T) {
	cases := []struct {
		name, stream, body string
		kind               problem.Kind
		field              string
	}{
		{"bad name", "9lives", `{"database":"shop",` + okSink + `}`, problem.Malformed, "name"},
		{"name with slash", "a/b", `{"database":"shop",` + okSink + `}`, problem.Malformed, "name"},
		{"body names another", "s", `{"name":"t","database":"shop",` + okSink + `}`, problem.Malformed, "name"},
		{"not an object", "s", `[1]`, problem.Malformed, ""},
		{"trailing data", "s", `{"database":"shop",` + okSink + `} {}`, problem.Malformed, ""},
		{"unknown field", "s", `{"database":"shop","color":"red",` + okSink + `}`, problem.Malformed, "color"},
		{"no database", "s", `{` + okSink + `}`, problem.Malformed, "database"},
		{"database wrong type", "s", `{"database":7,` + okSink + `}`, problem.Malformed, "database"},
		{"unknown database", "s", `{"database":"nope",` + okSink + `}`, problem.NotFound, "database"},
		{"unknown table", "s", `{"database":"shop","tables":["Order","Nope"],` + okSink + `}`, problem.NotFound, "tables"},
		{"empty table name", "s", `{"database":"shop","tables":[""],` + okSink + `}`, problem.Malformed, "tables"},
		{"tables not an array", "s", `{"database":"shop","tables":"Order",` + okSink + `}`, problem.Malformed, "tables"},
		{"partition out of range", "s", `{"database":"shop","partitions":[0,8],` + okSink + `}`, problem.NotFound, "partitions"},
		{"negative partition", "s", `{"database":"shop","partitions":[-1],` + okSink + `}`, problem.Malformed, "partitions"},
		{"partition not integer", "s", `{"database":"shop","partitions":[1.5],` + okSink + `}`, problem.Malformed, "partitions"},
		{"no sink", "s", `{"database":"shop"}`, problem.Malformed, "sink"},
		{"sink not object", "s", `{"database":"shop","sink":"kafka"}`, problem.Malformed, "sink"},
		{"sink unknown field", "s", `{"database":"shop","sink":{"type":"kafka","brokers":["h:1"],"acks":1}}`, problem.Malformed, "sink.acks"},
		{"sink no type", "s", `{"database":"shop","sink":{"brokers":["h:1"]}}`, problem.Malformed, "sink.type"},
		{"sink other type", "s", `{"database":"shop","sink":{"type":"kinesis","brokers":["h:1"]}}`, problem.Malformed, "sink.type"},
		{"no brokers", "s", `{"database":"shop","sink":{"type":"kafka"}}`, problem.Malformed, "sink.brokers"},
		{"empty brokers", "s", `{"database":"shop","sink":{"type":"kafka","brokers":[]}}`, problem.Malformed, "sink.brokers"},
		{"broker without port", "s", `{"database":"shop","sink":{"type":"kafka","brokers":["localhost"]}}`, problem.Malformed, "sink.brokers"},
		{"broker bad port", "s", `{"database":"shop","sink":{"type":"kafka","brokers":["h:99999"]}}`, problem.Malformed, "sink.brokers"},
		{"brokers wrong type", "s", `{"database":"shop","sink":{"type":"kafka","brokers":"h:1"}}`, problem.Malformed, "sink.brokers"},
		{"bad topics", "s", `{"database":"shop","sink":{"type":"kafka","brokers":["h:1"],"topics":"per-row"}}`, problem.Malformed, "sink.topics"},
		{"bad prefix", "s", `{"database":"shop","sink":{"type":"kafka","brokers":["h:1"],"topicPrefix":"a b"}}`, problem.Malformed, "sink.topicPrefix"},
		{"bad format", "s", `{"database":"shop","sink":{"type":"kafka","brokers":["h:1"],"format":"xml"}}`, problem.Malformed, "sink.format"},
		{"schemas without debezium", "s", `{"database":"shop","sink":{"type":"kafka","brokers":["h:1"],"format":"avro","schemas":false}}`, problem.Malformed, "sink.schemas"},
		{"schemas not a boolean", "s", `{"database":"shop","sink":{"type":"kafka","brokers":["h:1"],"format":"debezium-json","schemas":"no"}}`, problem.Malformed, "sink.schemas"},
		{"negative topic partitions", "s", `{"database":"shop","sink":{"type":"kafka","brokers":["h:1"],"topicPartitions":-2}}`, problem.Malformed, "sink.topicPartitions"},
		{"bad replication factor", "s", `{"database":"shop","sink":{"type":"kafka","brokers":["h:1"],"replicationFactor":40000}}`, problem.Malformed, "sink.replicationFactor"},
		{"autoPause not object", "s", `{"database":"shop",` + okSink + `,"autoPause":5}`, problem.Malformed, "autoPause"},
		{"autoPause unknown field", "s", `{"database":"shop",` + okSink + `,"autoPause":{"after":5}}`, problem.Malformed, "autoPause.after"},
		{"failures too many", "s", `{"database":"shop",` + okSink + `,"autoPause":{"failures":1001}}`, problem.Malformed, "autoPause.failures"},
		{"failures negative", "s", `{"database":"shop",` + okSink + `,"autoPause":{"failures":-1}}`, problem.Malformed, "autoPause.failures"},
		{"resumeAfter not duration", "s", `{"database":"shop",` + okSink + `,"autoPause":{"resumeAfter":"soon"}}`, problem.Malformed, "autoPause.resumeAfter"},
		{"resumeAfter a number", "s", `{"database":"shop",` + okSink + `,"autoPause":{"resumeAfter":60}}`, problem.Malformed, "autoPause.resumeAfter"},
		{"resumeAfter too short", "s", `{"database":"shop",` + okSink + `,"autoPause":{"resumeAfter":"10ms"}}`, problem.Malformed, "autoPause.resumeAfter"},
		{"resumeAfter too long", "s", `{"database":"shop",` + okSink + `,"autoPause":{"resumeAfter":"200h"}}`, problem.Malformed, "autoPause.resumeAfter"},
		{"bad from", "s", `{"database":"shop",` + okSink + `,"from":"yesterday"}`, problem.Malformed, "from"},
		{"redis without addresses", "s", `{"database":"shop","sink":{"type":"redis"}}`, problem.Malformed, "sink.addresses"},
		{"redis address without port", "s", `{"database":"shop","sink":{"type":"redis","addresses":["h:1","h"]}}`, problem.Malformed, "sink.addresses"},
		{"redis with a Kafka field", "s", `{"database":"shop","sink":{"type":"redis","addresses":["h:1"],"format":"avro"}}`, problem.Malformed, "sink"},
		{"kafka with addresses", "s", `{"database":"shop","sink":{"type":"kafka","brokers":["h:1"],"addresses":["h:2"]}}`, problem.Malformed, "sink.addresses"},
		{"redis with a bad policy", "s", `{"database":"shop","sink":{"type":"redis","addresses":["h:1"]},"autoPause":{"failures":5000}}`, problem.Malformed, "autoPause.failures"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(context.Background(), c.stream, []byte(c.body), fakeCatalog{})
			pe, ok := problem.As(err)
			if !ok {
				t.Fatalf("Parse(%s) = %v, want a problem", c.body, err)
			}
			if pe.Kind != c.kind || pe.Field != c.field {
				t.Fatalf("Parse(%s) = kind %v field %q (%s), want kind %v field %q", c.body, pe.Kind, pe.Field, pe.Detail, c.kind, c.field)
			}
		})
	}
}

// TestParseFillsDefaults: a minimal definition gets the documented
// defaults; filters are sorted and deduplicated; it survives a JSON round
// trip (the stored record).
func TestParseFillsDefaults(t *testing.T) {
	d, err := Parse(context.Background(), "orders", []byte(`{"database":"shop","tables":["Order","Item","Order"],"partitions":[3,1,3],`+okSink+`}`), fakeCatalog{})
	if err != nil {
		t.Fatal(err)
	}
	want := Definition{
		Name: "orders", Database: "shop", Tables: []string{"Item", "Order"}, Partitions: []int{1, 3},
		Sink:      Sink{Type: "kafka", Brokers: []string{"127.0.0.1:9092"}, Topics: TopicsPerTable, Format: FormatJSON},
		AutoPause: AutoPause{Failures: 5, ResumeAfter: Duration(time.Minute)},
		From:      FromNow,
	}
	if !reflect.DeepEqual(d, want) {
		t.Fatalf("got %+v\nwant %+v", d, want)
	}
	b, _ := json.Marshal(d)
	var back Definition
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, d) {
		t.Fatalf("round trip of %s: %+v, %v", b, back, err)
	}
	if got := d.Topic("Order"); got != "shop.Order" {
		t.Errorf("per-table topic %q", got)
	}
	d.Sink.Topics, d.Sink.TopicPrefix = TopicsPerDatabase, "cdc."
	if got := d.Topic("Order"); got != "cdc.shop" {
		t.Errorf("per-database topic %q", got)
	}
	r, err := Parse(context.Background(), "updater", []byte(`{"database":"shop","sink":{"type":"redis","addresses":["10.0.0.1:6379","10.0.0.2:6379"]}}`), fakeCatalog{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Sink.Type != SinkRedis || len(r.Sink.Addresses) != 2 || r.AutoPause.Failures != DefaultFailures || r.Sink.Format != "" {
		t.Fatalf("a Redis sink parsed as %+v", r)
	}
}

func TestRecordsCarryADropWithoutItsTable(t *testing.T) {
	recordsCarryATableEvent(t, partition.OpDrop, []string{FormatJSON, FormatAvro},
		`{"scn":"1:9","partition":2,"table":"Message","key":null,"op":"drop","before":null,"after":null,"txnEnd":true,"ts":5}`)
}

// A replace load's swap reaches a topic as the change stream renders it,
// unkeyed, in every format: consumers drop the table's documents of the
// partition and read them again.
func TestRecordsCarryAReplaceMarker(t *testing.T) {
	recordsCarryATableEvent(t, partition.OpReplace, []string{FormatJSON, FormatAvro, FormatDebezium},
		`{"scn":"1:9","partition":2,"table":"Message","key":null,"op":"replace","before":null,"after":null,"txnEnd":true,"ts":5}`)
}

// recordsCarryATableEvent checks that op, a table's event without key or
// images, is one unkeyed record holding want in each of formats, made
// without asking for the table.
func recordsCarryATableEvent(t *testing.T, op partition.Op, formats []string, want string) {
	t.Helper()
	for _, format := range formats {
		def := &Definition{Database: "mail", Sink: Sink{Format: format, TopicPrefix: "doppio."}}
		evs := []changes.Event{{Partition: 2, SCN: partition.SCN{Generation: 1, Sequence: 9}, Mtime: 5,
			Write: partition.Write{Table: "Message", Op: op}, TxnEnd: true}}
		gone := func(name string) (*schema.Table, error) { return nil, fmt.Errorf("table %s is gone", name) }
		recs, err := Records(def, evs, gone)
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		if len(recs) != 1 || recs[0].Key != nil || recs[0].Topic != "doppio.mail.Message" {
			t.Fatalf("%s: records %+v", format, recs)
		}
		if string(recs[0].Value) != want {
			t.Fatalf("%s: value %s, want %s", format, recs[0].Value, want)
		}
	}
}
