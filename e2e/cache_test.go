package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/doppio-db/doppio/client/wire"
	"github.com/doppio-db/doppio/internal/cache"
	"github.com/doppio-db/doppio/internal/cache/cachecheck"
	"github.com/doppio-db/doppio/internal/datastream"
	"github.com/doppio-db/doppio/internal/redistest"
)

// cacheOp is one write (or delete) of a hot key: the n it wrote, and
// when it was sent and acknowledged.
type cacheOp struct {
	n         int64
	deleted   bool
	sent, ack time.Time
}

// cacheRead is one staleness-bounded read of a hot key.
type cacheRead struct {
	key        string
	bound      time.Duration
	sent, done time.Time
	found      bool
	n          int64
	source     string
}

// cacheLoad is the test's workload: each hot key written and deleted by
// one goroutine (so its acknowledged history is a sequence), read by
// others with staleness bounds, every request through the router and
// retried the way a client does while nothing can answer it (503, 504 on
// a write that is then sent again whole, a refused connection while the
// router restarts).
type cacheLoad struct {
	base string

	mu     sync.Mutex
	ops    map[string][]cacheOp
	reads  []cacheRead
	failed []string
	stop   chan struct{}
	wg     sync.WaitGroup
}

// cacheBounds are the staleness bounds the readers ask for.
var cacheBounds = []time.Duration{300 * time.Millisecond, time.Second, 2 * time.Second}

