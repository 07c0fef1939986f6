package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/doppio-db/doppio/client/wire"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/membership"
	"github.com/doppio-db/doppio/internal/storage"
)

// runCLI runs the binary's client commands against server.
func runCLI(t *testing.T, server string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(binary, mode.args(append(args, "--server", server))...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return out.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatalf("doppio %v: %v", args, err)
	}
	return out.String(), 0
}

// corruptDocument overwrites the first document of table in partition p
// of db in the (stopped) node's Pebble store, behind Raft's back, and
// returns its key.
func corruptDocument(t *testing.T, n *clusterNode, db string, p int, table string) []byte {
	t.Helper()
	data := n.args[slices.Index(n.args, "--data")+1]
	e, err := storage.Open(filepath.Join(data, "pebble"), storage.Options{CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	prefix := keys.PartitionPrefix(db, p).Table(table)
	it, err := e.NewIter(prefix, keys.PrefixEnd(prefix))
	if err != nil {
		t.Fatal(err)
	}
	if !it.First() {
		t.Fatalf("node %s holds no document of %s/%d", n.id, db, p)
	}
	key := bytes.Clone(it.Key())
	it.Close()
	b := e.NewBatch()
	b.Set(key, []byte("bit rot"))
	if err := e.Commit(b); err != nil {
		t.Fatal(err)
	}
	return key
}

// stopCleanly stops a node with SIGTERM: unlike a kill -9, which may lose
// applied batches not yet written (applied again from the Raft log on
// restart), its store then holds everything it applied. It also gives up
// its registration at once, so the controller sees it gone.
func stopCleanly(t *testing.T, n *clusterNode) {
	t.Helper()
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = n.cmd.Wait()
}

// preferredLeader reads from etcd the node the placement prefers as the
// leader of partition p of db, once the controller's rebalance is over:
// the creation's own rebalance spreads leaderships, and a preference read
// in the middle of it goes stale.
func preferredLeader(t *testing.T, ep, db string, p int) string {
	t.Helper()
	cli := mode.etcdClient(t, ep)
	defer cli.Close()
	view, err := membership.Open(context.Background(), cli, "/doppio", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer view.Close()
	var preferred string
	waitFor(t, 20*time.Second, "the placement of "+db, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		r, recorded, err := membership.ReadRebalance(ctx, cli, "/doppio")
		cancel()
		if err != nil || recorded && r.Active {
			return false, fmt.Sprintf("rebalance %+v (%v)", r, err)
		}
		rec, ok := view.Placement(db)
		if ok && p < len(rec.Partitions) {
			preferred = rec.Partitions[p].Leader
		}
		return preferred != "", fmt.Sprint(rec)
	})
	return preferred
}

// leads waits until every partition of db is settled with 3 replicas and
// node id leads partition p, as another node's /_cluster shows it.
func leads(t *testing.T, nodes []*clusterNode, partitions, p int, id string) {
	t.Helper()
	other := nodes[slices.IndexFunc(nodes, func(n *clusterNode) bool { return n.id != id })]
	waitFor(t, 30*time.Second, fmt.Sprintf("%s leads partition %d", id, p), func() (bool, string) {
		info := clusterInfo(t, other)
		if ok, state := settled(info, partitions, 3); !ok {
			return false, state
		}
		return info.Partitions[p].Leader == id, "leader " + info.Partitions[p].Leader
	})
}

// partitionData reads partition p of db from a stopped node's store:
// every key outside the Raft section.
func partitionData(t *testing.T, n *clusterNode, db string, p int) map[string][]byte {
	t.Helper()
	data := n.args[slices.Index(n.args, "--data")+1]
	e, err := storage.Open(filepath.Join(data, "pebble"), storage.Options{CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	prefix := keys.PartitionPrefix(db, p)
	it, err := e.NewIter(prefix, prefix.End())
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	out := map[string][]byte{}
	for ok := it.First(); ok; ok = it.Next() {
		if !bytes.HasPrefix(it.Key(), prefix.Raft()) {
			out[string(it.Key())] = bytes.Clone(it.Value())
		}
	}
	return out
}

// TestConsistencyCheckRebuildsACorruptFollower runs three node processes,
// corrupts one document in one follower's store while it is down, and
// checks with `doppio check`: a report-only check names that follower and
// range and exits 6; a repairing check rebuilds it from a snapshot; a
// check under concurrent writes then finds every replica equal.
func TestConsistencyCheckRebuildsACorruptFollower(t *testing.T) {
	const partitions = 2
	nodes, ep := startClusterAt(t)
	router := runNode(t, []string{"router", "--etcd", ep, "--http", freePort(t), "--id", "r1"})
	nodes[0].must(201, "PUT", "/_schemas/chk", map[string]any{"partitions": partitions, "replicas": 3})
	nodes[0].must(201, "PUT", "/_schemas/chk/Counter", counterSchema)
	groups := groupsByPartition(partitions)
	for _, g := range groups {
		for i := range 20 {
			nodes[0].must(201, "PUT", fmt.Sprintf("/chk/Counter/%s/%d", g, i), map[string]any{"n": i}, "X-Doppio-Timeout", "5s")
		}
	}
	// The victim: a follower of partition 0 that the placement does not
	// prefer as its leader, so leadership stays where it is.
	leader := preferredLeader(t, ep, "chk", 0)
	leads(t, nodes, partitions, 0, leader)
	victim := nodes[slices.IndexFunc(nodes, func(n *clusterNode) bool { return n.id != leader })]
	t.Logf("partition 0 led by %s; corrupting %s", leader, victim.id)
	stopCleanly(t, victim)
	corrupted := corruptDocument(t, victim, "chk", 0, "Counter")
	victim.restart(t)
	leads(t, nodes, partitions, 0, leader)

	// Any node serves /_cluster/check (it runs at the leader), and a
	// router relays it.
	out, code := runCLI(t, victim.addr, "check", "chk", "--no-repair")
	if code != 6 {
		t.Fatalf("report-only check of a corrupt replica exited %d, want 6 (inconsistency):\n%s", code, out)
	}
	wantLine := fmt.Sprintf("  replica %s differs in documents/Counter: not repaired: repair not requested\n", victim.id)
	if !strings.Contains(out, "[1/2] partition 0: inconsistent at scn ") || !strings.Contains(out, wantLine) ||
		!strings.Contains(out, "[2/2] partition 1: consistent at scn ") || strings.Count(out, "differs") != 1 {
		t.Fatalf("report-only check output:\n%s\nwant partition 0 inconsistent with %q alone, partition 1 consistent", out, wantLine)
	}

	server := router.addr
	out, code = runCLI(t, server, "check", "chk")
	if code != 0 {
		t.Fatalf("repairing check exited %d:\n%s", code, out)
	}
	wantLine = fmt.Sprintf("  replica %s differs in documents/Counter: rebuilt from a snapshot\n", victim.id)
	if !strings.Contains(out, "[1/2] partition 0: repaired at scn ") || !strings.Contains(out, wantLine) ||
		!strings.HasSuffix(out, "chk: 2 partitions checked: 1 consistent, 1 repaired\n") {
		t.Fatalf("repairing check output:\n%s\nwant partition 0 repaired with %q", out, wantLine)
	}

	// /_cluster shows the last check of partition 0 at its leader; the
	// nodes' metrics count the mismatches and the one repair.
	var last *wire.PartitionCheck
	for _, p := range clusterInfo(t, nodes[0]).Partitions {
		if p.Partition == 0 && p.Check != nil {
			last = p.Check.Last
		}
	}
	if last == nil || last.Result != "repaired" || last.Leader != leader {
		t.Fatalf("/_cluster check of partition 0: %+v, want the repaired check by %s", last, leader)
	}
	rebuilt := false
	for _, rc := range last.Replicas {
		rebuilt = rebuilt || (rc.Node == victim.id && rc.Status == "mismatch" && rc.Repaired && slices.Equal(rc.Ranges, []string{"documents/Counter"}))
	}
	if !rebuilt {
		t.Fatalf("/_cluster check of partition 0 does not show %s rebuilt: %+v", victim.id, last)
	}
	leaderNode := nodes[slices.IndexFunc(nodes, func(n *clusterNode) bool { return n.id == leader })]
	metrics := string(leaderNode.must(200, "GET", "/metrics", nil))
	if m, r := metricValue(t, metrics, "doppio_consistency_mismatches_total"), metricValue(t, metrics, "doppio_consistency_repairs_total"); m != 2 || r != 1 {
		t.Fatalf("leader %s counts %v mismatches and %v repairs, want 2 (one per check) and 1", leader, m, r)
	}

	// The rebuilt replica is a voter again and caught up; checks while
	// clients write find no difference.
	waitFor(t, 20*time.Second, "3 caught-up replicas after the rebuild", func() (bool, string) {
		return settled(clusterInfo(t, nodes[0]), partitions, 3)
	})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var written atomic.Int64
	for w := range 2 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				p := (i + w) % partitions
				st, _, _, err := nodes[w].try(ctx, "PUT", fmt.Sprintf("/chk/Counter/%s/%d", groups[p], 1000*(w+1)+i), map[string]any{"n": i}, "X-Doppio-Timeout", "5s")
				if err == nil && st == 201 {
					written.Add(1)
				}
			}
		})
	}
	for range 2 {
		out, code = runCLI(t, server, "check", "chk")
		if code != 0 || !strings.HasSuffix(out, "chk: 2 partitions checked: 2 consistent\n") {
			cancel()
			wg.Wait()
			t.Fatalf("check under writes exited %d:\n%s", code, out)
		}
	}
	cancel()
	wg.Wait()
	if written.Load() == 0 {
		t.Fatal("no write succeeded during the checks")
	}
	t.Logf("%d writes during the clean checks", written.Load())

	// The API answers bad input precisely, through a router too.
	for _, tc := range []struct {
		path string
		want int
	}{
		{"/_cluster/check/nope", 404},
		{"/_cluster/check/chk/2", 404},
		{"/_cluster/check/chk/x", 400},
		{"/_cluster/check/chk?repair=maybe", 400},
		{"/_cluster/check/chk?deep=1", 400},
	} {
		st, _, b := router.do("POST", tc.path, nil)
		if st != tc.want || !json.Valid(b) {
			t.Fatalf("POST %s: %d %s, want %d problem", tc.path, st, b, tc.want)
		}
	}
	if st, _, b := nodes[0].do("POST", "/_cluster/check/chk", map[string]any{"deep": true}); st != 400 || !bytes.Contains(b, []byte("takes no request body")) {
		t.Fatalf("POST /_cluster/check/chk with a body: %d %s, want 400", st, b)
	}

	// Byte for byte, the rebuilt replica's store holds what the others do
	// (once all have applied the last write and stopped).
	waitFor(t, 20*time.Second, "3 caught-up replicas after the writes", func() (bool, string) {
		return settled(clusterInfo(t, nodes[0]), partitions, 3)
	})
	for _, n := range nodes {
		stopCleanly(t, n)
	}
	want := partitionData(t, nodes[0], "chk", 0)
	if string(want[string(corrupted)]) == "bit rot" || want[string(corrupted)] == nil {
		t.Fatalf("node %s holds %q under the corrupted key", nodes[0].id, want[string(corrupted)])
	}
	for _, n := range nodes[1:] {
		got := partitionData(t, n, "chk", 0)
		if len(got) != len(want) {
			t.Fatalf("node %s holds %d keys of partition 0, node %s %d", n.id, len(got), nodes[0].id, len(want))
		}
		for k, v := range want {
			if !bytes.Equal(got[k], v) {
				t.Fatalf("node %s differs from node %s at %x", n.id, nodes[0].id, k)
			}
		}
	}

}

