package builder

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/doppio-db/doppio/internal/bulk"
	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/schema"
	"github.com/hamba/avro/v2/ocf"
	"github.com/parquet-go/parquet-go"
)

// The test table: a two-part key and fields of the common types.
const testSpec = `{
  "key": [{"name": "user", "type": "string"}, {"name": "n", "type": "long"}],
  "schema": {"type": "record", "name": "Event", "fields": [
    {"name": "kind", "type": "string"},
    {"name": "count", "type": "int", "default": 0},
    {"name": "score", "type": ["null", "double"], "default": null},
    {"name": "ok", "type": "boolean", "default": true},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}, "default": 0}
  ]}
}`

func testTarget(t testing.TB, partitions int) *Target {
	t.Helper()
	spec, err := ParseSpec([]byte(testSpec))
	if err != nil {
		t.Fatal(err)
	}
	tg, err := NewTarget("DB", "Event", partitions, 2, spec)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// event is one test record, as every format writes it.
type event struct {
	User  string   `parquet:"user" avro:"user"`
	N     int64    `parquet:"n" avro:"n"`
	Kind  string   `parquet:"kind" avro:"kind"`
	Count int32    `parquet:"count" avro:"count"`
	Score *float64 `parquet:"score,optional" avro:"score"`
	OK    bool     `parquet:"ok" avro:"ok"`
	At    int64    `parquet:"at" avro:"at"`
}

func events(n int) []event {
	out := make([]event, n)
	for i := range out {
		out[i] = event{User: fmt.Sprintf("u%03d", i%37), N: int64(i), Kind: fmt.Sprintf("k%d", i%5), Count: int32(i % 100), OK: i%3 == 0, At: 1700000000000 + int64(i)}
		if i%2 == 0 {
			s := float64(i) / 4
			out[i].Score = &s
		}
	}
	return out
}

func (e event) json() string {
	score := "null"
	if e.Score != nil {
		score = fmt.Sprint(*e.Score)
	}
	return fmt.Sprintf(`{"user":%q,"n":%d,"kind":%q,"count":%d,"score":%s,"ok":%t,"at":%d}`, e.User, e.N, e.Kind, e.Count, score, e.OK, e.At)
}

func writeInput(t *testing.T, dir, name string, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func jsonLines(evs []event) string {
	var sb strings.Builder
	for _, e := range evs {
		sb.WriteString(e.json() + "\n")
	}
	return sb.String()
}

func csvText(evs []event) string {
	var sb strings.Builder
	w := csv.NewWriter(&sb)
	w.Write([]string{"user", "n", "kind", "count", "score", "ok", "at"})
	for _, e := range evs {
		score := ""
		if e.Score != nil {
			score = fmt.Sprint(*e.Score)
		}
		w.Write([]string{e.User, fmt.Sprint(e.N), e.Kind, fmt.Sprint(e.Count), score, fmt.Sprint(e.OK), fmt.Sprint(e.At)})
	}
	w.Flush()
	return sb.String()
}

const avroFileSchema = `{"type": "record", "name": "In", "fields": [
  {"name": "user", "type": "string"}, {"name": "n", "type": "long"},
  {"name": "kind", "type": "string"}, {"name": "count", "type": "int"},
  {"name": "score", "type": ["null", "double"]}, {"name": "ok", "type": "boolean"},
  {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}`

func avroBytes(t *testing.T, evs []event) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc, err := ocf.NewEncoder(avroFileSchema, &buf)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		m := map[string]any{"user": e.User, "n": e.N, "kind": e.Kind, "count": int(e.Count), "score": nil, "ok": e.OK, "at": e.At}
		if e.Score != nil {
			m["score"] = map[string]any{"double": *e.Score}
		}
		if err := enc.Encode(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func parquetBytes[T any](t *testing.T, rows []T) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[T](&buf)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func runBuild(t *testing.T, tg *Target, out string, cfg Config, paths ...string) (*bulk.Manifest, error) {
	t.Helper()
	cfg.Target, cfg.Out, cfg.Builder = tg, out, "test"
	for _, p := range paths {
		f, err := FormatOf(p, "")
		if err != nil {
			t.Fatal(err)
		}
		cfg.Inputs = append(cfg.Inputs, Input{Path: p, Format: f})
	}
	return Build(context.Background(), cfg)
}

// readBuild reads every partition file of a finished build, checking
// each against the manifest and that every record is in the partition
// the server would route its key to.
func readBuild(t *testing.T, tg *Target, dir string) map[string]schema.Document {
	t.Helper()
	m, err := bulk.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]schema.Document{}
	for _, f := range m.Files {
		err := bulk.ReadFile(dir, f, func(rec bulk.Record) error {
			key, err := keys.DecodeTuple(rec.Key)
			if err != nil {
				return err
			}
			pk, _ := keys.EncodeTuple(key[:1])
			if p := keys.PartitionOf(pk, m.Partitions); p != f.Partition {
				return fmt.Errorf("key %v in partition %d, routed to %d", key, f.Partition, p)
			}
			doc, err := tg.table.Decode(rec.Doc, m.SchemaVersion, m.SchemaVersion)
			docs[key.String()] = doc
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return docs
}

func wantDocs(evs []event) map[string]schema.Document {
	out := map[string]schema.Document{}
	for _, e := range evs {
		var score any
		if e.Score != nil {
			score = *e.Score
		}
		out[keys.Tuple{e.User, e.N}.String()] = schema.Document{"kind": e.Kind, "count": int64(e.Count), "score": score, "ok": e.OK, "at": e.At}
	}
	return out
}

func partitionFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	names, _ := filepath.Glob(filepath.Join(dir, "p-*.dpb"))
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(n)] = b
	}
	return out
}

// TestEveryFormatBuildsTheSameFiles writes the same records as JSON
// Lines, CSV, Avro and Parquet: each build holds exactly those documents
// and the partition files are byte-identical across formats.
func TestEveryFormatBuildsTheSameFiles(t *testing.T) {
	tg := testTarget(t, 4)
	evs := events(300)
	in := t.TempDir()
	inputs := map[Format]string{
		JSONLines: writeInput(t, in, "e.jsonl", jsonLines(evs)),
		CSV:       writeInput(t, in, "e.csv", csvText(evs)),
		Avro:      writeInput(t, in, "e.avro", string(avroBytes(t, evs))),
		Parquet:   writeInput(t, in, "e.parquet", string(parquetBytes(t, evs))),
	}
	var first map[string][]byte
	for _, f := range []Format{JSONLines, CSV, Avro, Parquet} {
		t.Run(string(f), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			m, err := runBuild(t, tg, out, Config{}, inputs[f])
			if err != nil {
				t.Fatal(err)
			}
			if m.Records != 300 || m.Rejected != 0 {
				rj, _ := os.ReadFile(filepath.Join(out, bulk.RejectsName))
				t.Fatalf("%d records, %d rejected:\n%s", m.Records, m.Rejected, rj)
			}
			if got, want := readBuild(t, tg, out), wantDocs(evs); !reflect.DeepEqual(got, want) {
				t.Fatalf("documents differ from the input")
			}
			files := partitionFiles(t, out)
			if first == nil {
				first = files
			} else if !reflect.DeepEqual(files, first) {
				t.Fatal("partition files differ from the JSON Lines build's")
			}
		})
	}
}

func TestRejectsNameInputRecordAndReason(t *testing.T) {
	tg := testTarget(t, 2)
	in := t.TempDir()
	a := writeInput(t, in, "a.jsonl", strings.Join([]string{
		`{"user":"x","n":1,"kind":"ok"}`,
		`{"user":"x","n":2,"kind":7}`,
		``,
		`{"user":5,"n":3,"kind":"k"}`,
		`{"user":"x","n":"4","kind":"k"}`,
		`{"n":5,"kind":"k"}`,
		`{"user":"x","n":6,"kind":"k","extra":1}`,
		`{"user":"d","n":1,"kind":"first"}`,
		`[1,2]`,
		`{"user":"d","n":1,"kind":"second"}`,
		`{"user":"","n":9,"kind":"k"}`,
	}, "\n")+"\n")
	b := writeInput(t, in, "b.csv", "user,n,kind,count\nd,1,third,0\ny,1,k,notanumber\ny,x,k,1\ny,2,k,3\n")
	out := filepath.Join(t.TempDir(), "out")
	m, err := runBuild(t, tg, out, Config{}, a, b)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(out, bulk.RejectsName))
	want := strings.Join([]string{
		`{"input":"` + a + `","record":2,"reason":"kind: expected string, got number 7"}`,
		`{"input":"` + a + `","record":4,"reason":"key part \"user\" must be a string, got number 5"}`,
		`{"input":"` + a + `","record":5,"reason":"key part \"n\" must be a number (long), got string"}`,
		`{"input":"` + a + `","record":6,"reason":"missing key part \"user\""}`,
		`{"input":"` + a + `","record":7,"reason":"extra: unknown field (not in record Event)"}`,
		`{"input":"` + a + `","record":8,"reason":"duplicate key"}`,
		`{"input":"` + a + `","record":9,"reason":"the record must be a JSON object"}`,
		`{"input":"` + a + `","record":10,"reason":"duplicate key"}`,
		`{"input":"` + a + `","record":11,"reason":"key part \"user\" must not be empty"}`,
		`{"input":"` + b + `","record":1,"reason":"duplicate key"}`,
		`{"input":"` + b + `","record":2,"reason":"field \"count\": \"notanumber\" is not a decimal integer"}`,
		`{"input":"` + b + `","record":3,"reason":"key part \"n\" must be a decimal integer (long), got \"x\""}`,
	}, "\n") + "\n"
	if string(got) != want {
		t.Fatalf("rejects:\n%s\nwant:\n%s", got, want)
	}
	if m.Records != 2 || m.Rejected != 12 {
		t.Fatalf("manifest counts %d records, %d rejected", m.Records, m.Rejected)
	}
	docs := readBuild(t, tg, out)
	if len(docs) != 2 || docs[`["x",1]`] == nil || docs[`["y",2]`]["count"] != int64(3) {
		t.Fatalf("documents %v", docs)
	}
}

