package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/doppio-db/doppio/client/wire"

	"github.com/doppio-db/doppio/client"
	"github.com/doppio-db/doppio/internal/datastream/streamcheck"
)

// load is clients writing and reading documents through the Go client
// library (smart routing, its own retries), each seeded at another node,
// and counting every request that failed after those retries.
type load struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	acked  map[string]int64 // path -> n
	failed []string
	ops    atomic.Int64
}

func startLoad(t *testing.T, seeds []*clusterNode, groups []string, writers int) *load {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{cancel: cancel, acked: map[string]int64{}}
	for w := range writers {
		c := client.New(seeds[w%len(seeds)].addr, append(mode.clientOptions(), client.WithSmartRouting(time.Second), client.WithRetry(client.DefaultRetry))...)
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := int64(1); ctx.Err() == nil; i++ {
				g := groups[int(i+int64(w))%len(groups)]
				id := 1_000_000*int64(w+1) + i
				key := client.Key{g, id}
				path := fmt.Sprintf("%s/%d", g, id)
				_, err := c.Put(ctx, "e2e", "Counter", key, map[string]any{"n": i, "writer": fmt.Sprint(w)})
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					l.fail("put %s: %v", path, err)
					continue
				}
				l.mu.Lock()
				l.acked[path] = i
				l.mu.Unlock()
				if _, err := c.Get(ctx, "e2e", "Counter", key); err != nil && ctx.Err() == nil {
					l.fail("get %s after its put: %v", path, err)
				}
				l.ops.Add(2)
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	return l
}

func (l *load) fail(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failed = append(l.failed, fmt.Sprintf(format, args...))
}

// stop ends the load and fails the test if any request failed; it then
// reads every acknowledged write back through n.
func (l *load) stop(t *testing.T, n *clusterNode) {
	t.Helper()
	l.cancel()
	l.wg.Wait()
	if len(l.failed) > 0 {
		t.Errorf("%d of %d requests failed after the client's retries; first: %s", len(l.failed), l.ops.Load(), strings.Join(l.failed[:min(5, len(l.failed))], "; "))
	}
	for path, want := range l.acked {
		st, _, b := n.do("GET", "/e2e/Counter/"+path, nil)
		var doc struct{ N int64 }
		if st != 200 || json.Unmarshal(b, &doc) != nil || doc.N != want {
			t.Fatalf("acknowledged write %s (n=%d): status %d %s", path, want, st, b)
		}
	}
	t.Logf("%d requests, %d failed; %d acknowledged writes read back", l.ops.Load(), len(l.failed), len(l.acked))
}

// startElasticCluster starts an etcd in the test process and the nodes
// named (each like startClusterNode), the ones in standby with --standby,
// every one with the extra flags.
func startElasticCluster(t *testing.T, ids []string, standby map[string]bool, extra ...string) ([]*clusterNode, string) {
	t.Helper()
	data := t.TempDir()
	etcd := mode.startEtcd(t, filepath.Join(data, "etcd"))
	ep := etcd.Endpoints()[0]
	nodes := make([]*clusterNode, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			host := nodeHost(id)
			args := []string{"start", "--id", id, "--data", filepath.Join(data, id),
				"--http", freePortOn(t, host), "--grpc", freePortOn(t, host), "--etcd", ep}
			if standby[id] {
				args = append(args, "--standby")
			}
			args = append(args, extra...)
			nodes[i] = &clusterNode{id: id, args: args, devNode: runNode(t, args)}
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range nodes {
				t.Logf("%s log (tail):\n%s", n.id, n.tail(80))
			}
		}
	})
	return nodes, ep
}

// replicasOn counts the replicas each node's placement holds.
func replicasOn(info wire.ClusterInfo) map[string]int {
	out := map[string]int{}
	for _, p := range info.Partitions {
		for _, r := range p.Replicas {
			out[r]++
		}
	}
	return out
}

// rebalanced reports whether the controller has no move left, every
// partition is settled with rf members, and the placement puts exactly
// want replicas on each node named (none on the others).
func rebalanced(info wire.ClusterInfo, partitions, rf int, want map[string][2]int) (bool, string) {
	if ok, state := settled(info, partitions, rf); !ok {
		return false, state
	}
	if info.Rebalance == nil || info.Rebalance.Active {
		return false, fmt.Sprintf("rebalance %+v", info.Rebalance)
	}
	got := replicasOn(info)
	for id, n := range got {
		if r, ok := want[id]; !ok || n < r[0] || n > r[1] {
			return false, fmt.Sprintf("replicas per node %v, want %v", got, want)
		}
	}
	for id, r := range want {
		if r[0] > 0 && got[id] == 0 {
			return false, fmt.Sprintf("replicas per node %v, want %v", got, want)
		}
	}
	return true, ""
}

