package client_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/doppio-db/doppio/client"
)

func TestSchemasCreateReadAndRefuseIncompatible(t *testing.T) {
	c, ctx := newClient(t), ctxT(t)

	d, created, err := c.PutDatabase(ctx, "SchemaDB", client.DatabaseSpec{Partitions: 2, Replicas: 1})
	if err != nil || !created {
		t.Fatalf("PutDatabase = %+v, %v, %v; want created", d, created, err)
	}
	if d.Name != "SchemaDB" || d.Partitions != 2 || d.Replicas != 1 || d.Partitioner != "hash" || len(d.Tables) != 0 {
		t.Fatalf("PutDatabase answered %+v", d)
	}
	if _, created, err := c.PutDatabase(ctx, "SchemaDB", client.DatabaseSpec{Partitions: 2, Replicas: 1}); err != nil || created {
		t.Fatalf("second PutDatabase: created=%v err=%v; want an update", created, err)
	}

	spec := client.TableSpec{Key: []client.KeyPart{{Name: "id", Type: "string"}}, Schema: json.RawMessage(`{"type":"record","name":"T","fields":[{"name":"a","type":"long"}]}`)}
	tb, created, err := c.PutTable(ctx, "SchemaDB", "T", spec)
	if err != nil || !created {
		t.Fatalf("PutTable = %v, %v", created, err)
	}
	if tb.Database != "SchemaDB" || tb.Name != "T" || tb.Version != 1 || len(tb.Versions) != 1 || !reflect.DeepEqual(tb.Key, spec.Key) {
		t.Fatalf("PutTable answered %+v", tb)
	}
	// A compatible evolution registers version 2.
	spec.Schema = json.RawMessage(`{"type":"record","name":"T","fields":[{"name":"a","type":"long"},{"name":"b","type":"string","default":"x"}]}`)
	if tb, created, err = c.PutTable(ctx, "SchemaDB", "T", spec); err != nil || created || tb.Version != 2 {
		t.Fatalf("evolving PutTable = version %d, created %v, %v; want version 2", tb.Version, created, err)
	}
	// Removing a field without default is incompatible: 409.
	spec.Schema = json.RawMessage(`{"type":"record","name":"T","fields":[{"name":"c","type":"long"}]}`)
	if _, _, err = c.PutTable(ctx, "SchemaDB", "T", spec); !client.IsConflict(err) {
		t.Fatalf("incompatible PutTable: %v; want 409", err)
	}

	got, err := c.GetTable(ctx, "SchemaDB", "T")
	if err != nil || got.Version != 2 || len(got.Versions) != 2 {
		t.Fatalf("GetTable = %+v, %v", got, err)
	}
	v1, err := c.GetTableVersion(ctx, "SchemaDB", "T", 1)
	if err != nil || v1.Version != 1 || v1.Created.IsZero() {
		t.Fatalf("GetTableVersion(1) = %+v, %v", v1, err)
	}
	var fields struct{ Fields []struct{ Name string } }
	if err := json.Unmarshal(v1.Schema, &fields); err != nil || len(fields.Fields) != 1 || fields.Fields[0].Name != "a" {
		t.Fatalf("version 1 schema = %s (%v)", v1.Schema, err)
	}
	if _, err := c.GetTableVersion(ctx, "SchemaDB", "T", 3); !client.IsNotFound(err) {
		t.Fatalf("GetTableVersion(3): %v; want 404", err)
	}

	d, err = c.GetDatabase(ctx, "SchemaDB")
	if err != nil || len(d.Tables) != 1 || d.Tables[0].Name != "T" || d.Tables[0].Version != 2 {
		t.Fatalf("GetDatabase = %+v, %v", d, err)
	}
	all, err := c.ListDatabases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, d := range all {
		names[d.Name] = true
	}
	if !names["SchemaDB"] || !names[db] {
		t.Fatalf("ListDatabases names %v; want SchemaDB and %s", names, db)
	}
	if _, err := c.GetDatabase(ctx, "NoSuchDB"); !client.IsNotFound(err) {
		t.Fatalf("GetDatabase(NoSuchDB): %v; want 404", err)
	}
	if _, err := c.GetTable(ctx, "SchemaDB", "Nope"); !client.IsNotFound(err) {
		t.Fatalf("GetTable(Nope): %v; want 404", err)
	}
	var e *client.Error
	_, _, err = c.PutDatabase(ctx, "SchemaDB", client.DatabaseSpec{Partitions: 2, Replicas: 9})
	if !errors.As(err, &e) || e.Status != 400 || e.Field != "replicas" || e.Type != "https://doppio.dev/problems/malformed" || e.Title == "" || e.Detail == "" {
		t.Fatalf("replicas 9: %#v", err)
	}
}

