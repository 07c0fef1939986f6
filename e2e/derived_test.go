package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/doppio-db/doppio/client/wire"
	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/schema"
	"github.com/doppio-db/doppio/internal/storage"
)

const pymkSchema = `{"type":"record","name":"Suggestion","fields":[{"name":"score","type":"long"},{"name":"v","type":"long"},{"name":"tag","type":"string","index":"attribute"}]}`

var pymkKey = []schema.KeyPart{{Name: "member", Type: "string"}, {Name: "other", Type: "string"}}

// buildPYMK writes a "people you may know" build of database V's table P
// for members [from, to), six suggestions each, every document stamped
// with v, and returns its directory.
func buildPYMK(t *testing.T, partitions, from, to, v int) string {
	t.Helper()
	var b strings.Builder
	pad := strings.Repeat("p", 300)
	for m := from; m < to; m++ {
		for o := range 6 {
			fmt.Fprintf(&b, `{"member":"m%03d","other":"o%d","score":%d,"v":%d,"tag":"t%d%s"}`+"\n", m, o, m*10+o, v, o, pad)
		}
	}
	return buildJSONL(t, "V", "P", partitions, pymkKey, pymkSchema, b.String())
}

// derivedRead is one read of the steady load: when it started and ended,
// the version it named and whether its answer belonged to that version.
type derivedRead struct {
	start, end time.Time
	version    int
	err        string
}

