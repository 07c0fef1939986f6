package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"math/bits"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/doppio-db/doppio/client/export"
	"github.com/doppio-db/doppio/internal/changes/checkpoint"
)

// exportDB is the MailboxDB example with a table holding every Avro type.
const exportDB = "MailboxDB"

// exportTable is a table of the export tests: its key part names, in
// order, and its Avro record schema.
type exportTable struct {
	key    []string
	schema json.RawMessage
}

// exportFixture is a database loaded for the export tests and what the
// database holds: its tables and every document, by table and key path.
type exportFixture struct {
	t      *testing.T
	n      *devNode
	tables map[string]exportTable
	// docs are the keys written, as "table/k1/k2" paths.
	docs map[string][]any
}

func (f *exportFixture) path(table string, key []any) string {
	p := "/" + exportDB + "/" + table
	for _, k := range key {
		p += "/" + url.PathEscape(fmt.Sprint(k))
	}
	return p
}

// write sends one document write and fails the test on an unexpected
// status; safe from any goroutine (it returns the error).
func (f *exportFixture) write(method, table string, key []any, body any) error {
	st, _, b, err := f.n.try(context.Background(), method, f.path(table, key), body, "X-Doppio-Timeout", "10s")
	if err != nil {
		return err
	}
	if st >= 300 {
		return fmt.Errorf("%s %s: %d %s", method, f.path(table, key), st, b)
	}
	return nil
}

// read returns the document at key as the database renders it, nil when
// absent.
func (f *exportFixture) read(table string, key []any) (map[string]any, error) {
	st, _, b, err := f.n.try(context.Background(), "GET", f.path(table, key), nil)
	if err != nil {
		return nil, err
	}
	if st == 404 {
		return nil, nil
	}
	if st != 200 {
		return nil, fmt.Errorf("GET %s: %d %s", f.path(table, key), st, b)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var doc map[string]any
	return doc, d.Decode(&doc)
}

// decimalBytes is the shortest big-endian two's complement of n, as Avro
// decimals carry their unscaled value.
func decimalBytes(n int64) []byte {
	m := n
	if m < 0 {
		m = ^m
	}
	b := make([]byte, bits.Len64(uint64(m))/8+1)
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = byte(n)
		n >>= 8
	}
	return b
}

// everythingDoc is a document of the Everything table drawn from r.
func everythingDoc(r *rand.Rand) map[string]any {
	b64 := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		return base64.StdEncoding.EncodeToString(b)
	}
	doc := map[string]any{
		"flag":     r.IntN(2) == 0,
		"small":    r.IntN(1<<31) - 1<<30,
		"big":      r.Int64() - 1<<62,
		"ratio":    float64(r.IntN(801)-400) / 4, // exact in a float
		"score":    float64(r.IntN(100001)-50000) / 8,
		"label":    fmt.Sprintf("label \"%d\" é\t%d", r.IntN(1000), r.IntN(10)),
		"blob":     b64(r.IntN(9)),
		"color":    []string{"RED", "GREEN", "BLUE"}[r.IntN(3)],
		"hash":     b64(4),
		"day":      r.IntN(40000),
		"at":       1_500_000_000_000 + r.Int64N(400_000_000_000),
		"atMicros": 1_500_000_000_000_000 + r.Int64N(400_000_000_000_000),
		"price":    base64.StdEncoding.EncodeToString(decimalBytes(r.Int64N(200_000_000) - 100_000_000)),
		"id":       fmt.Sprintf("%08x-0000-4000-8000-%012x", r.Uint32(), r.Int64N(1<<48)),
		"tags":     []string{},
		"attrs":    map[string]any{},
		"home":     map[string]any{"city": fmt.Sprintf("city %d", r.IntN(50)), "zip": nil},
		"past":     []any{},
		"note":     nil,
		"either":   nil,
	}
	for i := range r.IntN(4) {
		doc["tags"] = append(doc["tags"].([]string), fmt.Sprintf("t%d", i+r.IntN(9)))
		doc["attrs"].(map[string]any)[fmt.Sprintf("k%d", i)] = r.Int64N(1000) - 500
		doc["past"] = append(doc["past"].([]any), map[string]any{"city": fmt.Sprintf("old %d", i), "zip": r.IntN(99999)})
	}
	if r.IntN(2) == 0 {
		doc["note"] = fmt.Sprintf("note %d", r.IntN(100))
		doc["home"].(map[string]any)["zip"] = r.IntN(99999)
	}
	switch r.IntN(3) {
	case 0:
		doc["either"] = r.Int64N(1 << 40)
	case 1:
		doc["either"] = fmt.Sprintf("either %d", r.IntN(100))
	}
	return doc
}