type mailbox struct {
	Owner       string `json:"owner"`
	UnreadCount int64  `json:"unreadCount"`
	TotalCount  int64  `json:"totalCount"`
}

func TestPutGetConditionalWritesAndDelete(t *testing.T) {
	c, ctx := newClient(t), ctxT(t)
	key := client.Key{"put-get"}

	w, err := c.Put(ctx, db, "Mailbox", key, mailbox{Owner: "ann", UnreadCount: 3})
	if err != nil {
		t.Fatal(err)
	}
	if !w.Created || !reflect.DeepEqual(w.Key, client.Key{"put-get"}) || w.ETag == "" || w.SCN == "" || w.Version != 1 {
		t.Fatalf("Put answered %+v", w)
	}
	d, err := c.Get(ctx, db, "Mailbox", key)
	if err != nil {
		t.Fatal(err)
	}
	var mb mailbox
	if err := d.Decode(&mb); err != nil {
		t.Fatal(err)
	}
	if mb != (mailbox{Owner: "ann", UnreadCount: 3}) || d.ETag != w.ETag || d.SCN != w.SCN || d.SchemaVersion != 1 ||
		!reflect.DeepEqual(d.Key, key) || time.Since(d.LastModified) > time.Minute {
		t.Fatalf("Get = %+v body %s", d, d.Body)
	}
	if d, err = c.Get(ctx, db, "Mailbox", key, client.Fields("unreadCount")); err != nil || string(d.Body) != `{"unreadCount":3}` {
		t.Fatalf("Get with Fields = %q, %v", d.Body, err)
	}
	if _, err := c.Get(ctx, db, "Mailbox", key, client.IfNoneMatch(w.ETag)); err != client.ErrNotModified {
		t.Fatalf("Get IfNoneMatch(current) = %v; want ErrNotModified", err)
	}

	// Replace under the right ETag; then the old ETag no longer matches.
	w2, err := c.Put(ctx, db, "Mailbox", key, mailbox{Owner: "ann", UnreadCount: 4}, client.IfMatch(w.ETag))
	if err != nil || w2.Created || w2.ETag == w.ETag {
		t.Fatalf("Put IfMatch(current) = %+v, %v", w2, err)
	}
	_, err = c.Put(ctx, db, "Mailbox", key, mailbox{Owner: "bob"}, client.IfMatch(w.ETag))
	if !client.IsPreconditionFailed(err) {
		t.Fatalf("Put IfMatch(stale) = %v; want 412", err)
	}
	if _, err = c.Put(ctx, db, "Mailbox", key, mailbox{Owner: "bob"}, client.IfNoneMatch("*")); !client.IsPreconditionFailed(err) {
		t.Fatalf("Put IfNoneMatch(*) on an existing document = %v; want 412", err)
	}
	if _, err = c.Put(ctx, db, "Mailbox", key, mailbox{Owner: "bob"}, client.IfUnmodifiedSince(time.Now().Add(-time.Hour))); !client.IsPreconditionFailed(err) {
		t.Fatalf("Put IfUnmodifiedSince(an hour ago) = %v; want 412", err)
	}
	if d, _ := c.Get(ctx, db, "Mailbox", key); d == nil || d.ETag != w2.ETag {
		t.Fatalf("a failed conditional write changed the document: %+v", d)
	}
	// A document that does not match its schema is 422.
	var e *client.Error
	if _, err := c.Put(ctx, db, "Mailbox", key, map[string]any{"unreadCount": "many"}); !errors.As(err, &e) || e.Status != 422 {
		t.Fatalf("Put mismatching document = %v; want 422", err)
	}

	if err := c.Delete(ctx, db, "Mailbox", key, client.IfMatch(w.ETag)); !client.IsPreconditionFailed(err) {
		t.Fatalf("Delete IfMatch(stale) = %v; want 412", err)
	}
	if err := c.Delete(ctx, db, "Mailbox", key, client.IfMatch(w2.ETag)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, db, "Mailbox", key); !client.IsNotFound(err) {
		t.Fatalf("Get after Delete = %v; want 404", err)
	}
	if err := c.Delete(ctx, db, "Mailbox", key); !client.IsNotFound(err) {
		t.Fatalf("second Delete = %v; want 404", err)
	}
	if _, err := c.Get(ctx, "NoSuchDB", "Mailbox", key); !client.IsNotFound(err) {
		t.Fatalf("Get in a missing database = %v; want 404", err)
	}
}

