package datastream_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/doppio-db/doppio/internal/datastream"
)

// problemOf decodes a problem+json answer.
func problemOf(t *testing.T, h http.Header, b []byte) (status int, field, detail string) {
	t.Helper()
	if ct := h.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json: %s", ct, b)
	}
	var p struct {
		Status int
		Field  string
		Detail string
	}
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	return p.Status, p.Field, p.Detail
}

// TestDatastreamAPIRefusesBadInputPrecisely: every bad request is a 4xx
// problem naming the field (and the missing thing), and changes nothing;
// PUT answers 201 then 200; the database and "from" are fixed.
func TestDatastreamAPIRefusesBadInputPrecisely(t *testing.T) {
	n := startNode(t)
	setupShop(n, 4)
	const sink = `"sink":{"type":"kafka","brokers":["127.0.0.1:1"]}`
	cases := []struct {
		name, method, path, body, contentType string
		status                                int
		field, mentions                       string
	}{
		{"unknown database", "PUT", "/_datastreams/s", `{"database":"nope",` + sink + `}`, "", 404, "database", `"nope"`},
		{"unknown table", "PUT", "/_datastreams/s", `{"database":"shop","tables":["Order","Gone"],` + sink + `}`, "", 404, "tables", `"Gone"`},
		{"partition out of range", "PUT", "/_datastreams/s", `{"database":"shop","partitions":[4],` + sink + `}`, "", 404, "partitions", "partition 4"},
		{"bad format", "PUT", "/_datastreams/s", `{"database":"shop","sink":{"type":"kafka","brokers":["h:1"],"format":"xml"}}`, "", 400, "sink.format", `"xml"`},
		{"bad broker", "PUT", "/_datastreams/s", `{"database":"shop","sink":{"type":"kafka","brokers":["h"]}}`, "", 400, "sink.brokers", `"h"`},
		{"unknown sink field", "PUT", "/_datastreams/s", `{"database":"shop","sink":{"type":"kafka","brokers":["h:1"],"linger":5}}`, "", 400, "sink.linger", "linger"},
		{"bad auto-pause", "PUT", "/_datastreams/s", `{"database":"shop",` + sink + `,"autoPause":{"failures":0.5}}`, "", 400, "autoPause.failures", "failures"},
		{"not JSON", "PUT", "/_datastreams/s", `{"database":`, "", 400, "", "JSON"},
		{"not JSON content", "PUT", "/_datastreams/s", `{"database":"shop",` + sink + `}`, "text/plain", 415, "", "text/plain"},
		{"bad name", "PUT", "/_datastreams/9lives", `{"database":"shop",` + sink + `}`, "", 400, "name", "9lives"},
		{"unknown parameter", "PUT", "/_datastreams/s?dryRun=1", `{"database":"shop",` + sink + `}`, "", 400, "dryRun", "dryRun"},
		{"get unknown", "GET", "/_datastreams/s", "", "", 404, "", `"s"`},
		{"status unknown", "GET", "/_datastreams/s/status", "", "", 404, "", `"s"`},
		{"delete unknown", "DELETE", "/_datastreams/s", "", "", 404, "", `"s"`},
		{"pause unknown", "POST", "/_datastreams/s/pause", "", "", 404, "", `"s"`},
		{"resume unknown", "POST", "/_datastreams/s/resume", "", "", 404, "", `"s"`},
		{"method", "PATCH", "/_datastreams/s", `{}`, "", 405, "", "PATCH"},
	}
	for _, c := range cases {
		req, err := http.NewRequest(c.method, n.url+c.path, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		ct := c.contentType
		if ct == "" && c.body != "" {
			ct = "application/json"
		}
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b := readAll(t, resp)
		status, field, detail := problemOf(t, resp.Header, b)
		if resp.StatusCode != c.status || status != c.status || field != c.field || !strings.Contains(detail, c.mentions) {
			t.Errorf("%s: %d field %q detail %q; want %d field %q mentioning %s", c.name, resp.StatusCode, field, detail, c.status, c.field, c.mentions)
		}
		if c.status == 405 && resp.Header.Get("Allow") == "" {
			t.Errorf("%s: 405 without Allow", c.name)
		}
	}
	// Nothing was created.
	if b := n.must(200, "GET", "/_datastreams", nil); string(b) != `{"datastreams":[]}`+"\n" {
		t.Fatalf("datastreams after refused requests: %s", b)
	}

	// Create (201, Location), update (200); defaults filled.
	st, h, b := n.do("PUT", "/_datastreams/s", `{"database":"shop","partitions":[1,0],`+sink+`}`)
	if st != 201 || h.Get("Location") != "/_datastreams/s" {
		t.Fatalf("create: %d %v %s", st, h, b)
	}
	var v datastream.View
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if v.Name != "s" || v.State != "running" || len(v.Partitions) != 2 || v.Partitions[0] != 0 || v.Sink.Topics != "per-table" || v.Sink.Format != "json" ||
		v.From != "now" || v.AutoPause.Failures != 5 || v.Created.IsZero() {
		t.Fatalf("created view %s", b)
	}
	n.must(200, "PUT", "/_datastreams/s", `{"name":"s","database":"shop","partitions":[0,1],"sink":{"type":"kafka","brokers":["127.0.0.1:2"]}}`)
	n.must(201, "PUT", "/_schemas/other", map[string]any{"partitions": 1})
	for _, c := range []struct{ body, field string }{
		{`{"database":"other",` + sink + `}`, "database"},
		{`{"database":"shop","from":"earliest",` + sink + `}`, "from"},
	} {
		st, h, b := n.do("PUT", "/_datastreams/s", c.body)
		if code, field, _ := problemOf(t, h, b); st != 409 || code != 409 || field != c.field {
			t.Errorf("changing %s: %d %s", c.field, st, b)
		}
	}
	if b := n.must(200, "GET", "/_datastreams/s", nil); !strings.Contains(string(b), `"brokers":["127.0.0.1:2"]`) || !strings.Contains(string(b), `"database":"shop"`) {
		t.Fatalf("after refused updates: %s", b)
	}

	// Pause and resume: partitions must be read by the stream.
	for _, c := range []struct {
		path   string
		status int
		field  string
	}{
		{"/_datastreams/s/pause?partitions=x", 400, "partitions"},
		{"/_datastreams/s/pause?partitions=2", 404, "partitions"},
		{"/_datastreams/s/pause?partitions=0&partitions=1", 400, "partitions"},
		{"/_datastreams/s/resume?all=1", 400, "all"},
	} {
		st, h, b := n.do("POST", c.path, nil)
		if code, field, _ := problemOf(t, h, b); st != c.status || code != c.status || field != c.field {
			t.Errorf("POST %s: %d %s; want %d field %s", c.path, st, b, c.status, c.field)
		}
	}
	if b := n.must(200, "POST", "/_datastreams/s/pause?partitions=1", nil); !strings.Contains(string(b), `"state":"partially-paused"`) || !strings.Contains(string(b), `"pausedPartitions":[1]`) {
		t.Fatalf("pause 1: %s", b)
	}
	if b := n.must(200, "POST", "/_datastreams/s/pause", nil); !strings.Contains(string(b), `"state":"paused"`) {
		t.Fatalf("pause: %s", b)
	}
	if b := n.must(200, "POST", "/_datastreams/s/resume?partitions=1", nil); !strings.Contains(string(b), `"pausedPartitions":[0]`) {
		t.Fatalf("resume 1 of a paused stream: %s", b)
	}
	if b := n.must(200, "POST", "/_datastreams/s/resume", nil); !strings.Contains(string(b), `"state":"running"`) {
		t.Fatalf("resume: %s", b)
	}
	if b := n.must(200, "GET", "/_datastreams", nil); !strings.Contains(string(b), `"name":"s"`) {
		t.Fatalf("list: %s", b)
	}
	st2 := n.status("s")
	if len(st2.Partitions) != 2 || st2.Partitions[0].Partition != 0 || st2.Partitions[1].Partition != 1 {
		t.Fatalf("status partitions: %+v", st2)
	}
	n.must(204, "DELETE", "/_datastreams/s", nil)
	n.must(404, "GET", "/_datastreams/s", nil)
}

func readAll(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	var buf strings.Builder
	if _, err := io.Copy(&buf, resp.Body); err != nil {
		t.Fatal(err)
	}
	return []byte(buf.String())
}