func messageDoc(box, i int, r *rand.Rand) map[string]any {
	return map[string]any{
		"subject": fmt.Sprintf("subject %d of mailbox %d", i, box), "body": strings.Repeat("body ", r.IntN(20)),
		"senderId": fmt.Sprintf("user%d", r.IntN(30)), "folder": []string{"inbox", "archive", "spam"}[r.IntN(3)],
		"isInbox": r.IntN(2) == 0, "unread": r.IntN(2) == 0, "createdOn": 1_700_000_000_000 + int64(box*1000+i),
	}
}

// loadExportFixture creates MailboxDB (examples/mailbox plus the
// Everything table) on n and writes a few thousand documents.
func loadExportFixture(t *testing.T, n *devNode) *exportFixture {
	t.Helper()
	if out, code := runCLI(t, n.addr, "schema", "apply", "../examples/mailbox"); code != 0 {
		t.Fatalf("schema apply: %s", out)
	}
	everything, err := os.ReadFile("testdata/export/Everything.json")
	if err != nil {
		t.Fatal(err)
	}
	n.must(201, "PUT", "/_schemas/"+exportDB+"/Everything", string(everything))
	f := &exportFixture{t: t, n: n, tables: map[string]exportTable{}, docs: map[string][]any{}}
	for _, name := range []string{"Mailbox", "Message", "Everything"} {
		var tb struct {
			Key    []struct{ Name string }
			Schema json.RawMessage
		}
		if err := json.Unmarshal(n.must(200, "GET", "/_schemas/"+exportDB+"/"+name, nil), &tb); err != nil {
			t.Fatal(err)
		}
		et := exportTable{schema: tb.Schema}
		for _, k := range tb.Key {
			et.key = append(et.key, k.Name)
		}
		f.tables[name] = et
	}
	type put struct {
		table string
		key   []any
		doc   any
	}
	var puts []put
	r := rand.New(rand.NewPCG(29, 4))
	for box := range 40 {
		mb := fmt.Sprintf("mb-%03d", box)
		puts = append(puts, put{"Mailbox", []any{mb}, map[string]any{"unreadCount": r.Int64N(60), "totalCount": 60, "pendingInvites": r.IntN(3)}})
		for i := 1; i <= 60; i++ {
			puts = append(puts, put{"Message", []any{mb, int64(i)}, messageDoc(box, i, r)})
		}
	}
	for o := range 20 {
		for i := 1; i <= 20; i++ {
			puts = append(puts, put{"Everything", []any{fmt.Sprintf("o-%02d", o), int64(i)}, everythingDoc(r)})
		}
	}
	work := make(chan put)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				if err := f.write("PUT", p.table, p.key, p.doc); err != nil {
					errs <- err
					for range work {
					}
					return
				}
			}
		}()
	}
	for _, p := range puts {
		work <- p
		f.docs[p.table+"\x00"+fmt.Sprint(p.key...)] = append([]any{p.table}, p.key...)
	}
	close(work)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	return f
}

// snapshot returns every document the database holds, as export rows
// render them (key parts by name, then the fields), by row key.
func (f *exportFixture) snapshot() map[string]map[string]any {
	f.t.Helper()
	out := map[string]map[string]any{}
	for _, d := range f.docs {
		table, key := d[0].(string), d[1:]
		doc, err := f.read(table, key)
		if err != nil {
			f.t.Fatal(err)
		}
		if doc == nil {
			continue
		}
		row := map[string]any{}
		for i, k := range f.tables[table].key {
			row[k] = key[i]
		}
		for k, v := range doc {
			row[k] = v
		}
		out[f.rowKey(table, row)] = canon(row).(map[string]any)
	}
	return out
}