func TestPatchIncrementsSetsAndUnsets(t *testing.T) {
	c, ctx := newClient(t), ctxT(t)
	key := client.Key{"patch"}
	if _, err := c.Put(ctx, db, "Mailbox", key, mailbox{Owner: "ann", UnreadCount: 1, TotalCount: 5}); err != nil {
		t.Fatal(err)
	}
	w, err := c.Patch(ctx, db, "Mailbox", key, client.Patch{Inc: map[string]any{"unreadCount": 2, "totalCount": -1}, Set: map[string]any{"owner": "bea"}})
	if err != nil || w.Created || w.ETag == "" {
		t.Fatalf("Patch = %+v, %v", w, err)
	}
	var mb mailbox
	if d, err := c.Get(ctx, db, "Mailbox", key); err != nil || d.Decode(&mb) != nil || mb != (mailbox{Owner: "bea", UnreadCount: 3, TotalCount: 4}) {
		t.Fatalf("after Patch: %+v, %v", mb, err)
	}
	if _, err := c.Patch(ctx, db, "Mailbox", key, client.Patch{Unset: []string{"owner"}}, client.IfMatch(w.ETag)); err != nil {
		t.Fatal(err)
	}
	if d, err := c.Get(ctx, db, "Mailbox", key); err != nil || d.Decode(&mb) != nil || mb != (mailbox{Owner: "", UnreadCount: 3, TotalCount: 4}) {
		t.Fatalf("after $unset: %+v, %v", mb, err)
	}
	if _, err := c.Patch(ctx, db, "Mailbox", key, client.Patch{Inc: map[string]any{"unreadCount": 1}}, client.IfMatch(w.ETag)); !client.IsPreconditionFailed(err) {
		t.Fatalf("Patch IfMatch(stale) = %v; want 412", err)
	}
	if _, err := c.Patch(ctx, db, "Mailbox", client.Key{"patch-missing"}, client.Patch{Inc: map[string]any{"unreadCount": 1}}); !client.IsNotFound(err) {
		t.Fatalf("Patch of a missing document = %v; want 404", err)
	}
}

type message struct {
	Subject string `json:"subject"`
	Body    string `json:"body"`
	Unread  bool   `json:"unread"`
}

