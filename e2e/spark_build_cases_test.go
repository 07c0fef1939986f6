package e2e

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/doppio-db/doppio/internal/schema"
)

// The builds' inputs: every record of every format is written from its JSON
// form, so a valid record's expected document is the schema package's
// reading of that form whatever the format carried it.

// messageCase is the MailboxDB Message table (examples/mailbox) with 240
// messages spread over the four formats, a key given three times and
// records refused in each format.
func messageCase(t *testing.T) *bulkCase {
	def, err := os.ReadFile(filepath.Join("..", "examples", "mailbox", "Message.json"))
	if err != nil {
		t.Fatal(err)
	}
	c := &bulkCase{db: "MailboxDB", table: "Message", def: string(def), partitions: 8,
		avroSchema: `{"type": "record", "name": "MessageIn", "fields": [
			{"name": "mailboxId", "type": "string"}, {"name": "messageId", "type": "long"},
			{"name": "subject", "type": ["null", "string"]}, {"name": "body", "type": "string"},
			{"name": "senderId", "type": "string"}, {"name": "folder", "type": "string"},
			{"name": "isInbox", "type": "boolean"}, {"name": "unread", "type": "boolean"},
			{"name": "createdOn", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}`,
		parquet: [][2]string{{"mailboxId", "string"}, {"messageId", "int64"}, {"subject", "string"}, {"body", "string"},
			{"senderId", "string"}, {"folder", "string"}, {"isInbox", "bool"}, {"unread", "bool"}, {"createdOn", "timestamp_ms"}},
	}
	for i := range 240 {
		format := bulkFormats[i%4]
		js := fmt.Sprintf(`{"mailboxId": "mb-%02d", "messageId": %d, "subject": "re: %d ✉ «naïve»", "senderId": "user%d", "createdOn": %d`,
			i%17, 1000+i, i, i%7, 1700000000000+int64(i)*60000)
		full := format != "jsonl" // every column present (an empty CSV string cell is "")
		if i%3 != 0 || full {
			js += fmt.Sprintf(`, "body": "line one\nline \"two\", %d"`, i)
		}
		if i%5 == 0 || full {
			js += fmt.Sprintf(`, "folder": "%s", "isInbox": %t, "unread": %t`, []string{"archive", "inbox"}[i%2], i%2 == 1, i%3 == 1)
		}
		c.records = append(c.records, rec(t, format, js+"}", ""))
	}
	const ok = `"subject": "s", "senderId": "x", "createdOn": 1700000000000`
	dup := fmt.Sprintf(`{"mailboxId": "mb-03", "messageId": 5000, "body": "", "folder": "inbox", "isInbox": true, "unread": true, %s}`, ok)
	c.records = append(c.records,
		rec(t, "jsonl", dup, ""), rec(t, "csv", dup, ""), rec(t, "parquet", dup, ""),
		rec(t, "jsonl", `{"mailboxId": "mb-01", "messageId": "7", `+ok+`}`, `key part "messageId" must be a number (long), got string`),
		rec(t, "jsonl", `{"mailboxId": "mb-01", "messageId": 9001, "subject": 42, "senderId": "x", "createdOn": 1}`, `subject: expected string, got number 42`),
		rec(t, "jsonl", `{"mailboxId": "mb-01", "messageId": 9002, "flagged": true, `+ok+`}`, `flagged: unknown field (not in record com.example.mailbox.Message)`),
		rec(t, "jsonl", `{"mailboxId": "mb-01", "messageId": 9003, "subject": "s", "senderId": "x"}`, `createdOn: required field is missing`),
		rec(t, "jsonl", `{"messageId": 9004, `+ok+`}`, `missing key part "mailboxId"`),
		rec(t, "jsonl", `{"mailboxId": "", "messageId": 9005, `+ok+`}`, `key part "mailboxId" must not be empty`),
		rec(t, "jsonl", `{"mailboxId": "mb-01", "messageId": 9006, "subject": "s", "senderId": "x", "createdOn": 1.5}`, `createdOn: 1.5 is not an integer (long)`),
		rec(t, "jsonl", `{"mailboxId": "mb-01", "messageId": 9007, "isInbox": "yes", `+ok+`}`, `isInbox: expected boolean, got string`),
		bulkRecord{format: "jsonl", line: `[1, 2]`, reject: `the record must be a JSON object`},
		withCells(rec(t, "csv", `{"mailboxId": "mb-01", `+ok+`}`, `key part "messageId" must be a decimal integer (long), got "12a"`), "messageId", "12a"),
		withCells(rec(t, "csv", `{"mailboxId": "mb-01", "messageId": 9010, "subject": "s", "senderId": "x"}`, `field "createdOn": "soon" is not a decimal integer`), "createdOn", "soon"),
		withCells(rec(t, "csv", `{"mailboxId": "mb-01", "messageId": 9011, `+ok+`}`, `field "unread": "1" is not a boolean (true or false)`), "unread", "1"),
		rec(t, "avro", `{"mailboxId": "mb-01", "messageId": 9012, "subject": null, "body": "", "senderId": "x", "folder": "f", "isInbox": true, "unread": true, "createdOn": 1}`, `subject: expected string, got null`),
		rec(t, "parquet", `{"mailboxId": "mb-01", "messageId": 9013, "subject": "s", "body": "", "senderId": null, "folder": "f", "isInbox": true, "unread": true, "createdOn": 1}`, `senderId: expected string, got null`),
	)
	return c.compile(t)
}