// TestDerivedTableVersions pushes versions of a derived table to a 3-node
// cluster under a steady read load, with a kill -9 of a node during a
// fetch: no read fails, each names one version and answers from it
// alone (gets, collections, queries over every partition), the swap
// waits for every replica and, once announced, every read answers the
// new version; rollback answers the old version again, a corrupt or
// misfit build is refused before any swap, and the expired version's
// keys are gone from the nodes' stores.
func TestDerivedTableVersions(t *testing.T) {
	const partitions = 4
	nodes := startCluster(t)
	n1 := nodes[0]
	n1.must(201, "PUT", "/_schemas/V", map[string]any{"partitions": partitions, "replicas": 3})
	n1.must(201, "PUT", "/_schemas/V/P", map[string]any{"key": pymkKey, "schema": json.RawMessage(pymkSchema), "kind": "derived"})
	waitFor(t, 60*time.Second, "partitions settled", func() (bool, string) { return settled(clusterInfo(t, n1), partitions, 3) })

	// Writes are refused; reads wait for a first version.
	if status, _, b := n1.do("PUT", "/V/P/m001/o1", map[string]any{"score": 1, "v": 0, "tag": "t"}); status != 409 || !strings.Contains(string(b), "table V.P is derived") {
		t.Fatalf("PUT to a derived table: %d %s", status, b)
	}
	if status, _, b := n1.do("POST", "/V/_txn", map[string]any{"ops": []map[string]any{{"op": "delete", "table": "P", "key": []any{"m001", "o1"}}}}); status != 409 || !strings.Contains(string(b), "derived") {
		t.Fatalf("a transaction on a derived table: %d %s", status, b)
	}
	if status, _, b := n1.do("GET", "/V/P/m001/o1", nil); status != 409 || !strings.Contains(string(b), "no current version") {
		t.Fatalf("GET before any push: %d %s", status, b)
	}
	// A build for another partition count is refused before anything.
	if out, code := runCLI(t, n1.addr, "derived", "push", "V/P", "--from", buildPYMK(t, partitions-1, 0, 5, 9)); code != 4 ||
		!strings.Contains(out, fmt.Sprintf("the build has %d partitions, database V has %d", partitions-1, partitions)) {
		t.Fatalf("push of a 3-partition build exited %d:\n%s", code, out)
	}

	// Version 1: members m000–m079.
	if out, code := runCLI(t, n1.addr, "derived", "push", "V/P", "--from", buildPYMK(t, partitions, 0, 80, 1)); code != 0 {
		t.Fatalf("push v1 exited %d:\n%s", code, out)
	}
	ranges := map[int][2]int{1: {0, 80}, 2: {20, 100}, 4: {0, 80}}
	holds := func(v, m int) bool { r, ok := ranges[v]; return ok && m >= r[0] && m < r[1] }

	// check reads through n one document, a collection or a query over
	// every partition, and says what is wrong with the answer, if anything.
	check := func(ctx context.Context, n *clusterNode, rng *rand.Rand, kind int, headers ...string) derivedRead {
		r := derivedRead{start: time.Now()}
		defer func() { r.end = time.Now() }()
		m := rng.IntN(100)
		path := fmt.Sprintf("/V/P/m%03d/o%d", m, rng.IntN(6))
		switch kind {
		case 1:
			path = fmt.Sprintf("/V/P/m%03d", m)
		case 2:
			path = "/V/P?query=*&limit=20"
		}
		status, h, b, err := n.try(ctx, "GET", path, nil, headers...)
		if err != nil {
			r.err = err.Error()
			return r
		}
		r.version, _ = strconv.Atoi(h.Get("X-Doppio-Version"))
		if r.version == 0 {
			r.err = fmt.Sprintf("GET %s on %s: %d without X-Doppio-Version: %s", path, n.id, status, b)
			return r
		}
		type doc struct {
			V int `json:"v"`
		}
		var docs []doc
		switch {
		case kind == 0 && status == 404 && !holds(r.version, m):
		case kind == 0 && status == 200:
			var d doc
			_ = json.Unmarshal(b, &d)
			if !holds(r.version, m) {
				r.err = fmt.Sprintf("version %d has no member m%03d", r.version, m)
			}
			docs = append(docs, d)
		case kind > 0 && status == 200:
			var l struct{ Documents []struct{ Document doc } }
			_ = json.Unmarshal(b, &l)
			for _, it := range l.Documents {
				docs = append(docs, it.Document)
			}
			want := 20
			if kind == 1 {
				want = 0
				if holds(r.version, m) {
					want = 6
				}
			}
			if len(docs) != want {
				r.err = fmt.Sprintf("%d documents, want %d", len(docs), want)
			}
		default:
			r.err = fmt.Sprintf("status %d: %s", status, b)
		}
		for _, d := range docs {
			if d.V != r.version {
				r.err = fmt.Sprintf("a document of version %d in an answer naming version %d", d.V, r.version)
			}
		}
		if r.err != "" {
			r.err = fmt.Sprintf("GET %s on %s: %s", path, n.id, r.err)
		}
		return r
	}
	for _, n := range nodes {
		if r := check(context.Background(), n, rand.New(rand.NewPCG(1, 1)), 2); r.err != "" || r.version != 1 {
			t.Fatalf("after push v1: %+v", r)
		}
	}

	// A steady read load through every live node.
	var (
		stop  atomic.Bool
		wg    sync.WaitGroup
		mu    sync.Mutex
		reads []derivedRead
		live  atomic.Pointer[[]*clusterNode]
		// inFlight is held by each read; the kill takes it whole, so no
		// read is ever on its way to the node it kills.
		inFlight sync.RWMutex
	)
	live.Store(&nodes)
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 3))
			for i := 0; !stop.Load(); i++ {
				inFlight.RLock()
				ns := *live.Load()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				r := check(ctx, ns[i%len(ns)], rng, w)
				cancel()
				inFlight.RUnlock()
				mu.Lock()
				reads = append(reads, r)
				mu.Unlock()
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}

	// Version 2, staged without a swap, throttled so that a node dies
	// during its fetch; a second push meanwhile is refused naming it.
	out, code := runCLI(t, n1.addr, "derived", "push", "V/P", "--from", buildPYMK(t, partitions, 20, 100, 2), "--no-swap", "--throttle", "16KB", "--detach")
	if code != 0 {
		t.Fatalf("push v2 exited %d:\n%s", code, out)
	}
	if out, code := runCLI(t, n1.addr, "derived", "push", "V/P", "--from", buildPYMK(t, partitions, 0, 5, 9)); code != 4 || !strings.Contains(out, "version 2 of V.P is fetching") {
		t.Fatalf("a second push during the first exited %d:\n%s", code, out)
	}
	victim := nodes[2]
	others := []*clusterNode{nodes[0], nodes[1]}
	inFlight.Lock()
	live.Store(&others)
	inFlight.Unlock()
	victim.kill()
	time.Sleep(time.Second)
	victim.restart(t)
	// Back in the read load once it answers a read over every partition.
	waitFor(t, 30*time.Second, "the restarted node serving", func() (bool, string) {
		r := check(context.Background(), victim, rand.New(rand.NewPCG(5, 5)), 2)
		return r.err == "", r.err
	})
	live.Store(&nodes)
	status := func() wire.DerivedTable {
		var d wire.DerivedTable
		if err := json.Unmarshal(n1.must(200, "GET", "/_derived/V/P", nil), &d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	states := func(d wire.DerivedTable) string {
		var s []string
		for _, v := range d.Versions {
			s = append(s, fmt.Sprintf("%d:%s", v.Version, v.State))
		}
		return strings.Join(s, " ")
	}
	waitFor(t, 60*time.Second, "version 2 staged", func() (bool, string) {
		d := status()
		return states(d) == "1:current 2:staged", fmt.Sprintf("%s %+v", states(d), d.Versions)
	})
	// Staged, it can be read by naming it; unnamed reads stay on 1.
	if r := check(context.Background(), n1, rand.New(rand.NewPCG(2, 2)), 2, "X-Doppio-Version", "2"); r.err != "" || r.version != 2 {
		t.Fatalf("a read naming the staged version: %+v", r)
	}
	if out, code := runCLI(t, n1.addr, "derived", "swap", "V/P"); code != 0 || !strings.Contains(out, "current version 2") || strings.Contains(out, "not yet served") {
		t.Fatalf("swap exited %d:\n%s", code, out)
	}
	announced := time.Now()
	time.Sleep(time.Second)
	stop.Store(true)
	wg.Wait()
	seen := map[int]int{}
	for _, r := range reads {
		if r.err != "" {
			t.Fatalf("read %v–%v: %s", r.start.Format(time.StampMicro), r.end.Format(time.StampMicro), r.err)
		}
		seen[r.version]++
		if r.start.After(announced) && r.version != 2 {
			t.Fatalf("a read started %v after the swap was announced answered version %d", r.start.Sub(announced), r.version)
		}
	}
	if seen[1] == 0 || seen[2] == 0 || len(seen) != 2 {
		t.Fatalf("reads by version: %v", seen)
	}
	t.Logf("%d reads: %v", len(reads), seen)

	// Rollback answers version 1's documents again, on every node;
	// roll-forward undoes it.
	for _, step := range []struct {
		verb    string
		version int
	}{{"rollback", 1}, {"roll-forward", 2}} {
		if out, code := runCLI(t, n1.addr, "derived", step.verb, "V/P"); code != 0 || !strings.Contains(out, fmt.Sprintf("current version %d", step.version)) {
			t.Fatalf("%s exited %d:\n%s", step.verb, code, out)
		}
		for _, n := range nodes {
			status, h, b := n.do("GET", "/V/P/m005/o1", nil)
			want := 404
			if step.version == 1 {
				want = 200
			}
			if status != want || h.Get("X-Doppio-Version") != strconv.Itoa(step.version) {
				t.Fatalf("after %s, GET m005/o1 on %s: %d version %q %s", step.verb, n.id, status, h.Get("X-Doppio-Version"), b)
			}
		}
	}

	// A build with a corrupt file fails before any swap.
	bad := buildPYMK(t, partitions, 0, 80, 3)
	file := filepath.Join(bad, "p-00001.dpb")
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)/2] ^= 0xff
	if err := os.WriteFile(file, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := runCLI(t, n1.addr, "derived", "push", "V/P", "--from", bad); code != 1 || !strings.Contains(out, "version 3 of V.P failed") || !strings.Contains(out, "sha256") {
		t.Fatalf("push of a corrupt build exited %d:\n%s", code, out)
	}
	if d := status(); d.Current != 2 {
		t.Fatalf("after a failed push: %s", states(d))
	}

	// Version 4 makes version 1 expire (2 kept): its keys are deleted
	// on every replica, and reads can no longer name it.
	if out, code := runCLI(t, n1.addr, "derived", "push", "V/P", "--from", buildPYMK(t, partitions, 0, 80, 4)); code != 0 {
		t.Fatalf("push v4 exited %d:\n%s", code, out)
	}
	waitFor(t, 60*time.Second, "versions 1 and 3 gone", func() (bool, string) {
		d := status()
		return states(d) == "2:backup 4:current", states(d)
	})
	if status, _, b := n1.do("GET", "/V/P/m005/o1", nil, "X-Doppio-Version", "1"); status != 410 || !strings.Contains(string(b), "version 1 of V.P cannot be read (gone)") {
		t.Fatalf("a read naming the expired version: %d %s", status, b)
	}
	if r := check(context.Background(), nodes[1], rand.New(rand.NewPCG(4, 4)), 2); r.err != "" || r.version != 4 {
		t.Fatalf("after push v4: %+v", r)
	}
	if m := string(n1.must(200, "GET", "/metrics", nil)); !strings.Contains(m, `doppio_derived_current_version{db="V",table="P"} 4`) {
		t.Fatal("/metrics lacks the current version 4")
	}
	info := clusterInfo(t, n1)
	if len(info.Derived) != 1 || info.Derived[0].Current != 4 {
		t.Fatalf("/_cluster derived: %+v", info.Derived)
	}
	// A version staged without a swap and not wanted is discarded: no
	// longer readable, deleted from every replica, and a push may follow.
	if out, code := runCLI(t, n1.addr, "derived", "discard", "V/P"); code != 4 || !strings.Contains(out, "V.P has no staged version to discard") {
		t.Fatalf("discard with nothing staged exited %d:\n%s", code, out)
	}
	if out, code := runCLI(t, n1.addr, "derived", "push", "V/P", "--from", buildPYMK(t, partitions, 40, 60, 5), "--no-swap"); code != 0 {
		t.Fatalf("push v5 exited %d:\n%s", code, out)
	}
	if status, h, _ := n1.do("GET", "/V/P/m045/o1", nil, "X-Doppio-Version", "5"); status != 200 || h.Get("X-Doppio-Version") != "5" {
		t.Fatalf("a read naming the staged version 5: %d %q", status, h.Get("X-Doppio-Version"))
	}
	if out, code := runCLI(t, n1.addr, "derived", "discard", "V/P", "--version", "4"); code != 4 || !strings.Contains(out, "version 4 of V.P is current: only a staged version is discarded") {
		t.Fatalf("discard of the current version exited %d:\n%s", code, out)
	}
	if out, code := runCLI(t, n1.addr, "derived", "discard", "V/P", "--version", "5"); code != 0 || !strings.Contains(out, "5  deleting") {
		t.Fatalf("discard of the staged version exited %d:\n%s", code, out)
	}
	waitFor(t, 60*time.Second, "version 5 gone", func() (bool, string) {
		d := status()
		return states(d) == "2:backup 4:current", states(d)
	})
	if status, _, b := n1.do("GET", "/V/P/m045/o1", nil, "X-Doppio-Version", "5"); status != 410 || !strings.Contains(string(b), "version 5 of V.P cannot be read (gone)") {
		t.Fatalf("a read naming the discarded version: %d %s", status, b)
	}
	if r := check(context.Background(), nodes[2], rand.New(rand.NewPCG(6, 6)), 2); r.err != "" || r.version != 4 {
		t.Fatalf("after the discard: %+v", r)
	}

	victim = nodes[1]
	stopCleanly(t, victim)
	data := victim.args[slices.Index(victim.args, "--data")+1]
	e, err := storage.Open(filepath.Join(data, "pebble"), storage.Options{CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	count := func(table string) int {
		n := 0
		for p := range partitions {
			pp := keys.PartitionPrefix("V", p)
			for _, start := range [][]byte{pp.Table(table), pp.IndexTable(table)} {
				it, err := e.NewIter(start, keys.PrefixEnd(start))
				if err != nil {
					t.Fatal(err)
				}
				for ok := it.First(); ok; ok = it.Next() {
					n++
				}
				it.Close()
			}
		}
		return n
	}
	if n := count("P@1"); n != 0 {
		t.Fatalf("node %s still holds %d keys of the expired version 1", victim.id, n)
	}
	if n := count("P@5"); n != 0 {
		t.Fatalf("node %s still holds %d keys of the discarded version 5", victim.id, n)
	}
	if n := count("P@4"); n < 80*6 {
		t.Fatalf("node %s holds %d keys of the current version 4", victim.id, n)
	}
}