func TestInsertAssignsIncreasingKeysAndMultiGetAndDeleteCollection(t *testing.T) {
	c, ctx := newClient(t), ctxT(t)
	for i := int64(1); i <= 3; i++ {
		// "unread" is left out: the schema's default (true) applies.
		w, err := c.Insert(ctx, db, "Message", client.Key{"ins"}, map[string]any{"subject": fmt.Sprint("s", i)})
		if err != nil {
			t.Fatal(err)
		}
		if !w.Created || !reflect.DeepEqual(w.Key, client.Key{"ins", i}) {
			t.Fatalf("insert %d answered %+v", i, w)
		}
	}
	docs, err := c.MultiGet(ctx, db, "Message", client.Key{"ins"}, []any{3, 1, int64(9)}, client.Fields("subject"))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 2 || !reflect.DeepEqual(docs[0].Key, client.Key{"ins", int64(3)}) || string(docs[0].Body) != `{"subject":"s3"}` ||
		!reflect.DeepEqual(docs[1].Key, client.Key{"ins", int64(1)}) || string(docs[1].Body) != `{"subject":"s1"}` {
		t.Fatalf("MultiGet = %+v", docs)
	}
	var m message
	if d, err := c.Get(ctx, db, "Message", client.Key{"ins", 2}); err != nil || d.Decode(&m) != nil || m != (message{Subject: "s2", Unread: true}) {
		t.Fatalf("Get inserted = %+v, %v", m, err)
	}
	n, err := c.DeleteCollection(ctx, db, "Message", client.Key{"ins"})
	if err != nil || n != 3 {
		t.Fatalf("DeleteCollection = %d, %v; want 3", n, err)
	}
	if p, err := c.List(ctx, db, "Message", client.Key{"ins"}, client.ListOptions{}); err != nil || len(p.Documents) != 0 || p.Next != "" {
		t.Fatalf("List after DeleteCollection = %+v, %v", p, err)
	}
	if n, err := c.DeleteCollection(ctx, db, "Message", client.Key{"ins"}); !client.IsNotFound(err) || n != 0 {
		t.Fatalf("DeleteCollection of an empty collection = %d, %v; want 404", n, err)
	}
}

func TestListAllFollowsCursorsOver250Documents(t *testing.T) {
	c, ctx := newClient(t), ctxT(t)
	var ops []client.TxnOp
	for i := 1; i <= 250; i++ {
		ops = append(ops, client.PutOp("Message", client.Key{"many", i}, message{Subject: fmt.Sprint(i)}))
	}
	res, err := c.Batch(ctx, db, ops)
	if err != nil || len(res) != 250 {
		t.Fatalf("Batch = %d results, %v", len(res), err)
	}
	for i, r := range res {
		if r.Status != 201 || r.Problem != nil || !r.Result.Created {
			t.Fatalf("batch op %d: %+v", i, r)
		}
	}

	p, err := c.List(ctx, db, "Message", client.Key{"many"}, client.ListOptions{Limit: 100})
	if err != nil || len(p.Documents) != 100 || p.Next == "" {
		t.Fatalf("first page: %d documents, next %q, %v", len(p.Documents), p.Next, err)
	}
	var want int64 = 1
	pages := map[string]bool{}
	opts := client.ListOptions{Limit: 100, Fields: []string{"subject"}}
	for d, err := range c.ListAll(ctx, db, "Message", client.Key{"many"}, opts) {
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(d.Key, client.Key{"many", want}) || string(d.Body) != fmt.Sprintf(`{"subject":"%d"}`, want) {
			t.Fatalf("document %d: key %v body %s", want, d.Key, d.Body)
		}
		pages[string(d.Body)] = true
		want++
	}
	if want != 251 || len(pages) != 250 {
		t.Fatalf("ListAll yielded %d documents; want 250", want-1)
	}
	// Stopping early stops the iteration.
	n := 0
	for range c.ListAll(ctx, db, "Message", client.Key{"many"}, client.ListOptions{Limit: 7}) {
		if n++; n == 10 {
			break
		}
	}
	if n != 10 {
		t.Fatalf("early break after %d", n)
	}
	for _, err := range c.ListAll(ctx, db, "Nope", client.Key{"many"}, opts) {
		if !client.IsNotFound(err) {
			t.Fatalf("ListAll of a missing table yielded %v; want 404", err)
		}
	}
}