// rowKey identifies a row by table and key parts.
func (f *exportFixture) rowKey(table string, row map[string]any) string {
	k := table
	for _, name := range f.tables[table].key {
		k += "/" + fmt.Sprint(canon(row[name]))
	}
	return k
}

// canon makes JSON values comparable whatever wrote them: every number
// becomes its exact rational ("1.50" and "1.5", "0.0" and "0" are equal),
// every integer-typed Go value too.
func canon(v any) any {
	switch x := v.(type) {
	case json.Number:
		r, ok := new(big.Rat).SetString(string(x))
		if !ok {
			return string(x)
		}
		return "#" + r.RatString()
	case int:
		return "#" + strconv.Itoa(x)
	case int64:
		return "#" + strconv.FormatInt(x, 10)
	case float64:
		return "#" + new(big.Rat).SetFloat64(x).RatString()
	case []string:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = e
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = canon(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = canon(e)
		}
		return out
	}
	return v
}

// exportedRow is one row a third-party reader read from an export.
type exportedRow struct {
	Table string
	File  string
	Row   map[string]any
}

// readExport reads the export in dir with reader (pyarrow, duckdb,
// fastavro or json) through testdata/export/read_export.py.
func (f *exportFixture) readExport(python, reader, dir string) []exportedRow {
	f.t.Helper()
	schemas := map[string]json.RawMessage{}
	for name, t := range f.tables {
		schemas[name] = t.schema
	}
	js, _ := json.Marshal(schemas)
	sp := filepath.Join(f.t.TempDir(), "schemas.json")
	if err := os.WriteFile(sp, js, 0o644); err != nil {
		f.t.Fatal(err)
	}
	cmd := exec.Command(python, "testdata/export/read_export.py", reader, dir, sp)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		f.t.Fatalf("read_export.py %s %s: %v\n%s", reader, dir, err, stderr.Bytes())
	}
	var rows []exportedRow
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		d := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		d.UseNumber()
		var r exportedRow
		if err := d.Decode(&r); err != nil {
			f.t.Fatalf("%s: %v", sc.Text(), err)
		}
		rows = append(rows, r)
	}
	return rows
}

// runExport runs `doppio export` and returns its manifest, checking each
// file's size and SHA-256 and that every table and partition has one.
func (f *exportFixture) runExport(dir string, args ...string) export.Manifest {
	f.t.Helper()
	out, code := runCLI(f.t, f.n.addr, append([]string{"export", exportDB, "--to", dir}, args...)...)
	if code != 0 {
		f.t.Fatalf("doppio export %v: exit %d\n%s", args, code, out)
	}
	return checkManifest(f.t, dir)
}

func checkManifest(t *testing.T, dir string) export.Manifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m export.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var rows int64
	for i, p := range m.Partitions {
		if p.Partition != i || p.SCN == "" || len(p.Files) != len(m.Tables) {
			t.Fatalf("manifest partition %d: %+v", i, p)
		}
		for j, fl := range p.Files {
			if want := fmt.Sprintf("%s/p-%05d.%s", m.Tables[j].Name, i, m.FileFormat); fl.Path != want {
				t.Fatalf("partition %d file %d is %s, want %s", i, j, fl.Path, want)
			}
			data, err := os.ReadFile(filepath.Join(dir, fl.Path))
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(data)
			if int64(len(data)) != fl.Bytes || hex.EncodeToString(sum[:]) != fl.SHA256 {
				t.Fatalf("%s: %d bytes sha256 %x; the manifest says %d bytes, %s", fl.Path, len(data), sum, fl.Bytes, fl.SHA256)
			}
		}
		rows += p.Rows
	}
	if rows != m.Rows || m.Checkpoint == "" || m.Format != export.ManifestFormat {
		t.Fatalf("manifest: %d rows in partitions, %d in total, checkpoint %q, format %q", rows, m.Rows, m.Checkpoint, m.Format)
	}
	return m
}

