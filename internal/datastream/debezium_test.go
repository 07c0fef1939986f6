package datastream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/doppio-db/doppio/internal/buildinfo"
	"github.com/doppio-db/doppio/internal/datastream"
	"github.com/doppio-db/doppio/internal/kafkatest"
)

// dbzRecord is a consumed record of a debezium-json stream.
type dbzRecord struct {
	key, value string
	partition  string // doppio-partition
	id         string // doppio-partition, scn and txn index: redeliveries repeat it
}

// consumeDebezium reads topics from their start until want records
// (redeliveries dropped) arrived in each, and returns them per topic.
func consumeDebezium(t *testing.T, addr string, want map[string]int) map[string][]dbzRecord {
	t.Helper()
	var topics []string
	for topic := range want {
		topics = append(topics, topic)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := map[string][]dbzRecord{}
	seen := map[string]bool{}
	done := func() bool {
		for topic, n := range want {
			if len(got[topic]) < n {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("records within 30s: got %v, want counts %v", got, want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			h := map[string]string{}
			for _, x := range r.Headers {
				h[x.Key] = string(x.Value)
			}
			id := h[datastream.HeaderPartition] + "@" + h[datastream.HeaderSCN] + "#" + h[datastream.HeaderTxnIndex]
			if seen[r.Topic+id] {
				return
			}
			seen[r.Topic+id] = true
			got[r.Topic] = append(got[r.Topic], dbzRecord{key: string(r.Key), value: string(r.Value), partition: h[datastream.HeaderPartition], id: id})
		})
	}
	return got
}

// txnSCN runs a transaction given as JSON ops and returns its SCN.
func (n *testNode) txnSCN(ops string) string {
	n.t.Helper()
	var res struct{ SCN string }
	if err := json.Unmarshal(n.must(200, "POST", "/shop/_txn", `{"ops":[`+ops+`]}`), &res); err != nil {
		n.t.Fatal(err)
	}
	return res.SCN
}

var processedAt = regexp.MustCompile(`"op":"(.)","ts_ms":(\d+),`)

// TestDebeziumEnvelopesAreExact streams creates, an update, a delete and
// a transaction over two tables to a real Kafka broker as debezium-json,
// with and without schemas, and checks every key and value byte for byte
// (the envelope's ts_ms, the processing time, only for its range), then
// a snapshot of what remains (checkSnapshotReads).
func TestDebeziumEnvelopesAreExact(t *testing.T) {
	broker := kafkatest.Start(t)
	n := startNode(t)
	setupShop(n, 2)
	for prefix, schemas := range map[string]bool{"dbz.": true, "plain.": false} {
		def := fmt.Sprintf(`{"database":"shop","from":"now","sink":{"type":"kafka","brokers":[%q],"topicPrefix":%q,"format":"debezium-json","schemas":%t,"topicPartitions":1}}`,
			broker.Addr(), prefix, schemas)
		b := n.must(201, "PUT", "/_datastreams/"+strings.TrimSuffix(prefix, "."), def)
		if !strings.Contains(string(b), `"format":"debezium-json"`) {
			t.Fatalf("PUT answer %s", b)
		}
	}
	time.Sleep(5 * time.Millisecond) // commit times are in milliseconds: "now" includes the creation's
	start := time.Now().UnixMilli()

	put := func(table string, id, v int) string {
		return fmt.Sprintf(`{"op":"put","table":%q,"key":["g1",%d],"document":{"n":%d,"pad":"p%d"}}`, table, id, v, v)
	}
	create := n.txnSCN(put("Order", 1, 10))
	update := n.txnSCN(put("Order", 1, 11))
	del := n.txnSCN(`{"op":"delete","table":"Order","key":["g1",1]}`)
	multi := n.txnSCN(put("Order", 2, 20) + "," + put("Item", 3, 30) + "," + put("Order", 4, 40))

	type envelope struct{ key, before, after, op, scn, txn string }
	txn := func(scn string, total, table int) string {
		return fmt.Sprintf(`{"id":"%%s:%s","total_order":%d,"data_collection_order":%d}`, scn, total, table)
	}
	want := map[string][]envelope{
		"Order": {
			{`{"customer":"g1","id":1}`, `null`, `{"n":10,"pad":"p10"}`, "c", create, txn(create, 1, 1)},
			{`{"customer":"g1","id":1}`, `{"n":10,"pad":"p10"}`, `{"n":11,"pad":"p11"}`, "u", update, txn(update, 1, 1)},
			{`{"customer":"g1","id":1}`, `{"n":11,"pad":"p11"}`, `null`, "d", del, txn(del, 1, 1)},
			{`{"customer":"g1","id":2}`, `null`, `{"n":20,"pad":"p20"}`, "c", multi, txn(multi, 1, 1)},
			{`{"customer":"g1","id":4}`, `null`, `{"n":40,"pad":"p40"}`, "c", multi, txn(multi, 3, 2)},
		},
		"Item": {
			{`{"customer":"g1","id":3}`, `null`, `{"n":30,"pad":"p30"}`, "c", multi, txn(multi, 2, 1)},
		},
	}
	version := buildinfo.Get().Version
	for prefix, schemas := range map[string]bool{"dbz.": true, "plain.": false} {
		stream := strings.TrimSuffix(prefix, ".")
		got := consumeDebezium(t, broker.Addr(), map[string]int{prefix + "shop.Order": 5, prefix + "shop.Item": 1})
		for table, envs := range want {
			recs := got[prefix+"shop."+table]
			if len(recs) != len(envs) {
				t.Fatalf("%s: %d records on %s, want %d: %v", stream, len(recs), table, len(envs), recs)
			}
			for i, w := range envs {
				r := recs[i]
				m := processedAt.FindStringSubmatch(r.value)
				if m == nil {
					t.Fatalf("%s %s record %d has no op and ts_ms: %s", stream, table, i, r.value)
				}
				ts, _ := strconv.ParseInt(m[2], 10, 64)
				if ts < start || ts > time.Now().UnixMilli() {
					t.Errorf("%s %s record %d: ts_ms %d outside [%d, now]", stream, table, i, ts, start)
				}
				value := strings.Replace(r.value, `"ts_ms":`+m[2]+`,"transaction"`, `"ts_ms":0,"transaction"`, 1)
				// source.ts_ms is the commit time: between the start and the record's processing.
				srcTS := regexp.MustCompile(`"connector":"doppio","name":"[a-z]+","ts_ms":(\d+),`).FindStringSubmatch(value)
				if srcTS == nil {
					t.Fatalf("%s %s record %d has no source.ts_ms: %s", stream, table, i, value)
				}
				if c, _ := strconv.ParseInt(srcTS[1], 10, 64); c < start || c > ts {
					t.Errorf("%s %s record %d: source.ts_ms %d outside [%d, %d]", stream, table, i, c, start, ts)
				}
				value = strings.Replace(value, `"ts_ms":`+srcTS[1]+`,"snapshot"`, `"ts_ms":1,"snapshot"`, 1)
				payload := fmt.Sprintf(`{"before":%s,"after":%s,"source":{"version":%q,"connector":"doppio","name":%q,"ts_ms":1,"snapshot":"false","db":"shop","table":%q,"partition":%s,"scn":%q},"op":%q,"ts_ms":0,"transaction":%s}`,
					w.before, w.after, version, stream, table, r.partition, w.scn, w.op, fmt.Sprintf(w.txn, r.partition))
				key := w.key
				if schemas {
					key = `{"schema":` + keySchema(table) + `,"payload":` + key + `}`
					payload = `{"schema":` + envelopeSchema(table) + `,"payload":` + payload + `}`
				}
				if r.key != key {
					t.Errorf("%s %s record %d key\n got %s\nwant %s", stream, table, i, r.key, key)
				}
				if value != payload {
					t.Errorf("%s %s record %d value\n got %s\nwant %s", stream, table, i, value, payload)
				}
			}
		}
	}
	checkSnapshotReads(t, broker, n)
}

// checkSnapshotReads starts a "from":"snapshot" stream in debezium-json
// over what TestDebeziumEnvelopesAreExact wrote: the documents present
// arrive as reads (op r, no transaction), the partition's last one
// marked snapshot "last", then the changes after the snapshot.
func checkSnapshotReads(t *testing.T, broker *kafkatest.Broker, n *testNode) {
	put := func(table string, id, v int) string {
		return fmt.Sprintf(`{"op":"put","table":%q,"key":["g1",%d],"document":{"n":%d,"pad":""}}`, table, id, v)
	}
	def := fmt.Sprintf(`{"database":"shop","from":"snapshot","sink":{"type":"kafka","brokers":[%q],"topics":"per-database","format":"debezium-json","schemas":false,"topicPartitions":1}}`, broker.Addr())
	n.must(201, "PUT", "/_datastreams/boot", def)
	waitStatus(t, n, "boot", 30*time.Second, func(p datastream.PartitionStatus) bool {
		return p.State == datastream.StateRunning && p.Snapshot == nil && p.Checkpoint != ""
	})
	later := n.txnSCN(put("Order", 2, 21))
	recs := consumeDebezium(t, broker.Addr(), map[string]int{"shop": 4})["shop"]
	type short struct {
		key, op, snapshot, after, txn string
	}
	var got []short
	for _, r := range recs {
		var v struct {
			Op     string          `json:"op"`
			After  json.RawMessage `json:"after"`
			Source struct {
				Snapshot string `json:"snapshot"`
			} `json:"source"`
			Transaction *struct {
				ID string `json:"id"`
			} `json:"transaction"`
		}
		if err := json.Unmarshal([]byte(r.value), &v); err != nil {
			t.Fatalf("record %s: %v", r.value, err)
		}
		txn := "null"
		if v.Transaction != nil {
			txn = v.Transaction.ID
		}
		got = append(got, short{r.key, v.Op, v.Source.Snapshot, string(v.After), txn})
	}
	want := []short{
		{`{"customer":"g1","id":3}`, "r", "true", `{"n":30,"pad":"p30"}`, "null"},
		{`{"customer":"g1","id":2}`, "r", "true", `{"n":20,"pad":"p20"}`, "null"},
		{`{"customer":"g1","id":4}`, "r", "last", `{"n":40,"pad":"p40"}`, "null"},
		{`{"customer":"g1","id":2}`, "u", "false", `{"n":21,"pad":""}`, recs[3].partition + ":" + later},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("records\n got %v\nwant %v", got, want)
	}
}

func keySchema(table string) string {
	return `{"type":"struct","fields":[{"type":"string","optional":false,"field":"customer"},{"type":"int64","optional":false,"field":"id"}],"optional":false,"name":"doppio.shop.` + table + `.Key"}`
}

func envelopeSchema(table string) string {
	value := func(field string) string {
		return `{"type":"struct","fields":[{"type":"int64","optional":false,"field":"n"},{"type":"string","optional":false,"field":"pad"}],"optional":true,"name":"doppio.shop.` + table + `.Value","field":"` + field + `"}`
	}
	return `{"type":"struct","fields":[` + value("before") + `,` + value("after") + `,` +
		`{"type":"struct","fields":[{"type":"string","optional":false,"field":"version"},{"type":"string","optional":false,"field":"connector"},{"type":"string","optional":false,"field":"name"},{"type":"int64","optional":false,"field":"ts_ms"},` +
		`{"type":"string","optional":true,"name":"io.debezium.data.Enum","version":1,"parameters":{"allowed":"true,last,false"},"default":"false","field":"snapshot"},` +
		`{"type":"string","optional":false,"field":"db"},{"type":"string","optional":false,"field":"table"},{"type":"int32","optional":false,"field":"partition"},{"type":"string","optional":false,"field":"scn"}],"optional":false,"name":"io.debezium.connector.doppio.Source","field":"source"},` +
		`{"type":"string","optional":false,"field":"op"},{"type":"int64","optional":true,"field":"ts_ms"},` +
		`{"type":"struct","fields":[{"type":"string","optional":false,"field":"id"},{"type":"int64","optional":false,"field":"total_order"},{"type":"int64","optional":false,"field":"data_collection_order"}],"optional":true,"name":"event.block","version":1,"field":"transaction"}],` +
		`"optional":false,"name":"doppio.shop.` + table + `.Envelope","version":1}`
}
