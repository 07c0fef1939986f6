package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
)

// problemTypes maps a status to the problem type every answer with it
// carries.
var problemTypes = map[int]string{
	400: "https://doppio.dev/problems/malformed",
	404: "https://doppio.dev/problems/not-found",
	405: "https://doppio.dev/problems/method-not-allowed",
	409: "https://doppio.dev/problems/conflict",
	412: "https://doppio.dev/problems/precondition-failed",
	413: "https://doppio.dev/problems/too-large",
	415: "https://doppio.dev/problems/unsupported-media-type",
	422: "https://doppio.dev/problems/schema-mismatch",
}

type problemDoc struct {
	Type       string `json:"type"`
	Title      string `json:"title"`
	Status     int    `json:"status"`
	Detail     string `json:"detail"`
	Instance   string `json:"instance"`
	Field      string `json:"field"`
	Operation  *int   `json:"operation"`
	RetryAfter int    `json:"retryAfter"`
}

// checkProblem asserts a is an RFC 9457 answer with status (and its type),
// and returns it parsed.
func checkProblem(t testing.TB, a answer, status int) problemDoc {
	t.Helper()
	if a.status != status {
		t.Fatalf("status %d, want %d; body %s", a.status, status, a.body)
	}
	if ct := a.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json", ct)
	}
	var p problemDoc
	dec := json.NewDecoder(bytes.NewReader(a.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("problem body %s: %v", a.body, err)
	}
	if p.Status != status || p.Type != problemTypes[status] || p.Title == "" || p.Detail == "" {
		t.Fatalf("problem %+v does not carry status %d, type %s, a title and a detail", p, status, problemTypes[status])
	}
	return p
}