// TestExpandDrainAndRemoveUnderLoad grows a cluster of three nodes by two
// standby nodes added in one step, drains one of them and removes it,
// while clients write and read: no request fails beyond the client's
// retries, every acknowledged write reads back, the data ends evenly
// spread, and the controller's progress shows in /_cluster, /metrics and
// the CLI. It also checks the operator's refusals: removing a node that
// holds replicas, draining below the replication factor, unknown nodes.
func TestExpandDrainAndRemoveUnderLoad(t *testing.T) {
	const partitions, rf = 12, 3
	nodes, _ := startElasticCluster(t, []string{"n1", "n2", "n3", "n4", "n5"}, map[string]bool{"n4": true, "n5": true},
		"--max-moves", "4", "--max-moves-per-node", "2")
	n1 := nodes[0]
	n1.must(201, "PUT", "/_schemas/e2e", map[string]any{"partitions": partitions, "replicas": rf})
	n1.must(201, "PUT", "/_schemas/e2e/Counter", counterSchema)
	all3 := map[string][2]int{"n1": {12, 12}, "n2": {12, 12}, "n3": {12, 12}}
	waitFor(t, 30*time.Second, "placed on the three active nodes only", func() (bool, string) {
		info := clusterInfo(t, n1)
		if ok, state := settled(info, partitions, rf); !ok {
			return false, state
		}
		// The creation's own rebalance (leaderships spread) must be over,
		// or the expansion's progress continues its record and the moves
		// counted below include it.
		if r := info.Rebalance; r != nil && r.Active {
			return false, fmt.Sprintf("creation's rebalance still running: %d of %d", r.Done, r.Total)
		}
		got := replicasOn(info)
		return got["n4"] == 0 && got["n5"] == 0 && got["n1"] == 12, fmt.Sprint(got)
	})
	for _, nd := range clusterInfo(t, n1).Nodes {
		want := "active"
		if nd.ID == "n4" || nd.ID == "n5" {
			want = "standby"
		}
		if nd.Intent != want {
			t.Fatalf("node %s intent %q, want %q", nd.ID, nd.Intent, want)
		}
	}

	groups := make([]string, 0, 2*partitions)
	for _, gs := range streamcheck.GroupsPer(partitions, 2) {
		groups = append(groups, gs...)
	}
	l := startLoad(t, nodes[:3], groups, 6)
	time.Sleep(time.Second)

	// Expand: both standby nodes in one step; 36 replicas over 5 nodes.
	for _, id := range []string{"n4", "n5"} {
		var in client.NodeIntent
		if err := json.Unmarshal(n1.must(200, "POST", "/_cluster/nodes/"+id+"/add", nil), &in); err != nil {
			t.Fatal(err)
		}
		if in.State != "active" || !in.Alive || in.Replicas != 0 {
			t.Fatalf("add %s answered %+v", id, in)
		}
	}
	even5 := map[string][2]int{"n1": {7, 8}, "n2": {7, 8}, "n3": {7, 8}, "n4": {7, 8}, "n5": {7, 8}}
	waitFor(t, 90*time.Second, "expanded to five nodes", func() (bool, string) {
		return rebalanced(clusterInfo(t, n1), partitions, rf, even5)
	})
	info := clusterInfo(t, n1)
	r := info.Rebalance
	moved := replicasOn(info)["n4"] + replicasOn(info)["n5"]
	// Minimal movement: every replica the new nodes hold was one move (add
	// then remove), nothing else moved, and a few leadership transfers
	// spread the leaders.
	if moved < 14 || moved > 16 || r.Done < 2*moved || r.Done > 2*moved+partitions {
		t.Fatalf("new nodes hold %d replicas; rebalance %+v", moved, r)
	}
	t.Logf("expansion: %d of 36 replicas moved to n4 and n5 in %d moves, %v", moved, r.Done, r.Finished.Sub(*r.Started).Round(100*time.Millisecond))

	// The controller's node exports the progress.
	var ctl *clusterNode
	for _, n := range nodes {
		if n.id == info.Controller {
			ctl = n
		}
	}
	metrics := string(ctl.must(200, "GET", "/metrics", nil))
	if want := fmt.Sprintf("doppio_rebalance_moves_done %d", r.Done); !strings.Contains(metrics, want) {
		t.Fatalf("controller %s's /metrics lacks %q", ctl.id, want)
	}
	// Every replica moved was a snapshot streamed by its leader.
	var snapshots float64
	for _, n := range nodes {
		for _, line := range strings.Split(string(n.must(200, "GET", "/metrics", nil)), "\n") {
			if v, ok := strings.CutPrefix(line, "doppio_snapshots_sent_total "); ok {
				f, _ := strconv.ParseFloat(v, 64)
				snapshots += f
			}
		}
	}
	if snapshots < float64(moved) {
		t.Fatalf("%v snapshots sent for %d replicas moved", snapshots, moved)
	}
	out, err := exec.Command(binary, mode.args([]string{"cluster", "status", "--server", n1.addr})...).CombinedOutput()
	if err != nil {
		t.Fatalf("doppio cluster status: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "rebalance: [##############################] 100%") || !strings.Contains(string(out), "INTENT") {
		t.Fatalf("doppio cluster status shows no finished rebalance:\n%s", out)
	}

	// Refusals change nothing.
	if st, _, b := n1.do("POST", "/_cluster/nodes/n5/remove", nil); st != 409 || !strings.Contains(string(b), "still holds") {
		t.Fatalf("remove of a node holding replicas: %d %s", st, b)
	}
	if st, _, b := n1.do("POST", "/_cluster/nodes/n9/drain", nil); st != 404 || !strings.Contains(string(b), `node \"n9\" is not part of the cluster`) {
		t.Fatalf("drain of an unknown node: %d %s", st, b)
	}

	// Drain n5 with the CLI, waiting for it to be empty, then remove it.
	out, err = exec.Command(binary, mode.args([]string{"cluster", "drain", "n5", "--wait", "--server", n1.addr})...).CombinedOutput()
	if err != nil {
		t.Fatalf("doppio cluster drain --wait: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "n5: draining") || !strings.Contains(string(out), "100%") {
		t.Fatalf("doppio cluster drain --wait printed:\n%s", out)
	}
	even4 := map[string][2]int{"n1": {9, 9}, "n2": {9, 9}, "n3": {9, 9}, "n4": {9, 9}}
	waitFor(t, 90*time.Second, "n5 drained", func() (bool, string) {
		return rebalanced(clusterInfo(t, n1), partitions, rf, even4)
	})
	var in client.NodeIntent
	if err := json.Unmarshal(n1.must(200, "POST", "/_cluster/nodes/n5/remove", nil), &in); err != nil {
		t.Fatal(err)
	}
	if in.State != "removed" || in.Replicas != 0 {
		t.Fatalf("remove n5 answered %+v", in)
	}
	// Four active nodes, replication factor 3: draining one is fine,
	// draining a second would leave too few.
	n1.must(200, "POST", "/_cluster/nodes/n4/drain", nil)
	if st, _, b := n1.do("POST", "/_cluster/nodes/n3/drain", nil); st != 409 || !strings.Contains(string(b), "would leave 2 live active node(s)") {
		t.Fatalf("drain below the replication factor: %d %s", st, b)
	}
	waitFor(t, 90*time.Second, "n4 drained", func() (bool, string) {
		return rebalanced(clusterInfo(t, n1), partitions, rf, all3)
	})
	l.stop(t, n1)
	// The removed node's process still runs and holds nothing.
	for _, nd := range clusterInfo(t, n1).Nodes {
		if nd.ID == "n5" && (nd.Intent != "removed" || nd.Leads+nd.Follows != 0) {
			t.Fatalf("removed node: %+v", nd)
		}
	}
}

// TestRollingRestartFailsNoRequest restarts every node of a three-node
// cluster in turn (SIGTERM, wait for the exit, start again, wait until it
// has caught up) while clients write and read: a stopping node hands its
// leaderships over first, so no request fails beyond the client's
// retries, and every acknowledged write reads back.
func TestRollingRestartFailsNoRequest(t *testing.T) {
	const partitions, rf = 8, 3
	nodes, _ := startElasticCluster(t, []string{"n1", "n2", "n3"}, nil)
	nodes[0].must(201, "PUT", "/_schemas/e2e", map[string]any{"partitions": partitions, "replicas": rf})
	nodes[0].must(201, "PUT", "/_schemas/e2e/Counter", counterSchema)
	waitFor(t, 30*time.Second, "placed and settled", func() (bool, string) { return settled(clusterInfo(t, nodes[0]), partitions, rf) })
	l := startLoad(t, nodes, groupsByPartition(partitions), 6)
	time.Sleep(time.Second)
	for i, n := range nodes {
		other := nodes[(i+1)%len(nodes)]
		leads := 0
		for _, nd := range clusterInfo(t, other).Nodes {
			if nd.ID == n.id {
				leads = nd.Leads
			}
		}
		if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		<-n.eof
		if err := n.cmd.Wait(); err != nil {
			t.Fatalf("%s after SIGTERM: %v\n%s", n.id, err, n.logs)
		}
		handed := regexp.MustCompile(`leaderships handed over before stopping.*`).FindString(n.logs.String())
		if handed == "" && leads > 0 {
			t.Fatalf("%s led %d partitions and handed none over:\n%s", n.id, leads, n.logs)
		}
		t.Logf("%s: %s", n.id, handed)
		n.restart(t)
		waitFor(t, 60*time.Second, n.id+" back and caught up", func() (bool, string) {
			return settled(clusterInfo(t, other), partitions, rf)
		})
		t.Logf("%s restarted (led %d partitions before)", n.id, leads)
	}
	l.stop(t, nodes[0])
}
