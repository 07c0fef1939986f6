package e2e

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/doppio-db/doppio/internal/bulk"
	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/schema"
	"github.com/doppio-db/doppio/internal/sparktest"
)

// TestSparkBuildMatchesTheGoRules builds the same inputs (JSON Lines, CSV,
// Avro, Parquet; valid records, records each refused for a precise reason,
// a key given three times) with the Spark job in local mode, for the
// MailboxDB Message table and a table of every Avro type with a two-part
// integer key, and requires what Doppio's own packages make of them:
// byte-identical partition files (keys.EncodeTuple, schema.Table.Encode,
// keys.PartitionOf, bulk.Writer), the exact rejects, and a manifest that
// bulk.ParseManifest accepts whose counts and checksums are the files'.
func TestSparkBuildMatchesTheGoRules(t *testing.T) {
	env := sparktest.Prepare(t)
	for _, c := range []*bulkCase{messageCase(t), readingCase(t)} {
		t.Run(c.table, func(t *testing.T) {
			dir := t.TempDir()
			c.inputs = c.writeInputs(t, env, dir)
			args := []string{"--db", c.db, "--table", c.table, "--schema-file", c.schemaFile(t, dir),
				"--schema-version", "1", "--partitions", strconv.Itoa(c.partitions)}
			sparkOut, goOut := filepath.Join(dir, "spark"), filepath.Join(dir, "go")
			env.Build(t, append(c.inputArgs(bulkFormats), append(args, "--out", sparkOut)...)...)
			goArgs := append([]string{"bulk", "build", "--out", goOut}, append(args, c.inputArgs(bulkFormats)...)...)
			if out, err := exec.Command(binary, goArgs...).CombinedOutput(); err != nil {
				t.Fatalf("doppio bulk build: %v\n%s", err, out)
			}
			spark := c.check(t, "Spark", sparkOut, bulkFormats)
			gob := c.check(t, "Go", goOut, bulkFormats)
			spark.Builder, gob.Builder = "", ""
			if !reflect.DeepEqual(spark, gob) {
				t.Errorf("the manifests differ beyond the builder's name\nSpark: %+v\n   Go: %+v", spark, gob)
			}
		})
	}
}

// bulkCase is one table's build: its definition and its input records,
// each with the reason it is refused for ("" when it loads).
type bulkCase struct {
	db, table  string
	def        string // the table definition, as PUT /_schemas takes it
	partitions int
	records    []bulkRecord
	// avroSchema is the Avro inputs' writer schema; parquet the Parquet
	// inputs' columns (name, type as e2e/testdata/bulk_inputs.py names it).
	avroSchema string
	parquet    [][2]string
	compiled   *schema.Table
	inputs     []string // the inputs' paths, in bulkFormats order
}

// inputArgs are the --input flags of the inputs of formats.
func (c *bulkCase) inputArgs(formats []string) []string {
	var args []string
	for _, f := range formats {
		args = append(args, "--input", c.inputs[slices.Index(bulkFormats, f)])
	}
	return args
}

type bulkRecord struct {
	format string         // jsonl, csv, avro or parquet
	doc    map[string]any // the record in its JSON form (numbers as json.Number)
	line   string         // jsonl: the line as is, when not doc's JSON
	cells  map[string]string
	reject string
}

// rec parses a record's JSON form.
func rec(t *testing.T, format, js, reject string) bulkRecord {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(js))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("bad test record %s: %v", js, err)
	}
	return bulkRecord{format: format, doc: m, reject: reject}
}

var bulkFormats = []string{"jsonl", "csv", "avro", "parquet"}

func (c *bulkCase) inputName(format string) string {
	return map[string]string{"jsonl": "records.jsonl", "csv": "records.csv", "avro": "records.avro", "parquet": "records.parquet"}[format]
}