func TestKeysWithSpecialCharactersRoundTrip(t *testing.T) {
	c, ctx := newClient(t), ctxT(t)
	owner := "ow/ner, (x)"
	names := []string{"a/b", "x,y", "(p)", "(q,r)", "sp ace", "ünïcødé ✓", ".", "..", "100%", "a?b#c&d=e", "+plus+", "%2F"}
	for _, name := range names {
		key := client.Key{owner, name}
		w, err := c.Put(ctx, db, "Note", key, map[string]string{"text": name})
		if err != nil {
			t.Fatalf("Put %q: %v", name, err)
		}
		if !reflect.DeepEqual(w.Key, key) {
			t.Fatalf("Put %q answered key %#v", name, w.Key)
		}
		d, err := c.Get(ctx, db, "Note", key)
		if err != nil {
			t.Fatalf("Get %q: %v", name, err)
		}
		var n struct{ Text string }
		if err := d.Decode(&n); err != nil || n.Text != name {
			t.Fatalf("Get %q = %s", name, d.Body)
		}
	}
	got := map[string]bool{}
	for d, err := range c.ListAll(ctx, db, "Note", client.Key{owner}, client.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		if d.Key[0] != owner {
			t.Fatalf("listed key %#v", d.Key)
		}
		got[d.Key[1].(string)] = true
	}
	if len(got) != len(names) {
		t.Fatalf("listed %v; want %v", got, names)
	}
	docs, err := c.MultiGet(ctx, db, "Note", client.Key{owner}, []any{"x,y", "(p)", "a/b", "absent"})
	if err != nil || len(docs) != 3 || docs[0].Key[1] != "x,y" || docs[1].Key[1] != "(p)" || docs[2].Key[1] != "a/b" {
		t.Fatalf("MultiGet = %+v, %v", docs, err)
	}
	if _, err := c.Get(ctx, db, "Note", client.Key{owner, ""}); err == nil {
		t.Fatal("an empty key part was accepted")
	}
}

