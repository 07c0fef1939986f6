package datastream_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/doppio-db/doppio/internal/datastream"
	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/node"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/router"
	"github.com/doppio-db/doppio/internal/schema"
)

// testNode is a node in this process: embedded etcd, real Pebble, real
// HTTP.
type testNode struct {
	t   *testing.T
	n   *node.Node
	url string
}

// logWriter keeps a node's warnings in the test log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func startNode(t *testing.T) *testNode {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n, err := node.Start(ctx, node.Config{
		ID: "n1", DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0",
		Logger: slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return &testNode{t: t, n: n, url: "http://" + n.Addr()}
}

func (n *testNode) do(method, path string, body any) (int, http.Header, []byte) {
	n.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		js, err := json.Marshal(b)
		if err != nil {
			n.t.Fatal(err)
		}
		rd = bytes.NewReader(js)
	}
	req, err := http.NewRequest(method, n.url+path, rd)
	if err != nil {
		n.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		n.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func (n *testNode) must(want int, method, path string, body any) []byte {
	n.t.Helper()
	st, _, b := n.do(method, path, body)
	if st != want {
		n.t.Fatalf("%s %s: status %d, want %d: %s", method, path, st, want, b)
	}
	return b
}

func (n *testNode) status(name string) datastream.Status {
	n.t.Helper()
	var st datastream.Status
	if err := json.Unmarshal(n.must(200, "GET", "/_datastreams/"+name+"/status", nil), &st); err != nil {
		n.t.Fatal(err)
	}
	return st
}

const orderSchema = `{"key":[{"name":"customer","type":"string"},{"name":"id","type":"long"}],
 "schema":{"type":"record","name":"Order","fields":[{"name":"n","type":"long"},{"name":"pad","type":"string","default":""}]}}`

// setupShop creates database shop (partitions, one replica) with tables
// Order and Item of the same shape.
func setupShop(n *testNode, partitions int) {
	n.must(201, "PUT", "/_schemas/shop", map[string]any{"partitions": partitions, "replicas": 1})
	n.must(201, "PUT", "/_schemas/shop/Order", orderSchema)
	n.must(201, "PUT", "/_schemas/shop/Item", strings.Replace(orderSchema, `"Order"`, `"Item"`, 1))
}

// groupsOf returns per partition some document groups (partition keys)
// that hash there.
func groupsOf(partitions, perPartition int) [][]string {
	out := make([][]string, partitions)
	db := schema.Database{Partitions: partitions}
	for i, left := 0, partitions*perPartition; left > 0; i++ {
		g := fmt.Sprint("g", i)
		enc, _ := keys.EncodeTuple(keys.Tuple{g})
		if p := router.PartitionOf(db, enc); len(out[p]) < perPartition {
			out[p] = append(out[p], g)
			left--
		}
	}
	return out
}

// txn is a committed transaction as the writer knows it.
type txn struct {
	group string
	scn   partition.SCN
	ops   []op
}

type op struct {
	table string
	id    int64
	del   bool
}

// commit runs one transaction of ops in group g and returns it with its
// SCN (the write must succeed).
func (n *testNode) commit(g string, ops []op, pad int) txn {
	n.t.Helper()
	var body []map[string]any
	for i, o := range ops {
		if o.del {
			body = append(body, map[string]any{"op": "delete", "table": o.table, "key": []any{g, o.id}})
			continue
		}
		body = append(body, map[string]any{"op": "put", "table": o.table, "key": []any{g, o.id},
			"document": map[string]any{"n": i, "pad": noise(pad)}})
	}
	b := n.must(200, "POST", "/shop/_txn", map[string]any{"ops": body})
	var res struct{ SCN string }
	if err := json.Unmarshal(b, &res); err != nil {
		n.t.Fatal(err)
	}
	s, err := partition.ParseSCN(res.SCN)
	if err != nil {
		n.t.Fatalf("txn answer %s: %v", b, err)
	}
	return txn{group: g, scn: s, ops: ops}
}

// noise is n bytes that do not compress (Kafka limits compressed batches).
func noise(n int) string {
	b := make([]byte, (n*3+3)/4)
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
	return base64.StdEncoding.EncodeToString(b)[:n]
}

// event is one consumed Kafka record, as the checks need it.
type event struct {
	topic     string
	kpart     int32
	group     string
	partition int
	scn       partition.SCN
	index     int
	end       bool
	table     string
	op        string
	version   string
	value     []byte
}

func header(r *kgo.Record, k string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == k {
			return string(h.Value), true
		}
	}
	return "", false
}