func (c *bulkCase) schemaFile(t *testing.T, dir string) string {
	p := filepath.Join(dir, c.table+".json")
	if err := os.WriteFile(p, []byte(c.def), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeInputs writes one input per format (JSON Lines and CSV here, Avro
// and Parquet with fastavro and pyarrow) and returns their paths in order.
func (c *bulkCase) writeInputs(t *testing.T, env *sparktest.Env, dir string) []string {
	t.Helper()
	var jsonl bytes.Buffer
	var csvRows [][]string
	header := c.csvHeader()
	spec := map[string]any{}
	var avroRows, parquetRows []map[string]any
	for _, r := range c.records {
		switch r.format {
		case "jsonl":
			line := r.line
			if line == "" {
				b, err := json.Marshal(r.doc)
				if err != nil {
					t.Fatal(err)
				}
				line = string(b)
			}
			jsonl.WriteString(line + "\n")
		case "csv":
			row := make([]string, len(header))
			for i, h := range header {
				if cell, ok := r.cells[h]; ok {
					row[i] = cell
				} else if v, ok := r.doc[h]; ok {
					row[i] = csvCell(t, v)
				}
			}
			csvRows = append(csvRows, row)
		case "avro":
			avroRows = append(avroRows, r.doc)
		case "parquet":
			parquetRows = append(parquetRows, r.doc)
		}
	}
	paths := make([]string, len(bulkFormats))
	for i, f := range bulkFormats {
		paths[i] = filepath.Join(dir, c.inputName(f))
	}
	if err := os.WriteFile(paths[0], jsonl.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var cb bytes.Buffer
	w := csv.NewWriter(&cb)
	w.Write(header)
	w.WriteAll(csvRows)
	if err := os.WriteFile(paths[1], cb.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var avroSchema any
	if err := json.Unmarshal([]byte(c.avroSchema), &avroSchema); err != nil {
		t.Fatal(err)
	}
	cols := []map[string]string{}
	for _, col := range c.parquet {
		cols = append(cols, map[string]string{"name": col[0], "type": col[1]})
	}
	spec["avro"] = map[string]any{"path": paths[2], "schema": avroSchema, "rows": avroRows}
	spec["parquet"] = map[string]any{"path": paths[3], "columns": cols, "rows": parquetRows}
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	specPath := filepath.Join(dir, "spec.json")
	if err := os.WriteFile(specPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	env.Python(t, filepath.Join(env.Root, "e2e", "testdata", "bulk_inputs.py"), specPath)
	return paths
}

// csvHeader is the key parts, then the document's fields, then any other
// name a CSV record uses.
func (c *bulkCase) csvHeader() []string {
	var def struct {
		Key    []struct{ Name string }
		Schema struct{ Fields []struct{ Name string } }
	}
	json.Unmarshal([]byte(c.def), &def)
	var h []string
	seen := map[string]bool{}
	add := func(n string) {
		if !seen[n] {
			seen[n] = true
			h = append(h, n)
		}
	}
	for _, k := range def.Key {
		add(k.Name)
	}
	for _, f := range def.Schema.Fields {
		add(f.Name)
	}
	for _, r := range c.records {
		if r.format == "csv" {
			for _, k := range slices.Sorted(maps.Keys(r.doc)) {
				add(k)
			}
		}
	}
	return h
}

// csvCell is a value as the CSV rule reads it back: a string as is,
// anything else as its JSON.
func csvCell(t *testing.T, v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	if v == nil {
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

type bulkReject struct {
	Input  string `json:"input"`
	Record int    `json:"record"`
	Reason string `json:"reason"`
}

// expected computes, with Doppio's packages, the partition files and the
// rejects the inputs must give.
func (c *bulkCase) expected(t *testing.T, formats []string) (files [][]byte, rejects []bulkReject) {
	t.Helper()
	type kv struct{ key, doc []byte }
	byKey := map[string][]int{}
	var loaded []kv
	var where []bulkReject
	ordinal := map[string]int{}
	for _, r := range c.records {
		ordinal[r.format]++
		if !slices.Contains(formats, r.format) {
			continue
		}
		at := bulkReject{Input: c.inputs[slices.Index(bulkFormats, r.format)], Record: ordinal[r.format]}
		if r.reject != "" {
			at.Reason = r.reject
			rejects = append(rejects, at)
			c.checkReason(t, r)
			continue
		}
		key, doc := c.encode(t, r.doc)
		byKey[string(key)] = append(byKey[string(key)], len(loaded))
		loaded = append(loaded, kv{key, doc})
		where = append(where, at)
	}
	parts := make([][]kv, c.partitions)
	for i, r := range loaded {
		if len(byKey[string(r.key)]) > 1 {
			w := where[i]
			w.Reason = "duplicate key"
			rejects = append(rejects, w)
			continue
		}
		pk, _, err := keys.DecodeOne(r.key)
		if err != nil {
			t.Fatal(err)
		}
		enc, _ := keys.EncodeTuple(keys.Tuple{pk})
		p := keys.PartitionOf(enc, c.partitions)
		parts[p] = append(parts[p], r)
	}
	for _, recs := range parts {
		sort.Slice(recs, func(i, j int) bool { return bytes.Compare(recs[i].key, recs[j].key) < 0 })
		var b bytes.Buffer
		w := bulk.NewWriter(&b)
		for _, r := range recs {
			if err := w.Write(bulk.Record{Key: r.key, Doc: r.doc}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		files = append(files, b.Bytes())
	}
	return files, rejects
}

// encode is a valid record's key and document as a PUT stores them.
func (c *bulkCase) encode(t *testing.T, rec map[string]any) (key, doc []byte) {
	t.Helper()
	rest := maps.Clone(rec)
	var parts []any
	for _, k := range c.compiled.Def.Key {
		parts = append(parts, rest[k.Name])
		delete(rest, k.Name)
	}
	tuple, err := c.compiled.ParseKeyJSON(parts)
	if err != nil {
		t.Fatalf("test record %v: key: %v", rec, err)
	}
	if key, err = keys.EncodeTuple(tuple); err != nil {
		t.Fatal(err)
	}
	d, err := c.compiled.Normalize(rest)
	if err != nil {
		t.Fatalf("test record %v: %v", rec, err)
	}
	if doc, err = c.compiled.Encode(d); err != nil {
		t.Fatal(err)
	}
	return key, doc
}

// checkReason holds a JSON record's expected reason to what the schema
// package says of it, where the schema package decides (a present key of
// the wrong type, a document that fails its schema).
func (c *bulkCase) checkReason(t *testing.T, r bulkRecord) {
	t.Helper()
	if r.format != "jsonl" || r.line != "" {
		return
	}
	rest := maps.Clone(r.doc)
	var parts []any
	for _, k := range c.compiled.Def.Key {
		v, ok := rest[k.Name]
		if !ok {
			return
		}
		parts = append(parts, v)
		delete(rest, k.Name)
	}
	_, err := c.compiled.ParseKeyJSON(parts)
	if err == nil {
		_, err = c.compiled.Normalize(rest)
	}
	var pe *problem.Error
	if !errors.As(err, &pe) {
		t.Fatalf("record %v: the schema package accepts it (%v), the test expects %q", r.doc, err, r.reject)
	}
	if pe.Detail != r.reject {
		t.Fatalf("record %v: the schema package says %q, the test expects %q", r.doc, pe.Detail, r.reject)
	}
}

// check compares the build in out, made by builder from the inputs of
// formats, with what Doppio's packages make of them, and returns its
// manifest.
func (c *bulkCase) check(t *testing.T, builder, out string, formats []string) *bulk.Manifest {
	t.Helper()
	files, rejects := c.expected(t, formats)
	var inputs []string
	for _, f := range formats {
		inputs = append(inputs, c.inputs[slices.Index(bulkFormats, f)])
	}
	m, err := bulk.ReadManifest(out)
	if err != nil {
		t.Fatalf("the %s build's manifest: %v", builder, err)
	}
	if m.Database != c.db || m.Table != c.table || m.SchemaVersion != 1 || m.Partitions != c.partitions {
		t.Fatalf("%s: manifest names %s/%s v%d in %d partitions, want %s/%s v1 in %d", builder, m.Database, m.Table, m.SchemaVersion, m.Partitions, c.db, c.table, c.partitions)
	}
	var records int64
	for p, want := range files {
		got, err := os.ReadFile(filepath.Join(out, bulk.FileName(p)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: partition %d: %d bytes, Doppio's encoding gives %d; first difference at byte %d\n%s", builder, p, len(got), len(want), firstDiff(got, want), describeDPB(got, want))
		}
		if err := bulk.VerifyFile(out, m.Files[p]); err != nil {
			t.Errorf("%s: partition %d: %v", builder, p, err)
		}
		n, err := countRecords(want)
		if err != nil {
			t.Fatal(err)
		}
		if m.Files[p].Records != n {
			t.Errorf("%s: manifest: partition %d holds %d records, want %d", builder, p, m.Files[p].Records, n)
		}
		records += n
	}
	if m.Records != records || m.Rejected != int64(len(rejects)) {
		t.Errorf("%s: manifest counts %d records and %d rejects, want %d and %d", builder, m.Records, m.Rejected, records, len(rejects))
	}
	if want := inputFingerprint(t, inputs); m.InputFingerprint != want {
		t.Errorf("%s: manifest inputFingerprint %s, want %s", builder, m.InputFingerprint, want)
	}
	got := readRejects(t, filepath.Join(out, bulk.RejectsName))
	if !slices.Equal(sortedRejects(got), sortedRejects(rejects)) {
		t.Errorf("%s: rejects differ\n got: %v\nwant: %v", builder, sortedRejects(got), sortedRejects(rejects))
	}
	return m
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// describeDPB lists the first records that differ between two partition
// files, to say which document the builders disagree on.
func describeDPB(got, want []byte) string {
	g, w := bulk.NewReader(bytes.NewReader(got)), bulk.NewReader(bytes.NewReader(want))
	var sb strings.Builder
	for i := 1; i < 1000; i++ {
		a, errA := g.Next()
		b, errB := w.Next()
		if errA != nil || errB != nil {
			fmt.Fprintf(&sb, "record %d: got error %v, want error %v\n", i, errA, errB)
			return sb.String()
		}
		if !bytes.Equal(a.Key, b.Key) || !bytes.Equal(a.Doc, b.Doc) {
			fmt.Fprintf(&sb, "record %d:\n got key %x doc %x\nwant key %x doc %x\n", i, a.Key, a.Doc, b.Key, b.Doc)
			return sb.String()
		}
	}
	return sb.String()
}

func countRecords(b []byte) (int64, error) {
	r := bulk.NewReader(bytes.NewReader(b))
	var n int64
	for {
		_, err := r.Next()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return 0, err
		}
		n++
	}
}

func readRejects(t *testing.T, path string) []bulkReject {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []bulkReject
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if line == "" {
			continue
		}
		var r bulkReject
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("rejects line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

func sortedRejects(rs []bulkReject) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = fmt.Sprintf("%s#%d: %s", r.Input, r.Record, r.Reason)
	}
	slices.Sort(out)
	return out
}