// readersOf names the third-party readers of a file format.
var readersOf = map[string][]string{"parquet": {"pyarrow", "duckdb"}, "avro": {"fastavro"}, "jsonl": {"json"}}

// TestExportReadByThirdPartyToolsMatchesTheDatabase loads MailboxDB with
// a table of every Avro type into `doppio dev`, exports it in each
// format, and has pyarrow, DuckDB, fastavro and Python's json read every
// row back equal to the database's documents; then chains change exports
// (--since) across updates, deletes and inserts, some made while the
// exports run, and finds every write exactly once.
func TestExportReadByThirdPartyToolsMatchesTheDatabase(t *testing.T) {
	python := exportPython(t)
	n := startDev(t, t.TempDir())
	f := loadExportFixture(t, n)
	want := f.snapshot()
	if len(want) != 40+40*60+20*20 {
		t.Fatalf("the fixture holds %d documents", len(want))
	}
	base := t.TempDir()
	var cp0 string
	for _, format := range []string{"parquet", "avro", "jsonl"} {
		dir := filepath.Join(base, "snap-"+format)
		m := f.runExport(dir, "--format", format, "--parallel", "3", "--throttle", "64MB")
		if m.Kind != export.Snapshot || m.Rows != int64(len(want)) || len(m.Partitions) != 8 || len(m.Tables) != 3 {
			t.Fatalf("%s manifest: kind %s, %d rows (want %d), %d partitions, %d tables", format, m.Kind, m.Rows, len(want), len(m.Partitions), len(m.Tables))
		}
		for _, tb := range m.Tables {
			if tb.SchemaVersion != 1 || len(tb.Key) != len(f.tables[tb.Name].key) {
				t.Fatalf("manifest table %+v", tb)
			}
		}
		// Nothing was written between the exports: the same point.
		if cp0 == "" {
			cp0 = m.Checkpoint
		} else if m.Checkpoint != cp0 {
			t.Fatalf("%s export's checkpoint %s differs from the first's %s with no write between", format, m.Checkpoint, cp0)
		}
		for _, reader := range readersOf[format] {
			got := map[string]map[string]any{}
			for _, r := range f.readExport(python, reader, dir) {
				k := f.rowKey(r.Table, r.Row)
				if _, dup := got[k]; dup {
					t.Fatalf("%s read %s twice", reader, k)
				}
				got[k] = canon(r.Row).(map[string]any)
			}
			compareRows(t, format+"/"+reader, got, want)
		}
	}

	// Changes made after the snapshot, read back by each format.
	r := rand.New(rand.NewPCG(29, 5))
	w := newChangeWriter(f, r)
	for range 300 {
		if err := w.step(); err != nil {
			t.Fatal(err)
		}
	}
	var cp1 string
	for _, format := range []string{"parquet", "avro", "jsonl"} {
		dir := filepath.Join(base, "changes-"+format)
		m := f.runExport(dir, "--format", format, "--since", cp0)
		if m.Kind != export.Changes || m.Since != cp0 {
			t.Fatalf("%s change manifest: kind %s since %q", format, m.Kind, m.Since)
		}
		if cp1 == "" {
			cp1 = m.Checkpoint
		} else if m.Checkpoint != cp1 {
			t.Fatalf("%s change export's checkpoint differs with no write between", format)
		}
		for _, reader := range readersOf[format] {
			w.compare(t, format+"/"+reader, [][]exportedRow{f.readExport(python, reader, dir)}, w.log)
		}
	}

	// Exports chained while a writer runs: each write in exactly one.
	w.log = nil
	stop := make(chan struct{})
	werr := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				werr <- nil
				return
			default:
			}
			if err := w.step(); err != nil {
				werr <- err
				return
			}
		}
	}()
	var chain [][]exportedRow
	cp := cp1
	for i, format := range []string{"jsonl", "avro", "parquet"} {
		if i == 2 {
			close(stop)
			if err := <-werr; err != nil {
				t.Fatal(err)
			}
		} else {
			time.Sleep(300 * time.Millisecond)
		}
		dir := filepath.Join(base, fmt.Sprintf("chain-%d", i))
		m := f.runExport(dir, "--format", format, "--since", cp, "--parallel", "4")
		cp = m.Checkpoint
		chain = append(chain, f.readExport(python, readersOf[format][0], dir))
	}
	if len(w.log) < 50 {
		t.Fatalf("the writer made only %d changes during the chained exports", len(w.log))
	}
	w.compare(t, "chained exports", chain, w.log)
	// Nothing written since: an empty export that keeps the checkpoint.
	m := f.runExport(filepath.Join(base, "chain-empty"), "--format", "jsonl", "--since", cp)
	if m.Rows != 0 || m.Checkpoint != cp {
		t.Fatalf("an export with no change since: %d rows, checkpoint %s (want %s)", m.Rows, m.Checkpoint, cp)
	}

	// Throttled, an export reads no faster than asked: at 2 KB/s, the
	// Mailbox rows' bytes (less than the stream carries) take their time.
	start := time.Now()
	m = f.runExport(filepath.Join(base, "throttled"), "--format", "jsonl", "--tables", "Mailbox", "--throttle", "2KB", "--parallel", "8")
	var fileBytes int64
	for _, p := range m.Partitions {
		fileBytes += p.Files[0].Bytes
	}
	if took, least := time.Since(start), time.Duration(float64(fileBytes-1000)/2000*float64(time.Second)); m.Rows != 40 || took < least {
		t.Fatalf("a throttled export of %d rows, %d bytes took %s, less than %s", m.Rows, fileBytes, took, least)
	}

	t.Run("bad input", func(t *testing.T) { checkExportBadInput(t, f) })
}