// send runs one request until something answers it other than 503, a
// 504 or a refused connection, for at most 15 s; it returns the answer
// and when the last attempt was sent.
func (l *cacheLoad) send(method, path string, body any, headers ...string) (int, http.Header, []byte, time.Time) {
	deadline := time.Now().Add(15 * time.Second)
	for {
		sent := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		n := &devNode{addr: l.base}
		st, h, b, err := n.try(ctx, method, path, body, append(headers, "X-Doppio-Timeout", "5s")...)
		cancel()
		retry := err != nil || st == 503 || st == 504
		if !retry || time.Now().After(deadline) {
			if err != nil {
				return 0, nil, []byte(err.Error()), sent
			}
			return st, h, b, sent
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (l *cacheLoad) fail(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failed = append(l.failed, fmt.Sprintf(format, args...))
}

func (l *cacheLoad) stopped() bool {
	select {
	case <-l.stop:
		return true
	default:
		return false
	}
}

// writer owns keys: it writes each with a growing n, and deletes one
// now and then.
func (l *cacheLoad) writer(seed uint64, keys []string) {
	defer l.wg.Done()
	rng := rand.New(rand.NewPCG(seed, 1))
	n := int64(0)
	for !l.stopped() {
		key := keys[rng.IntN(len(keys))]
		n++
		op := cacheOp{n: n, deleted: rng.IntN(6) == 0}
		var st int
		var b []byte
		if op.deleted {
			st, _, b, op.sent = l.send("DELETE", "/e2e/Counter/"+key, nil)
			if st == 404 { // an attempt whose outcome was unknown did it
				st = 204
			}
		} else {
			st, _, b, op.sent = l.send("PUT", "/e2e/Counter/"+key, map[string]any{"n": n, "writer": key})
			if st == 200 {
				st = 201
			}
		}
		op.ack = time.Now()
		if want := map[bool]int{true: 204, false: 201}[op.deleted]; st != want {
			l.fail("%s %s: status %d: %s", map[bool]string{true: "DELETE", false: "PUT"}[op.deleted], key, st, b)
			continue
		}
		l.mu.Lock()
		l.ops[key] = append(l.ops[key], op)
		l.mu.Unlock()
		time.Sleep(time.Duration(10+rng.IntN(30)) * time.Millisecond)
	}
}

// reader reads random keys with random bounds.
func (l *cacheLoad) reader(seed uint64, keys []string) {
	defer l.wg.Done()
	rng := rand.New(rand.NewPCG(seed, 2))
	for !l.stopped() {
		r := cacheRead{key: keys[rng.IntN(len(keys))], bound: cacheBounds[rng.IntN(len(cacheBounds))]}
		st, h, b, sent := l.send("GET", "/e2e/Counter/"+r.key, nil, "X-Doppio-Staleness", r.bound.String())
		r.sent, r.done = sent, time.Now()
		switch st {
		case 200:
			var doc struct {
				N int64 `json:"n"`
			}
			if err := json.Unmarshal(b, &doc); err != nil {
				l.fail("GET %s: %v: %s", r.key, err, b)
				continue
			}
			r.found, r.n = true, doc.N
		case 404:
		default:
			l.fail("GET %s with staleness %s: status %d: %s", r.key, r.bound, st, b)
			continue
		}
		r.source = h.Get("X-Doppio-Cache")
		l.mu.Lock()
		l.reads = append(l.reads, r)
		l.mu.Unlock()
		time.Sleep(time.Duration(2+rng.IntN(4)) * time.Millisecond)
	}
}

// checkReads holds every read to its bound against the acknowledged
// history of its key: the latest operation acknowledged before
// sent - bound (L) must show, or a later one. A document read must be
// L's or a later write's; a 404 must have L a delete, no L at all, or a
// later delete sent before the read ended (so a deleted document never
// comes back once its bound has passed).
func checkReads(ops map[string][]cacheOp, reads []cacheRead) []string {
	var bad []string
	for _, r := range reads {
		hist := ops[r.key]
		var last *cacheOp
		for i := range hist {
			if hist[i].ack.Before(r.sent.Add(-r.bound)) {
				last = &hist[i]
			}
		}
		what := fmt.Sprintf("read of %s (bound %s, sent %s, answered by %q)", r.key, r.bound, r.sent.Format("15:04:05.000"), r.source)
		switch {
		case r.found:
			var op *cacheOp
			for i := range hist {
				if hist[i].n == r.n {
					op = &hist[i]
				}
			}
			switch {
			case op == nil || op.deleted:
				bad = append(bad, fmt.Sprintf("%s: n=%d, which no acknowledged write wrote", what, r.n))
			case last != nil && op.n < last.n:
				bad = append(bad, fmt.Sprintf("%s: n=%d, older than n=%d acknowledged at %s", what, r.n, last.n, last.ack.Format("15:04:05.000")))
			}
		case last != nil && !last.deleted:
			later := false
			for _, op := range hist {
				later = later || (op.deleted && op.n > last.n && op.sent.Before(r.done))
			}
			if !later {
				bad = append(bad, fmt.Sprintf("%s: 404, but n=%d was acknowledged at %s and no delete followed", what, last.n, last.ack.Format("15:04:05.000")))
			}
		}
	}
	return bad
}

// TestCacheTierKeepsItsStalenessBoundUnderFaults runs three nodes and a
// router with a hot-key cache and a real Redis (a primary and a
// replica), a cacheable table, its updater (a datastream with a Redis
// sink) and bootstrapper. Writers, deleters and staleness-bounded
// readers work on hot keys through the router while Redis is killed and
// restarted empty, the updater's node is killed -9 (a partition it leads
// fails over) and the router restarts. No request fails; no read answers
// a state older than its bound allows, judged against the acknowledged
// history; and once the load stops, after one bootstrap period the
// divergence checker finds no entry that differs from the nodes.
func TestCacheTierKeepsItsStalenessBoundUnderFaults(t *testing.T) {
	const partitions = 4
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	began := time.Now()
	rc := redistest.Start(t, 1)
	nodes, ep := startClusterAt(t)
	addrs := strings.Join(rc.Addrs(), ",")
	routerArgs := []string{"router", "--etcd", ep, "--http", freePort(t), "--id", "r1", "--cache-redis", addrs, "--cache-local-bytes", "16MB"}
	rt := runNode(t, routerArgs)
	rt.must(201, "PUT", "/_schemas/e2e", map[string]any{"partitions": partitions, "replicas": 3})
	table := strings.TrimSuffix(counterSchema, "}") + `,"cache":{"ttl":"30s","bootstrapEvery":"2s"}}`
	rt.must(201, "PUT", "/_schemas/e2e/Counter", table)
	rt.must(201, "PUT", "/_datastreams/updater", map[string]any{
		"database": "e2e", "from": "earliest",
		"sink":      map[string]any{"type": "redis", "addresses": rc.Addrs()},
		"autoPause": map[string]any{"failures": 1000},
	})
	waitFor(t, 20*time.Second, "settled", func() (bool, string) { return settled(clusterInfo(t, nodes[0]), partitions, 3) })
	waitFor(t, 20*time.Second, "the updater raises every watermark", func() (bool, string) {
		st, err := streamStatus(t, nodes[0], "updater")
		return err == nil && updaterCaughtUp(st, time.Now().Add(-time.Hour)), fmt.Sprintf("%+v %v", st, err)
	})
	t.Logf("cluster, Redis, router and updater ready in %s", time.Since(began).Round(time.Millisecond))

	var keys []string
	for _, g := range groupsByPartition(partitions) {
		for id := 1; id <= 3; id++ {
			keys = append(keys, fmt.Sprintf("%s/%d", g, id))
		}
	}
	l := &cacheLoad{base: rt.addr, ops: map[string][]cacheOp{}, stop: make(chan struct{})}
	for w := range 3 {
		var own []string
		for i, k := range keys {
			if i%3 == w {
				own = append(own, k)
			}
		}
		l.wg.Add(1)
		go l.writer(seed+uint64(w), own)
	}
	for r := range 4 {
		l.wg.Add(1)
		go l.reader(seed+uint64(10+r), keys)
	}
	loadStopped := false
	stopLoad := func() {
		if !loadStopped {
			loadStopped = true
			close(l.stop)
			l.wg.Wait()
		}
	}
	defer stopLoad()

	time.Sleep(3 * time.Second)
	t.Log("fault: Redis's primary killed; restarted empty 2 s later")
	rc.Primary.Kill()
	time.Sleep(2 * time.Second)
	rc.Primary.Restart(t) // the replica syncs from it again: empty
	time.Sleep(3 * time.Second)

	victim := updaterVictim(t, nodes)
	t.Logf("fault: %s, which runs updater tasks and leads a partition, killed -9; restarted 3 s later", victim.id)
	victim.kill()
	time.Sleep(3 * time.Second)
	victim.restart(t)
	waitFor(t, 20*time.Second, "every partition led, with three voters, after the kill", func() (bool, string) {
		return voting(clusterInfo(t, nodes[0]), partitions)
	})

	t.Log("fault: the router restarts")
	rt.kill()
	rt = runNode(t, routerArgs)
	time.Sleep(3 * time.Second)
	stopLoad()
	stoppedAt := time.Now()

	l.mu.Lock()
	reads, failed := l.reads, l.failed
	bySource := map[string]int{}
	for _, r := range reads {
		bySource[r.source]++
	}
	writes := 0
	for _, h := range l.ops {
		writes += len(h)
	}
	l.mu.Unlock()
	t.Logf("%d acknowledged writes and deletes, %d reads answered by %v", writes, len(reads), bySource)
	if len(failed) > 0 {
		t.Errorf("%d requests failed, first: %s", len(failed), strings.Join(failed[:min(5, len(failed))], "\n"))
	}
	if bad := checkReads(l.ops, reads); len(bad) > 0 {
		t.Errorf("%d of %d reads broke their staleness bound (seed %d), first:\n%s", len(bad), len(reads), seed, strings.Join(bad[:min(10, len(bad))], "\n"))
	}
	if n := bySource[""]; n > 0 {
		t.Errorf("%d reads answered without X-Doppio-Cache", n)
	}
	if bySource["local"] == 0 || bySource["redis"] == 0 || bySource["miss"] == 0 {
		t.Errorf("reads by source %v: want some from each tier and some misses", bySource)
	}

	// One bootstrap period after the load, with the updater caught up,
	// no entry may differ from the nodes.
	waitFor(t, 20*time.Second, "the updater caught up and a bootstrap after the load", func() (bool, string) {
		st, err := streamStatus(t, nodes[0], "updater")
		return err == nil && updaterCaughtUp(st, stoppedAt), fmt.Sprintf("%+v %v", st, err)
	})
	var gen struct {
		CacheGeneration int64 `json:"cacheGeneration"`
	}
	if err := json.Unmarshal(rt.must(200, "GET", "/_schemas/e2e/Counter", nil), &gen); err != nil {
		t.Fatal(err)
	}
	st, err := cache.Open(cache.Config{Addrs: rc.Addrs()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rep, err := cachecheck.Check(context.Background(), st, cachecheck.HTTPSource{URL: nodes[0].addr, Client: mode.http}, "e2e", partitions,
		[]cachecheck.Table{{Name: "Counter", Generation: gen.CacheGeneration}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("divergence check: %d entries checked", rep.Checked)
	for _, d := range rep.Diverged {
		t.Errorf("diverged: %s", d)
	}
	if rep.Checked < len(keys)/2 {
		t.Errorf("only %d entries in Redis after the bootstrap, want most of the %d keys", rep.Checked, len(keys))
	}

	checkCacheVisible(t, rt, nodes, partitions)
	t.Logf("whole test %s", time.Since(began).Round(time.Millisecond))
}

// updaterCaughtUp reports whether every partition of the updater is
// running with its watermark past after and a bootstrap of Counter
// started after it.
func updaterCaughtUp(st datastream.Status, after time.Time) bool {
	if len(st.Partitions) == 0 {
		return false
	}
	for _, p := range st.Partitions {
		c := p.Cache
		if p.State != "running" || c == nil || c.Watermark <= after.UnixMilli() || c.Bootstrapped["Counter"] <= after.UnixMilli() {
			return false
		}
	}
	return true
}

// voting reports whether every partition has a leader and three voting
// members (which, under load, need not have applied the same SCN).
func voting(info wire.ClusterInfo, partitions int) (bool, string) {
	js, _ := json.Marshal(info.Partitions)
	if len(info.Partitions) != partitions {
		return false, string(js)
	}
	for _, p := range info.Partitions {
		if p.Leader == "" || len(p.Members) != 3 {
			return false, string(js)
		}
		for _, m := range p.Members {
			if m.Role != "leader" && m.Role != "follower" {
				return false, string(js)
			}
		}
	}
	return true, ""
}

// updaterVictim is a node that runs updater tasks and leads a
// partition, the one running the most tasks.
func updaterVictim(t *testing.T, nodes []*clusterNode) *clusterNode {
	t.Helper()
	st, err := streamStatus(t, nodes[0], "updater")
	if err != nil {
		t.Fatal(err)
	}
	tasks := map[string]int{}
	for _, p := range st.Partitions {
		tasks[p.Owner]++
	}
	leads := map[string]int{}
	for _, p := range clusterInfo(t, nodes[0]).Partitions {
		leads[p.Leader]++
	}
	var best *clusterNode
	for _, n := range nodes {
		if leads[n.id] > 0 && tasks[n.id] > 0 && (best == nil || tasks[n.id] > tasks[best.id]) {
			best = n
		}
	}
	if best == nil {
		// No node both leads and runs tasks: the updater's busiest node
		// alone, then; the kill still moves its tasks.
		for _, n := range nodes {
			if best == nil || tasks[n.id] > tasks[best.id] {
				best = n
			}
		}
	}
	return best
}

// checkCacheVisible checks the tier shows in /_cluster through the
// router, in `doppio cache status` and in /metrics.
func checkCacheVisible(t *testing.T, rt *devNode, nodes []*clusterNode, partitions int) {
	t.Helper()
	var info wire.ClusterInfo
	if err := json.Unmarshal(rt.must(200, "GET", "/_cluster", nil), &info); err != nil {
		t.Fatal(err)
	}
	c := info.Cache
	if c == nil || len(c.Tables) != 1 || c.Tables[0].Table != "Counter" || len(c.Updaters) != partitions {
		t.Fatalf("/_cluster's cache section: %+v", c)
	}
	if tb := c.Tables[0]; tb.HitRate() <= 0 || tb.TTL != "30s" || tb.BootstrapEvery != "2s" || tb.BootstrapProgress <= 0 {
		t.Errorf("/_cluster's cache table: %+v (hit rate %f)", tb, tb.HitRate())
	}
	var router *wire.CacheProcess
	for i := range c.Processes {
		if c.Processes[i].Process == "r1" {
			router = &c.Processes[i]
		}
	}
	if router == nil || router.Role != "router" || router.Local == nil || router.Local.Entries == 0 || len(router.Redis) != 2 ||
		!router.Redis[0].Healthy || router.Tables["e2e.Counter"].Answered["local"] == 0 {
		t.Errorf("/_cluster's cache section lacks the router's read side: %+v", c.Processes)
	}
	for _, u := range c.Updaters {
		if u.Watermark == nil || u.LagSeconds == nil || u.Owner == "" || u.State != "running" {
			t.Errorf("/_cluster's updater partition %d: %+v", u.Partition, u)
		}
	}
	out, code := runCLI(t, rt.addr, "cache", "status")
	if code != 0 || !strings.Contains(out, "e2e.Counter") || !strings.Contains(out, "r1") || strings.Count(out, "updater ") != partitions {
		t.Errorf("doppio cache status: exit %d:\n%s", code, out)
	}
	page := string(rt.must(200, "GET", "/metrics", nil))
	for _, m := range []string{`doppio_cache_requests_total{result="hit",table="e2e.Counter",tier="local"}`, `doppio_cache_endpoint_healthy{`, `doppio_cache_local_bytes `} {
		if !strings.Contains(page, m) {
			t.Errorf("the router's /metrics lacks %s", m)
		}
	}
	var lagSeries []string
	for _, n := range nodes {
		for _, line := range strings.Split(string(n.must(200, "GET", "/metrics", nil)), "\n") {
			if strings.HasPrefix(line, "doppio_cache_updater_lag_transactions{") || strings.HasPrefix(line, "doppio_cache_updater_lag_seconds{") {
				lagSeries = append(lagSeries, n.id+" "+line)
			}
		}
	}
	sort.Strings(lagSeries)
	if len(lagSeries) != 2*partitions {
		t.Errorf("updater lag series over the nodes: %d, want 2 per partition:\n%s", len(lagSeries), strings.Join(lagSeries, "\n"))
	}
}
