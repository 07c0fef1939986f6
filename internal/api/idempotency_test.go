package api_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// messagesIn counts the messages of mailbox box of db.
func messagesIn(t *testing.T, db, box string) int {
	t.Helper()
	a := send(t, "GET", "/"+db+"/Message/"+box, nil)
	expect(t, a, 200, "read the mailbox")
	var page struct {
		Documents []json.RawMessage `json:"documents"`
	}
	if err := json.Unmarshal(a.body, &page); err != nil {
		t.Fatal(err)
	}
	return len(page.Documents)
}

// expectProblem asserts a problem+json answer of status and type slug
// about field.
func expectProblem(t *testing.T, a answer, status int, slug, field, what string) {
	t.Helper()
	expect(t, a, status, what)
	m := decode(t, a.body)
	if m["type"] != "https://doppio.dev/problems/"+slug || (field != "" && m["field"] != field) ||
		!strings.HasPrefix(a.header.Get("Content-Type"), "application/problem+json") {
		t.Fatalf("%s: %s %s, want type %s about %q", what, a.header.Get("Content-Type"), a.body, slug, field)
	}
}

func TestBadIdempotencyKeysAre400AndChangeNothing(t *testing.T) {
	db := newDB(t)
	txn := map[string]any{"ops": []any{map[string]any{"op": "insert", "table": "Message", "key": []any{"b1"}, "document": message("t", 1)}}}
	for _, k := range []struct{ name, value string }{
		{"empty", ""},
		{"too long", strings.Repeat("k", 256)},
		{"not ASCII", "clé"},
		{"a control character", "a\tb"},
	} {
		for _, req := range []struct {
			path string
			body any
		}{
			{"/" + db + "/Message/b1", message("s", 1)},
			{"/" + db + "/_txn", txn},
			{"/" + db + "/_batch", txn},
		} {
			a := send(t, "POST", req.path, req.body, "Idempotency-Key", k.value)
			expectProblem(t, a, 400, "malformed", "Idempotency-Key", k.name+" key on "+req.path)
		}
	}
	if n := messagesIn(t, db, "b1"); n != 0 {
		t.Fatalf("refused requests wrote %d messages", n)
	}
	// 255 printable characters are a key.
	expect(t, send(t, "POST", "/"+db+"/Message/b1", message("s", 1), "Idempotency-Key", strings.Repeat("~", 255)), 201, "longest key")
}

func TestIdempotentInsertRetryAnswersTheFirstOutcome(t *testing.T) {
	db := newDB(t)
	path := "/" + db + "/Message/box"
	first := send(t, "POST", path, message("hello", 1), "Idempotency-Key", "order-1")
	expect(t, first, 201, "first attempt")
	if first.header.Get("Idempotent-Replayed") != "" {
		t.Fatal("a first attempt is marked replayed")
	}
	// A retry with the JSON spelled otherwise (whitespace) is the same request.
	body, _ := json.MarshalIndent(message("hello", 1), "", "  ")
	again := send(t, "POST", path, body, "Idempotency-Key", "order-1")
	expect(t, again, 201, "retry")
	if string(again.body) != string(first.body) || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry answered %s (replayed %q), want %s", again.body, again.header.Get("Idempotent-Replayed"), first.body)
	}
	for _, h := range []string{"ETag", "Location", "Last-Modified", "X-Doppio-SCN", "Content-Type"} {
		if again.header.Get(h) != first.header.Get(h) || first.header.Get(h) == "" {
			t.Fatalf("%s: retry %q, first %q", h, again.header.Get(h), first.header.Get(h))
		}
	}
	if n := messagesIn(t, db, "box"); n != 1 {
		t.Fatalf("%d messages after a retried insert, want 1", n)
	}

	// The key reused for another request: 422, nothing done.
	a := send(t, "POST", path, message("other", 2), "Idempotency-Key", "order-1")
	expectProblem(t, a, 422, "idempotency-key-reused", "", "reuse with another body")
	if !strings.Contains(string(decode(t, a.body)["detail"].(string)), `"order-1"`) {
		t.Fatalf("the 422 does not name the key: %s", a.body)
	}
	txn := map[string]any{"ops": []any{map[string]any{"op": "insert", "table": "Message", "key": []any{"box"}, "document": message("hello", 1)}}}
	expectProblem(t, send(t, "POST", "/"+db+"/_txn", txn, "Idempotency-Key", "order-1"), 422, "idempotency-key-reused", "", "reuse on another route")
	if n := messagesIn(t, db, "box"); n != 1 {
		t.Fatalf("%d messages after refused reuses, want 1", n)
	}

	// One caller's key never answers another's outcome.
	b := send(t, "POST", path, message("hello", 1), "Idempotency-Key", "order-1", "X-Test-User", "bob")
	expect(t, b, 201, "another caller's request")
	if b.header.Get("Idempotent-Replayed") != "" || b.header.Get("Location") == first.header.Get("Location") {
		t.Fatalf("another caller got the first outcome: %s %s", b.header.Get("Location"), b.body)
	}
	// Without a key, a retry is a second insert.
	expect(t, send(t, "POST", path, message("hello", 1)), 201, "insert without a key")
	if n := messagesIn(t, db, "box"); n != 3 {
		t.Fatalf("%d messages, want 3", n)
	}
}