func compareRows(t *testing.T, what string, got, want map[string]map[string]any) {
	t.Helper()
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Fatalf("%s: row %s missing", what, k)
		}
		if !reflect.DeepEqual(g, w) {
			gj, _ := json.Marshal(g)
			wj, _ := json.Marshal(w)
			t.Fatalf("%s: row %s\n got %s\nwant %s", what, k, gj, wj)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Fatalf("%s: row %s is not in the database", what, k)
		}
	}
}

// change is one write the change writer made, with the document after it.
type change struct {
	table, op string
	key       []any
	after     map[string]any // nil for a delete
}

// changeWriter makes updates, deletes and inserts on the fixture, one at
// a time, and logs each with the document it left.
type changeWriter struct {
	f       *exportFixture
	r       *rand.Rand
	live    map[string][][]any // table → keys present
	nextMsg int64
	log     []change
	start   time.Time
}

func newChangeWriter(f *exportFixture, r *rand.Rand) *changeWriter {
	w := &changeWriter{f: f, r: r, live: map[string][][]any{}, nextMsg: 1000, start: time.Now()}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range f.docs {
			if !yield(k) {
				return
			}
		}
	})
	for _, k := range keys {
		d := f.docs[k]
		w.live[d[0].(string)] = append(w.live[d[0].(string)], d[1:])
	}
	return w
}

func (w *changeWriter) pick(table string) (int, []any) {
	i := w.r.IntN(len(w.live[table]))
	return i, w.live[table][i]
}

