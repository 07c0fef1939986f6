package api_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/auth"
)

// testCaller names the caller of a request that carries X-Test-User, as
// authentication will.
func testCaller(r *http.Request) (auth.Caller, bool) {
	u := r.Header.Get("X-Test-User")
	return auth.Caller{User: u}, u != ""
}

// quotaDB creates a database of one partition with the table T (key g,
// id: strings; one string field s).
func quotaDB(t *testing.T) string {
	t.Helper()
	db := fmt.Sprintf("q%d_%d", time.Now().UnixNano()%1e6, dbSeq.Add(1))
	expect(t, send(t, "PUT", "/_schemas/"+db, `{"partitions":1}`), 201, "create database")
	expect(t, send(t, "PUT", "/_schemas/"+db+"/T", `{"key":[{"name":"g","type":"string"},{"name":"id","type":"string"}],
	  "schema":{"type":"record","name":"T","fields":[{"name":"s","type":"string"}]}}`), 201, "create table")
	return db
}

// settleShares waits until each of dbs has its leader here (a read
// answered needs one) and then out one recomputation of the node's quota
// shares (every second), so that they count them as led here: a user's
// share is the part of all partitions the node leads.
func settleShares(t *testing.T, dbs ...string) {
	t.Helper()
	for _, db := range dbs {
		expect(t, send(t, "GET", "/"+db+"/T/probe/p", nil), 404, "probe read")
	}
	time.Sleep(1100 * time.Millisecond)
}

// doc is a document of T whose field s holds n bytes.
func doc(n int) string { return `{"s":"` + strings.Repeat("x", n) + `"}` }

// metric reads one series of the node's /metrics, 0 when absent.
func metric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	var ls []string
	for i := 0; i+1 < len(labels); i += 2 {
		ls = append(ls, labels[i]+`="`+labels[i+1]+`"`)
	}
	want := name + "{" + strings.Join(ls, ",") + "} "
	a := send(t, "GET", "/metrics", nil)
	sc := bufio.NewScanner(bytes.NewReader(a.body))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), want); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", sc.Text(), err)
			}
			return f
		}
	}
	return 0
}

func consumed(t *testing.T, scope, name, unit string) float64 {
	return metric(t, "doppio_quota_consumed_units_total", "name", name, "scope", scope, "unit", unit)
}

// overQuota checks a is a 429 problem whose detail names what, with
// Retry-After retry: the debt's seconds at 1 unit a second, rounded up,
// or one less when a second passed since the debt was made (a loaded
// machine), and X-Doppio-Retry-After-Ms the exact wait it rounds up.
func overQuota(t *testing.T, a answer, retry int, what string) {
	t.Helper()
	expect(t, a, 429, what)
	got, err := strconv.Atoi(a.header.Get("Retry-After"))
	if err != nil || got > retry || got < max(retry-1, 1) {
		t.Fatalf("%s: Retry-After %q, want %d", what, a.header.Get("Retry-After"), retry)
	}
	if ms, err := strconv.Atoi(a.header.Get("X-Doppio-Retry-After-Ms")); err != nil || ms > got*1000 || ms <= (got-1)*1000 {
		t.Fatalf("%s: X-Doppio-Retry-After-Ms %q with Retry-After %d", what, a.header.Get("X-Doppio-Retry-After-Ms"), got)
	}
	p := decode(t, a.body)
	if a.header.Get("Content-Type") != "application/problem+json" || p["type"] != "https://doppio.dev/problems/over-quota" ||
		p["retryAfter"] != jsonNumber(got) || !strings.Contains(fmt.Sprint(p["detail"]), what) {
		t.Fatalf("%s: %s %s", what, a.header.Get("Content-Type"), a.body)
	}
}

// jsonNumber is n as decode reads it.
func jsonNumber(n int) any { return json.Number(strconv.Itoa(n)) }

