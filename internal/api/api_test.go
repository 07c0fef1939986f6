package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/api"
	"github.com/doppio-db/doppio/internal/node"
	"github.com/doppio-db/doppio/internal/partition"
)

// The tests of this package drive one real node (embedded etcd, Pebble, the
// HTTP listener) started once per test binary; each test works in its own
// database so tests do not see each other's writes.
var (
	addr   string
	client = &http.Client{Timeout: 30 * time.Second}
	dbSeq  atomic.Int64
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "doppio-api-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Errors (handler panics, 500s) are worth seeing; the rest is noise.
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	// Backfills at 500 documents per second: TestAddingAnIndexBackfillsOnline
	// watches one in progress.
	// Quota buckets keep 1 s of credit, and X-Test-User names a request's
	// caller (quota_test.go).
	n, err := node.Start(ctx, node.Config{DataDir: dir, HTTPAddr: "127.0.0.1:0", Logger: log, BackfillRate: 500,
		QuotaBurst: time.Second, API: api.Config{Knobs: api.Knobs{Caller: testCaller}}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start node:", err)
		return 1
	}
	defer n.Close()
	addr = n.Addr()
	return m.Run()
}

// answer is a response read in full.
type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) String() string { return fmt.Sprintf("%d %s", a.status, a.body) }

// send issues one request. path is sent as is (escaped form, no cleaning);
// body is nil, a string, []byte or a value to marshal as JSON; hdr lists
// header name, value pairs. A JSON body gets Content-Type application/json
// unless hdr sets it.
func send(t testing.TB, method, path string, body any, hdr ...string) answer {
	t.Helper()
	a, err := trySend(method, path, body, hdr...)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return a
}

func trySend(method, path string, body any, hdr ...string) (answer, error) {
	return probe(addr, method, path, false, body, hdr...)
}

// probe sends one request to host; of a streaming answer that succeeded
// it reads only the status and headers.
func probe(host, method, path string, stream bool, body any, hdr ...string) (answer, error) {
	req, err := newRequest(host, method, path, body, hdr...)
	if err != nil {
		return answer{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode, header: resp.Header}
	if stream && resp.StatusCode < 300 {
		return a, nil
	}
	a.body, err = io.ReadAll(resp.Body)
	return a, err
}

// newRequest builds the request trySend sends, to host.
func newRequest(host, method, path string, body any, hdr ...string) (*http.Request, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, "http://"+host, rd)
	if err != nil {
		return nil, err
	}
	// Opaque keeps the path byte for byte: no cleaning, no re-escaping.
	req.URL = &url.URL{Scheme: "http", Host: host, Opaque: path}
	if strings.Contains(path, "?") {
		p, q, _ := strings.Cut(path, "?")
		req.URL.Opaque, req.URL.RawQuery = p, q
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return req, nil
}

// expect fails the test unless the answer has status want.
func expect(t testing.TB, a answer, want int, what string) {
	t.Helper()
	if a.status != want {
		t.Fatalf("%s: status %d, want %d; body %s", what, a.status, want, a.body)
	}
}

func decode(t testing.TB, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("body %q is not a JSON object: %v", b, err)
	}
	return m
}