func TestMalformedInputFailsNamingFileAndPosition(t *testing.T) {
	tg := testTarget(t, 2)
	in := t.TempDir()
	evs := events(50)
	avroFile := avroBytes(t, evs)
	pq := parquetBytes(t, evs)
	for _, tc := range []struct {
		name, file, content, want string
	}{
		{"json syntax", "a.jsonl", jsonLines(evs[:3]) + `{"user":"x","n":1,` + "\n", "a.jsonl:4: malformed JSON at byte 18: unexpected end of JSON input"},
		{"json two values", "b.jsonl", `{"user":"x","n":1,"kind":"k"} {}` + "\n", "b.jsonl:1: malformed JSON at byte 31: invalid character '{' after top-level value"},
		{"csv quote", "a.csv", "user,n,kind\nx,1,\"k\nx,2,k\n", "a.csv: record on line 2; parse error on line 3, column 7: extraneous or missing \" in quoted-field"},
		{"csv fields", "b.csv", "user,n,kind\nx,1,k\nx,2\n", "b.csv: record on line 3: wrong number of fields"},
		{"csv empty", "c.csv", "", "c.csv: empty CSV file: a header line is required"},
		{"csv no key column", "d.csv", "user,kind\nx,k\n", `d.csv: header lacks key part "n"`},
		{"avro garbage", "a.avro", "not avro at all", "a.avro: not an Avro object container file"},
		{"avro truncated", "b.avro", string(avroFile[:len(avroFile)-40]), "b.avro: after record"},
		{"parquet garbage", "a.parquet", "PAR1 not really parquet PAR1", "a.parquet: not a Parquet file"},
		{"parquet truncated", "b.parquet", string(pq[:len(pq)/2]), "b.parquet: not a Parquet file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeInput(t, in, tc.file, tc.content)
			out := filepath.Join(t.TempDir(), "out")
			_, err := runBuild(t, tg, out, Config{}, p)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			left, _ := os.ReadDir(out)
			if len(left) != 0 {
				var names []string
				for _, e := range left {
					names = append(names, e.Name())
				}
				t.Fatalf("a failed build left %v", names)
			}
		})
	}
}