func TestWriteAndReadUnitsFollowTheBytesProcessed(t *testing.T) {
	db := quotaDB(t)
	// A write set is the document's record plus some tens of bytes of
	// key, framing and change-log header: a 1500-byte string is 2 units,
	// 2500 is 3, 4500 is 5; a write that changes nothing costs 1.
	for _, c := range []struct {
		key   string
		bytes int
		units float64
	}{{"a", 1, 1}, {"b", 1500, 2}, {"c", 2500, 3}, {"d", 4500, 5}} {
		before := consumed(t, "database", db, "write")
		expect(t, send(t, "PUT", "/"+db+"/T/g/"+c.key, doc(c.bytes)), 201, "put "+c.key)
		if got := consumed(t, "database", db, "write") - before; got != c.units {
			t.Errorf("a %d-byte document written: %v write units, want %v", c.bytes, got, c.units)
		}
	}
	before := consumed(t, "database", db, "write")
	expect(t, send(t, "PUT", "/"+db+"/T/g/a", doc(1), "If-None-Match", "*"), 412, "refused create")
	if got := consumed(t, "database", db, "write") - before; got != 1 {
		t.Errorf("a refused conditional write: %v write units, want 1", got)
	}

	// A read is its documents' stored bytes (key and Avro), in 4 KiB.
	for _, c := range []struct {
		path  string
		units float64
	}{
		{"/T/g/b", 1},        // 1500 bytes
		{"/T/g/d", 2},        // 4500 bytes
		{"/T/g/zz", 1},       // absent: at least 1
		{"/T/g/(b,c)", 1},    // 4000 bytes and two keys
		{"/T/g/(b,d,zz)", 2}, // 6000 bytes and keys
		{"/T/g", 3},          // the collection: 8509 bytes of Avro and keys
		{"/T/g?query=*", 3},  // the same documents, and their index entries
		{"/T?query=*", 3},    // over all partitions (one, led here)
		{"/T?query=*&count=true", 1},
	} {
		before := consumed(t, "database", db, "read")
		a := send(t, "GET", "/"+db+c.path, nil)
		if a.status != 200 && a.status != 404 {
			t.Fatalf("GET %s: %s", c.path, a)
		}
		if got := consumed(t, "database", db, "read") - before; got != c.units {
			t.Errorf("GET %s: %v read units, want %v", c.path, got, c.units)
		}
	}
	if got := consumed(t, "database", db, "write"); got != 12 {
		t.Errorf("reads were charged as writes: %v write units, want 12", got)
	}
}

func TestWritesOverQuotaAreRefusedAndChangeNothing(t *testing.T) {
	db := quotaDB(t)
	expect(t, send(t, "PUT", "/_quotas/databases/"+db, `{"writeUnitsPerSecond":1}`), 201, "set quota")
	// The bucket holds 1 unit (1 s of burst); a 5-unit write is admitted
	// and leaves 4 of debt: the next write waits 4 s.
	var refused answer
	n := 0
	for ; n < 10; n++ {
		a := send(t, "PUT", fmt.Sprintf("/%s/T/g/k%d", db, n), doc(4500))
		if a.status == 429 {
			refused = a
			break
		}
		expect(t, a, 201, "write under quota")
	}
	if n != 1 {
		t.Fatalf("%d writes before the first refusal, want 1", n)
	}
	overQuota(t, refused, 4, "database "+db+" is over its write quota of 1 units per second")
	expect(t, send(t, "GET", "/"+db+"/T/g/k1", nil), 404, "the refused write's document")
	if got := consumed(t, "database", db, "write"); got != 5 {
		t.Fatalf("%v write units consumed, want 5: the refused write cost nothing", got)
	}
	if got := metric(t, "doppio_quota_throttled_requests_total", "name", db, "scope", "database"); got != 1 {
		t.Fatalf("throttled %v, want 1", got)
	}
	// A transaction and a batch are refused the same way; in a batch, the
	// operation is.
	overQuota(t, send(t, "POST", "/"+db+"/_txn", `{"ops":[{"op":"put","table":"T","key":["g","t"],"document":{"s":""}}]}`), 4, "write quota")
	b := send(t, "POST", "/"+db+"/_batch", `{"ops":[{"op":"put","table":"T","key":["g","t"],"document":{"s":""}}]}`)
	expect(t, b, 200, "batch")
	if !strings.Contains(string(b.body), `"status":429`) || !(strings.Contains(string(b.body), `"retryAfter":4`) || strings.Contains(string(b.body), `"retryAfter":3`)) {
		t.Fatalf("batch under a spent quota: %s", b.body)
	}
	expect(t, send(t, "GET", "/"+db+"/T/g/t", nil), 404, "the refused transaction's document")

	// Reads have their own units: still served.
	expect(t, send(t, "GET", "/"+db+"/T/g/k0", nil), 200, "read while writes are refused")
	expect(t, send(t, "PUT", "/_quotas/databases/"+db, `{"readUnitsPerSecond":1,"writeUnitsPerSecond":1}`), 200, "add a read quota")
	expect(t, send(t, "GET", "/"+db+"/T/g/k0", nil), 200, "first read") // 2 units: 1 of debt
	overQuota(t, send(t, "GET", "/"+db+"/T/g/k0", nil), 1, "database "+db+" is over its read quota of 1 units per second")

	// Removing the quota lifts it at once on this node.
	expect(t, send(t, "DELETE", "/_quotas/databases/"+db, nil), 204, "delete quota")
	expect(t, send(t, "PUT", "/"+db+"/T/g/k1", doc(4500)), 201, "write without a quota")
	expect(t, send(t, "GET", "/"+db+"/T/g/k1", nil), 200, "read without a quota")
}

