package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/doppio-db/doppio/client/wire"
	"github.com/doppio-db/doppio/internal/bulk"
	"github.com/doppio-db/doppio/internal/bulk/builder"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/schema"
)

const bulkSchema = `{"type":"record","name":"M","fields":[{"name":"body","type":"string"},{"name":"n","type":"long"},{"name":"tag","type":"string","index":"attribute"}]}`

// buildJSONL builds lines (JSON Lines records) for table db.table, of
// the key and document schema given, in a database of partitions
// partitions, and returns the build's directory.
func buildJSONL(t *testing.T, db, table string, partitions int, key []schema.KeyPart, docSchema, lines string) string {
	t.Helper()
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(in, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	tg, err := builder.NewTarget(db, table, partitions, 1, builder.Spec{Key: key, Schema: json.RawMessage(docSchema)})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "build")
	if _, err := builder.Build(context.Background(), builder.Config{Target: tg, Inputs: []builder.Input{{Path: in, Format: builder.JSONLines}}, Out: out}); err != nil {
		t.Fatal(err)
	}
	return out
}

// buildBulk writes a build of records k00000… of database B's table
// table (partitions partitions) and returns its directory: record i has
// n = i, tag t(i%5) and a body of about 1.5 KB, so each partition's file
// takes several chunks.
func buildBulk(t *testing.T, table string, partitions, records int) string {
	t.Helper()
	var b strings.Builder
	pad := strings.Repeat("x", 1500)
	for i := range records {
		fmt.Fprintf(&b, `{"id":"k%05d","body":"%d %s","n":%d,"tag":"t%d"}`+"\n", i, i, pad, i, i%5)
	}
	return buildJSONL(t, "B", table, partitions, []schema.KeyPart{{Name: "id", Type: "string"}}, bulkSchema, b.String())
}

// loadedWrite is an acknowledged write to a key the build also loads.
type loadedWrite struct {
	n   int64
	scn partition.SCN
}

