package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// problemBase starts every problem type.
const problemBase = "https://doppio.dev/problems/"

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

// TestBadInputChangesNothing sends the requests of testdata/bad_input,
// every one of which must fail, and checks the exact problem answer and
// that no document, collection, schema or partition SCN changed.
//
// A case is a request directive: the request line, header lines, then a
// blank line and the body; "request empty-body" sends an empty JSON body.
// Paths and bodies expand {db} (the test database), {repeat N c} (c N
// times), {range A B} (A,…,B) and {puts N} (N put operations of a
// transaction). The answer is the status and problem type, then the field
// and the operation the problem names, if any.
func TestBadInputChangesNothing(t *testing.T) {
	db := newDB(t)
	expect(t, send(t, "PUT", "/"+db+"/Mailbox/m1", `{"name":"Inbox"}`), 201, "setup")
	expect(t, send(t, "PUT", "/"+db+"/Message/m1/1", message("one", 1)), 201, "setup")
	expect(t, send(t, "PUT", "/"+db+"/Message/m1/2", message("two", 2)), 201, "setup")
	expect(t, send(t, "PUT", "/"+db+"/Counter/1", `{"n":1,"blob":"AA=="}`), 201, "setup")

	before := snapshot(t, db)
	datadriven.RunTest(t, "testdata/bad_input", func(t *testing.T, d *datadriven.TestData) string {
		if d.Cmd != "request" {
			d.Fatalf(t, "unknown directive %s", d.Cmd)
		}
		method, path, hdr, body := parseRequest(t, d, db)
		a := send(t, method, path, body, hdr...)
		p := checkProblem(t, a, a.status)
		if after := snapshot(t, db); after != before {
			d.Fatalf(t, "state changed:\n%s", diffLines(before, after))
		}
		out := fmt.Sprintf("%d %s", a.status, strings.TrimPrefix(p.Type, problemBase))
		if p.Field != "" {
			out += " field=" + p.Field
		}
		if p.Operation != nil {
			out += fmt.Sprintf(" operation=%d", *p.Operation)
		}
		return out + "\n"
	})
}

// parseRequest reads a request directive's method, path (expanded for db),
// headers as name, value pairs, and body: nil when it has none.
func parseRequest(t *testing.T, d *datadriven.TestData, db string) (method, path string, hdr []string, body any) {
	lines := strings.Split(d.Input, "\n")
	method, path, ok := strings.Cut(lines[0], " ")
	if !ok {
		d.Fatalf(t, "want METHOD PATH, got %q", lines[0])
	}
	path = expandMacros(path, db)
	rest := lines[1:]
	for len(rest) > 0 && rest[0] != "" {
		name, value, ok := strings.Cut(rest[0], ": ")
		if !ok {
			d.Fatalf(t, "want a header line or a blank line before the body, got %q", rest[0])
		}
		hdr, rest = append(hdr, name, value), rest[1:]
	}
	switch {
	case len(rest) > 1:
		body = expandMacros(strings.Join(rest[1:], "\n"), db)
	case d.HasArg("empty-body"):
		body = ""
	}
	return method, path, hdr, body
}

var macro = regexp.MustCompile(`\{(db|repeat (\d+) (\S)|range (\d+) (\d+)|puts (\d+))\}`)

// expandMacros expands the macros of a request's path or body (see
// TestBadInputChangesNothing).
func expandMacros(s, db string) string {
	return macro.ReplaceAllStringFunc(s, func(m string) string {
		g := macro.FindStringSubmatch(m)
		num := func(s string) int { n, _ := strconv.Atoi(s); return n }
		switch {
		case g[1] == "db":
			return db
		case g[2] != "":
			return strings.Repeat(g[3], num(g[2]))
		case g[4] != "":
			var items []string
			for i := num(g[4]); i <= num(g[5]); i++ {
				items = append(items, strconv.Itoa(i))
			}
			return strings.Join(items, ",")
		default:
			var ops []string
			for i := range num(g[6]) {
				op := map[string]any{"op": "put", "table": "Message", "key": []any{"m1", 100 + i}, "document": message("many", i)}
				ops = append(ops, string(mustJSON(op)))
			}
			return strings.Join(ops, ",")
		}
	})
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