func (w *changeWriter) step() error {
	var c change
	switch p := w.r.IntN(100); {
	case p < 40:
		_, key := w.pick("Message")
		c = change{table: "Message", op: "update", key: key}
		if err := w.f.write("PATCH", "Message", key, map[string]any{"$set": map[string]any{"unread": w.r.IntN(2) == 0, "folder": fmt.Sprintf("f%d", w.r.IntN(9))}}); err != nil {
			return err
		}
	case p < 60:
		key := []any{fmt.Sprintf("o-%02d", w.r.IntN(25)), int64(1 + w.r.IntN(25))}
		c = change{table: "Everything", op: "insert", key: key}
		for _, k := range w.live["Everything"] {
			if reflect.DeepEqual(k, key) {
				c.op = "update"
			}
		}
		if err := w.f.write("PUT", "Everything", key, everythingDoc(w.r)); err != nil {
			return err
		}
		if c.op == "insert" {
			w.live["Everything"] = append(w.live["Everything"], key)
		}
	case p < 85:
		table := []string{"Message", "Everything"}[w.r.IntN(2)]
		i, key := w.pick(table)
		c = change{table: table, op: "delete", key: key}
		if err := w.f.write("DELETE", table, key, nil); err != nil {
			return err
		}
		w.live[table] = slices.Delete(w.live[table], i, i+1)
	default:
		box := w.r.IntN(40)
		w.nextMsg++
		key := []any{fmt.Sprintf("mb-%03d", box), w.nextMsg}
		c = change{table: "Message", op: "insert", key: key}
		if err := w.f.write("PUT", "Message", key, messageDoc(box, int(w.nextMsg), w.r)); err != nil {
			return err
		}
		w.live["Message"] = append(w.live["Message"], key)
	}
	if c.op != "delete" {
		doc, err := w.f.read(c.table, c.key)
		if err != nil {
			return err
		}
		c.after = doc
	}
	w.log = append(w.log, c)
	return nil
}

// compare checks that the rows of the exports, in order, are the changes
// logged: per document the same operations in the same order, with the
// same after-images, each exactly once.
func (w *changeWriter) compare(t *testing.T, what string, exports [][]exportedRow, log []change) {
	t.Helper()
	type seen struct {
		seq uint64
		row map[string]any
	}
	got := map[string][]seen{}
	for _, rows := range exports {
		for _, r := range rows {
			scn, _ := r.Row["_scn"].(string)
			_, s, ok := strings.Cut(scn, ":")
			seq, err := strconv.ParseUint(s, 10, 64)
			if !ok || err != nil {
				t.Fatalf("%s: row without a valid _scn: %v", what, r.Row)
			}
			ms, err := r.Row["_mtime"].(json.Number).Int64()
			if err != nil || ms < w.start.Add(-time.Minute).UnixMilli() || ms > time.Now().Add(time.Minute).UnixMilli() {
				t.Fatalf("%s: row's _mtime %v is not the time of the test's writes", what, r.Row["_mtime"])
			}
			k := w.f.rowKey(r.Table, r.Row)
			got[k] = append(got[k], seen{seq, r.Row})
		}
	}
	want := map[string][]change{}
	for _, c := range log {
		row := map[string]any{}
		for i, k := range w.f.tables[c.table].key {
			row[k] = c.key[i]
		}
		want[w.f.rowKey(c.table, row)] = append(want[w.f.rowKey(c.table, row)], c)
	}
	for k, cs := range want {
		g := got[k]
		slices.SortStableFunc(g, func(a, b seen) int { return int(a.seq) - int(b.seq) })
		if len(g) != len(cs) {
			t.Fatalf("%s: %s changed %d times, the exports hold %d rows of it", what, k, len(cs), len(g))
		}
		for i, c := range cs {
			row := g[i].row
			if row["_op"] != c.op {
				t.Fatalf("%s: change %d of %s is %s, the export says %v", what, i, k, c.op, row["_op"])
			}
			if c.after == nil {
				continue
			}
			fields := map[string]any{}
			for name, v := range row {
				if !strings.HasPrefix(name, "_") && !slices.Contains(w.f.tables[c.table].key, name) {
					fields[name] = v
				}
			}
			if gc, wc := canon(fields), canon(c.after); !reflect.DeepEqual(gc, wc) {
				gj, _ := json.Marshal(gc)
				wj, _ := json.Marshal(wc)
				t.Fatalf("%s: change %d of %s\n got %s\nwant %s", what, i, k, gj, wj)
			}
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Fatalf("%s: the exports hold changes of %s, which was not written", what, k)
		}
	}
}