func TestIdempotentTransactionAndBatchRetriesApplyOnce(t *testing.T) {
	db := newDB(t)
	txn := map[string]any{"ops": []any{
		map[string]any{"op": "insert", "table": "Message", "key": []any{"t1"}, "document": message("a", 1)},
		map[string]any{"op": "insert", "table": "Message", "key": []any{"t1"}, "document": message("b", 2)},
	}}
	first := send(t, "POST", "/"+db+"/_txn", txn, "Idempotency-Key", "txn-1")
	expect(t, first, 200, "transaction")
	again := send(t, "POST", "/"+db+"/_txn", txn, "Idempotency-Key", "txn-1")
	expect(t, again, 200, "transaction retry")
	if string(again.body) != string(first.body) || again.header.Get("X-Doppio-SCN") != first.header.Get("X-Doppio-SCN") || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("transaction retry: %s, want %s", again.body, first.body)
	}
	if n := messagesIn(t, db, "t1"); n != 2 {
		t.Fatalf("%d messages after a retried transaction, want 2", n)
	}

	// A batch's operations, in any partitions, are remembered one by one.
	var ops []any
	for i := range 6 {
		ops = append(ops, map[string]any{"op": "insert", "table": "Message", "key": []any{fmt.Sprint("b", i)}, "document": message("x", i)})
	}
	ops = append(ops, map[string]any{"op": "patch", "table": "Message", "key": []any{"nobody", 1}, "patch": map[string]any{"$set": map[string]any{"size": 1}}})
	batch := map[string]any{"ops": ops}
	type results struct {
		Results []struct {
			Status int             `json:"status"`
			SCN    string          `json:"scn"`
			Result json.RawMessage `json:"result"`
		} `json:"results"`
	}
	a1 := send(t, "POST", "/"+db+"/_batch", batch, "Idempotency-Key", "batch-1")
	a2 := send(t, "POST", "/"+db+"/_batch", batch, "Idempotency-Key", "batch-1")
	var r1, r2 results
	if err := json.Unmarshal(a1.body, &r1); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(a2.body, &r2); err != nil {
		t.Fatal(err)
	}
	if len(r1.Results) != 7 || len(r2.Results) != 7 {
		t.Fatalf("batch results: %d then %d, want 7", len(r1.Results), len(r2.Results))
	}
	for i := range 6 {
		a, b := r1.Results[i], r2.Results[i]
		if a.Status != 201 || b.Status != 201 || a.SCN != b.SCN || string(a.Result) != string(b.Result) {
			t.Fatalf("batch operation %d: first %+v, retry %+v", i, a, b)
		}
		if n := messagesIn(t, db, fmt.Sprint("b", i)); n != 1 {
			t.Fatalf("mailbox b%d has %d messages after a retried batch, want 1", i, n)
		}
	}
	// A failed operation is not remembered: it is evaluated again, so
	// this batch is not wholly replayed.
	if a, b := r1.Results[6], r2.Results[6]; a.Status != 404 || b.Status != 404 || a2.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("failed operation: first %+v, retry %+v, replayed %q", a, b, a2.header.Get("Idempotent-Replayed"))
	}
	// Without it, the retry is wholly replayed, body and all.
	batch["ops"] = ops[:6]
	b1 := send(t, "POST", "/"+db+"/_batch", batch, "Idempotency-Key", "batch-2")
	b2 := send(t, "POST", "/"+db+"/_batch", batch, "Idempotency-Key", "batch-2")
	if b1.status != 200 || string(b2.body) != string(b1.body) || b2.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("batch retry: %s (replayed %q), want %s", b2.body, b2.header.Get("Idempotent-Replayed"), b1.body)
	}
}