func TestTxnIsAtomicAcrossTables(t *testing.T) {
	c, ctx := newClient(t), ctxT(t)
	mbox := client.Key{"txn"}
	w, err := c.Put(ctx, db, "Mailbox", mbox, mailbox{Owner: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Txn(ctx, db, client.Txn{PartitionKey: "txn", Ops: []client.TxnOp{
		client.InsertOp("Message", client.Key{"txn"}, message{Subject: "hi"}),
		client.PatchOp("Mailbox", mbox, client.Patch{Inc: map[string]any{"unreadCount": 1, "totalCount": 1}}),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if res.SCN == "" || len(res.Results) != 2 || !reflect.DeepEqual(res.Results[0].Key, client.Key{"txn", int64(1)}) ||
		!res.Results[0].Created || res.Results[0].ETag == "" || res.Results[1].Created || res.Results[1].ETag == "" {
		t.Fatalf("Txn = %+v", res)
	}
	after, err := c.Get(ctx, db, "Mailbox", mbox)
	if err != nil || after.SCN != res.SCN || after.ETag != res.Results[1].ETag {
		t.Fatalf("mailbox after txn = %+v, %v; want SCN %s", after, err, res.SCN)
	}

	// The second operation's condition is false: nothing is applied.
	stale := w.ETag
	_, err = c.Txn(ctx, db, client.Txn{Ops: []client.TxnOp{
		client.PutOp("Message", client.Key{"txn", 1}, message{Subject: "changed"}),
		{Op: "patch", Table: "Mailbox", Key: mbox, Patch: &client.Patch{Inc: map[string]any{"unreadCount": 1}}, IfMatch: stale},
	}})
	var e *client.Error
	if !client.IsPreconditionFailed(err) || !errors.As(err, &e) || e.Operation == nil || *e.Operation != 1 {
		t.Fatalf("Txn with a stale IfMatch = %#v; want 412 naming operation 1", err)
	}
	var m message
	if d, err := c.Get(ctx, db, "Message", client.Key{"txn", 1}); err != nil || d.Decode(&m) != nil || m.Subject != "hi" {
		t.Fatalf("first operation of the failed txn was applied: %+v, %v", m, err)
	}
	if d, err := c.Get(ctx, db, "Mailbox", mbox); err != nil || d.ETag != after.ETag {
		t.Fatalf("mailbox changed by the failed txn: %+v, %v", d, err)
	}

	// Keys that leave the document group are refused.
	_, err = c.Txn(ctx, db, client.Txn{Ops: []client.TxnOp{
		client.DeleteOp("Message", client.Key{"txn", 1}),
		client.DeleteOp("Mailbox", client.Key{"other"}),
	}})
	if !errors.As(err, &e) || e.Status != 400 || e.Operation == nil || *e.Operation != 1 {
		t.Fatalf("cross-group txn = %v; want 400 naming operation 1", err)
	}
	res, err = c.Txn(ctx, db, client.Txn{Ops: []client.TxnOp{client.DeleteOp("Message", client.Key{"txn"})}})
	if err != nil || res.Results[0].Deleted != 1 {
		t.Fatalf("collection delete in a txn = %+v, %v", res, err)
	}
}

func TestBatchReportsEachOutcome(t *testing.T) {
	c, ctx := newClient(t), ctxT(t)
	res, err := c.Batch(ctx, db, []client.TxnOp{
		client.PutOp("Mailbox", client.Key{"batch-a"}, mailbox{Owner: "a"}),
		client.PatchOp("Mailbox", client.Key{"batch-missing"}, client.Patch{Inc: map[string]any{"unreadCount": 1}}),
		client.PutOp("Mailbox", client.Key{"batch-a"}, mailbox{Owner: "a2"}),
		client.DeleteOp("Mailbox", client.Key{"batch-a"}),
	})
	if err != nil || len(res) != 4 {
		t.Fatalf("Batch = %+v, %v", res, err)
	}
	if res[0].Status != 201 || !res[0].Result.Created || res[0].SCN == "" {
		t.Errorf("op 0: %+v", res[0])
	}
	if res[1].Status != 404 || res[1].Problem == nil || res[1].Problem.Status != 404 || res[1].Result != nil {
		t.Errorf("op 1: %+v", res[1])
	}
	if res[2].Status != 200 || res[2].Result.Created {
		t.Errorf("op 2: %+v", res[2])
	}
	if res[3].Status != 204 {
		t.Errorf("op 3: %+v", res[3])
	}
	if _, err := c.Batch(ctx, "NoSuchDB", []client.TxnOp{client.DeleteOp("T", client.Key{"x"})}); !client.IsNotFound(err) {
		t.Fatalf("Batch on a missing database = %v; want 404", err)
	}
}

// countingTransport counts round trips.
type countingTransport struct{ n atomic.Int32 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

func TestRetryGivesUpAfterItsBoundOnAClosedPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: connections are refused

	tr := &countingTransport{}
	c := client.New("http://"+addr, client.WithHTTPClient(&http.Client{Transport: tr}), client.WithRetry(400*time.Millisecond))
	start := time.Now()
	_, err = c.Get(ctxT(t), db, "Mailbox", client.Key{"x"})
	elapsed := time.Since(start)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("err = %v; want connection refused", err)
	}
	if elapsed < 400*time.Millisecond || elapsed > 2*time.Second {
		t.Fatalf("gave up after %v; want just after 400ms", elapsed)
	}
	if n := tr.n.Load(); n < 3 {
		t.Fatalf("%d attempts; want retries", n)
	}

	// Without retries one attempt is made.
	tr.n.Store(0)
	c = client.New("http://"+addr, client.WithHTTPClient(&http.Client{Transport: tr}), client.WithRetry(0))
	if _, err := c.Get(ctxT(t), db, "Mailbox", client.Key{"x"}); !errors.Is(err, syscall.ECONNREFUSED) || tr.n.Load() != 1 {
		t.Fatalf("WithRetry(0): %v after %d attempts", err, tr.n.Load())
	}
}

func TestRetryHonoursRetryAfterOn503(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 2 {
			w.Header().Set("Content-Type", "application/problem+json")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(503)
			fmt.Fprint(w, `{"type":"https://doppio.dev/problems/unavailable","title":"Service unavailable","status":503,"detail":"node is starting","retryAfter":1}`)
			return
		}
		w.Header().Set("ETag", `"e"`)
		fmt.Fprint(w, `{"a":1}`)
	}))
	defer srv.Close()

	start := time.Now()
	d, err := client.New(srv.URL).Get(ctxT(t), "D", "T", client.Key{"k"})
	if err != nil || string(d.Body) != `{"a":1}` || calls.Load() != 3 {
		t.Fatalf("Get = %v, %v after %d calls", d, err, calls.Load())
	}
	if el := time.Since(start); el < 2*time.Second {
		t.Fatalf("answered after %v; Retry-After: 1 twice means at least 2s", el)
	}

	// A bound shorter than Retry-After gives up with the 503.
	calls.Store(0)
	start = time.Now()
	_, err = client.New(srv.URL, client.WithRetry(300*time.Millisecond)).Get(ctxT(t), "D", "T", client.Key{"k"})
	var e *client.Error
	if !errors.As(err, &e) || !errors.Is(err, client.ErrUnavailable) || e.Status != 503 || e.RetryAfter != 1 || e.Detail != "node is starting" {
		t.Fatalf("err = %#v; want the 503 problem", err)
	}
	if el := time.Since(start); el < 300*time.Millisecond || el > 900*time.Millisecond {
		t.Fatalf("gave up after %v; want about 300ms", el)
	}
}

func TestDropRefusesUnlessForcedAndTheNameStartsEmpty(t *testing.T) {
	c, ctx := newClient(t), ctxT(t)
	if _, _, err := c.PutDatabase(ctx, "DropDB", client.DatabaseSpec{Partitions: 2, Replicas: 1}); err != nil {
		t.Fatal(err)
	}
	spec := client.TableSpec{Key: []client.KeyPart{{Name: "id", Type: "string"}}, Schema: json.RawMessage(`{"type":"record","name":"T","fields":[{"name":"a","type":"long"}]}`)}
	if _, _, err := c.PutTable(ctx, "DropDB", "T", spec); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, "DropDB", "T", client.Key{"x"}, map[string]any{"a": 1}); err != nil {
		t.Fatal(err)
	}
	if err := c.DropTable(ctx, "DropDB", "T", client.DropOptions{}); !client.IsConflict(err) {
		t.Fatalf("unforced DropTable of a table holding a document: %v; want 409", err)
	}
	if err := c.DropTable(ctx, "DropDB", "T", client.DropOptions{Force: true}); err != nil {
		t.Fatalf("forced DropTable: %v", err)
	}
	if _, err := c.GetTable(ctx, "DropDB", "T"); !client.IsNotFound(err) {
		t.Fatalf("GetTable after the drop: %v; want 404", err)
	}
	if _, _, err := c.PutTable(ctx, "DropDB", "T", spec); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, "DropDB", "T", client.Key{"x"}); !client.IsNotFound(err) {
		t.Fatalf("Get of a dropped document after the table is created again: %v; want 404", err)
	}
	if err := c.DropDatabase(ctx, "DropDB", client.DropOptions{}); err != nil {
		t.Fatalf("DropDatabase of an empty database: %v", err)
	}
	if _, err := c.GetDatabase(ctx, "DropDB"); !client.IsNotFound(err) {
		t.Fatalf("GetDatabase after the drop: %v; want 404", err)
	}
}