// readingCase is a table of every Avro type (each primitive, enum, fixed,
// array, map of several entries, nullable record, a three-branch union, a
// logical date) with a two-part integer key.
func readingCase(t *testing.T) *bulkCase {
	c := &bulkCase{db: "SensorDB", table: "Reading", partitions: 5,
		def: `{"key": [{"name": "sensorId", "type": "long"}, {"name": "seq", "type": "int"}],
		"schema": {"type": "record", "name": "Reading", "namespace": "com.example.sensors", "fields": [
			{"name": "value", "type": "double"},
			{"name": "ratio", "type": "float", "default": 0.5},
			{"name": "count", "type": "int"},
			{"name": "total", "type": "long", "default": 0},
			{"name": "ok", "type": "boolean", "default": true},
			{"name": "label", "type": "string", "default": ""},
			{"name": "raw", "type": "bytes", "default": ""},
			{"name": "digest", "type": {"type": "fixed", "name": "Digest", "size": 4}},
			{"name": "unit", "type": {"type": "enum", "name": "Unit", "symbols": ["CELSIUS", "KELVIN", "PASCAL"]}, "default": "CELSIUS"},
			{"name": "tags", "type": {"type": "array", "items": "string"}, "default": []},
			{"name": "attrs", "type": {"type": "map", "values": "long"}, "default": {}},
			{"name": "note", "type": ["null", "string"], "default": null},
			{"name": "where", "type": ["null", {"type": "record", "name": "Place", "fields": [
				{"name": "lat", "type": "double"}, {"name": "lon", "type": "double"}]}], "default": null},
			{"name": "day", "type": {"type": "int", "logicalType": "date"}, "default": 0},
			{"name": "reading", "type": ["long", "string", "double"], "default": 0}]}}`,
		avroSchema: `{"type": "record", "name": "ReadingIn", "namespace": "in", "fields": [
			{"name": "sensorId", "type": "long"}, {"name": "seq", "type": "int"},
			{"name": "value", "type": ["null", "double"]}, {"name": "ratio", "type": "float"},
			{"name": "count", "type": "int"}, {"name": "total", "type": "long"}, {"name": "ok", "type": "boolean"},
			{"name": "label", "type": "string"}, {"name": "raw", "type": "bytes"},
			{"name": "digest", "type": {"type": "fixed", "name": "D4", "size": 4}},
			{"name": "unit", "type": {"type": "enum", "name": "U", "symbols": ["CELSIUS", "KELVIN", "PASCAL"]}},
			{"name": "tags", "type": {"type": "array", "items": "string"}},
			{"name": "attrs", "type": {"type": "map", "values": "long"}},
			{"name": "note", "type": ["null", "string"]},
			{"name": "where", "type": ["null", {"type": "record", "name": "P", "fields": [
				{"name": "lat", "type": "double"}, {"name": "lon", "type": "double"}]}]},
			{"name": "day", "type": {"type": "int", "logicalType": "date"}},
			{"name": "reading", "type": ["long", "string", "double"]}]}`,
		parquet: [][2]string{{"sensorId", "int64"}, {"seq", "int32"}, {"value", "double"}, {"ratio", "float"}, {"count", "int32"},
			{"total", "int64"}, {"ok", "bool"}, {"label", "string"}, {"raw", "binary"}, {"digest", "binary"}, {"unit", "string"},
			{"tags", "list_string"}, {"attrs", "map_string_int64"}, {"note", "string"}, {"where", "struct_latlon"}, {"day", "date32"}},
	}
	units := []string{"CELSIUS", "KELVIN", "PASCAL"}
	readings := []string{`-3`, `"n/a"`, `2.75`}
	for i := range 160 {
		format := bulkFormats[i%4]
		js := fmt.Sprintf(`{"sensorId": %d, "seq": %d, "value": %g, "count": %d, "digest": "%s"`,
			int64(i%11)*1_000_000_007-5_000_000_000, i-40, float64(i)*1.25-30, i*3-100, b64(fmt.Sprintf("d%03d", i)))
		full := format == "parquet"
		if i%2 == 0 || full {
			js += fmt.Sprintf(`, "ratio": %g, "total": %d, "ok": %t, "label": "L%d ü", "raw": "%s", "unit": "%s"`,
				[]float64{0.1, 1e-3, 3.4e38, -2.5}[i%4], int64(i)<<40, i%3 == 0, i, b64(fmt.Sprintf("raw\x00%d", i)), units[i%3])
		}
		if i%3 == 0 || full {
			js += fmt.Sprintf(`, "tags": ["t%d", "", "x y"], "attrs": {"k%d": %d, "a": 1, "z%d": -5, "é": 7}, "note": "n%d", "where": {"lat": %g, "lon": -%g}, "day": %d`,
				i, i, i*i, i, i, float64(i)/7, float64(i)/3, 19000+i)
		} else if i%3 == 1 {
			js += `, "tags": [], "attrs": {}, "note": null, "where": null`
		}
		if format == "avro" {
			js = fmt.Sprintf(`{"sensorId": %d, "seq": %d, "value": %d.5, "ratio": 0.25, "count": %d, "total": -%d, "ok": false, "label": "avro %d",
				"raw": "%s", "digest": "%s", "unit": "KELVIN", "tags": ["a"], "attrs": {"a": 1}, "note": null, "where": {"lat": 1, "lon": 2},
				"day": %d, "reading": %s`, 7_000+i, i, i, i, i, i, b64("r"), b64(fmt.Sprintf("a%03d", i)), 18000+i, readings[i%3])
		} else if format != "parquet" {
			js += `, "reading": ` + readings[i%3]
		}
		c.records = append(c.records, rec(t, format, js+"}", ""))
	}
	const ok = `"value": 1, "count": 1, "digest": "AAAAAA=="`
	dup := `{"sensorId": 1, "seq": 1, "value": 1, "ratio": 1, "count": 1, "total": 1, "ok": true, "label": "", "raw": "", "digest": "AAAAAA==",
		"unit": "CELSIUS", "tags": [], "attrs": {}, "note": null, "where": null, "day": 0}`
	avroOK := `"value": 1, "ratio": 1, "count": 1, "total": 1, "ok": true, "label": "", "raw": "", "digest": "AAAAAA==", "unit": "CELSIUS",
		"tags": [], "attrs": {}, "note": null, "where": null, "day": 0, "reading": 0`
	c.records = append(c.records,
		rec(t, "avro", dup[:len(dup)-1]+`, "reading": 0}`, ""), rec(t, "parquet", dup, ""),
		rec(t, "jsonl", `{"sensorId": 2, "seq": 2147483648, `+ok+`}`, `key part "seq": 2147483648 is out of range for int`),
		rec(t, "jsonl", `{"sensorId": 2, "seq": 1, "unit": "FAHRENHEIT", `+ok+`}`, `unit: "FAHRENHEIT" is not one of the symbols of enum com.example.sensors.Unit (CELSIUS, KELVIN, PASCAL)`),
		rec(t, "jsonl", `{"sensorId": 2, "seq": 2, "value": 1, "count": 1, "digest": "AAAA"}`, `digest: expected exactly 4 bytes (fixed com.example.sensors.Digest), got 3`),
		rec(t, "jsonl", `{"sensorId": 2, "seq": 3, "ratio": 1e39, `+ok+`}`, `ratio: 1e+39 is out of range for float`),
		rec(t, "jsonl", `{"sensorId": 2, "seq": 4, "value": 1, "count": 1.5, "digest": "AAAAAA=="}`, `count: 1.5 is not an integer (int)`),
		rec(t, "jsonl", `{"sensorId": 2, "seq": 5, "tags": ["a", 1], `+ok+`}`, `tags[1]: expected string, got number 1`),
		rec(t, "jsonl", `{"sensorId": 2, "seq": 6, "where": {"lat": 1}, `+ok+`}`, `where.lon: required field is missing`),
		rec(t, "jsonl", `{"sensorId": 2, "seq": 7, "reading": true, `+ok+`}`, `reading: boolean matches no branch of union [long, string, double]`),
		rec(t, "jsonl", `{"sensorId": 2, "seq": 8, "raw": "not base64!", `+ok+`}`, `raw: expected a base64 string (bytes), got an invalid one`),
		rec(t, "jsonl", `{"sensorId": 2, "seq": 9, "attrs": {"a": "b"}, `+ok+`}`, `attrs.a: expected long, got string`),
		rec(t, "jsonl", `{"sensorId": 2.5, "seq": 10, `+ok+`}`, `key part "sensorId" must be a decimal integer (long), got "2.5"`),
		withCells(rec(t, "csv", `{"sensorId": 3, "seq": 1, `+ok+`}`, `field "ok": "yes" is not a boolean (true or false)`), "ok", "yes"),
		withCells(rec(t, "csv", `{"sensorId": 3, `+ok+`}`, `key part "seq" must be a decimal integer (int), got ""`), "seq", ""),
		rec(t, "avro", `{"sensorId": 4, "seq": 2, `+avroOK[len(`"value": 1, `):]+`, "value": null}`, `value: expected double, got null`),
		rec(t, "parquet", `{"sensorId": 5, "seq": 1, "value": 1, "ratio": 1, "count": 1, "total": 1, "ok": true, "label": "", "raw": "", "digest": "AAAAAA==",
			"unit": "KILO", "tags": [], "attrs": {}, "note": null, "where": null, "day": 0}`, `unit: "KILO" is not one of the symbols of enum com.example.sensors.Unit (CELSIUS, KELVIN, PASCAL)`),
	)
	return c.compile(t)
}