func TestUserQuotaAppliesAcrossDatabases(t *testing.T) {
	db1, db2 := quotaDB(t), quotaDB(t)
	settleShares(t, db1, db2)
	user := fmt.Sprintf("alice%d", dbSeq.Add(1))
	expect(t, send(t, "PUT", "/_quotas/users/"+user, `{"writeUnitsPerSecond":1}`), 201, "set user quota")
	expect(t, send(t, "PUT", "/"+db1+"/T/g/a", doc(4500), "X-Test-User", user), 201, "the user's first write")
	overQuota(t, send(t, "PUT", "/"+db2+"/T/g/a", doc(10), "X-Test-User", user), 4, "user "+user+" is over its write quota")
	expect(t, send(t, "GET", "/"+db2+"/T/g/a", nil), 404, "the refused write")
	expect(t, send(t, "PUT", "/"+db2+"/T/g/a", doc(10), "X-Test-User", "bob"), 201, "another user")
	expect(t, send(t, "PUT", "/"+db2+"/T/g/b", doc(10)), 201, "no user (insecure)")
	if got := consumed(t, "user", user, "write"); got != 5 {
		t.Fatalf("%s consumed %v write units, want 5", user, got)
	}
	if got := metric(t, "doppio_quota_throttled_requests_total", "name", user, "scope", "user"); got != 1 {
		t.Fatalf("%s throttled %v, want 1", user, got)
	}
	// bob has no quota: no series of his.
	if m := send(t, "GET", "/metrics", nil); strings.Contains(string(m.body), `name="bob"`) {
		t.Fatalf("a user without a quota has series")
	}
}