// TestOutputIsDeterministic builds the same inputs with one worker and a
// spill bound small enough to force many spills and multi-pass merges,
// and with four workers and no spill: every output byte is the same.
func TestOutputIsDeterministic(t *testing.T) {
	tg := testTarget(t, 8)
	in := t.TempDir()
	evs := events(3000)
	// Duplicates across and within inputs, and some rejections.
	a := writeInput(t, in, "a.jsonl", jsonLines(evs[:2000])+jsonLines(evs[10:20])+`{"user":"bad"}`+"\n")
	b := writeInput(t, in, "b.csv", csvText(evs[1990:3000]))
	var spills []int64
	outs := []string{filepath.Join(t.TempDir(), "small"), filepath.Join(t.TempDir(), "large")}
	for i, cfg := range []Config{{Workers: 1, SpillBytes: 4 << 10}, {Workers: 4, SpillBytes: 1 << 30}} {
		var last Progress
		cfg.Progress = func(p Progress) { last = p }
		m, err := runBuild(t, tg, outs[i], cfg, a, b)
		if err != nil {
			t.Fatal(err)
		}
		// Keys 10..19 appear twice in a, 1990..1999 in a and in b.
		if m.Records != 3000-10-10 || m.Rejected != 20+20+1 {
			t.Fatalf("%d records, %d rejected; want 2980, 41", m.Records, m.Rejected)
		}
		if last.Phase != "done" || last.Records != 3021 || last.BytesRead != last.BytesTotal || last.Partitions != 8 {
			t.Fatalf("final progress %+v", last)
		}
		spills = append(spills, last.Spills)
	}
	if spills[0] <= maxFanIn || spills[1] != 0 {
		t.Fatalf("spills %v: want more than %d with the small bound, none with the large", spills, maxFanIn)
	}
	for _, name := range []string{bulk.ManifestName, bulk.RejectsName} {
		x, _ := os.ReadFile(filepath.Join(outs[0], name))
		y, _ := os.ReadFile(filepath.Join(outs[1], name))
		if !bytes.Equal(x, y) {
			t.Fatalf("%s differs:\n%s\n%s", name, x, y)
		}
	}
	if x, y := partitionFiles(t, outs[0]), partitionFiles(t, outs[1]); len(x) != 8 || !reflect.DeepEqual(x, y) {
		t.Fatal("partition files differ")
	}
	// Nothing temporary is left.
	for _, out := range outs {
		ents, _ := os.ReadDir(out)
		if len(ents) != 10 {
			t.Fatalf("%s holds %d entries, want 8 partition files, rejects and manifest", out, len(ents))
		}
	}
}

