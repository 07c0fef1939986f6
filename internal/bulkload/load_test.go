package bulkload_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/doppio-db/doppio/client"
	"github.com/doppio-db/doppio/client/changes"
	"github.com/doppio-db/doppio/internal/bulk"
	"github.com/doppio-db/doppio/internal/bulk/builder"
	"github.com/doppio-db/doppio/internal/embedetcd"
	"github.com/doppio-db/doppio/internal/node"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/schema"
	"github.com/doppio-db/doppio/internal/storage"
	"github.com/doppio-db/doppio/internal/testwait"
)

const messageSchema = `{"type":"record","name":"M","fields":[{"name":"body","type":"string"},{"name":"n","type":"long"}]}`

// cluster is one real node (embedded etcd, Pebble) with database D of
// partitions partitions and table M.
type cluster struct {
	t    *testing.T
	ctx  context.Context
	cfg  node.Config
	n    *node.Node // nil while stopped
	c    *client.Client
	data string // the node's data directory
}

func startCluster(t *testing.T, cfg node.Config, partitions int) *cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	quiet := slog.New(slog.DiscardHandler)
	dir := t.TempDir()
	etcd, err := embedetcd.Start(ctx, filepath.Join(dir, "etcd"), quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { etcd.Close() })
	cfg.ID, cfg.DataDir, cfg.HTTPAddr, cfg.EtcdEndpoints, cfg.Logger = "a", filepath.Join(dir, "a"), "127.0.0.1:0", etcd.Endpoints(), quiet
	cl := &cluster{t: t, ctx: ctx, cfg: cfg, data: cfg.DataDir}
	cl.start()
	t.Cleanup(func() {
		if cl.n != nil {
			cl.n.Close()
		}
	})
	c := cl.c
	if _, _, err := c.PutDatabase(ctx, "D", client.DatabaseSpec{Partitions: partitions, Replicas: 1}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.PutTable(ctx, "D", "M", client.TableSpec{Key: []client.KeyPart{{Name: "id", Type: "string"}}, Schema: json.RawMessage(messageSchema)}); err != nil {
		t.Fatal(err)
	}
	return cl
}