// TestBackfillConsumesNoQuota: an index built over existing documents
// writes index entries in the partition, never through a charged path.
func TestBackfillConsumesNoQuota(t *testing.T) {
	db := quotaDB(t)
	var ops []string
	for i := range 300 {
		ops = append(ops, fmt.Sprintf(`{"op":"put","table":"T","key":["g%d","k%03d"],"document":{"s":"v%d"}}`, i%5, i, i%7))
	}
	expect(t, send(t, "POST", "/"+db+"/_batch", `{"ops":[`+strings.Join(ops, ",")+`]}`), 200, "seed")
	expect(t, send(t, "PUT", "/_quotas/databases/"+db, `{"writeUnitsPerSecond":1}`), 201, "set quota")
	before := consumed(t, "database", db, "write")
	expect(t, send(t, "PUT", "/_schemas/"+db+"/T", `{"key":[{"name":"g","type":"string"},{"name":"id","type":"string"}],
	  "schema":{"type":"record","name":"T","fields":[{"name":"s","type":"string","index":"attribute"}]}}`), 200, "add an index")
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(string(send(t, "GET", "/_schemas/"+db+"/T", nil).body), `"state":"ready"`) {
		if time.Now().After(deadline) {
			t.Fatal("the index was not built within 30 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := consumed(t, "database", db, "write"); got != before {
		t.Fatalf("the backfill consumed %v write units", got-before)
	}
	// The bucket is untouched: a write is admitted.
	expect(t, send(t, "PUT", "/"+db+"/T/g/new", doc(10)), 201, "write after the backfill")
}

func TestQuotaRoutesRefuseBadInputAndChangeNothing(t *testing.T) {
	db := quotaDB(t)
	path := "/_quotas/databases/" + db
	for _, c := range []struct {
		method, path, body string
		status             int
		field              string
	}{
		{"PUT", path, `{"writeUnitsPerSecond":`, 400, ""},
		{"PUT", path, `{"writeUnitsPerSecond":"5"}`, 400, ""},
		{"PUT", path, `{"writeUnitsPerSecond":2.5}`, 400, ""},
		{"PUT", path, `{"writeUnits":5}`, 400, ""},
		{"PUT", path, `{"readUnitsPerSecond":-1}`, 422, "readUnitsPerSecond"},
		{"PUT", path, `{"writeUnitsPerSecond":1099511627777}`, 422, "writeUnitsPerSecond"},
		{"PUT", path + "?x=1", `{}`, 400, "x"},
		{"PUT", "/_quotas/databases/nope" + db, `{"writeUnitsPerSecond":5}`, 404, ""},
		{"PUT", "/_quotas/databases/9bad", `{}`, 400, "db"},
		{"PUT", "/_quotas/users/-bad", `{}`, 400, "name"},
		{"PUT", "/_quotas/users/node", `{}`, 400, "name"},
		{"GET", path, "", 404, ""},
		{"DELETE", path, "", 404, ""},
		{"POST", path, "{}", 405, ""},
	} {
		var body any
		if c.body != "" {
			body = c.body
		}
		a := send(t, c.method, c.path, body)
		expect(t, a, c.status, c.method+" "+c.path+" "+c.body)
		if p := decode(t, a.body); c.field != "" && p["field"] != c.field {
			t.Errorf("%s %s %s: field %v, want %s", c.method, c.path, c.body, p["field"], c.field)
		}
		expect(t, send(t, "GET", path, nil), 404, "the quota after a refused request")
	}

	a := send(t, "PUT", path, `{"readUnitsPerSecond":100}`)
	expect(t, a, 201, "create")
	if a.header.Get("Location") != path || canon(t, a.body) != `{"name":"`+db+`","readUnitsPerSecond":100,"writeUnitsPerSecond":0}` {
		t.Fatalf("create: %s %s", a.header.Get("Location"), a.body)
	}
	expect(t, send(t, "PUT", path, `{"readUnitsPerSecond":100,"writeUnitsPerSecond":7}`), 200, "replace")
	g := send(t, "GET", path, nil)
	expect(t, g, 200, "get")
	if canon(t, g.body) != `{"name":"`+db+`","readUnitsPerSecond":100,"writeUnitsPerSecond":7}` {
		t.Fatalf("get: %s", g.body)
	}
	user := fmt.Sprintf("carol%d", dbSeq.Add(1))
	expect(t, send(t, "PUT", "/_quotas/users/"+user, `{"writeUnitsPerSecond":3}`), 201, "user")
	l := send(t, "GET", "/_quotas", nil)
	expect(t, l, 200, "list")
	if !strings.Contains(string(l.body), `{"name":"`+db+`","readUnitsPerSecond":100,"writeUnitsPerSecond":7}`) ||
		!strings.Contains(string(l.body), `{"name":"`+user+`","readUnitsPerSecond":0,"writeUnitsPerSecond":3}`) {
		t.Fatalf("list: %s", l.body)
	}
	expect(t, send(t, "DELETE", path, nil), 204, "delete")
	expect(t, send(t, "DELETE", "/_quotas/users/"+user, nil), 204, "delete user")
	expect(t, send(t, "GET", path, nil), 404, "get after delete")
}