// TestBulkLoadSurvivesKill9UnderConcurrentWrites loads a build into a
// 3-node cluster (3 replicas) while clients write, kills -9 a partition's
// leader mid-load and restarts it: the load ends done with every record
// present, every acknowledged write intact (a write to a loaded key is
// never overwritten by a chunk applied before it), replicas identical and
// the index answering as a scan does. The same cluster then loads a
// build over http and replaces a table (replaceOnCluster).
func TestBulkLoadSurvivesKill9UnderConcurrentWrites(t *testing.T) {
	const partitions, records = 4, 8000
	nodes := startCluster(t)
	n1 := nodes[0]
	n1.must(201, "PUT", "/_schemas/B", map[string]any{"partitions": partitions, "replicas": 3})
	n1.must(201, "PUT", "/_schemas/B/M", map[string]any{"key": []map[string]string{{"name": "id", "type": "string"}}, "schema": json.RawMessage(bulkSchema)})
	waitFor(t, 60*time.Second, "partitions settled", func() (bool, string) { return settled(clusterInfo(t, n1), partitions, 3) })
	// A build for another partition count is refused, naming the field,
	// as a conflict (exit 4).
	if out, code := runCLI(t, n1.addr, "bulk", "load", buildBulk(t, "M", partitions-1, 10)); code != 4 ||
		!strings.Contains(out, fmt.Sprintf("the build has %d partitions, database B has %d", partitions-1, partitions)) {
		t.Fatalf("doppio bulk load of a 3-partition build exited %d:\n%s", code, out)
	}
	dir := buildBulk(t, "M", partitions, records)
	m, err := bulk.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, f := range m.Files {
		total += f.Bytes
	}

	// Writers: distinct keys through every node, and now and then a key
	// the build loads, each remembered with its SCN when acknowledged.
	var (
		stop     atomic.Bool
		wg       sync.WaitGroup
		mu       sync.Mutex
		acked    = map[string]int64{}
		onLoaded = map[string][]loadedWrite{}
		tried    = map[string][]int64{} // every n written to a loaded key, acknowledged or not
		written  []string               // every other key written, acknowledged or not
		live     atomic.Pointer[[]*clusterNode]
	)
	live.Store(&nodes)
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := 0; !stop.Load(); i++ {
				ns := *live.Load()
				n := ns[i%len(ns)]
				id, val, loaded := fmt.Sprintf("w%d-%05d", w, i), int64(i), false
				if w == 2 {
					id, val, loaded = fmt.Sprintf("k%05d", rng.IntN(records)), -int64(i)-1, true
					mu.Lock()
					tried[id] = append(tried[id], val)
					mu.Unlock()
					time.Sleep(20 * time.Millisecond)
				} else {
					mu.Lock()
					written = append(written, id)
					mu.Unlock()
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				status, h, _, err := n.try(ctx, "PUT", "/B/M/"+id, map[string]any{"body": "written", "n": val, "tag": "w"})
				cancel()
				if err != nil || (status != 200 && status != 201) {
					continue
				}
				mu.Lock()
				if loaded {
					s, err := partition.ParseSCN(h.Get("X-Doppio-SCN"))
					if err != nil {
						t.Errorf("write %s: SCN %q: %v", id, h.Get("X-Doppio-SCN"), err)
					}
					onLoaded[id] = append(onLoaded[id], loadedWrite{val, s})
				} else {
					acked[id] = val
				}
				mu.Unlock()
			}
		}()
	}

	// About a dozen seconds of loading, spread over three nodes.
	throttle := max(total/12, 64<<10)
	var l wire.Load
	if err := json.Unmarshal(n1.must(202, "POST", "/_bulk/loads", map[string]any{"source": dir, "throttle": throttle}), &l); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the load under way", func() (bool, string) {
		json.Unmarshal(n1.must(200, "GET", "/_bulk/loads/"+l.ID, nil), &l)
		return l.State == wire.LoadLoading && l.Bytes > 0, fmt.Sprintf("%s %d/%d", l.State, l.Bytes, l.TotalBytes)
	})
	if l.Bytes >= l.TotalBytes/2 {
		t.Fatalf("the load is already %d of %d bytes in: the throttle did not hold", l.Bytes, l.TotalBytes)
	}
	info := clusterInfo(t, n1)
	if len(info.Loads) != 1 || info.Loads[0].ID != l.ID {
		t.Fatalf("/_cluster loads: %+v", info.Loads)
	}
	var victim *clusterNode
	for _, p := range info.Partitions {
		if p.Partition == 0 {
			for _, n := range nodes {
				if n.id == p.Leader {
					victim = n
				}
			}
		}
	}
	if victim == nil {
		t.Fatal("partition 0 has no leader")
	}
	var others []*clusterNode
	for _, n := range nodes {
		if n != victim {
			others = append(others, n)
		}
	}
	live.Store(&others)
	t.Logf("killing %s at %d of %d bytes", victim.id, l.Bytes, l.TotalBytes)
	victim.kill()
	time.Sleep(2 * time.Second)
	victim.restart(t)
	live.Store(&nodes)

	waitFor(t, 120*time.Second, "the load done", func() (bool, string) {
		json.Unmarshal(others[0].must(200, "GET", "/_bulk/loads/"+l.ID, nil), &l)
		return l.State == wire.LoadDone, fmt.Sprintf("%s %d/%d %+v", l.State, l.Bytes, l.TotalBytes, l.Partitions)
	})
	stop.Store(true)
	wg.Wait()
	if l.Records != records || l.PartitionsDone != partitions {
		t.Fatalf("done load: %+v", l)
	}

	// Every record and every acknowledged write, read back.
	type doc struct {
		N   int64  `json:"n"`
		Tag string `json:"tag"`
	}
	tags := map[string]string{}
	read := func(id string) (doc, partition.SCN) {
		status, h, b, err := n1.try(context.Background(), "GET", "/B/M/"+id, nil)
		if _, ok := acked[id]; !ok && strings.HasPrefix(id, "w") && status == 404 {
			return doc{}, partition.SCN{} // a write whose answer was lost, not applied
		}
		if err != nil || status != 200 {
			t.Fatalf("GET %s: %d %s %v", id, status, b, err)
		}
		var d doc
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatal(err)
		}
		s, _ := partition.ParseSCN(h.Get("X-Doppio-SCN"))
		tags[id] = d.Tag
		return d, s
	}
	for i := range records {
		id := fmt.Sprintf("k%05d", i)
		d, s := read(id)
		ws := onLoaded[id]
		if len(ws) == 0 {
			// Loaded, or written by a write whose answer was lost.
			if (d.N != int64(i) || d.Tag != fmt.Sprintf("t%d", i%5)) && !slices.Contains(tried[id], d.N) {
				t.Fatalf("%s: %+v, want the loaded n=%d", id, d, i)
			}
			continue
		}
		last := ws[0]
		for _, w := range ws[1:] {
			if last.scn.Less(w.scn) {
				last = w
			}
		}
		switch {
		case d.N == int64(i):
			// The chunk came after every acknowledged write to the key.
			if !last.scn.Less(s) {
				t.Fatalf("%s: the load's value at %s overwrote the write acknowledged at %s", id, s, last.scn)
			}
		case d.N == last.n:
		default:
			// A later write whose answer was lost may have landed.
			later := false
			for _, n := range tried[id] {
				later = later || (n == d.N && n < last.n)
			}
			if !later {
				t.Fatalf("%s: n=%d, want the load's %d or the last acknowledged write's %d", id, d.N, i, last.n)
			}
		}
	}
	for _, id := range written {
		d, _ := read(id)
		if n, ok := acked[id]; ok && d.N != n {
			t.Fatalf("acknowledged write %s: n=%d, want %d", id, d.N, n)
		}
	}
	t.Logf("%d records loaded, %d writes on other keys and %d on loaded keys acknowledged", records, len(acked), len(onLoaded))

	// The index answers as the scan above does.
	for _, tag := range []string{"t0", "t3", "w"} {
		want := 0
		for _, tg := range tags {
			if tg == tag {
				want++
			}
		}
		got, cursor := 0, ""
		for {
			path := "/B/M?limit=1000&query=" + url.QueryEscape("tag:"+tag)
			if cursor != "" {
				path += "&cursor=" + url.QueryEscape(cursor)
			}
			var page struct {
				Documents []struct {
					Key      []string `json:"key"`
					Document doc      `json:"document"`
				} `json:"documents"`
				Next string `json:"next"`
			}
			if err := json.Unmarshal(n1.must(200, "GET", path, nil), &page); err != nil {
				t.Fatal(err)
			}
			for _, d := range page.Documents {
				if tags[d.Key[0]] != tag || d.Document.Tag != tag {
					t.Fatalf("query tag:%s answered %s with tag %s (scan: %s)", tag, d.Key[0], d.Document.Tag, tags[d.Key[0]])
				}
			}
			got += len(page.Documents)
			if cursor = page.Next; cursor == "" {
				break
			}
		}
		if got != want {
			t.Fatalf("query tag:%s answered %d documents, the scan finds %d", tag, got, want)
		}
	}

	if out, code := runCLI(t, n1.addr, "check", "B"); code != 0 || !strings.Contains(out, fmt.Sprintf("%d consistent", partitions)) {
		t.Fatalf("doppio check B exited %d:\n%s", code, out)
	}
	if out, code := runCLI(t, n1.addr, "bulk", "status", l.ID); code != 0 || !strings.Contains(out, "done") || !strings.Contains(out, fmt.Sprintf("%d / %d records", records, records)) {
		t.Fatalf("doppio bulk status exited %d:\n%s", code, out)
	}
	loadOverHTTP(t, n1, partitions)
	replaceOnCluster(t, nodes, partitions)
}