// canon re-encodes JSON with sorted keys so documents compare by value.
func canon(t testing.TB, b []byte) string {
	t.Helper()
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%q is not JSON: %v", b, err)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

func scnOf(t testing.TB, a answer) partition.SCN {
	t.Helper()
	s, err := partition.ParseSCN(a.header.Get("X-Doppio-SCN"))
	if err != nil {
		t.Fatalf("X-Doppio-SCN: %v (answer %s)", err, a)
	}
	return s
}

const (
	mailboxTable = `{"key":[{"name":"mailboxId","type":"string"}],
	  "schema":{"type":"record","name":"Mailbox","fields":[
	    {"name":"name","type":"string"},
	    {"name":"unread","type":"int","default":0}]}}`
	messageSchemaV1 = `{"type":"record","name":"Message","fields":[
	    {"name":"subject","type":"string"},
	    {"name":"from","type":{"type":"record","name":"Address","fields":[
	      {"name":"name","type":"string"},{"name":"address","type":"string"}]}},
	    {"name":"size","type":"int","default":0},
	    {"name":"kind","type":{"type":"enum","name":"Kind","symbols":["mail","note"]},"default":"mail"}]}`
	messageKey   = `[{"name":"mailboxId","type":"string"},{"name":"messageId","type":"long","autoIncrement":true}]`
	messageTable = `{"key":` + messageKey + `,"schema":` + messageSchemaV1 + `}`
	counterTable = `{"key":[{"name":"id","type":"int"}],
	  "schema":{"type":"record","name":"Counter","fields":[
	    {"name":"n","type":"long"},{"name":"blob","type":"bytes"}]}}`
)

// newDB creates a fresh database with the tables Mailbox (key mailboxId),
// Message (mailboxId, messageId auto-increment) and Counter (id int).
func newDB(t testing.TB) string {
	t.Helper()
	db := fmt.Sprintf("t%d_%d", time.Now().UnixNano()%1e6, dbSeq.Add(1))
	createSchema(t, db)
	return db
}

func createSchema(t testing.TB, db string) {
	t.Helper()
	a := send(t, "PUT", "/_schemas/"+db, `{"partitions":4}`)
	if a.status != 201 && a.status != 200 {
		t.Fatalf("create database %s: %s", db, a)
	}
	for name, def := range map[string]string{"Mailbox": mailboxTable, "Message": messageTable, "Counter": counterTable} {
		a := send(t, "PUT", "/_schemas/"+db+"/"+name, def)
		if a.status != 201 && a.status != 200 {
			t.Fatalf("create table %s.%s: %s", db, name, a)
		}
	}
}

func message(subject string, size int) map[string]any {
	return map[string]any{"subject": subject, "from": map[string]any{"name": "Ann", "address": "ann@example.com"}, "size": size}
}

func TestOperationalEndpoints(t *testing.T) {
	for _, c := range []struct {
		path string
		ct   string
	}{
		{"/healthz", "application/json"},
		{"/readyz", "application/json"},
		{"/metrics", "text/plain"},
		{"/_openapi", "application/yaml"},
		{"/_cluster", "application/json"},
		{"/_schemas", "application/json"},
	} {
		a := send(t, "GET", c.path, nil)
		expect(t, a, 200, c.path)
		if !strings.HasPrefix(a.header.Get("Content-Type"), c.ct) {
			t.Errorf("%s: Content-Type %q, want %s", c.path, a.header.Get("Content-Type"), c.ct)
		}
	}
	if a := send(t, "GET", "/_openapi", nil); !bytes.Equal(a.body, api.OpenAPI) {
		t.Errorf("/_openapi does not serve the embedded document")
	}
	cl := decode(t, send(t, "GET", "/_cluster", nil).body)
	if nodes, _ := cl["nodes"].([]any); len(nodes) != 1 {
		t.Errorf("/_cluster nodes = %v, want one node", cl["nodes"])
	}
}

func TestDocumentLifecycle(t *testing.T) {
	db := newDB(t)
	doc := "/" + db + "/Message/m1/1"

	created := send(t, "PUT", doc, message("hello", 10))
	expect(t, created, 201, "create")
	etag := created.header.Get("ETag")
	if !strings.HasPrefix(etag, `"`) || !strings.HasSuffix(etag, `"`) || len(etag) < 3 {
		t.Fatalf("ETag %q is not quoted", etag)
	}
	if loc := created.header.Get("Location"); loc != doc {
		t.Errorf("Location %q, want %q", loc, doc)
	}
	s1 := scnOf(t, created)
	wb := decode(t, created.body)
	if got := canon(t, mustJSON(wb["key"])); got != `["m1",1]` {
		t.Errorf("write result key %s, want [\"m1\",1]", got)
	}
	if wb["etag"] != etag || wb["scn"] != s1.String() {
		t.Errorf("write result %s does not repeat ETag %s and SCN %s", created.body, etag, s1)
	}

	got := send(t, "GET", doc, nil)
	expect(t, got, 200, "get")
	if got.header.Get("ETag") != etag {
		t.Errorf("GET ETag %q, want %q", got.header.Get("ETag"), etag)
	}
	if _, err := http.ParseTime(got.header.Get("Last-Modified")); err != nil {
		t.Errorf("Last-Modified %q: %v", got.header.Get("Last-Modified"), err)
	}
	if v := got.header.Get("X-Doppio-Schema-Version"); v != "1" {
		t.Errorf("X-Doppio-Schema-Version %q, want 1", v)
	}
	if scnOf(t, got) != s1 {
		t.Errorf("GET SCN %s, want the writing SCN %s", scnOf(t, got), s1)
	}
	want := `{"from":{"address":"ann@example.com","name":"Ann"},"kind":"mail","size":10,"subject":"hello"}`
	if c := canon(t, got.body); c != want {
		t.Errorf("GET body %s, want %s (defaults filled)", c, want)
	}

	replaced := send(t, "PUT", doc, message("hello again", 11), "If-Match", etag)
	expect(t, replaced, 200, "replace")
	if replaced.header.Get("ETag") == etag {
		t.Errorf("replace kept the ETag %s", etag)
	}
	if s := scnOf(t, replaced); s.Sequence != s1.Sequence+1 {
		t.Errorf("replace SCN %s, want sequence %d", s, s1.Sequence+1)
	}

	patched := send(t, "PATCH", doc, `{"$set":{"from.name":"Bob","kind":"note"},"$inc":{"size":5}}`)
	expect(t, patched, 200, "patch")
	want = `{"from":{"address":"ann@example.com","name":"Bob"},"kind":"note","size":16,"subject":"hello again"}`
	if c := canon(t, send(t, "GET", doc, nil).body); c != want {
		t.Errorf("after patch %s, want %s", c, want)
	}
	unset := send(t, "PATCH", doc, `{"$unset":["size"]}`)
	expect(t, unset, 200, "patch $unset")
	if m := decode(t, send(t, "GET", doc, nil).body); m["size"] != json.Number("0") {
		t.Errorf("$unset size gave %v, want its default 0", m["size"])
	}

	del := send(t, "DELETE", doc, nil)
	expect(t, del, 204, "delete")
	if d := del.header.Get("X-Doppio-Deleted"); d != "1" {
		t.Errorf("X-Doppio-Deleted %q, want 1", d)
	}
	if len(del.body) != 0 {
		t.Errorf("204 with a body %q", del.body)
	}
	expect(t, send(t, "GET", doc, nil), 404, "get after delete")
	expect(t, send(t, "DELETE", doc, nil), 404, "delete again")
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func TestCollectionReadPagesWithCursor(t *testing.T) {
	db := newDB(t)
	for i := 1; i <= 5; i++ {
		expect(t, send(t, "PUT", fmt.Sprintf("/%s/Message/m1/%d", db, i), message(fmt.Sprint("s", i), i)), 201, "put")
	}
	expect(t, send(t, "PUT", "/"+db+"/Message/m2/1", message("other", 1)), 201, "put m2")

	var keys []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatalf("cursor never ends")
		}
		path := "/" + db + "/Message/m1?limit=2"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		a := send(t, "GET", path, nil)
		expect(t, a, 200, "collection page")
		var page struct {
			Documents []struct {
				Key      []any          `json:"key"`
				Document map[string]any `json:"document"`
			} `json:"documents"`
			Next string `json:"next"`
		}
		if err := json.Unmarshal(a.body, &page); err != nil {
			t.Fatal(err)
		}
		if len(page.Documents) > 2 {
			t.Fatalf("page of %d documents with limit=2", len(page.Documents))
		}
		for _, d := range page.Documents {
			keys = append(keys, fmt.Sprint(d.Key...))
			if d.Document["subject"] != fmt.Sprint("s", d.Key[1]) {
				t.Errorf("document %v is %v", d.Key, d.Document)
			}
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	if want := []string{"m11", "m12", "m13", "m14", "m15"}; !slices.Equal(keys, want) {
		t.Errorf("collection keys %v, want %v", keys, want)
	}
	all := send(t, "GET", "/"+db+"/Message/m1", nil)
	if m := decode(t, all.body); m["next"] != nil {
		t.Errorf("a collection read within the default limit has next %v", m["next"])
	}
	empty := send(t, "GET", "/"+db+"/Message/nobody", nil)
	expect(t, empty, 200, "empty collection")
	if c := canon(t, empty.body); c != `{"documents":[]}` {
		t.Errorf("empty collection %s", c)
	}
}

func TestMultiGetListsPresentDocuments(t *testing.T) {
	db := newDB(t)
	for i := 1; i <= 4; i++ {
		expect(t, send(t, "PUT", fmt.Sprintf("/%s/Message/m1/%d", db, i), message(fmt.Sprint("s", i), i)), 201, "put")
	}
	a := send(t, "GET", "/"+db+"/Message/m1/(1,3,9)", nil)
	expect(t, a, 200, "multi-get")
	var page struct {
		Documents []struct {
			Key      []any          `json:"key"`
			Document map[string]any `json:"document"`
		} `json:"documents"`
	}
	if err := json.Unmarshal(a.body, &page); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range page.Documents {
		got = append(got, fmt.Sprint(d.Key...)+"="+fmt.Sprint(d.Document["subject"]))
	}
	if want := []string{"m11=s1", "m13=s3"}; !slices.Equal(got, want) {
		t.Errorf("multi-get %v, want %v", got, want)
	}
	expect(t, send(t, "GET", "/"+db+"/Message/m1/(7,8)", nil), 200, "multi-get of absent documents")
	if c := canon(t, send(t, "GET", "/"+db+"/Message/m1/(7,8)", nil).body); c != `{"documents":[]}` {
		t.Errorf("multi-get of absent documents: %s", c)
	}
}

func TestProjectionReturnsOnlyTheFields(t *testing.T) {
	db := newDB(t)
	expect(t, send(t, "PUT", "/"+db+"/Message/m1/1", message("hi", 3)), 201, "put")
	a := send(t, "GET", "/"+db+"/Message/m1/1?fields=subject,from.name", nil)
	expect(t, a, 200, "projected get")
	if c := canon(t, a.body); c != `{"from":{"name":"Ann"},"subject":"hi"}` {
		t.Errorf("projection %s", c)
	}
	a = send(t, "GET", "/"+db+"/Message/m1?fields=size", nil)
	expect(t, a, 200, "projected collection")
	if c := canon(t, a.body); c != `{"documents":[{"document":{"size":3},"key":["m1",1]}]}` {
		t.Errorf("projected collection %s", c)
	}
	a = send(t, "GET", "/"+db+"/Message/m1/(1)?fields=kind", nil)
	expect(t, a, 200, "projected multi-get")
	if c := canon(t, a.body); c != `{"documents":[{"document":{"kind":"mail"},"key":["m1",1]}]}` {
		t.Errorf("projected multi-get %s", c)
	}
}

func TestPostAssignsAutoIncrementKeys(t *testing.T) {
	db := newDB(t)
	for i := 1; i <= 2; i++ {
		a := send(t, "POST", "/"+db+"/Message/m1", message("auto", i))
		expect(t, a, 201, "insert")
		wantLoc := fmt.Sprintf("/%s/Message/m1/%d", db, i)
		if loc := a.header.Get("Location"); loc != wantLoc {
			t.Errorf("Location %q, want %q", loc, wantLoc)
		}
		if k := canon(t, mustJSON(decode(t, a.body)["key"])); k != fmt.Sprintf(`["m1",%d]`, i) {
			t.Errorf("key %s, want [\"m1\",%d]", k, i)
		}
		g := send(t, "GET", wantLoc, nil)
		expect(t, g, 200, "get inserted")
		if g.header.Get("ETag") != a.header.Get("ETag") {
			t.Errorf("inserted ETag %s, read %s", a.header.Get("ETag"), g.header.Get("ETag"))
		}
	}
	// An explicit put of a larger key moves the counter past it.
	expect(t, send(t, "PUT", "/"+db+"/Message/m1/10", message("explicit", 0)), 201, "put 10")
	a := send(t, "POST", "/"+db+"/Message/m1", message("auto", 3))
	expect(t, a, 201, "insert after explicit")
	if loc := a.header.Get("Location"); loc != "/"+db+"/Message/m1/11" {
		t.Errorf("insert after key 10 went to %s", loc)
	}
}

func TestDeleteCollectionIsAtomic(t *testing.T) {
	db := newDB(t)
	expect(t, send(t, "PUT", "/"+db+"/Message/m2/1", message("keep", 1)), 201, "put m2")
	for i := 1; i <= 3; i++ {
		expect(t, send(t, "PUT", fmt.Sprintf("/%s/Message/m1/%d", db, i), message("x", i)), 201, "put")
	}
	before := scnOf(t, send(t, "GET", "/"+db+"/Message/m1/3", nil))
	a := send(t, "DELETE", "/"+db+"/Message/m1", nil)
	expect(t, a, 204, "delete collection")
	if d := a.header.Get("X-Doppio-Deleted"); d != "3" {
		t.Errorf("X-Doppio-Deleted %q, want 3", d)
	}
	if s := scnOf(t, a); s.Sequence != before.Sequence+1 {
		t.Errorf("collection delete at %s, want one SCN after %s", s, before)
	}
	if c := canon(t, send(t, "GET", "/"+db+"/Message/m1", nil).body); c != `{"documents":[]}` {
		t.Errorf("collection after delete %s", c)
	}
	expect(t, send(t, "GET", "/"+db+"/Message/m2/1", nil), 200, "other collection kept")
	expect(t, send(t, "DELETE", "/"+db+"/Message/m1", nil), 404, "delete empty collection")
}

func TestTxnAcrossTablesIsAtomic(t *testing.T) {
	db := newDB(t)
	expect(t, send(t, "PUT", "/"+db+"/Mailbox/m1", `{"name":"Inbox"}`), 201, "put mailbox")
	expect(t, send(t, "PUT", "/"+db+"/Message/m1/3", message("old", 1)), 201, "put message 3")
	txn := map[string]any{"partitionKey": "m1", "ops": []any{
		map[string]any{"op": "put", "table": "Message", "key": []any{"m1", 7}, "document": message("new", 2)},
		map[string]any{"op": "patch", "table": "Mailbox", "key": []any{"m1"}, "patch": map[string]any{"$inc": map[string]any{"unread": 1}}},
		map[string]any{"op": "delete", "table": "Message", "key": []any{"m1", 3}},
		map[string]any{"op": "put", "table": "Message", "key": []any{"m1"}, "document": message("auto", 3)},
	}}
	a := send(t, "POST", "/"+db+"/_txn", txn)
	expect(t, a, 200, "txn")
	var res struct {
		SCN     string `json:"scn"`
		Results []struct {
			Key     []any  `json:"key"`
			ETag    string `json:"etag"`
			Created bool   `json:"created"`
			Deleted int    `json:"deleted"`
		} `json:"results"`
	}
	if err := json.Unmarshal(a.body, &res); err != nil {
		t.Fatal(err)
	}
	if a.header.Get("X-Doppio-SCN") != res.SCN || len(res.Results) != 4 {
		t.Fatalf("txn answer %s, header SCN %s", a.body, a.header.Get("X-Doppio-SCN"))
	}
	if !res.Results[0].Created || res.Results[2].Deleted != 1 || !res.Results[3].Created {
		t.Errorf("txn results %s", a.body)
	}
	if k := fmt.Sprint(res.Results[3].Key...); k != "m18" {
		t.Errorf("auto-increment key in a txn: %v, want [m1 8]", res.Results[3].Key)
	}
	for _, p := range []string{"/Message/m1/7", "/Mailbox/m1", "/Message/m1/8"} {
		g := send(t, "GET", "/"+db+p, nil)
		expect(t, g, 200, p)
		if s := g.header.Get("X-Doppio-SCN"); s != res.SCN {
			t.Errorf("%s written at %s, want the txn SCN %s", p, s, res.SCN)
		}
	}
	if m := decode(t, send(t, "GET", "/"+db+"/Mailbox/m1", nil).body); m["unread"] != json.Number("1") {
		t.Errorf("unread %v, want 1", m["unread"])
	}
	expect(t, send(t, "GET", "/"+db+"/Message/m1/3", nil), 404, "deleted in txn")
}

func TestBatchReportsEachOutcome(t *testing.T) {
	db := newDB(t)
	expect(t, send(t, "PUT", "/"+db+"/Message/m1/1", message("one", 1)), 201, "put")
	expect(t, send(t, "PUT", "/"+db+"/Message/m2/1", message("two", 1)), 201, "put")
	batch := map[string]any{"ops": []any{
		map[string]any{"op": "put", "table": "Message", "key": []any{"m3", 1}, "document": message("new", 1)},
		map[string]any{"op": "put", "table": "Message", "key": []any{"m1", 1}, "document": message("replaced", 1)},
		map[string]any{"op": "delete", "table": "Message", "key": []any{"m4", 1}},
		map[string]any{"op": "put", "table": "Message", "key": []any{"m5", 1}, "document": map[string]any{"subject": 1}},
		map[string]any{"op": "delete", "table": "Message", "key": []any{"m2", 1}},
		map[string]any{"op": "insert", "table": "Message", "key": []any{"m1", 1}, "document": message("dup", 1)},
	}}
	a := send(t, "POST", "/"+db+"/_batch", batch)
	expect(t, a, 200, "batch")
	var res struct {
		Results []struct {
			Status  int `json:"status"`
			Problem *struct {
				Type   string `json:"type"`
				Status int    `json:"status"`
				Field  string `json:"field"`
			} `json:"problem"`
		} `json:"results"`
	}
	if err := json.Unmarshal(a.body, &res); err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, r := range res.Results {
		got = append(got, r.Status)
		if r.Status >= 400 && (r.Problem == nil || r.Problem.Status != r.Status) {
			t.Errorf("failed batch operation without a matching problem: %s", a.body)
		}
	}
	if want := []int{201, 200, 404, 422, 204, 412}; !slices.Equal(got, want) {
		t.Errorf("batch statuses %v, want %v (%s)", got, want, a.body)
	}
	expect(t, send(t, "GET", "/"+db+"/Message/m3/1", nil), 200, "batch put applied")
	expect(t, send(t, "GET", "/"+db+"/Message/m2/1", nil), 404, "batch delete applied")
	expect(t, send(t, "GET", "/"+db+"/Message/m5/1", nil), 404, "invalid batch put not applied")
	if m := decode(t, send(t, "GET", "/"+db+"/Message/m1/1", nil).body); m["subject"] != "replaced" {
		t.Errorf("m1/1 subject %v, want replaced (the duplicate insert must not apply)", m["subject"])
	}
}

func TestSchemaEvolutionResolvesVersions(t *testing.T) {
	db := newDB(t)
	doc := "/" + db + "/Message/m1/1"
	expect(t, send(t, "PUT", doc, message("v1", 1)), 201, "put at v1")

	v2 := strings.Replace(messageSchemaV1, `{"name":"size"`, `{"name":"priority","type":"int","default":3},{"name":"size"`, 1)
	a := send(t, "PUT", "/_schemas/"+db+"/Message", `{"key":`+messageKey+`,"schema":`+v2+`}`)
	expect(t, a, 200, "register v2")
	if m := decode(t, a.body); m["version"] != json.Number("2") {
		t.Fatalf("table after v2: %s", a.body)
	}
	// Registering the same schema again changes nothing.
	a = send(t, "PUT", "/_schemas/"+db+"/Message", `{"key":`+messageKey+`,"schema":`+v2+`}`)
	expect(t, a, 200, "register v2 again")
	if m := decode(t, a.body); m["version"] != json.Number("2") {
		t.Errorf("re-registering v2 made version %v", m["version"])
	}
	expect(t, send(t, "GET", "/_schemas/"+db+"/Message/versions/2", nil), 200, "version 2")
	expect(t, send(t, "GET", "/_schemas/"+db+"/Message/versions/3", nil), 404, "version 3")

	for _, c := range []struct {
		header, wantVersion string
		wantPriority        bool
	}{
		{"", "2", true},
		{"2", "2", true},
		{"1", "1", false},
		{"0", "1", false},
	} {
		var hdr []string
		if c.header != "" {
			hdr = []string{"X-Doppio-Schema-Version", c.header}
		}
		g := send(t, "GET", doc, nil, hdr...)
		expect(t, g, 200, "get at version "+c.header)
		if v := g.header.Get("X-Doppio-Schema-Version"); v != c.wantVersion {
			t.Errorf("X-Doppio-Schema-Version: %q answered version %q, want %s", c.header, v, c.wantVersion)
		}
		m := decode(t, g.body)
		p, has := m["priority"]
		if has != c.wantPriority || (has && p != json.Number("3")) {
			t.Errorf("reading at %q: priority %v (present %v), want present=%v with default 3", c.header, p, has, c.wantPriority)
		}
	}
	// A document written at v2 reads at v1 without the new field and as
	// written with it.
	w := message("v2", 2)
	w["priority"] = 9
	expect(t, send(t, "PUT", "/"+db+"/Message/m1/2", w), 201, "put at v2")
	if m := decode(t, send(t, "GET", "/"+db+"/Message/m1/2", nil, "X-Doppio-Schema-Version", "1").body); m["priority"] != nil {
		t.Errorf("v2 document read at v1 still has priority")
	}
	g := send(t, "GET", "/"+db+"/Message/m1/2", nil, "X-Doppio-Schema-Version", "0")
	if m := decode(t, g.body); m["priority"] != json.Number("9") || g.header.Get("X-Doppio-Schema-Version") != "2" {
		t.Errorf("v2 document as written: %s (version %s)", g.body, g.header.Get("X-Doppio-Schema-Version"))
	}
}

func TestSCNGrowsByOnePerCommittedWrite(t *testing.T) {
	db := newDB(t)
	var last partition.SCN
	step := func(a answer, what string) {
		t.Helper()
		s := scnOf(t, a)
		if last != (partition.SCN{}) && (s.Generation != last.Generation || s.Sequence != last.Sequence+1) {
			t.Errorf("%s committed at %s, want one after %s", what, s, last)
		}
		last = s
	}
	step(send(t, "PUT", "/"+db+"/Mailbox/g", `{"name":"g"}`), "put")
	step(send(t, "PUT", "/"+db+"/Message/g/1", message("a", 1)), "put")
	step(send(t, "POST", "/"+db+"/Message/g", message("b", 1)), "insert")
	step(send(t, "PATCH", "/"+db+"/Message/g/1", `{"$inc":{"size":1}}`), "patch")
	// A failed write consumes no SCN.
	expect(t, send(t, "PUT", "/"+db+"/Message/g/1", message("c", 1), "If-Match", `"0000"`), 412, "failed condition")
	expect(t, send(t, "PUT", "/"+db+"/Message/g/1", `{"subject":1}`), 422, "invalid document")
	step(send(t, "POST", "/"+db+"/_txn", map[string]any{"ops": []any{
		map[string]any{"op": "delete", "table": "Message", "key": []any{"g", 2}},
		map[string]any{"op": "patch", "table": "Mailbox", "key": []any{"g"}, "patch": map[string]any{"$inc": map[string]any{"unread": 1}}},
	}}), "txn")
	step(send(t, "DELETE", "/"+db+"/Message/g/1", nil), "delete")
	step(send(t, "PUT", "/"+db+"/Message/g/1", message("d", 1)), "put again")
	step(send(t, "DELETE", "/"+db+"/Message/g", nil), "delete collection")
}

func TestConditionalReadsAnswerNotModified(t *testing.T) {
	db := newDB(t)
	doc := "/" + db + "/Mailbox/m1"
	w := send(t, "PUT", doc, `{"name":"Inbox"}`)
	expect(t, w, 201, "put")
	etag, lm := w.header.Get("ETag"), w.header.Get("Last-Modified")

	a := send(t, "GET", doc, nil, "If-None-Match", etag)
	expect(t, a, 304, "If-None-Match current")
	if a.header.Get("ETag") != etag || len(a.body) != 0 {
		t.Errorf("304 has ETag %q and body %q", a.header.Get("ETag"), a.body)
	}
	expect(t, send(t, "GET", doc, nil, "If-None-Match", `"other", `+etag), 304, "If-None-Match list")
	expect(t, send(t, "GET", doc, nil, "If-None-Match", `"other"`), 200, "If-None-Match other")
	expect(t, send(t, "GET", doc, nil, "If-Modified-Since", lm), 304, "If-Modified-Since Last-Modified")
	past := time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat)
	expect(t, send(t, "GET", doc, nil, "If-Modified-Since", past), 200, "If-Modified-Since an hour ago")

	// Conditional writes that hold.
	expect(t, send(t, "PUT", doc, `{"name":"Inbox 2"}`, "If-Match", etag), 200, "If-Match current")
	future := time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
	expect(t, send(t, "PUT", doc, `{"name":"Inbox 3"}`, "If-Unmodified-Since", future), 200, "If-Unmodified-Since future")
	expect(t, send(t, "PUT", "/"+db+"/Mailbox/m2", `{"name":"New"}`, "If-None-Match", "*"), 201, "If-None-Match * on absent")
}

func TestAvroReadAnswersStoredBinary(t *testing.T) {
	db := newDB(t)
	expect(t, send(t, "PUT", "/"+db+"/Counter/1", `{"n":5,"blob":"AQI="}`), 201, "put")
	a := send(t, "GET", "/"+db+"/Counter/1", nil, "Accept", "avro/binary")
	expect(t, a, 200, "avro read")
	if ct := a.header.Get("Content-Type"); ct != "avro/binary" {
		t.Errorf("Content-Type %q", ct)
	}
	// long 5 zigzag = 0x0a; bytes of length 2 = 0x04 then 01 02.
	if want := []byte{0x0a, 0x04, 0x01, 0x02}; !bytes.Equal(a.body, want) {
		t.Errorf("avro body % x, want % x", a.body, want)
	}
	if c := canon(t, send(t, "GET", "/"+db+"/Counter/1", nil).body); c != `{"blob":"AQI=","n":5}` {
		t.Errorf("JSON read %s", c)
	}
}

func TestMethodNotAllowedListsAllow(t *testing.T) {
	db := newDB(t)
	for _, c := range []struct{ method, path, allow string }{
		{"PATCH", "/_schemas/" + db, "GET, PUT, DELETE"},
		{"POST", "/_cluster", "GET"},
		{"GET", "/" + db + "/_txn", "POST"},
		// A table without an auto-increment key part takes no POST.
		{"POST", "/" + db + "/Mailbox/m1", "GET, PUT, PATCH, DELETE"},
	} {
		a := send(t, c.method, c.path, "{}")
		expect(t, a, 405, c.method+" "+c.path)
		if got := a.header.Get("Allow"); got != c.allow {
			t.Errorf("%s %s: Allow %q, want %q", c.method, c.path, got, c.allow)
		}
	}
}

func TestLocationAddressesUnusualKeys(t *testing.T) {
	db := newDB(t)
	// Key parts that look like path syntax once decoded: each Location must
	// address exactly the document written.
	for _, k := range []struct{ escaped, value string }{
		{"%28a%2Cb%29", "(a,b)"},
		{"%2E%2E", ".."},
		{"%2E", "."},
		{"a%2Fb", "a/b"},
		{"caf%C3%A9%20%3F", "café ?"},
	} {
		body := fmt.Sprintf(`{"name":%q}`, k.value)
		w := send(t, "PUT", "/"+db+"/Mailbox/"+k.escaped, body)
		expect(t, w, 201, "put "+k.value)
		loc := w.header.Get("Location")
		g := send(t, "GET", loc, nil)
		expect(t, g, 200, "get Location "+loc)
		if m := decode(t, g.body); m["name"] != k.value {
			t.Errorf("Location %s of key %q reads %s", loc, k.value, g.body)
		}
	}
}