func withCells(r bulkRecord, name, cell string) bulkRecord {
	r.cells = map[string]string{name: cell}
	return r
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func (c *bulkCase) compile(t *testing.T) *bulkCase {
	t.Helper()
	var def schema.TableDef
	if err := json.Unmarshal([]byte(c.def), &def); err != nil {
		t.Fatal(err)
	}
	var body struct {
		Schema json.RawMessage `json:"schema"`
	}
	if err := json.Unmarshal([]byte(c.def), &body); err != nil {
		t.Fatal(err)
	}
	def.Database, def.Name = c.db, c.table
	def.Versions = []schema.Version{{Version: 1, Schema: []byte(body.Schema)}}
	tbl, err := schema.Compile(def)
	if err != nil {
		t.Fatalf("compiling %s: %v", c.table, err)
	}
	c.compiled = tbl
	return c
}

// inputFingerprint is docs/design/bulk.md's input fingerprint: SHA-256
// over each input's base name, size and content SHA-256, in order.
func inputFingerprint(t *testing.T, paths []string) string {
	t.Helper()
	h := sha256.New()
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		fh := sha256.New()
		n, err := io.Copy(fh, f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(h, "%s\n%d\n%s\n", filepath.Base(p), n, hex.EncodeToString(fh.Sum(nil)))
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}