// snapshot renders everything a failed request must leave untouched: the
// probe documents and collections with their headers, the schemas, and the
// SCN of every partition of db.
func snapshot(t testing.TB, db string) string {
	t.Helper()
	var b strings.Builder
	probes := []string{
		"/" + db + "/Message/m1/1", "/" + db + "/Message/m1/2", "/" + db + "/Message/m1",
		"/" + db + "/Message/m1/50", "/" + db + "/Message/m1/51", "/" + db + "/Message/m2",
		"/" + db + "/Mailbox/m1", "/" + db + "/Mailbox/m2", "/" + db + "/Counter/1",
		"/_schemas/" + db, "/_schemas/" + db + "/Message", "/_schemas/" + db + "/Mailbox",
		"/_schemas/" + db + "/Counter", "/_schemas/" + db + "/Bad", "/_schemas",
	}
	for _, p := range probes {
		a := send(t, "GET", p, nil)
		fmt.Fprintf(&b, "%s %d etag=%s scn=%s lm=%s v=%s\n%s\n", p, a.status, a.header.Get("ETag"),
			a.header.Get("X-Doppio-SCN"), a.header.Get("Last-Modified"), a.header.Get("X-Doppio-Schema-Version"), a.body)
	}
	var cl struct {
		Partitions []struct {
			Database  string `json:"database"`
			Partition int    `json:"partition"`
			SCN       string `json:"scn"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal(send(t, "GET", "/_cluster", nil).body, &cl); err != nil {
		t.Fatal(err)
	}
	var scns []string
	for _, p := range cl.Partitions {
		if p.Database == db {
			scns = append(scns, fmt.Sprintf("%d=%s", p.Partition, p.SCN))
		}
	}
	sort.Strings(scns)
	fmt.Fprintf(&b, "partitions %v\n", scns)
	return b.String()
}

func intp(i int) *int { return &i }

type badCase struct {
	name   string
	method string
	path   string // {db} is the test database
	body   any
	hdr    []string
	status int
	field  string // the problem's field, when it must name one
	op     *int   // the problem's operation, when it must name one
}

func msgOp(op string, key []any, doc any) map[string]any {
	m := map[string]any{"op": op, "table": "Message", "key": key}
	if doc != nil {
		m["document"] = doc
	}
	return m
}

func txnOf(ops ...any) map[string]any { return map[string]any{"ops": ops} }

// TestBadInputChangesNothing sends requests that must fail and checks the
// exact problem answer and that no document, collection, schema or
// partition SCN changed.
func TestBadInputChangesNothing(t *testing.T) {
	db := newDB(t)
	expect(t, send(t, "PUT", "/"+db+"/Mailbox/m1", `{"name":"Inbox"}`), 201, "setup")
	expect(t, send(t, "PUT", "/"+db+"/Message/m1/1", message("one", 1)), 201, "setup")
	expect(t, send(t, "PUT", "/"+db+"/Message/m1/2", message("two", 2)), 201, "setup")
	expect(t, send(t, "PUT", "/"+db+"/Counter/1", `{"n":1,"blob":"AA=="}`), 201, "setup")

	valid := string(mustJSON(message("changed", 3)))
	big := message(strings.Repeat("x", 1<<20+1), 1)
	var manyOps []any
	for i := range 1001 {
		manyOps = append(manyOps, msgOp("put", []any{"m1", 100 + i}, message("many", i)))
	}
	var manyItems []string
	for i := range 1001 {
		manyItems = append(manyItems, fmt.Sprint(i+1))
	}
	past := "Mon, 01 Jan 1990 00:00:00 GMT"
	bogus := `"0000000000000000"`
	schema := func(key, schema string) string { return `{"key":` + key + `,"schema":` + schema + `}` }
	rec := `{"type":"record","name":"R","fields":[{"name":"a","type":"string"}]}`
	v2Incompatible := strings.Replace(messageSchemaV1, `{"name":"size","type":"int","default":0}`, `{"name":"size","type":"string"}`, 1)
	v2NoDefault := strings.Replace(messageSchemaV1, `{"name":"size"`, `{"name":"priority","type":"int"},{"name":"size"`, 1)
	v2Shape := func(s string) string { return schema(messageKey, s) }

	cases := []badCase{
		// Malformed bodies.
		{name: "malformed JSON", method: "PUT", path: "/{db}/Message/m1/1", body: `{"subject":`, status: 400},
		{name: "malformed JSON on new key", method: "PUT", path: "/{db}/Message/m1/50", body: `{`, status: 400},
		{name: "trailing garbage", method: "PUT", path: "/{db}/Message/m1/1", body: valid + ` x`, status: 400},
		{name: "two JSON values", method: "PUT", path: "/{db}/Message/m1/1", body: valid + valid, status: 400},
		{name: "empty body", method: "PUT", path: "/{db}/Message/m1/50", body: ``, status: 400},
		{name: "document not an object", method: "PUT", path: "/{db}/Message/m1/1", body: `[1]`, status: 422},

		// Key arity and types.
		{name: "too many key parts", method: "PUT", path: "/{db}/Message/m1/1/2", body: valid, status: 400, field: "key"},
		{name: "too many key parts on GET", method: "GET", path: "/{db}/Mailbox/m1/x", status: 400, field: "key"},
		{name: "too few key parts for PUT", method: "PUT", path: "/{db}/Message/m1", body: valid, status: 400},
		{name: "too few key parts for PATCH", method: "PATCH", path: "/{db}/Message/m1", body: `{"$inc":{"size":1}}`, status: 400},
		{name: "string for long", method: "PUT", path: "/{db}/Message/m1/abc", body: valid, status: 400, field: "messageId"},
		{name: "plus sign", method: "PUT", path: "/{db}/Message/m1/+1", body: valid, status: 400, field: "messageId"},
		{name: "encoded plus sign", method: "PUT", path: "/{db}/Message/m1/%2B1", body: valid, status: 400, field: "messageId"},
		{name: "hex", method: "PUT", path: "/{db}/Message/m1/0x10", body: valid, status: 400, field: "messageId"},
		{name: "decimal point", method: "PUT", path: "/{db}/Message/m1/1.0", body: valid, status: 400, field: "messageId"},
		{name: "leading space", method: "PUT", path: "/{db}/Message/m1/%201", body: valid, status: 400, field: "messageId"},
		{name: "lone minus", method: "GET", path: "/{db}/Message/m1/-", status: 400, field: "messageId"},
		{name: "int32 overflow", method: "PUT", path: "/{db}/Counter/2147483648", body: `{"n":1,"blob":""}`, status: 400, field: "id"},
		{name: "int32 underflow", method: "PUT", path: "/{db}/Counter/-2147483649", body: `{"n":1,"blob":""}`, status: 400, field: "id"},
		{name: "int64 overflow", method: "PUT", path: "/{db}/Message/m1/9223372036854775808", body: valid, status: 400, field: "messageId"},
		{name: "empty key segment", method: "PUT", path: "/{db}/Message//1", body: valid, status: 400},
		{name: "empty string key part in txn", method: "POST", path: "/{db}/_txn", body: txnOf(msgOp("put", []any{"", 1}, message("x", 1))), status: 400, field: "mailboxId", op: intp(0)},
		{name: "string key part too long", method: "PUT", path: "/{db}/Mailbox/" + strings.Repeat("k", 1025), body: `{"name":"x"}`, status: 400, field: "mailboxId"},

		// Unknown database or table.
		{name: "unknown database PUT", method: "PUT", path: "/nodb/Message/m1/1", body: valid, status: 404},
		{name: "unknown database GET", method: "GET", path: "/nodb/Message/m1/1", status: 404},
		{name: "unknown database txn", method: "POST", path: "/nodb/_txn", body: txnOf(msgOp("delete", []any{"m1", 1}, nil)), status: 404},
		{name: "unknown database schema", method: "GET", path: "/_schemas/nodb", status: 404},
		{name: "unknown table PUT", method: "PUT", path: "/{db}/Nope/m1", body: `{}`, status: 404},
		{name: "unknown table DELETE", method: "DELETE", path: "/{db}/Nope/m1", status: 404},
		{name: "unknown table schema", method: "GET", path: "/_schemas/{db}/Nope", status: 404},
		{name: "table in unknown database", method: "PUT", path: "/_schemas/nodb/T", body: schema(`[{"name":"id","type":"string"}]`, rec), status: 404},

		// Documents that do not match the schema.
		{name: "unknown field", method: "PUT", path: "/{db}/Message/m1/1", body: `{"subject":"s","from":{"name":"a","address":"b"},"bogus":1}`, status: 422, field: "bogus"},
		{name: "unknown nested field", method: "PUT", path: "/{db}/Message/m1/1", body: `{"subject":"s","from":{"name":"a","address":"b","zip":1}}`, status: 422, field: "from.zip"},
		{name: "wrong field type", method: "PUT", path: "/{db}/Message/m1/1", body: `{"subject":"s","from":{"name":"a","address":"b"},"size":"big"}`, status: 422, field: "size"},
		{name: "wrong nested type", method: "PUT", path: "/{db}/Message/m1/1", body: `{"subject":"s","from":{"name":5,"address":"b"}}`, status: 422, field: "from.name"},
		{name: "int field overflow", method: "PUT", path: "/{db}/Message/m1/1", body: `{"subject":"s","from":{"name":"a","address":"b"},"size":2147483648}`, status: 422, field: "size"},
		{name: "fractional int", method: "PUT", path: "/{db}/Message/m1/1", body: `{"subject":"s","from":{"name":"a","address":"b"},"size":1.5}`, status: 422, field: "size"},
		{name: "null for non-nullable", method: "PUT", path: "/{db}/Message/m1/1", body: `{"subject":null,"from":{"name":"a","address":"b"}}`, status: 422, field: "subject"},
		{name: "missing required field", method: "PUT", path: "/{db}/Message/m1/1", body: `{"from":{"name":"a","address":"b"}}`, status: 422, field: "subject"},
		{name: "missing nested field", method: "PUT", path: "/{db}/Message/m1/50", body: `{"subject":"s","from":{"name":"a"}}`, status: 422, field: "from.address"},
		{name: "enum symbol", method: "PUT", path: "/{db}/Message/m1/1", body: `{"subject":"s","from":{"name":"a","address":"b"},"kind":"spam"}`, status: 422, field: "kind"},
		{name: "bytes not base64", method: "PUT", path: "/{db}/Counter/1", body: `{"n":1,"blob":"!!"}`, status: 422, field: "blob"},
		{name: "bytes not a string", method: "PUT", path: "/{db}/Counter/1", body: `{"n":1,"blob":[1]}`, status: 422, field: "blob"},
		{name: "invalid document on POST", method: "POST", path: "/{db}/Message/m1", body: `{"subject":1}`, status: 422},

		// Size limits.
		{name: "document over 1 MiB", method: "PUT", path: "/{db}/Message/m1/1", body: big, status: 413},
		{name: "document over 1 MiB on POST", method: "POST", path: "/{db}/Message/m1", body: big, status: 413},
		{name: "txn of 1001 operations", method: "POST", path: "/{db}/_txn", body: txnOf(manyOps...), status: 413},
		{name: "batch of 1001 operations", method: "POST", path: "/{db}/_batch", body: txnOf(manyOps...), status: 413},
		{name: "multi-get of 1001 keys", method: "GET", path: "/{db}/Message/m1/(" + strings.Join(manyItems, ",") + ")", status: 413},

		// Patches.
		{name: "patch unknown operator", method: "PATCH", path: "/{db}/Message/m1/1", body: `{"$push":{"size":1}}`, status: 400, field: "$push"},
		{name: "patch empty", method: "PATCH", path: "/{db}/Message/m1/1", body: `{}`, status: 400},
		{name: "patch empty $set", method: "PATCH", path: "/{db}/Message/m1/1", body: `{"$set":{}}`, status: 400},
		{name: "patch not an object", method: "PATCH", path: "/{db}/Message/m1/1", body: `[]`, status: 400},
		{name: "patch malformed", method: "PATCH", path: "/{db}/Message/m1/1", body: `{"$set":`, status: 400},
		{name: "patch overlapping paths", method: "PATCH", path: "/{db}/Message/m1/1", body: `{"$set":{"from":{"name":"a","address":"b"},"from.name":"c"}}`, status: 400},
		{name: "patch empty path segment", method: "PATCH", path: "/{db}/Message/m1/1", body: `{"$set":{"from..name":"c"}}`, status: 400},
		{name: "patch $inc by a string", method: "PATCH", path: "/{db}/Message/m1/1", body: `{"$inc":{"size":"1"}}`, status: 400, field: "size"},
		{name: "patch $inc on a string", method: "PATCH", path: "/{db}/Message/m1/1", body: `{"$inc":{"subject":1}}`, status: 422, field: "subject"},
		{name: "patch $inc overflows int", method: "PATCH", path: "/{db}/Message/m1/1", body: `{"$inc":{"size":2147483647}}`, status: 422, field: "size"},
		{name: "patch unknown path", method: "PATCH", path: "/{db}/Message/m1/1", body: `{"$set":{"nope":1}}`, status: 422, field: "nope"},
		{name: "patch unknown nested path", method: "PATCH", path: "/{db}/Message/m1/1", body: `{"$set":{"from.zip":1}}`, status: 422, field: "from.zip"},
		{name: "patch through a scalar", method: "PATCH", path: "/{db}/Message/m1/1", body: `{"$set":{"subject.x":1}}`, status: 422, field: "subject"},
		{name: "patch wrong type", method: "PATCH", path: "/{db}/Message/m1/1", body: `{"$set":{"size":"big"}}`, status: 422, field: "size"},
		{name: "patch $unset required", method: "PATCH", path: "/{db}/Message/m1/1", body: `{"$unset":["subject"]}`, status: 422, field: "subject"},
		{name: "patch absent document", method: "PATCH", path: "/{db}/Message/m1/50", body: `{"$inc":{"size":1}}`, status: 404},

		// Schemas.
		{name: "schema not a record", method: "PUT", path: "/_schemas/{db}/Bad", body: schema(`[{"name":"id","type":"string"}]`, `{"type":"string"}`), status: 400},
		{name: "schema not Avro", method: "PUT", path: "/_schemas/{db}/Bad", body: schema(`[{"name":"id","type":"string"}]`, `{"type":"record","name":"R","fields":[{"name":"a","type":"nope"}]}`), status: 400},
		{name: "schema missing", method: "PUT", path: "/_schemas/{db}/Bad", body: `{"key":[{"name":"id","type":"string"}]}`, status: 400, field: "schema"},
		{name: "schema body unknown member", method: "PUT", path: "/_schemas/{db}/Bad", body: `{"keys":[],"schema":` + rec + `}`, status: 400},
		{name: "schema body malformed", method: "PUT", path: "/_schemas/{db}/Bad", body: `{"key":`, status: 400},
		{name: "bad table name", method: "PUT", path: "/_schemas/{db}/1bad", body: schema(`[{"name":"id","type":"string"}]`, rec), status: 400},
		{name: "table name too long", method: "PUT", path: "/_schemas/{db}/" + strings.Repeat("T", 65), body: schema(`[{"name":"id","type":"string"}]`, rec), status: 400},
		{name: "bad Avro field name", method: "PUT", path: "/_schemas/{db}/Bad", body: schema(`[{"name":"id","type":"string"}]`, `{"type":"record","name":"R","fields":[{"name":"1a","type":"string"}]}`), status: 400},
		{name: "bad key part name", method: "PUT", path: "/_schemas/{db}/Bad", body: schema(`[{"name":"1id","type":"string"}]`, rec), status: 400, field: "key"},
		{name: "bad key type", method: "PUT", path: "/_schemas/{db}/Bad", body: schema(`[{"name":"id","type":"float"}]`, rec), status: 400, field: "id"},
		{name: "no key", method: "PUT", path: "/_schemas/{db}/Bad", body: schema(`[]`, rec), status: 400, field: "key"},
		{name: "duplicate key part", method: "PUT", path: "/_schemas/{db}/Bad", body: schema(`[{"name":"id","type":"string"},{"name":"id","type":"long"}]`, rec), status: 400, field: "id"},
		{name: "autoIncrement on a string", method: "PUT", path: "/_schemas/{db}/Bad", body: schema(`[{"name":"g","type":"string"},{"name":"id","type":"string","autoIncrement":true}]`, rec), status: 400, field: "id"},
		{name: "autoIncrement on the only key part", method: "PUT", path: "/_schemas/{db}/Bad", body: schema(`[{"name":"id","type":"long","autoIncrement":true}]`, rec), status: 400, field: "id"},
		{name: "autoIncrement not last", method: "PUT", path: "/_schemas/{db}/Bad", body: schema(`[{"name":"g","type":"string"},{"name":"id","type":"long","autoIncrement":true},{"name":"z","type":"long"}]`, rec), status: 400, field: "id"},
		{name: "incompatible type change", method: "PUT", path: "/_schemas/{db}/Message", body: v2Shape(v2Incompatible), status: 409},
		{name: "new field without default", method: "PUT", path: "/_schemas/{db}/Message", body: v2Shape(v2NoDefault), status: 409},
		{name: "key change", method: "PUT", path: "/_schemas/{db}/Message", body: schema(`[{"name":"mailboxId","type":"string"},{"name":"messageId","type":"int"}]`, messageSchemaV1), status: 409, field: "key"},
		{name: "bad database name", method: "PUT", path: "/_schemas/1db", body: `{}`, status: 400},
		{name: "partition count change", method: "PUT", path: "/_schemas/{db}", body: `{"partitions":8}`, status: 409, field: "partitions"},
		{name: "partitions out of range", method: "PUT", path: "/_schemas/{db}", body: `{"partitions":5000}`, status: 400, field: "partitions"},
		{name: "replicas out of range", method: "PUT", path: "/_schemas/{db}", body: `{"replicas":9}`, status: 400, field: "replicas"},
		{name: "unknown partitioner", method: "PUT", path: "/_schemas/{db}", body: `{"partitioner":"range"}`, status: 400, field: "partitioner"},
		{name: "database body unknown member", method: "PUT", path: "/_schemas/{db}", body: `{"shards":2}`, status: 400},
		{name: "database body wrong type", method: "PUT", path: "/_schemas/{db}", body: `{"partitions":"4"}`, status: 400},
		{name: "version not a number", method: "GET", path: "/_schemas/{db}/Message/versions/abc", status: 400, field: "version"},
		{name: "version zero", method: "GET", path: "/_schemas/{db}/Message/versions/0", status: 400, field: "version"},
		{name: "version absent", method: "GET", path: "/_schemas/{db}/Message/versions/9", status: 404},

		// Non-UTF-8 and bad escapes.
		{name: "non-UTF-8 string key", method: "GET", path: "/{db}/Message/%FF", status: 400, field: "mailboxId"},
		{name: "non-UTF-8 string key PUT", method: "PUT", path: "/{db}/Mailbox/%FF", body: `{"name":"x"}`, status: 400, field: "mailboxId"},
		{name: "non-UTF-8 int key", method: "PUT", path: "/{db}/Message/m1/%FF", body: valid, status: 400, field: "messageId"},
		{name: "bad escape", method: "GET", path: "/{db}/Message/%G1", status: 400},
		{name: "truncated escape", method: "GET", path: "/{db}/Message/m%", status: 400},
		{name: "bad escape in a write", method: "PUT", path: "/{db}/Message/m1/%G1", body: valid, status: 400},
		{name: "bad escape, administrative path", method: "GET", path: "/_schemas/{db}/%G1", status: 400},
		// Streaming routes are served by net/http; a target it would refuse
		// is refused before it gets there, as problem+json too.
		{name: "bad escape, streaming route", method: "GET", path: "/_changes/{db}%G1", status: 400},

		// Path tricks.
		{name: "dot-dot to schemas", method: "GET", path: "/{db}/../_schemas", status: 400},
		{name: "dot-dot in key", method: "DELETE", path: "/{db}/Message/m1/..", status: 400},
		{name: "double slash", method: "GET", path: "/{db}//Message/m1", status: 400},
		{name: "dot segment", method: "PUT", path: "/{db}/./Message/m1/1", body: valid, status: 400},
		{name: "trailing slash", method: "DELETE", path: "/{db}/Message/m1/", status: 400},
		{name: "encoded slash is a key byte", method: "GET", path: "/{db}/Mailbox/m1%2F..", status: 404},
		{name: "encoded dot-dot is a name", method: "GET", path: "/%2E%2E/_txn", status: 405},
		{name: "reserved table name", method: "GET", path: "/{db}/_schemas/m1", status: 404},
		{name: "root", method: "GET", path: "/", status: 404},
		{name: "unknown route", method: "GET", path: "/_nothing", status: 404},
		{name: "database alone", method: "GET", path: "/{db}", status: 404},
		{name: "table without key or query", method: "GET", path: "/{db}/Message", status: 400, field: "query"},
		{name: "put to a table without key", method: "PUT", path: "/{db}/Message", body: `{}`, status: 405},

		// Media types.
		{name: "text/plain document", method: "PUT", path: "/{db}/Message/m1/1", body: valid, hdr: []string{"Content-Type", "text/plain"}, status: 415},
		{name: "XML patch", method: "PATCH", path: "/{db}/Message/m1/1", body: `{"$inc":{"size":1}}`, hdr: []string{"Content-Type", "application/xml"}, status: 415},
		{name: "unparsable Content-Type", method: "PUT", path: "/{db}/Message/m1/1", body: valid, hdr: []string{"Content-Type", "application/json; ="}, status: 415},
		{name: "text/plain txn", method: "POST", path: "/{db}/_txn", body: txnOf(msgOp("delete", []any{"m1", 1}, nil)), hdr: []string{"Content-Type", "text/plain"}, status: 415},
		{name: "text/plain schema", method: "PUT", path: "/_schemas/{db}", body: `{}`, hdr: []string{"Content-Type", "text/plain"}, status: 415},

		// Methods.
		{name: "DELETE a database schema", method: "DELETE", path: "/_schemas/{db}", status: 405},
		{name: "POST /_cluster", method: "POST", path: "/_cluster", body: `{}`, status: 405},
		{name: "PUT /healthz", method: "PUT", path: "/healthz", body: `{}`, status: 405},
		{name: "GET a txn", method: "GET", path: "/{db}/_txn", status: 405},
		{name: "PATCH a batch", method: "PATCH", path: "/{db}/_batch", body: `{}`, status: 405},
		{name: "POST without auto-increment", method: "POST", path: "/{db}/Mailbox/m1", body: `{"name":"x"}`, status: 405},
		{name: "POST to a full key", method: "POST", path: "/{db}/Message/m1/1", body: valid, status: 400},

		// Read parameters.
		{name: "schema version not a number", method: "GET", path: "/{db}/Message/m1/1", hdr: []string{"X-Doppio-Schema-Version", "abc"}, status: 400, field: "X-Doppio-Schema-Version"},
		{name: "schema version negative", method: "GET", path: "/{db}/Message/m1/1", hdr: []string{"X-Doppio-Schema-Version", "-1"}, status: 400, field: "X-Doppio-Schema-Version"},
		{name: "schema version absent", method: "GET", path: "/{db}/Message/m1/1", hdr: []string{"X-Doppio-Schema-Version", "9"}, status: 404, field: "X-Doppio-Schema-Version"},
		{name: "limit zero", method: "GET", path: "/{db}/Message/m1?limit=0", status: 400, field: "limit"},
		{name: "limit too large", method: "GET", path: "/{db}/Message/m1?limit=1001", status: 400, field: "limit"},
		{name: "limit not a number", method: "GET", path: "/{db}/Message/m1?limit=x", status: 400, field: "limit"},
		{name: "cursor garbage", method: "GET", path: "/{db}/Message/m1?cursor=!!!", status: 400, field: "cursor"},
		{name: "cursor of another collection", method: "GET", path: "/{db}/Message/m1?cursor=AgAA", status: 400, field: "cursor"},
		{name: "projection unknown field", method: "GET", path: "/{db}/Message/m1/1?fields=nope", status: 400, field: "nope"},
		{name: "projection into a scalar", method: "GET", path: "/{db}/Message/m1/1?fields=size.x", status: 400},
		{name: "projection empty item", method: "GET", path: "/{db}/Message/m1/1?fields=subject,", status: 400, field: "fields"},
		{name: "projection as Avro", method: "GET", path: "/{db}/Message/m1/1?fields=subject", hdr: []string{"Accept", "avro/binary"}, status: 400},
		{name: "query not available", method: "GET", path: "/{db}/Message/m1?query=x", status: 400, field: "query"},

		// Multi-gets.
		{name: "multi-get without leading parts", method: "GET", path: "/{db}/Message/(m1,m2)", status: 400},
		{name: "multi-get empty", method: "GET", path: "/{db}/Message/m1/()", status: 400},
		{name: "multi-get wrong type", method: "GET", path: "/{db}/Message/m1/(1,x)", status: 400, field: "messageId"},
		{name: "multi-get bad escape", method: "GET", path: "/{db}/Message/m1/(1,%ZZ)", status: 400},
		{name: "DELETE a multi-get", method: "DELETE", path: "/{db}/Message/m1/(1,2)", status: 400},
		{name: "PUT a multi-get", method: "PUT", path: "/{db}/Message/m1/(1,2)", body: valid, status: 400},

		// Transactions.
		{name: "txn leaves the document group", method: "POST", path: "/{db}/_txn", body: txnOf(
			msgOp("put", []any{"m1", 50}, message("x", 1)), msgOp("put", []any{"m2", 1}, message("x", 1))), status: 400, field: "key", op: intp(1)},
		{name: "txn leaves the declared partition key", method: "POST", path: "/{db}/_txn", body: map[string]any{"partitionKey": "m2", "ops": []any{
			msgOp("put", []any{"m1", 50}, message("x", 1))}}, status: 400, field: "key", op: intp(0)},
		{name: "txn partition key of the wrong type", method: "POST", path: "/{db}/_txn", body: map[string]any{"partitionKey": 1, "ops": []any{
			msgOp("put", []any{"m1", 50}, message("x", 1))}}, status: 400, field: "partitionKey", op: intp(0)},
		{name: "txn failed If-Match", method: "POST", path: "/{db}/_txn", body: txnOf(
			msgOp("put", []any{"m1", 50}, message("x", 1)),
			map[string]any{"op": "patch", "table": "Mailbox", "key": []any{"m1"}, "patch": map[string]any{"$inc": map[string]any{"unread": 1}}, "ifMatch": bogus}),
			status: 412, op: intp(1)},
		{name: "txn failed first condition", method: "POST", path: "/{db}/_txn", body: txnOf(
			map[string]any{"op": "delete", "table": "Message", "key": []any{"m1", 1}, "ifMatch": bogus},
			msgOp("put", []any{"m1", 51}, message("x", 1))), status: 412, op: intp(0)},
		{name: "txn If-None-Match * on existing", method: "POST", path: "/{db}/_txn", body: txnOf(
			msgOp("put", []any{"m1", 50}, message("x", 1)),
			map[string]any{"op": "put", "table": "Message", "key": []any{"m1", 2}, "document": message("x", 1), "ifNoneMatch": "*"}),
			status: 412, op: intp(1)},
		{name: "txn If-Unmodified-Since in the past", method: "POST", path: "/{db}/_txn", body: txnOf(
			msgOp("put", []any{"m1", 50}, message("x", 1)),
			map[string]any{"op": "delete", "table": "Message", "key": []any{"m1", 2}, "ifUnmodifiedSince": "1990-01-01T00:00:00Z"}),
			status: 412, op: intp(1)},
		{name: "txn insert of an existing key", method: "POST", path: "/{db}/_txn", body: txnOf(
			msgOp("put", []any{"m1", 50}, message("x", 1)), msgOp("insert", []any{"m1", 1}, message("x", 1))), status: 412, op: intp(1)},
		{name: "txn patch of an absent document", method: "POST", path: "/{db}/_txn", body: txnOf(
			msgOp("put", []any{"m1", 50}, message("x", 1)),
			map[string]any{"op": "patch", "table": "Message", "key": []any{"m1", 99}, "patch": map[string]any{"$inc": map[string]any{"size": 1}}}),
			status: 404, op: intp(1)},
		{name: "txn delete of an absent document", method: "POST", path: "/{db}/_txn", body: txnOf(
			msgOp("put", []any{"m1", 50}, message("x", 1)), msgOp("delete", []any{"m1", 99}, nil)), status: 404, op: intp(1)},
		{name: "txn invalid document", method: "POST", path: "/{db}/_txn", body: txnOf(
			msgOp("put", []any{"m1", 50}, message("x", 1)), msgOp("put", []any{"m1", 51}, map[string]any{"subject": 1})), status: 422, field: "subject", op: intp(1)},
		{name: "txn invalid patch result", method: "POST", path: "/{db}/_txn", body: txnOf(
			msgOp("put", []any{"m1", 50}, message("x", 1)),
			map[string]any{"op": "patch", "table": "Message", "key": []any{"m1", 1}, "patch": map[string]any{"$inc": map[string]any{"subject": 1}}}),
			status: 422, field: "subject", op: intp(1)},
		{name: "txn unknown op", method: "POST", path: "/{db}/_txn", body: txnOf(msgOp("upsert", []any{"m1", 50}, message("x", 1))), status: 400, field: "op", op: intp(0)},
		{name: "txn unknown table", method: "POST", path: "/{db}/_txn", body: txnOf(map[string]any{"op": "delete", "table": "Nope", "key": []any{"m1"}}), status: 404, op: intp(0)},
		{name: "txn no ops", method: "POST", path: "/{db}/_txn", body: `{"ops":[]}`, status: 400, field: "ops"},
		{name: "txn put without document", method: "POST", path: "/{db}/_txn", body: txnOf(msgOp("put", []any{"m1", 50}, nil)), status: 400, field: "document", op: intp(0)},
		{name: "txn patch with a document", method: "POST", path: "/{db}/_txn", body: txnOf(map[string]any{"op": "patch", "table": "Message", "key": []any{"m1", 1}, "document": message("x", 1), "patch": map[string]any{"$inc": map[string]any{"size": 1}}}), status: 400, field: "document", op: intp(0)},
		{name: "txn patch of a collection", method: "POST", path: "/{db}/_txn", body: txnOf(map[string]any{"op": "patch", "table": "Message", "key": []any{"m1"}, "patch": map[string]any{"$inc": map[string]any{"size": 1}}}), status: 400, field: "key", op: intp(0)},
		{name: "txn string for long key", method: "POST", path: "/{db}/_txn", body: txnOf(msgOp("put", []any{"m1", "7"}, message("x", 1))), status: 400, field: "messageId", op: intp(0)},
		{name: "txn fractional key", method: "POST", path: "/{db}/_txn", body: `{"ops":[{"op":"delete","table":"Message","key":["m1",1.5]}]}`, status: 400, field: "messageId", op: intp(0)},
		{name: "txn too many key parts", method: "POST", path: "/{db}/_txn", body: txnOf(msgOp("delete", []any{"m1", 1, 2}, nil)), status: 400, field: "key", op: intp(0)},
		{name: "txn without key", method: "POST", path: "/{db}/_txn", body: txnOf(map[string]any{"op": "delete", "table": "Message"}), status: 400, field: "key", op: intp(0)},
		{name: "txn bad ifUnmodifiedSince", method: "POST", path: "/{db}/_txn", body: txnOf(map[string]any{"op": "delete", "table": "Message", "key": []any{"m1", 1}, "ifUnmodifiedSince": "yesterday"}), status: 400, field: "ifUnmodifiedSince", op: intp(0)},
		{name: "txn unknown member", method: "POST", path: "/{db}/_txn", body: `{"ops":[{"op":"delete","table":"Message","key":["m1",1],"when":1}]}`, status: 400},
		{name: "txn trailing garbage", method: "POST", path: "/{db}/_txn", body: `{"ops":[{"op":"delete","table":"Message","key":["m1",1]}]} x`, status: 400},
		{name: "txn not an object", method: "POST", path: "/{db}/_txn", body: `[]`, status: 400},
		{name: "txn conditional collection delete", method: "POST", path: "/{db}/_txn", body: txnOf(map[string]any{"op": "delete", "table": "Message", "key": []any{"m1"}, "ifMatch": "*"}), status: 400, field: "key", op: intp(0)},
		{name: "batch malformed", method: "POST", path: "/{db}/_batch", body: `{"ops":[`, status: 400},
		{name: "batch no ops", method: "POST", path: "/{db}/_batch", body: `{"ops":[]}`, status: 400, field: "ops"},

		// Conditional writes.
		{name: "If-Match mismatch", method: "PUT", path: "/{db}/Message/m1/1", body: valid, hdr: []string{"If-Match", bogus}, status: 412},
		{name: "If-Match on absent", method: "PUT", path: "/{db}/Message/m1/50", body: valid, hdr: []string{"If-Match", "*"}, status: 412},
		{name: "If-None-Match * on existing", method: "PUT", path: "/{db}/Message/m1/1", body: valid, hdr: []string{"If-None-Match", "*"}, status: 412},
		{name: "If-Unmodified-Since in the past", method: "PUT", path: "/{db}/Message/m1/1", body: valid, hdr: []string{"If-Unmodified-Since", past}, status: 412},
		{name: "If-Unmodified-Since not a date", method: "PUT", path: "/{db}/Message/m1/1", body: valid, hdr: []string{"If-Unmodified-Since", "yesterday"}, status: 400, field: "If-Unmodified-Since"},
		{name: "PATCH If-Match mismatch", method: "PATCH", path: "/{db}/Message/m1/1", body: `{"$inc":{"size":1}}`, hdr: []string{"If-Match", bogus}, status: 412},
		{name: "PATCH If-Unmodified-Since in the past", method: "PATCH", path: "/{db}/Message/m1/1", body: `{"$inc":{"size":1}}`, hdr: []string{"If-Unmodified-Since", past}, status: 412},
		{name: "DELETE If-Match mismatch", method: "DELETE", path: "/{db}/Message/m1/1", hdr: []string{"If-Match", bogus}, status: 412},
		{name: "DELETE If-Unmodified-Since in the past", method: "DELETE", path: "/{db}/Message/m1/1", hdr: []string{"If-Unmodified-Since", past}, status: 412},
		{name: "conditional collection delete", method: "DELETE", path: "/{db}/Message/m1", hdr: []string{"If-Match", "*"}, status: 400},
		{name: "delete absent", method: "DELETE", path: "/{db}/Message/m1/50", status: 404},
		{name: "delete empty collection", method: "DELETE", path: "/{db}/Message/m2", status: 404},
	}

	before := snapshot(t, db)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := strings.ReplaceAll(c.path, "{db}", db)
			a := send(t, c.method, path, c.body, c.hdr...)
			p := checkProblem(t, a, c.status)
			if c.field != "" && p.Field != c.field {
				t.Errorf("problem field %q, want %q (detail %q)", p.Field, c.field, p.Detail)
			}
			switch {
			case c.op != nil && p.Operation == nil:
				t.Errorf("problem names no operation, want %d (detail %q)", *c.op, p.Detail)
			case c.op != nil && *p.Operation != *c.op:
				t.Errorf("problem names operation %d, want %d (detail %q)", *p.Operation, *c.op, p.Detail)
			case c.op == nil && p.Operation != nil && !strings.Contains(path, "/_txn"):
				t.Errorf("problem names operation %d outside a transaction", *p.Operation)
			}
			if after := snapshot(t, db); after != before {
				t.Fatalf("state changed:\n%s", diffLines(before, after))
			}
		})
	}
}

func diffLines(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for i := range max(len(al), len(bl)) {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			out = append(out, "- "+x, "+ "+y)
		}
	}
	return strings.Join(out, "\n")
}

// TestNotModifiedKeepsHeaders guards the conditional read answers on the
// positive side too: 304 carries the validators, never a problem.
func TestNotModifiedCarriesValidators(t *testing.T) {
	db := newDB(t)
	w := send(t, "PUT", "/"+db+"/Mailbox/x", `{"name":"x"}`)
	expect(t, w, 201, "put")
	a := send(t, "GET", "/"+db+"/Mailbox/x", nil, "If-Modified-Since", w.header.Get("Last-Modified"))
	expect(t, a, http.StatusNotModified, "If-Modified-Since")
	if a.header.Get("ETag") != w.header.Get("ETag") || a.header.Get("Content-Type") == "application/problem+json" {
		t.Errorf("304 headers %v", a.header)
	}
}
