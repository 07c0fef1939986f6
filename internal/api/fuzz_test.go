package api_test

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
)

var (
	fuzzMethods = []string{"GET", "PUT", "PATCH", "POST", "DELETE", "HEAD", "OPTIONS"}
	// fuzzHeaders are header sets a fuzzed request may carry, so the
	// conditional, version and media-type paths are reached too.
	fuzzHeaders = [][]string{
		nil,
		{"If-Match", "*"},
		{"If-None-Match", "*"},
		{"If-Unmodified-Since", "Mon, 01 Jan 1990 00:00:00 GMT"},
		{"If-Modified-Since", "Mon, 01 Jan 2990 00:00:00 GMT"},
		{"X-Doppio-Schema-Version", "0"},
		{"X-Doppio-Schema-Version", "1"},
		{"Accept", "avro/binary"},
		{"Content-Type", "text/plain"},
		{"Content-Type", "application/merge-patch+json"},
	}
	fuzzSetup sync.Once
)

// FuzzRequest sends arbitrary requests to the running node: whatever the
// method, path, headers and body, the node answers without a 5xx and every
// 4xx is a problem+json document.
func FuzzRequest(f *testing.F) {
	fuzzSetup.Do(func() {
		createSchema(f, "fz")
		send(f, "PUT", "/fz/Mailbox/m1", `{"name":"Inbox"}`)
		send(f, "PUT", "/fz/Message/m1/1", message("one", 1))
		send(f, "PUT", "/fz/Counter/1", `{"n":1,"blob":"AA=="}`)
	})
	seeds := []struct {
		method uint8
		path   string
		body   string
	}{
		{0, "/fz/Message/m1/1", ""},
		{0, "/fz/Message/m1?limit=1", ""},
		{0, "/fz/Message/m1/(1,2,3)?fields=subject,from.name", ""},
		{0, "/fz/Message/m1/%FF", ""},
		{0, "/fz/../_schemas", ""},
		{0, "/_schemas/fz/Message/versions/1", ""},
		{0, "/_cluster", ""},
		{1, "/fz/Message/m1/2", `{"subject":"s","from":{"name":"a","address":"b"}}`},
		{1, "/fz/Message/m1/3", `{"subject":"s","from":{"name":"a","address":"b"},"size":2147483648}`},
		{1, "/fz/Counter/2147483648", `{"n":1,"blob":"AA=="}`},
		{1, "/fz/Mailbox/m2", `{"name":"x"} trailing`},
		{1, "/_schemas/fz/Fuzzed", `{"key":[{"name":"id","type":"string"}],"schema":{"type":"record","name":"F","fields":[{"name":"a","type":["null","string"],"default":null}]}}`},
		{1, "/_schemas/fz/Message", `{"key":[{"name":"mailboxId","type":"string"},{"name":"messageId","type":"long","autoIncrement":true}],"schema":{"type":"record","name":"Message","fields":[{"name":"subject","type":"string"}]}}`},
		{1, "/_schemas/fz", `{"partitions":4}`},
		{2, "/fz/Message/m1/1", `{"$set":{"from.name":"b"},"$inc":{"size":1}}`},
		{2, "/fz/Message/m1/1", `{"$unset":["kind"],"$inc":{"size":-9223372036854775808}}`},
		{2, "/fz/Message/m1/1", `{"$set":{"from":null}}`},
		{3, "/fz/Message/m1", `{"subject":"s","from":{"name":"a","address":"b"}}`},
		{3, "/fz/_txn", `{"partitionKey":"m1","ops":[{"op":"put","table":"Message","key":["m1"],"document":{"subject":"s","from":{"name":"a","address":"b"}}},{"op":"patch","table":"Mailbox","key":["m1"],"patch":{"$inc":{"unread":1}}}]}`},
		{3, "/fz/_txn", `{"ops":[{"op":"delete","table":"Message","key":["m1"]},{"op":"insert","table":"Message","key":["m1",1],"document":{}}]}`},
		{3, "/fz/_batch", `{"ops":[{"op":"put","table":"Counter","key":[1e300],"document":{"n":1,"blob":"AA=="}},{"op":"delete","table":"Mailbox","key":[null]}]}`},
		{1, "/_datastreams/fzs", `{"database":"fz","tables":["Message"],"sink":{"type":"kafka","brokers":["127.0.0.1:1"],"topics":"per-table","format":"avro"},"autoPause":{"failures":2,"resumeAfter":"1s"}}`},
		{3, "/_datastreams/fzs/pause?partitions=0,1", ""},
		{0, "/_datastreams/fzs/status", ""},
		{4, "/_datastreams/fzs", ""},
		{4, "/fz/Message/m1/1", ""},
		{4, "/fz/Message/m1", ""},
		{8 + 1, "/fz/Message/m1/1", `{"subject":"s","from":{"name":"a","address":"b"}}`},
		{8*7 + 0, "/fz/Counter/1", ""},
	}
	for _, s := range seeds {
		f.Add(s.method, s.path, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, m uint8, path string, body []byte) {
		if !strings.HasPrefix(path, "/") || strings.HasPrefix(path, "//") {
			t.Skip("not an origin-form path")
		}
		method := fuzzMethods[int(m)%len(fuzzMethods)]
		hdr := fuzzHeaders[int(m/8)%len(fuzzHeaders)]
		var b any
		if len(body) > 0 {
			b = body
		}
		a, err := trySend(method, path, b, hdr...)
		if err != nil {
			// The client refused to send it (bad bytes in the request
			// line); the node never saw it.
			t.Skip(err)
		}
		if a.status >= 500 {
			t.Fatalf("%s %q %v %q: %s", method, path, hdr, body, a)
		}
		if a.status >= 400 {
			if ct := a.header.Get("Content-Type"); ct != "application/problem+json" {
				t.Fatalf("%s %q: %d with Content-Type %q", method, path, a.status, ct)
			}
			if method == "HEAD" {
				return
			}
			var p problemDoc
			if err := json.Unmarshal(a.body, &p); err != nil || p.Status != a.status || p.Type == "" || p.Title == "" {
				t.Fatalf("%s %q: problem %s (%v)", method, path, a.body, err)
			}
			return
		}
		if method != "HEAD" && a.status != 204 && a.status != 304 && strings.HasPrefix(a.header.Get("Content-Type"), "application/json") && !json.Valid(a.body) {
			t.Fatalf("%s %q: %d with invalid JSON %q", method, path, a.status, a.body)
		}
	})
}