// loadOverHTTP loads a build of B.M served by a plain static file server
// and reads it back.
func loadOverHTTP(t *testing.T, n1 *clusterNode, partitions int) {
	t.Helper()
	var b strings.Builder
	for i := range 300 {
		fmt.Fprintf(&b, `{"id":"h%05d","body":"over http","n":%d,"tag":"h"}`+"\n", i, 1000+i)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(buildJSONL(t, "B", "M", partitions, []schema.KeyPart{{Name: "id", Type: "string"}}, bulkSchema, b.String()))))
	defer srv.Close()
	if out, code := runCLI(t, n1.addr, "bulk", "load", srv.URL+"/", "--wait"); code != 0 || !strings.Contains(out, "done") {
		t.Fatalf("doppio bulk load over http exited %d:\n%s", code, out)
	}
	for i := range 300 {
		var d struct{ N int }
		if err := json.Unmarshal(n1.must(200, "GET", fmt.Sprintf("/B/M/h%05d", i), nil), &d); err != nil || d.N != 1000+i {
			t.Fatalf("h%05d: n=%d (%v), want %d", i, d.N, err, 1000+i)
		}
	}
}

const replaceSchema = `{"type":"record","name":"R","fields":[{"name":"v","type":"long","index":"attribute"}]}`

// replaceOnCluster replaces B.R, whose groups g0…g7 hold o0…o9 at v=1,
// by a build whose groups hold n0…n14 at v=2, while a reader lists group
// g3 (one partition) and a writer adds w0, w1, … to group g5: every
// listing is the old group or the new, never a mix; the writes before
// the swap are gone and those after it stay, one cut in g5's timeline;
// the table ends holding the build and what was written after, on
// identical replicas.
func replaceOnCluster(t *testing.T, nodes []*clusterNode, partitions int) {
	t.Helper()
	n1 := nodes[0]
	key := []schema.KeyPart{{Name: "g", Type: "string"}, {Name: "id", Type: "string"}}
	n1.must(201, "PUT", "/_schemas/B/R", map[string]any{"key": key, "schema": json.RawMessage(replaceSchema)})
	for g := range 8 {
		for o := range 10 {
			n1.must(201, "PUT", fmt.Sprintf("/B/R/g%d/o%d", g, o), map[string]any{"v": 1})
		}
	}
	var b strings.Builder
	for g := range 8 {
		for i := range 15 {
			fmt.Fprintf(&b, `{"g":"g%d","id":"n%d","v":2}`+"\n", g, i)
		}
	}
	dir := buildJSONL(t, "B", "R", partitions, key, replaceSchema, b.String())

	type page struct {
		Documents []struct {
			Key      []string        `json:"key"`
			Document struct{ V int } `json:"document"`
		} `json:"documents"`
	}
	list := func(n *clusterNode, g string) (ids []string, vs map[int]bool) {
		var p page
		status, _, body, err := n.try(context.Background(), "GET", "/B/R/"+g+"?limit=1000", nil)
		if err != nil || status != 200 || json.Unmarshal(body, &p) != nil {
			return nil, nil
		}
		vs = map[int]bool{}
		for _, d := range p.Documents {
			ids = append(ids, d.Key[1])
			vs[d.Document.V] = true
		}
		return ids, vs
	}
	var (
		stop       atomic.Bool
		wg         sync.WaitGroup
		olds, news atomic.Int64
		mixed      atomic.Pointer[string]
		mu         sync.Mutex
		acked      []int // writer's acknowledged w-ids, in order
	)
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			ids, vs := list(nodes[i%len(nodes)], "g3")
			switch {
			case ids == nil:
			case len(ids) == 10 && len(vs) == 1 && vs[1] && strings.HasPrefix(ids[0], "o"):
				olds.Add(1)
			case len(ids) == 15 && len(vs) == 1 && vs[2] && strings.HasPrefix(ids[0], "n"):
				news.Add(1)
			default:
				s := fmt.Sprintf("%v with v in %v", ids, vs)
				mixed.Store(&s)
			}
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			status, _, _, err := nodes[i%len(nodes)].try(context.Background(), "PUT", fmt.Sprintf("/B/R/g5/w%04d", i), map[string]any{"v": 3})
			if err == nil && (status == 200 || status == 201) {
				mu.Lock()
				acked = append(acked, i)
				mu.Unlock()
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	waitFor(t, 10*time.Second, "the reader sees the old group", func() (bool, string) { return olds.Load() > 0, "" })
	out, code := runCLI(t, n1.addr, "bulk", "load", dir, "--mode", "replace", "--wait")
	if code != 0 || !strings.Contains(out, "done") {
		t.Fatalf("doppio bulk load --mode replace exited %d:\n%s", code, out)
	}
	waitFor(t, 10*time.Second, "the reader sees the new group", func() (bool, string) { return news.Load() > 0, "" })
	time.Sleep(200 * time.Millisecond) // writes after the swap
	stop.Store(true)
	wg.Wait()
	if m := mixed.Load(); m != nil {
		t.Fatalf("a listing of g3 mixed the old and the new: %s", *m)
	}

	// g5: the acknowledged writes that stay are a suffix of them.
	ids, _ := list(n1, "g5")
	kept := map[string]bool{}
	for _, id := range ids {
		kept[id] = true
	}
	cut := -1
	for i, w := range acked {
		if kept[fmt.Sprintf("w%04d", w)] && cut < 0 {
			cut = i
		}
		if !kept[fmt.Sprintf("w%04d", w)] && cut >= 0 {
			t.Fatalf("w%04d, acknowledged after the kept w%04d, is gone: the writes before the swap are not one prefix", w, acked[cut])
		}
	}
	if cut <= 0 {
		t.Fatalf("of %d acknowledged writes to g5, the swap replaced none or all (cut %d): the writer did not race it", len(acked), cut)
	}
	if want := 15 + len(acked) - cut; len(ids) < want {
		t.Fatalf("g5 holds %d documents, want the 15 loaded and %d written after the swap", len(ids), len(acked)-cut)
	}
	for g := range 8 {
		ids, vs := list(n1, fmt.Sprintf("g%d", g))
		if g != 5 && (len(ids) != 15 || len(vs) != 1 || !vs[2]) {
			t.Fatalf("g%d after the replace: %v with v in %v", g, ids, vs)
		}
	}
	if out, code := runCLI(t, n1.addr, "check", "B"); code != 0 || !strings.Contains(out, fmt.Sprintf("%d consistent", partitions)) {
		t.Fatalf("doppio check B after the replace exited %d:\n%s", code, out)
	}
	t.Logf("replace: %d listings old, %d new; %d of %d writes to g5 replaced", olds.Load(), news.Load(), cut, len(acked))
}