func toEvent(t *testing.T, r *kgo.Record) event {
	scnText, _ := header(r, datastream.HeaderSCN)
	scn, err := partition.ParseSCN(scnText)
	if err != nil {
		t.Fatalf("record at %s/%d@%d: bad %s header %q", r.Topic, r.Partition, r.Offset, datastream.HeaderSCN, scnText)
	}
	ps, _ := header(r, datastream.HeaderPartition)
	p, err := strconv.Atoi(ps)
	if err != nil {
		t.Fatalf("record at %s/%d@%d: bad partition header %q", r.Topic, r.Partition, r.Offset, ps)
	}
	is, _ := header(r, datastream.HeaderTxnIndex)
	idx, err := strconv.Atoi(is)
	if err != nil {
		t.Fatalf("record at %s/%d@%d: bad txn index header %q", r.Topic, r.Partition, r.Offset, is)
	}
	_, end := header(r, datastream.HeaderTxnEnd)
	table, _ := header(r, datastream.HeaderTable)
	opName, _ := header(r, datastream.HeaderOp)
	version, _ := header(r, datastream.HeaderSchemaVersion)
	return event{topic: r.Topic, kpart: r.Partition, group: string(r.Key), partition: p, scn: scn, index: idx, end: end,
		table: table, op: opName, version: version, value: r.Value}
}

// consumer reads topics from their start into memory.
type consumer struct {
	t      *testing.T
	mu     sync.Mutex
	events []event
	cancel context.CancelFunc
	done   chan struct{}
}

func consume(t *testing.T, addr string, topics ...string) *consumer {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.MetadataMinAge(100*time.Millisecond), kgo.MetadataMaxAge(time.Second),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &consumer{t: t, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		defer cl.Close()
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			var got []event
			fs.EachRecord(func(r *kgo.Record) { got = append(got, toEvent(t, r)) })
			c.mu.Lock()
			c.events = append(c.events, got...)
			c.mu.Unlock()
		}
	}()
	t.Cleanup(c.stop)
	return c
}

func (c *consumer) stop() {
	c.cancel()
	<-c.done
}

func (c *consumer) snapshot() []event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.events)
}