func TestManifestDescribesTheBuild(t *testing.T) {
	tg := testTarget(t, 3)
	in := t.TempDir()
	evs := events(100)
	a := writeInput(t, in, "a.jsonl", jsonLines(evs[:60]))
	b := writeInput(t, in, "b.jsonl", jsonLines(evs[60:])+`{"user":"z"}`+"\n")
	out := filepath.Join(t.TempDir(), "out")
	m, err := runBuild(t, tg, out, Config{}, a, b)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	for _, p := range []string{a, b} {
		data, _ := os.ReadFile(p)
		sum := sha256.Sum256(data)
		fmt.Fprintf(h, "%s\n%d\n%s\n", filepath.Base(p), len(data), hex.EncodeToString(sum[:]))
	}
	want := &bulk.Manifest{Format: bulk.Format, Database: "DB", Table: "Event", SchemaVersion: 2, Partitions: 3,
		Partitioner: "hash", InputFingerprint: "sha256:" + hex.EncodeToString(h.Sum(nil)), Records: 100, Rejected: 1, Builder: "test"}
	var total int64
	for p, f := range m.Files {
		data, err := os.ReadFile(filepath.Join(out, bulk.FileName(p)))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		if f.Partition != p || f.Path != bulk.FileName(p) || f.Bytes != int64(len(data)) || f.SHA256 != hex.EncodeToString(sum[:]) {
			t.Fatalf("file entry %+v for %d bytes with sha256 %x", f, len(data), sum)
		}
		total += f.Records
	}
	want.Files = m.Files
	if !reflect.DeepEqual(m, want) || total != 100 {
		t.Fatalf("manifest %+v\nwant %+v", m, want)
	}
	onDisk, err := bulk.ReadManifest(out)
	if err != nil || !reflect.DeepEqual(onDisk, m) {
		t.Fatalf("manifest on disk %+v (%v)", onDisk, err)
	}
	readBuild(t, tg, out)

	// A changed input changes the fingerprint.
	writeInput(t, in, "b.jsonl", jsonLines(evs[60:]))
	m2, err := runBuild(t, tg, out, Config{Overwrite: true}, a, b)
	if err != nil {
		t.Fatal(err)
	}
	if m2.InputFingerprint == m.InputFingerprint || m2.Rejected != 0 {
		t.Fatalf("changed input kept fingerprint %s", m2.InputFingerprint)
	}
}