// metricValue reads an unlabelled metric from a /metrics page.
func metricValue(t *testing.T, page, name string) float64 {
	t.Helper()
	for _, l := range strings.Split(page, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err != nil {
				t.Fatalf("metric %s: %q", name, l)
			}
			return f
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// TestBackgroundConsistencyChecksShowInClusterView runs a dev node that
// checks the partitions it leads every 200 ms: /_cluster shows each
// partition's last check and /metrics counts them.
func TestBackgroundConsistencyChecksShowInClusterView(t *testing.T) {
	n := runNode(t, []string{"dev", "--data", t.TempDir(), "--http", "127.0.0.1:0", "--check-interval", "200ms"})
	setupCounters(t, n)
	for i := range 10 {
		n.must(201, "PUT", fmt.Sprintf("/e2e/Counter/g%d/%d", i, i), map[string]any{"n": i})
	}
	cn := &clusterNode{devNode: n, id: "dev"}
	waitForChecks(t, cn, "every partition checked in the background after the writes", func(p wire.PartitionInfo) bool {
		return p.Check.Last.Result == "consistent" && p.Check.Last.SCN == p.SCN
	})
	if v := metricValue(t, string(n.must(200, "GET", "/metrics", nil)), "doppio_consistency_checks_total"); v < 8 {
		t.Fatalf("doppio_consistency_checks_total %v, want at least one per partition", v)
	}

	// On demand, the whole database at once.
	var dc wire.DatabaseCheck
	if err := json.Unmarshal(n.must(200, "POST", "/_cluster/check/e2e?repair=false", nil), &dc); err != nil {
		t.Fatal(err)
	}
	if dc.Database != "e2e" || dc.Result != "consistent" || len(dc.Partitions) != 8 {
		t.Fatalf("POST /_cluster/check/e2e: %+v", dc)
	}
	var keys uint64
	for p, pc := range dc.Partitions {
		if pc.Partition != p || pc.Result != "consistent" || pc.Leader != "dev" || len(pc.Replicas) != 1 {
			t.Fatalf("partition %d: %+v", p, pc)
		}
		keys += pc.Keys
	}
	if keys < 10 {
		t.Fatalf("the checks summed %d keys, want at least the 10 documents", keys)
	}
}

// TestTheLastCheckOutlivesItsLeader: the outcome of each partition's last
// check is kept in etcd by the leader that ran it, so after that leader is
// gone (here: killed and restarted, its memory lost) /_cluster still shows
// it, unchanged.
func TestTheLastCheckOutlivesItsLeader(t *testing.T) {
	data := t.TempDir()
	n := startDev(t, data)
	setupCounters(t, n)
	for i := range 10 {
		n.must(201, "PUT", fmt.Sprintf("/e2e/Counter/o%d/%d", i, i), map[string]any{"n": i})
	}
	var dc wire.DatabaseCheck
	if err := json.Unmarshal(n.must(200, "POST", "/_cluster/check/e2e?repair=false", nil), &dc); err != nil {
		t.Fatal(err)
	}
	if dc.Result != "consistent" || len(dc.Partitions) != 8 {
		t.Fatalf("POST /_cluster/check/e2e: %+v", dc)
	}
	n.kill()
	cn := &clusterNode{devNode: startDev(t, data), id: "dev"}
	waitForChecks(t, cn, "every partition's last check shown by the restarted leader", func(p wire.PartitionInfo) bool {
		want, got := dc.Partitions[p.Partition], p.Check.Last
		return !p.Check.Running && got.Result == "consistent" && got.At.Equal(want.At) && got.SCN == want.SCN && got.Keys == want.Keys && got.Leader == "dev"
	})
}

// TestARestartDoesNotPostponeBackgroundChecks: a partition's background
// check is due an interval after its last check, or after the cluster's
// checks began if it never had one, wherever that was; a node killed and
// restarted before then checks on time, not an interval after its own
// start (with a timer per process, a node restarted more often than the
// interval never checked anything).
func TestARestartDoesNotPostponeBackgroundChecks(t *testing.T) {
	const interval = 6 * time.Second
	args := []string{"dev", "--data", t.TempDir(), "--http", "127.0.0.1:0", "--check-interval", interval.String()}
	began := time.Now()
	n := runNode(t, args)
	ready := time.Now() // about when its check loop began and wrote the epoch
	setupCounters(t, n)
	for i := range 10 {
		n.must(201, "PUT", fmt.Sprintf("/e2e/Counter/r%d/%d", i, i), map[string]any{"n": i})
	}
	// Killed half an interval in: the checks are due in half an interval,
	// a timer started by the restart would fire in a whole one.
	time.Sleep(time.Until(ready.Add(interval / 2)))
	n.kill()
	restarted := time.Now()
	cn := &clusterNode{devNode: runNode(t, args), id: "dev"}
	first := waitForChecks(t, cn, "every partition checked in the background", func(wire.PartitionInfo) bool { return true })
	for _, pc := range first {
		if pc.Result != "consistent" || pc.At.Before(began.Add(interval)) || !pc.At.Before(restarted.Add(interval)) {
			t.Errorf("partition %d: checked at %s (%s), want consistent, no sooner than %s (an interval after the first start) and before %s (an interval after the restart)",
				pc.Partition, pc.At.Format(time.StampMilli), pc.Result, began.Add(interval).Format(time.StampMilli), restarted.Add(interval).Format(time.StampMilli))
		}
	}
}

// waitForChecks waits until /_cluster at cn shows all 8 partitions of e2e
// with a last check for which ok holds, and returns those checks.
func waitForChecks(t *testing.T, cn *clusterNode, what string, ok func(wire.PartitionInfo) bool) []wire.PartitionCheck {
	t.Helper()
	var last []wire.PartitionCheck
	waitFor(t, 30*time.Second, what, func() (bool, string) {
		info := clusterInfo(t, cn)
		js, _ := json.MarshalIndent(info.Partitions, "", " ")
		last = last[:0]
		for _, p := range info.Partitions {
			if p.Check == nil || p.Check.Last == nil || !ok(p) {
				return false, string(js)
			}
			last = append(last, *p.Check.Last)
		}
		return len(last) == 8, string(js)
	})
	return last
}

// TestConsistencyCheckHandsLeadershipOverToRepairACorruptLeader corrupts
// the store of a partition's preferred leader, which leads it again once
// restarted: the check finds the leader differing from two agreeing
// followers, hands leadership to one of them, which rebuilds the old
// leader (and holds off handing leadership back until then).
func TestConsistencyCheckHandsLeadershipOverToRepairACorruptLeader(t *testing.T) {
	nodes, ep := startClusterAt(t)
	nodes[0].must(201, "PUT", "/_schemas/chk", map[string]any{"partitions": 1, "replicas": 3})
	nodes[0].must(201, "PUT", "/_schemas/chk/Counter", counterSchema)
	group := groupsByPartition(1)[0]
	for i := range 20 {
		nodes[0].must(201, "PUT", fmt.Sprintf("/chk/Counter/%s/%d", group, i), map[string]any{"n": i}, "X-Doppio-Timeout", "5s")
	}
	preferred := preferredLeader(t, ep, "chk", 0)
	leads(t, nodes, 1, 0, preferred)
	victim := nodes[slices.IndexFunc(nodes, func(n *clusterNode) bool { return n.id == preferred })]
	// A kill -9, not a clean stop: a stopping node gives up its
	// registration, and the controller would prefer another leader. A
	// last write first makes the leader sync its log, and with it the
	// applied documents written before (applies are not synced), so the
	// first document is on disk to corrupt and no replay rewrites it.
	nodes[0].must(201, "PUT", fmt.Sprintf("/chk/Counter/%s/%d", group, 999), map[string]any{"n": 999}, "X-Doppio-Timeout", "5s")
	victim.kill()
	corruptDocument(t, victim, "chk", 0, "Counter")
	victim.restart(t)
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range nodes {
				t.Logf("LOGS %s:\n%s", n.id, grepLines(n.logs.String(), "membership|leader|transfer|WARN|ERROR"))
			}
		}
	})
	leads(t, nodes, 1, 0, preferred)

	other := nodes[slices.IndexFunc(nodes, func(n *clusterNode) bool { return n.id != preferred })]
	out, code := runCLI(t, other.addr, "check", "chk")
	wantLine := fmt.Sprintf("  replica %s differs in documents/Counter: rebuilt from a snapshot\n", victim.id)
	t.Logf("doppio check chk:\n%s", out)
	handed := fmt.Sprintf("  leader %s differed from the majority: leadership handed to ", victim.id)
	if code != 0 || !strings.HasPrefix(out, "[1/1] partition 0: repaired at scn ") || !strings.Contains(out, wantLine) || !strings.Contains(out, handed) {
		t.Fatalf("check of a corrupt leader exited %d:\n%s\nwant it handed over and rebuilt: %q", code, out, wantLine)
	}
	waitFor(t, 30*time.Second, "3 caught-up replicas after the rebuild", func() (bool, string) {
		return settled(clusterInfo(t, other), 1, 3)
	})
	out, code = runCLI(t, other.addr, "check", "chk")
	if code != 0 || !strings.HasSuffix(out, "chk: 1 partitions checked: 1 consistent\n") {
		t.Fatalf("check after the repair exited %d:\n%s", code, out)
	}
}

func grepLines(s, pat string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, p := range strings.Split(pat, "|") {
			if strings.Contains(l, p) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