// checkExportBadInput runs exports that must be refused, each with a
// precise message, leaving the directory as it was.
func checkExportBadInput(t *testing.T, f *exportFixture) {
	base := t.TempDir()
	file := filepath.Join(base, "a-file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	full := filepath.Join(base, "full")
	if err := os.MkdirAll(full, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(full, "keep.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	other := checkpoint.Checkpoint{DB: "OtherDB", Positions: []checkpoint.Position{{Partition: 0}}}
	short := checkpoint.Checkpoint{DB: exportDB, Positions: []checkpoint.Position{{Partition: 0}}}
	fresh := filepath.Join(base, "fresh")
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown database", []string{"export", "NoSuchDB", "--to", fresh, "--format", "jsonl"}, `database "NoSuchDB" does not exist`},
		{"unknown table", []string{"export", exportDB, "--to", fresh, "--format", "parquet", "--tables", "Message,Nope"}, `table "Nope" does not exist in database "MailboxDB"`},
		{"malformed checkpoint", []string{"export", exportDB, "--to", fresh, "--format", "avro", "--since", "not-a-checkpoint"}, `--since is not an export checkpoint`},
		{"checkpoint of another database", []string{"export", exportDB, "--to", fresh, "--format", "jsonl", "--since", other.String()}, `the checkpoint is of database "OtherDB", not "MailboxDB"`},
		{"checkpoint missing partitions", []string{"export", exportDB, "--to", fresh, "--format", "jsonl", "--since", short.String()}, `the checkpoint has no position in partition 1 (database MailboxDB has 8 partitions)`},
		{"non-empty directory", []string{"export", exportDB, "--to", full, "--format", "jsonl"}, "the export directory " + full + " is not empty (it holds keep.txt)"},
		{"directory under a file", []string{"export", exportDB, "--to", filepath.Join(file, "sub"), "--format", "jsonl"}, "cannot create the export directory " + filepath.Join(file, "sub") + ": " + file + " is not a directory"},
		{"directory is a file", []string{"export", exportDB, "--to", file, "--format", "jsonl"}, "the export directory " + file + " is not a directory"},
		{"unknown format", []string{"export", exportDB, "--to", fresh, "--format", "csv"}, `--format "csv": want parquet, avro or jsonl`},
		{"bad throttle", []string{"export", exportDB, "--to", fresh, "--format", "jsonl", "--throttle", "fast"}, `invalid argument "fast" for "--throttle" flag: "fast" is not a size`},
	} {
		out, code := runCLI(t, f.n.addr, c.args...)
		if code == 0 || !strings.Contains(out, c.want) {
			t.Errorf("%s: exit %d, output %q; want an error saying %q", c.name, code, out, c.want)
		}
		if _, err := os.Stat(fresh); err == nil {
			t.Fatalf("%s: the refused export created %s", c.name, fresh)
		}
	}
	if ents, _ := os.ReadDir(full); len(ents) != 1 {
		t.Errorf("the refused export changed %s: %d entries", full, len(ents))
	}
}

// TestExportReadsFollowersOfACluster exports a database of three replicas
// per partition from a 3-node cluster: every partition is read from a
// follower, at the SCN that follower applied, and the rows are the
// database's documents; a change export after updates, also read from
// followers, holds exactly those updates.
func TestExportReadsFollowersOfACluster(t *testing.T) {
	const partitions = 4
	nodes := startCluster(t)
	n := nodes[0]
	n.must(201, "PUT", "/_schemas/fx", map[string]any{"partitions": partitions, "replicas": 3})
	n.must(201, "PUT", "/_schemas/fx/Counter", counterSchema)
	for i := range 200 {
		nodes[i%3].must(201, "PUT", fmt.Sprintf("/fx/Counter/g%d/%d", i%17, i), map[string]any{"n": i, "writer": "load"}, "X-Doppio-Timeout", "10s")
	}
	waitFor(t, 20*time.Second, "3 caught-up replicas and one leader per partition", func() (bool, string) {
		return settled(clusterInfo(t, nodes[1]), partitions, 3)
	})
	readRows := func(dir string, m export.Manifest) map[string]map[string]any {
		rows := map[string]map[string]any{}
		for _, p := range m.Partitions {
			if !strings.HasSuffix(p.Source, "/follower") {
				t.Fatalf("partition %d was read from %q, not a follower", p.Partition, p.Source)
			}
			b, err := os.ReadFile(filepath.Join(dir, p.Files[0].Path))
			if err != nil {
				t.Fatal(err)
			}
			for line := range strings.Lines(string(b)) {
				d := json.NewDecoder(strings.NewReader(line))
				d.UseNumber()
				var row map[string]any
				if err := d.Decode(&row); err != nil {
					t.Fatal(err)
				}
				rows[fmt.Sprintf("%s/%s", row["group"], row["id"])] = row
			}
		}
		return rows
	}

	exportRows := func(via *clusterNode, args ...string) (export.Manifest, map[string]map[string]any) {
		dir := filepath.Join(t.TempDir(), "export")
		if out, code := runCLI(t, via.addr, append([]string{"export", "fx", "--to", dir, "--format", "jsonl"}, args...)...); code != 0 {
			t.Fatalf("export %v: %s", args, out)
		}
		m := checkManifest(t, dir)
		return m, readRows(dir, m)
	}
	m, rows := exportRows(n, "--parallel", "4")
	if len(rows) != 200 || m.Rows != 200 {
		t.Fatalf("the export holds %d rows (manifest: %d), want 200", len(rows), m.Rows)
	}
	for i := range 200 {
		var doc map[string]any
		d := json.NewDecoder(bytes.NewReader(n.must(200, "GET", fmt.Sprintf("/fx/Counter/g%d/%d", i%17, i), nil)))
		d.UseNumber()
		if err := d.Decode(&doc); err != nil {
			t.Fatal(err)
		}
		row := rows[fmt.Sprintf("g%d/%d", i%17, i)]
		if row == nil || row["n"] != doc["n"] || row["writer"] != doc["writer"] || len(row) != 4 {
			t.Fatalf("row g%d/%d is %v, the database holds %v", i%17, i, row, doc)
		}
	}

	if mode.secure() {
		// Whoever may read the database may export it; nobody else.
		for _, u := range []struct{ name, role, db string }{{"reader", "read", "fx"}, {"stranger", "readWrite", "other"}} {
			n.must(201, "PUT", "/_users/"+u.name, map[string]string{"password": u.name + "-secret"})
			if st, _, b := n.do("POST", "/_users/"+u.name+"/grants", map[string]string{"role": u.role, "db": u.db}); st >= 300 {
				t.Fatalf("grant %s: %d %s", u.name, st, b)
			}
		}
		if _, got := exportRows(n, "--user", "reader", "--password", "reader-secret"); len(got) != 200 {
			t.Fatalf("the reader's export holds %d rows, want 200", len(got))
		}
		dir := filepath.Join(t.TempDir(), "refused")
		out, code := runCLI(t, n.addr, "export", "fx", "--to", dir, "--format", "jsonl", "--user", "stranger", "--password", "stranger-secret")
		if _, err := os.Stat(dir); code == 0 || err == nil || !strings.Contains(out, `user "stranger" lacks the read privilege on database fx`) {
			t.Fatalf("an export by a user who may not read fx: exit %d, %q", code, out)
		}
	}

	for i := range 60 {
		nodes[i%3].must(200, "PUT", fmt.Sprintf("/fx/Counter/g%d/%d", i%17, i), map[string]any{"n": 1000 + i, "writer": "update"}, "X-Doppio-Timeout", "10s")
	}
	cm, changed := exportRows(nodes[2], "--since", m.Checkpoint)
	if len(changed) != 60 || cm.Rows != 60 {
		t.Fatalf("the change export holds %d rows (manifest: %d), want the 60 updates", len(changed), cm.Rows)
	}
	for i := range 60 {
		row := changed[fmt.Sprintf("g%d/%d", i%17, i)]
		if row == nil || row["_op"] != "update" || row["n"] != json.Number(strconv.Itoa(1000+i)) || row["writer"] != "update" {
			t.Fatalf("change of g%d/%d is %v", i%17, i, row)
		}
	}
}