func TestOutputDirectoryMustBeEmptyUnlessOverwrite(t *testing.T) {
	tg := testTarget(t, 1)
	in := writeInput(t, t.TempDir(), "a.jsonl", jsonLines(events(3)))
	out := t.TempDir()
	writeInput(t, out, "old.txt", "x")
	if _, err := runBuild(t, tg, out, Config{}, in); err == nil || !strings.Contains(err.Error(), "is not empty: pass --overwrite") {
		t.Fatalf("got %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, "old.txt")); err != nil {
		t.Fatal("a refused build touched the directory")
	}
	if _, err := runBuild(t, tg, out, Config{Overwrite: true}, in); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(out, "old.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("overwrite kept an old file")
	}
}

func TestFormatOf(t *testing.T) {
	for path, want := range map[string]Format{"a.jsonl": JSONLines, "a.NDJSON": JSONLines, "x/a.csv": CSV, "a.avro": Avro, "a.parquet": Parquet} {
		if got, err := FormatOf(path, ""); got != want || err != nil {
			t.Errorf("FormatOf(%q) = %q, %v", path, got, err)
		}
	}
	if got, err := FormatOf("a.txt", "csv"); got != CSV || err != nil {
		t.Errorf("override: %q, %v", got, err)
	}
	if _, err := FormatOf("a.txt", ""); err == nil || !strings.Contains(err.Error(), "pass --format") {
		t.Errorf("unknown extension: %v", err)
	}
	if _, err := FormatOf("a.jsonl", "xml"); err == nil {
		t.Error("unknown --format accepted")
	}
}

// TestMailboxExampleBuildsCleanly builds the README's example input
// against the example's Message table offline.
func TestMailboxExampleBuildsCleanly(t *testing.T) {
	def, err := os.ReadFile("../../../examples/mailbox/Message.json")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := ParseSpec(def)
	if err != nil {
		t.Fatal(err)
	}
	tg, err := NewTarget("MailboxDB", "Message", 8, 1, spec)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	m, err := runBuild(t, tg, out, Config{}, "../../../examples/mailbox/messages.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if m.Records != 300 || m.Rejected != 0 {
		t.Fatalf("%d records, %d rejected", m.Records, m.Rejected)
	}
	for _, f := range m.Files {
		if f.Records == 0 {
			t.Fatalf("partition %d is empty: the example should reach every partition", f.Partition)
		}
	}
}