// waitFor polls cond over the events consumed until it holds or d passes.
func (c *consumer) waitFor(d time.Duration, what string, cond func([]event) (bool, string)) []event {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for {
		evs := c.snapshot()
		ok, state := cond(evs)
		if ok {
			return evs
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: not within %v: %s", what, d, state)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// delivery is what a consumer that drops redeliveries by SCN sees: per
// document group, the distinct events in Kafka order.
type delivery struct {
	groups map[string][]event
	dups   int
}

// dedupe applies the consumer rule the datastream promises to make
// sufficient: per (Kafka topic partition, Doppio partition), a record
// whose (SCN sequence, index in transaction) is not above the last one
// kept is a redelivery. It reports a redelivered record that was never
// delivered first — a record that overtook an earlier one.
func dedupe(evs []event) (delivery, error) {
	type stream struct {
		topic string
		kpart int32
		part  int
	}
	type pos struct {
		seq uint64
		idx int
	}
	type id struct {
		part int
		pos
	}
	last := map[stream]pos{}
	seen := map[id]bool{}
	d := delivery{groups: map[string][]event{}}
	for _, e := range evs {
		s := stream{e.topic, e.kpart, e.partition}
		p := pos{e.scn.Sequence, e.index}
		l, ok := last[s]
		if ok && (p.seq < l.seq || (p.seq == l.seq && p.idx <= l.idx)) {
			if !seen[id{e.partition, p}] {
				return d, fmt.Errorf("record %s of partition %d (group %s) arrived after %d:%d on %s/%d, never before: out of order",
					e.scn, e.partition, e.group, l.seq, l.idx, e.topic, e.kpart)
			}
			d.dups++
			continue
		}
		last[s] = p
		seen[id{e.partition, p}] = true
		d.groups[e.group] = append(d.groups[e.group], e)
	}
	return d, nil
}

// want is an event a committed transaction must produce.
type want struct {
	scn   partition.SCN
	index int
	table string
	del   bool
	end   bool
}

// streamKey is what a consumer can order by: the document group, and with
// per-table topics the table too (a transaction's events then spread
// over topics, ordered within each).
func streamKey(group, table string, perTable bool) string {
	if perTable {
		return group + "|" + table
	}
	return group
}

// wanted is, per stream key, the events txns must produce in order.
func wanted(txns []txn, perTable bool) map[string][]want {
	sorted := slices.Clone(txns)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].scn.Sequence < sorted[j].scn.Sequence })
	out := map[string][]want{}
	for _, tx := range sorted {
		for k, o := range tx.ops {
			key := streamKey(tx.group, o.table, perTable)
			out[key] = append(out[key], want{scn: tx.scn, index: k, table: o.table, del: o.del, end: k == len(tx.ops)-1})
		}
	}
	return out
}

// check compares the deduplicated delivery with the committed
// transactions: every event exactly once, in SCN order per group (per
// group and table with per-table topics), at its index in its
// transaction, with its table, operation and boundary. With exact,
// nothing else may be delivered; otherwise events of other transactions
// (commits whose acknowledgement was lost) may be, in order.
func check(d delivery, txns []txn, exact, perTable bool) error {
	ws := wanted(txns, perTable)
	acked := map[string]bool{}
	for _, tx := range txns {
		acked[tx.group+"@"+tx.scn.String()] = true
	}
	got := map[string][]event{}
	for g, evs := range d.groups {
		for _, e := range evs {
			if !exact && !acked[g+"@"+e.scn.String()] {
				continue
			}
			key := streamKey(g, e.table, perTable)
			got[key] = append(got[key], e)
		}
	}
	for key, w := range ws {
		g := got[key]
		for i, x := range w {
			if i >= len(g) {
				return fmt.Errorf("%s: transaction %s event %d (%s) never delivered (%d of %d events delivered)", key, x.scn, x.index, x.table, len(g), len(w))
			}
			e := g[i]
			op := e.op == "delete"
			if e.scn != x.scn || e.index != x.index || e.table != x.table || op != x.del || e.end != x.end {
				return fmt.Errorf("%s: delivered %s #%d %s %s end=%v where %s #%d %s delete=%v end=%v was due",
					key, e.scn, e.index, e.table, e.op, e.end, x.scn, x.index, x.table, x.del, x.end)
			}
		}
		if len(g) > len(w) {
			return fmt.Errorf("%s: %d events delivered beyond its %d (next: %s)", key, len(g)-len(w), len(w), g[len(w)].scn)
		}
	}
	for key := range got {
		if _, ok := ws[key]; !ok {
			return fmt.Errorf("%s: delivered but never written", key)
		}
	}
	return nil
}

// delivered reports whether the consumed events hold every transaction of
// txns, and a summary otherwise.
func delivered(evs []event, txns []txn) (bool, string) { return deliveredAs(evs, txns, false) }

func deliveredAs(evs []event, txns []txn, perTable bool) (bool, string) {
	d, err := dedupe(evs)
	if err != nil {
		return false, err.Error()
	}
	if err := check(d, txns, false, perTable); err != nil {
		return false, fmt.Sprintf("%d records consumed, %d redelivered: %v", len(evs), d.dups, err)
	}
	return true, ""
}
