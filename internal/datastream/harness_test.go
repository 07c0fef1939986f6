package datastream_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/datastream"
	"github.com/doppio-db/doppio/internal/datastream/streamcheck"
	"github.com/doppio-db/doppio/internal/node"
	"github.com/doppio-db/doppio/internal/partition"
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

type (
	txn   = streamcheck.Txn
	op    = streamcheck.Op
	event = streamcheck.Event
)

func consume(t *testing.T, addr string, topics ...string) *streamcheck.Consumer {
	return streamcheck.Consume(t, addr, topics...)
}

func delivered(evs []event, txns []txn) (bool, string) {
	return streamcheck.Delivered(evs, txns, false)
}

func deliveredAs(evs []event, txns []txn, perTable bool) (bool, string) {
	return streamcheck.Delivered(evs, txns, perTable)
}

// commit runs one transaction of ops in group g and returns it with its
// SCN (the write must succeed).
func (n *testNode) commit(g string, ops []op, pad int) txn {
	n.t.Helper()
	var body []map[string]any
	for i, o := range ops {
		if o.Delete {
			body = append(body, map[string]any{"op": "delete", "table": o.Table, "key": []any{g, o.ID}})
			continue
		}
		body = append(body, map[string]any{"op": "put", "table": o.Table, "key": []any{g, o.ID},
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
	return txn{Group: g, SCN: s, Ops: ops}
}

// noise is n bytes that do not compress (Kafka limits compressed batches).
func noise(n int) string {
	b := make([]byte, (n*3+3)/4)
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
	return base64.StdEncoding.EncodeToString(b)[:n]
}