// start starts the node (again, after stop).
func (c *cluster) start() {
	c.t.Helper()
	n, err := node.Start(c.ctx, c.cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	c.n, c.c = n, client.New("http://"+n.Addr())
}

// stop stops the node.
func (c *cluster) stop() {
	c.t.Helper()
	if err := c.n.Close(); err != nil {
		c.t.Fatal(err)
	}
	c.n = nil
}

// storedKeys counts the keys of the stopped node's store that name
// stored table table.
func (c *cluster) storedKeys(table string) int {
	c.t.Helper()
	e, err := storage.Open(filepath.Join(c.data, "pebble"), storage.Options{CacheBytes: 8 << 20})
	if err != nil {
		c.t.Fatal(err)
	}
	defer e.Close()
	it, err := e.NewIter(nil, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if bytes.Contains(it.Key(), []byte(table)) {
			n++
		}
	}
	return n
}

// build writes a build of docs ("id" → n) for table table of D with
// partitions partitions at schema version version, and returns its dir.
func build(t *testing.T, table string, partitions, version int, docs map[string]int) string {
	t.Helper()
	return buildPadded(t, table, partitions, version, docs, 0)
}

// buildPadded is build with each document's body pad bytes longer.
func buildPadded(t *testing.T, table string, partitions, version int, docs map[string]int, pad int) string {
	t.Helper()
	padding := strings.Repeat("x", pad)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	var sb strings.Builder
	for id, n := range docs {
		fmt.Fprintf(&sb, `{"id":%q,"body":"body of %s%s","n":%d}`+"\n", id, id, padding, n)
	}
	if err := os.WriteFile(in, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	tg, err := builder.NewTarget("D", table, partitions, version, builder.Spec{
		Key: []schema.KeyPart{{Name: "id", Type: "string"}}, Schema: json.RawMessage(messageSchema),
	})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "build")
	if _, err := builder.Build(context.Background(), builder.Config{Target: tg, Inputs: []builder.Input{{Path: in, Format: builder.JSONLines}}, Out: out}); err != nil {
		t.Fatal(err)
	}
	return out
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func docs(from, to, n int) map[string]int {
	m := map[string]int{}
	for i := from; i < to; i++ {
		m[fmt.Sprintf("k%05d", i)] = n
	}
	return m
}

// wait waits for load id to end and returns it.
func (c *cluster) wait(id string) client.Load {
	c.t.Helper()
	var l client.Load
	testwait.Until(c.t, 60*time.Second, "load "+id+" ends", func() bool {
		var err error
		l, err = c.c.GetLoad(c.ctx, id)
		if err != nil {
			c.t.Fatal(err)
		}
		return l.State == client.LoadDone || l.State == client.LoadCancelled || l.State == client.LoadFailed
	})
	return l
}

// check asserts the table holds exactly want (id → n) among the keys
// k00000 to k00999 every build here draws from, and returns how many.
func (c *cluster) check(want map[string]int) int {
	c.t.Helper()
	seen := 0
	for i := range 1000 {
		id := fmt.Sprintf("k%05d", i)
		d, err := c.c.Get(c.ctx, "D", "M", client.Key{id})
		n, ok := want[id]
		switch {
		case client.IsNotFound(err) && !ok:
			continue
		case err != nil:
			c.t.Fatalf("%s: %v (want n=%d, present %v)", id, err, n, ok)
		}
		var v struct{ N int }
		if err := json.Unmarshal(d.Body, &v); err != nil || !ok || v.N != n {
			c.t.Fatalf("%s has n=%d (%v), want %d (present %v)", id, v.N, err, n, ok)
		}
		seen++
	}
	return seen
}

func TestLoadFromADirectoryThenOverHTTPMergesByKey(t *testing.T) {
	c := startCluster(t, node.Config{}, 4)
	first := docs(0, 600, 1)
	dir := build(t, "M", 4, 1, first)
	l, started, err := c.c.StartLoad(c.ctx, client.LoadRequest{Source: dir})
	if err != nil || !started {
		t.Fatalf("start: %v (started %v)", err, started)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, bulk.ManifestName))
	if l.ID != sha256Hex(raw) || l.TotalRecords != 600 || l.TotalPartitions != 4 {
		t.Fatalf("load %+v: want the manifest's digest, 600 records in 4 partitions", l)
	}
	if l = c.wait(l.ID); l.State != client.LoadDone || l.Records != 600 || l.PartitionsDone != 4 || l.Bytes != l.TotalBytes {
		t.Fatalf("load ended %+v", l)
	}
	c.check(first)
	// This node applied every chunk: /metrics and the audit log say so.
	res, err := http.Get("http://" + c.n.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if want := fmt.Sprintf("doppio_bulk_load_applied_records_total{load=%q} 600\n", l.ID); !strings.Contains(string(metrics), want) {
		t.Fatalf("/metrics lacks %q", want)
	}
	auditLog, _ := os.ReadFile(filepath.Join(c.data, "audit.log"))
	if !strings.Contains(string(auditLog), `"action":"bulk.load.end","target":"`+l.ID+`","outcome":"success"`) {
		t.Fatalf("audit log lacks the load's end:\n%s", auditLog)
	}

	// The same build again: the load as it is, done at once.
	again, started, err := c.c.StartLoad(c.ctx, client.LoadRequest{Source: "file://" + dir})
	if err != nil || started || again.State != client.LoadDone || again.ID != l.ID {
		t.Fatalf("second start of the same build: %+v started=%v err=%v", again, started, err)
	}

	// An overlapping build over http: loaded keys replace, others stay.
	second := docs(400, 1000, 2)
	srv := httptest.NewServer(http.FileServer(http.Dir(build(t, "M", 4, 1, second))))
	defer srv.Close()
	l2, started, err := c.c.StartLoad(c.ctx, client.LoadRequest{Source: srv.URL + "/", Throttle: 10 << 20})
	if err != nil || !started {
		t.Fatalf("start over http: %v", err)
	}
	if l2 = c.wait(l2.ID); l2.State != client.LoadDone || l2.Records != 600 {
		t.Fatalf("http load ended %+v", l2)
	}
	want := docs(0, 400, 1)
	for k, v := range second {
		want[k] = v
	}
	c.check(want)
	ls, err := c.c.ListLoads(c.ctx)
	if err != nil || len(ls) != 2 || ls[0].ID != l.ID || ls[1].ID != l2.ID || ls[1].Partitions != nil {
		t.Fatalf("list: %+v %v", ls, err)
	}
}

func TestLoadRefusesABuildThatDoesNotFit(t *testing.T) {
	c := startCluster(t, node.Config{}, 4)
	refuse := func(name string, req client.LoadRequest, status int, field, detail string) {
		t.Helper()
		_, _, err := c.c.StartLoad(c.ctx, req)
		var pe *client.Error
		if !errors.As(err, &pe) || pe.Status != status || pe.Field != field || !strings.Contains(pe.Detail, detail) {
			t.Fatalf("%s: %v (%+v), want %d on %q saying %q", name, err, pe, status, field, detail)
		}
	}
	some := docs(0, 50, 1)
	refuse("partition count", client.LoadRequest{Source: build(t, "M", 3, 1, some)}, 409, "partitions", "the build has 3 partitions, database D has 4")
	refuse("table", client.LoadRequest{Source: build(t, "Other", 4, 1, some)}, 404, "table", "D.Other, which does not exist")
	refuse("schema version", client.LoadRequest{Source: build(t, "M", 4, 2, some)}, 409, "schemaVersion", "schema version 2 of D.M, whose registered versions are 1 to 1")
	refuse("mode", client.LoadRequest{Source: build(t, "M", 4, 1, some), Mode: "upsert"}, 400, "mode", `mode "upsert" is not a load mode`)
	refuse("no manifest", client.LoadRequest{Source: t.TempDir()}, 422, "source", "manifest")
	refuse("relative", client.LoadRequest{Source: "some/dir"}, 400, "source", "give an absolute directory")

	// A checksum that lies: refused before anything is applied.
	dir := build(t, "M", 4, 1, some)
	m, err := bulk.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(dir, m.Files[2].Path)
	b, _ := os.ReadFile(f)
	b[len(b)-3] ^= 0xff
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
	l, _, err := c.c.StartLoad(c.ctx, client.LoadRequest{Source: dir})
	if err != nil {
		t.Fatal(err)
	}
	l = c.wait(l.ID)
	if l.State != client.LoadFailed || !strings.Contains(l.Error, "partition 2: ") || !strings.Contains(l.Error, "has sha256") || l.Records != 0 {
		t.Fatalf("corrupt build: %+v", l)
	}
	c.check(map[string]int{})
}

func TestCancelLeavesEachPartitionLoadedOrUntouched(t *testing.T) {
	c := startCluster(t, node.Config{BulkParallel: 1}, 4)
	all := docs(0, 1000, 7)
	dir := build(t, "M", 4, 1, all)
	m, err := bulk.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	// About two seconds a partition, one partition at a time.
	l, _, err := c.c.StartLoad(c.ctx, client.LoadRequest{Source: dir, Throttle: m.Files[0].Bytes / 2})
	if err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 30*time.Second, "a partition loading", func() bool {
		l, _ = c.c.GetLoad(c.ctx, l.ID)
		for _, p := range l.Partitions {
			if p.State == "loading" {
				return true
			}
		}
		return false
	})
	if _, err := c.c.CancelLoad(c.ctx, l.ID); err != nil {
		t.Fatal(err)
	}
	l = c.wait(l.ID)
	if l.State != client.LoadCancelled {
		t.Fatalf("cancelled load ended %+v", l)
	}
	done := 0
	for _, p := range l.Partitions {
		switch p.State {
		case "done":
			done++
		case "skipped":
		default:
			t.Fatalf("partition %d ended %s", p.Partition, p.State)
		}
	}
	if done == 0 || done == 4 {
		t.Fatalf("%d partitions done: the cancel should have come while one was loading and others waited", done)
	}
	got := 0
	for _, p := range l.Partitions {
		if p.State == "done" {
			got += int(p.Records)
		}
	}
	if l.Records != uint64(got) {
		t.Fatalf("records %d, done partitions hold %d", l.Records, got)
	}
	// The documents present are exactly some of the build's, as many as
	// the done partitions hold.
	present := map[string]int{}
	for k, v := range all {
		if _, err := c.c.Get(c.ctx, "D", "M", client.Key{k}); err == nil {
			present[k] = v
		} else if !client.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	if n := c.check(present); n != got {
		t.Fatalf("the table holds %d documents, the done partitions %d", n, got)
	}
	// Starting the cancelled build again finishes it.
	if _, started, err := c.c.StartLoad(c.ctx, client.LoadRequest{Source: dir}); err != nil || !started {
		t.Fatalf("restart: %v", err)
	}
	if l = c.wait(l.ID); l.State != client.LoadDone {
		t.Fatalf("restarted load ended %+v", l)
	}
	c.check(all)
}

// A replace load leaves the table holding exactly the build's documents:
// those written before it are gone, a write after it stays. The change
// stream carries one replace event per partition and none of the loaded
// documents, and re-reading a replaced partition answers its loaded
// documents.
func TestReplaceLoadSwapsEachPartitionAndMarksTheChangeStream(t *testing.T) {
	c := startCluster(t, node.Config{}, 4)
	l, _, err := c.c.StartLoad(c.ctx, client.LoadRequest{Source: build(t, "M", 4, 1, docs(0, 300, 1))})
	if err != nil {
		t.Fatal(err)
	}
	if l = c.wait(l.ID); l.State != client.LoadDone {
		t.Fatalf("merge load ended %+v", l)
	}
	stream, err := changes.Open(c.ctx, c.c, "D", changes.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	put := func(id string, n int) {
		t.Helper()
		if _, err := c.c.Put(c.ctx, "D", "M", client.Key{id}, map[string]any{"body": "written", "n": n}); err != nil {
			t.Fatal(err)
		}
	}
	put("k00999", 5) // before the replace: replaced

	dir := build(t, "M", 4, 1, docs(200, 500, 2))
	raw, _ := os.ReadFile(filepath.Join(dir, bulk.ManifestName))
	l, started, err := c.c.StartLoad(c.ctx, client.LoadRequest{Source: dir, Mode: "replace"})
	if err != nil || !started || l.Mode != "replace" || l.ID == sha256Hex(raw) {
		t.Fatalf("start replace: %+v started=%v err=%v (a merge of the build is another load)", l, started, err)
	}
	if l = c.wait(l.ID); l.State != client.LoadDone || l.Records != 300 || l.PartitionsDone != 4 {
		t.Fatalf("replace load ended %+v", l)
	}
	c.check(docs(200, 500, 2))
	put("k00999", 6) // after the replace: kept
	want := docs(200, 500, 2)
	want["k00999"] = 6
	c.check(want)

	// The stream: the write before, a replace per partition, the write
	// after; nothing of the loaded documents.
	var replaced []*changes.Event
	var writes []int
	for len(writes) < 2 {
		line, err := stream.Next()
		if err != nil {
			t.Fatalf("stream after %d replace events and writes %v: %v", len(replaced), writes, err)
		}
		e := line.Event
		switch {
		case e == nil:
		case e.Op == changes.OpReplace:
			if e.Table != "M" || e.Key != nil || string(e.After) != "null" || len(writes) != 1 {
				t.Fatalf("replace event %+v after writes %v", e, writes)
			}
			replaced = append(replaced, e)
		case len(e.Key) == 1 && e.Key[0] == "k00999":
			var d struct{ N int }
			json.Unmarshal(e.After, &d)
			writes = append(writes, d.N)
		default:
			t.Fatalf("unexpected event %+v", e)
		}
	}
	if len(replaced) != 4 || writes[0] != 5 || writes[1] != 6 {
		t.Fatalf("%d replace events, writes %v", len(replaced), writes)
	}
	reread := map[string]int{}
	for _, e := range replaced {
		err := changes.Reread(c.ctx, c.c, "D", e, func(s *changes.Event) error {
			var d struct{ N int }
			if err := json.Unmarshal(s.After, &d); err != nil {
				return err
			}
			if s.Partition != e.Partition || !s.Snapshot {
				return fmt.Errorf("re-read of partition %d answered %+v", e.Partition, s)
			}
			reread[s.Key[0].(string)] = d.N
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(reread) != len(want) {
		t.Fatalf("re-reading the replaced partitions found %d documents, want %d", len(reread), len(want))
	}
	for k, n := range want {
		if reread[k] != n {
			t.Fatalf("re-read %s: n=%d, want %d", k, reread[k], n)
		}
	}
}

// A replace load that fails after its partition staged chunks (the file
// changed under it; the node that restarts refuses its copy) deletes the
// staging from the store and leaves the table as it was; the same build,
// mended and loaded again, stages from the start and swaps.
func TestReplaceLoadThatFailsAfterStagingDiscardsTheStaging(t *testing.T) {
	c := startCluster(t, node.Config{}, 1)
	old := docs(0, 100, 1)
	l, _, err := c.c.StartLoad(c.ctx, client.LoadRequest{Source: build(t, "M", 1, 1, old)})
	if err != nil {
		t.Fatal(err)
	}
	if l = c.wait(l.ID); l.State != client.LoadDone {
		t.Fatalf("merge load ended %+v", l)
	}

	// Four chunks of about 1 MiB; the throttle spaces them by seconds.
	all := docs(0, 1000, 2)
	dir := buildPadded(t, "M", 1, 1, all, 3500)
	m, err := bulk.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	l, _, err = c.c.StartLoad(c.ctx, client.LoadRequest{Source: dir, Mode: "replace", Throttle: 512 << 10})
	if err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 30*time.Second, "the partition staged a chunk", func() bool {
		l, err = c.c.GetLoad(c.ctx, l.ID)
		if err != nil {
			t.Fatal(err)
		}
		return l.Partitions[0].State == "loading" && l.Partitions[0].Bytes > 0
	})
	c.stop()
	staging := partition.StagingTable("M", l.ID)
	if n := c.storedKeys(staging); n == 0 {
		t.Fatalf("nothing of %s is stored while the partition loads", staging)
	}
	f := filepath.Join(dir, m.Files[0].Path)
	good, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(good)
	bad[len(bad)-3] ^= 0xff
	if err := os.WriteFile(f, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	c.start()

	var lp client.LoadPartition
	testwait.Until(t, 30*time.Second, "the load fails and its staging is discarded", func() bool {
		l, err = c.c.GetLoad(c.ctx, l.ID)
		if err != nil {
			t.Fatal(err)
		}
		lp = l.Partitions[0]
		return l.State == client.LoadFailed && l.Discarding == 0
	})
	if lp.State != "failed" || lp.Staging != "discarded" || !strings.Contains(l.Error, "has sha256") {
		t.Fatalf("failed load %+v, partition %+v", l, lp)
	}
	c.check(old)
	c.stop()
	if n := c.storedKeys(staging); n != 0 {
		t.Fatalf("%d keys of %s are stored after the discard", n, staging)
	}

	// Mended, the same load runs again: from the start, to the swap.
	if err := os.WriteFile(f, good, 0o644); err != nil {
		t.Fatal(err)
	}
	c.start()
	again, started, err := c.c.StartLoad(c.ctx, client.LoadRequest{Source: dir, Mode: "replace"})
	if err != nil || !started || again.ID != l.ID {
		t.Fatalf("restart: %+v started=%v err=%v", again, started, err)
	}
	if l = c.wait(l.ID); l.State != client.LoadDone || l.Records != 1000 || l.Discarding != 0 || l.Partitions[0].Staging != "" {
		t.Fatalf("restarted load ended %+v", l)
	}
	c.check(all)
	c.stop()
	if n := c.storedKeys(staging); n != 0 {
		t.Fatalf("%d keys of %s are stored after the swap", n, staging)
	}
}
