package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/doppio-db/doppio/client/wire"

	"github.com/doppio-db/doppio/internal/datastream/streamcheck"
	"github.com/doppio-db/doppio/internal/testport"
	"github.com/doppio-db/doppio/internal/testwait"
)

// clusterNode is one `doppio start` process with fixed addresses, so that
// it can be killed and started again as the same node.
type clusterNode struct {
	*devNode
	id   string
	args []string
}

// startClusterNode starts node id against the etcd at endpoint.
func startClusterNode(t *testing.T, id, data, endpoint string) *clusterNode {
	t.Helper()
	host := nodeHost(id)
	args := []string{"start", "--id", id, "--data", filepath.Join(data, id),
		"--http", freePortOn(t, host), "--grpc", freePortOn(t, host), "--etcd", endpoint}
	n := &clusterNode{id: id, args: args}
	n.devNode = runNode(t, args)
	return n
}

// restart starts the (killed) node again with the same flags.
func (n *clusterNode) restart(t *testing.T) {
	t.Helper()
	n.devNode = runNode(t, n.args)
}

func freePort(t *testing.T) string { return freePortOn(t, "127.0.0.1") }

// maxNodeNumber is the highest node number nodeHost gives an address of
// its own; the secure mode's node certificate names every one.
const maxNodeNumber = 200

// nodeHost gives each cluster node its own loopback address (n1 on
// 127.0.0.11, n2 on 127.0.0.12, …), as separate hosts would have, so
// nothing works only because every node shares one address.
func nodeHost(id string) string {
	var n int
	if _, err := fmt.Sscanf(id, "n%d", &n); err != nil || n < 1 || n > maxNodeNumber {
		return "127.0.0.1"
	}
	return fmt.Sprintf("127.0.0.%d", 10+n)
}

// freePortOn returns host:port with a port free on host now, below the
// kernel's ephemeral range (see testport).
func freePortOn(t *testing.T, host string) string {
	t.Helper()
	addr, err := testport.Free(host)
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// processReadyLine is what a node or a router logs once it serves.
var processReadyLine = regexp.MustCompile(`doppio (?:node|router) ready.* http=(\S+)`)

// runNode starts the binary with args (a node or a router) and waits for
// its ready line.
func runNode(t *testing.T, args []string) *devNode {
	t.Helper()
	cmd := exec.Command(binary, mode.args(args)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n := &devNode{t: t, cmd: cmd, logs: &bytes.Buffer{}, eof: make(chan struct{}), logMu: &sync.Mutex{}}
	mu := n.logMu
	found := make(chan string, 1)
	go func() {
		defer close(n.eof)
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			mu.Lock()
			n.logs.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if m := processReadyLine.FindStringSubmatch(sc.Text()); m != nil && !sent {
				found <- m[1]
				sent = true
			}
		}
		if !sent {
			close(found)
		}
	}()
	select {
	case addr, ok := <-found:
		if !ok {
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("doppio %v exited before it was ready:\n%s", args, n.logs)
		}
		n.addr = mode.url(addr)
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("doppio %v not ready after 30s", args)
	}
	t.Cleanup(func() { n.kill() })
	return n
}

// startCluster starts an etcd in the test process and three nodes.
func startCluster(t *testing.T) []*clusterNode {
	t.Helper()
	nodes, _ := startClusterAt(t)
	return nodes
}

// startClusterAt is startCluster that also returns the etcd endpoint.
func startClusterAt(t *testing.T) ([]*clusterNode, string) {
	t.Helper()
	return startElasticCluster(t, []string{"n1", "n2", "n3"}, nil)
}

func clusterInfo(t *testing.T, n *clusterNode) wire.ClusterInfo {
	t.Helper()
	var info wire.ClusterInfo
	if err := json.Unmarshal(n.must(200, "GET", "/_cluster", nil), &info); err != nil {
		t.Fatal(err)
	}
	return info
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	testwait.For(t, d, what, cond)
}

// settled reports whether every partition has its replicas voting members, one
// leader and every member caught up with it.
func settled(info wire.ClusterInfo, partitions, replicas int) (bool, string) {
	js, _ := json.MarshalIndent(info.Partitions, "", " ")
	if len(info.Partitions) != partitions {
		return false, string(js)
	}
	for _, p := range info.Partitions {
		leaders := 0
		for _, m := range p.Members {
			if m.Role == "leader" {
				leaders++
			}
			// A learner (a replica the placement is still adding) does
			// not vote yet: a node's death then may leave no quorum.
			if m.SCN != p.SCN || (m.Role != "leader" && m.Role != "follower") {
				return false, string(js)
			}
		}
		if len(p.Replicas) != replicas || len(p.Members) != replicas || leaders != 1 || p.Leader == "" {
			return false, string(js)
		}
	}
	return true, ""
}

// groupsByPartition finds a partition key (document group) for each
// partition of a database of n partitions.
func groupsByPartition(n int) []string {
	out := make([]string, n)
	for p, gs := range streamcheck.GroupsPer(n, 1) {
		out[p] = gs[0]
	}
	return out
}

// TestClusterFailoverLosesNoAcknowledgedWrite runs three node processes,
// writes through all of them, kills -9 a node that leads partitions while
// eight clients write through the others, measures for each partition how
// long until a write succeeds again, checks every acknowledged write is
// there, and restarts the node, which catches up and serves again.
func TestClusterFailoverLosesNoAcknowledgedWrite(t *testing.T) {
	const partitions = 8
	nodes := startCluster(t)
	nodes[0].must(201, "PUT", "/_schemas/e2e", map[string]any{"partitions": partitions, "replicas": 3})
	nodes[0].must(201, "PUT", "/_schemas/e2e/Counter", counterSchema)
	groups := groupsByPartition(partitions)

	// Writes through every node: forwarding reaches each leader.
	for i, n := range nodes {
		for p, g := range groups {
			st, _, b := n.do("PUT", fmt.Sprintf("/e2e/Counter/%s/%d", g, i), map[string]any{"n": p}, "X-Doppio-Timeout", "5s")
			if st != 201 {
				t.Fatalf("write through %s to partition %d: %d %s", n.id, p, st, b)
			}
		}
	}
	waitFor(t, 10*time.Second, "3 caught-up replicas and one leader per partition", func() (bool, string) {
		return settled(clusterInfo(t, nodes[1]), partitions, 3)
	})

	// The victim: the node leading the most partitions.
	info := clusterInfo(t, nodes[0])
	led := map[string][]int{}
	for _, p := range info.Partitions {
		led[p.Leader] = append(led[p.Leader], p.Partition)
	}
	victim := nodes[0]
	for _, n := range nodes {
		if len(led[n.id]) > len(led[victim.id]) {
			victim = n
		}
	}
	var survivors []*clusterNode
	for _, n := range nodes {
		if n != victim {
			survivors = append(survivors, n)
		}
	}
	t.Logf("killing %s, leader of partitions %v", victim.id, led[victim.id])

	type ack struct {
		path string
		n    int64
	}
	var (
		mu        sync.Mutex
		acked     []ack
		killedAt  time.Time
		recovered = map[int]time.Duration{}
		wg        sync.WaitGroup
	)
	ctx, cancel := context.WithCancel(context.Background())
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int64(0); ctx.Err() == nil; i++ {
				p := int(i+int64(w)) % partitions
				path := fmt.Sprintf("/e2e/Counter/%s/%d", groups[p], 1_000_000*int64(w+1)+i)
				through := survivors[(int(i)+w)%len(survivors)]
				// Retry until acknowledged: every attempt may or may not
				// have been applied, only a 201 is an acknowledgement.
				for ctx.Err() == nil {
					rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
					st, _, _, err := through.try(rctx, "PUT", path, map[string]any{"n": i, "writer": fmt.Sprint("w", w)}, "X-Doppio-Timeout", "1s")
					rcancel()
					if err == nil && st == 201 {
						mu.Lock()
						acked = append(acked, ack{path, i})
						if !killedAt.IsZero() {
							if _, ok := recovered[p]; !ok {
								recovered[p] = time.Since(killedAt)
							}
						}
						mu.Unlock()
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	time.Sleep(time.Second)
	mu.Lock()
	killedAt = time.Now()
	mu.Unlock()
	victim.kill()
	time.Sleep(3 * time.Second)
	cancel()
	wg.Wait()

	var worst time.Duration
	for _, p := range led[victim.id] {
		d, ok := recovered[p]
		if !ok {
			t.Fatalf("partition %d (led by the killed node) accepted no write within 3s", p)
		}
		t.Logf("partition %d: writable again %v after the kill", p, d.Round(time.Millisecond))
		worst = max(worst, d)
	}
	t.Logf("failover: worst partition writable again after %v (target < 1s); %d writes acknowledged", worst.Round(time.Millisecond), len(acked))
	if worst > 2*time.Second {
		t.Errorf("failover took %v, far above the 1s target", worst)
	}

	// Every acknowledged write is there, read linearizably through a survivor.
	for _, a := range acked {
		st, _, b := survivors[0].do("GET", a.path, nil)
		if st != 200 {
			t.Fatalf("acknowledged write %s: status %d %s", a.path, st, b)
		}
		var doc struct{ N int64 }
		if err := json.Unmarshal(b, &doc); err != nil || doc.N != a.n {
			t.Fatalf("acknowledged write %s: got %s, want n=%d", a.path, b, a.n)
		}
	}

	// The killed node comes back, catches up and serves.
	victim.restart(t)
	waitFor(t, 15*time.Second, "restarted node caught up", func() (bool, string) {
		return settled(clusterInfo(t, victim), partitions, 3)
	})
	// The controller now hands leaderships back to the restarted node; a
	// request meeting a transfer answers 503 with Retry-After, which a
	// client retries (as the Go client does), within a bound.
	for p, g := range groups {
		mustRetrying503(t, victim.devNode, 201, "PUT", fmt.Sprintf("/e2e/Counter/%s/%d", g, 42), map[string]any{"n": p}, "X-Doppio-Timeout", "5s")
		b := mustRetrying503(t, victim.devNode, 200, "GET", fmt.Sprintf("/e2e/Counter/%s/%d", g, 42), nil)
		if !bytes.Contains(b, []byte(fmt.Sprintf(`"n":%d`, p))) {
			t.Fatalf("read back through the restarted node: %s", b)
		}
	}
	// Stale reads are answered by the restarted node's own replicas.
	for _, a := range acked[:min(len(acked), 50)] {
		victim.must(200, "GET", a.path, nil, "X-Doppio-Staleness", "10s")
	}
	info = clusterInfo(t, victim)
	var leads []string
	for _, n := range info.Nodes {
		leads = append(leads, fmt.Sprintf("%s:%d/%d", n.ID, n.Leads, n.Follows))
	}
	sort.Strings(leads)
	t.Logf("after restart, leads/follows: %v", leads)
}

// TestPartitionWithoutQuorumAnswers503 kills two of three nodes: requests
// to the partitions answer 503 with Retry-After (nothing applied) within
// the request's deadline instead of hanging, or for a write that reached
// the log before the node noticed, 504 (outcome unknown).
func TestPartitionWithoutQuorumAnswers503(t *testing.T) {
	nodes := startCluster(t)
	nodes[0].must(201, "PUT", "/_schemas/e2e", map[string]any{"partitions": 2, "replicas": 3})
	nodes[0].must(201, "PUT", "/_schemas/e2e/Counter", counterSchema)
	groups := groupsByPartition(2)
	for p, g := range groups {
		nodes[0].must(201, "PUT", "/e2e/Counter/"+g+"/1", map[string]any{"n": p}, "X-Doppio-Timeout", "5s")
	}
	waitFor(t, 10*time.Second, "settled", func() (bool, string) { return settled(clusterInfo(t, nodes[0]), 2, 3) })
	nodes[1].kill()
	nodes[2].kill()
	for _, c := range []struct {
		header []string
		limit  time.Duration
	}{
		{[]string{"X-Doppio-Timeout", "1s"}, 2 * time.Second},
		{nil, 6 * time.Second}, // the server's default deadline, 5s
	} {
		for _, g := range groups {
			for _, method := range []string{"PUT", "GET"} {
				var body any
				if method == "PUT" {
					body = map[string]any{"n": 7}
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				start := time.Now()
				st, h, b, err := nodes[0].try(ctx, method, "/e2e/Counter/"+g+"/2", body, c.header...)
				took := time.Since(start)
				cancel()
				if err != nil {
					t.Fatalf("%s %s: %v after %v", method, g, err, took)
				}
				// A write the node appended before it saw its peers die
				// (within the failure detection window) cannot be known
				// not to apply: 504, outcome unknown. Otherwise 503.
				indeterminate := method == "PUT" && st == 504
				if (st != 503 || h.Get("Retry-After") == "") && !indeterminate || took > c.limit {
					t.Fatalf("%s %s with %v: status %d, Retry-After %q after %v (limit %v): %s", method, g, c.header, st, h.Get("Retry-After"), took, c.limit, b)
				}
				t.Logf("%s partition of %s without quorum: 503 after %v", method, g, took.Round(time.Millisecond))
			}
		}
	}
}

// mustRetrying503 sends a request until it answers something other than 503
// (at most 10 s) and asserts that answer's status.
func mustRetrying503(t *testing.T, n *devNode, want int, method, path string, body any, headers ...string) []byte {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, _, b := n.do(method, path, body, headers...)
		if st == http.StatusServiceUnavailable && time.Now().Before(deadline) {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		if st != want {
			t.Fatalf("%s %s: status %d, want %d: %s", method, path, st, want, b)
		}
		return b
	}
}

// TestLeadershipTransfersAreInvisibleToClients restarts a node so that the
// controller hands leaderships back to it (Raft leadership transfers)
// while clients write and read through the other nodes, without retrying:
// every request meeting a transfer is waited out and routed again by the
// server within its deadline, so every one answers 2xx, and every write is
// there afterwards.
func TestLeadershipTransfersAreInvisibleToClients(t *testing.T) {
	const partitions = 8
	nodes := startCluster(t)
	nodes[0].must(201, "PUT", "/_schemas/e2e", map[string]any{"partitions": partitions, "replicas": 3})
	nodes[0].must(201, "PUT", "/_schemas/e2e/Counter", counterSchema)
	groups := groupsByPartition(partitions)
	for p, g := range groups {
		mustRetrying503(t, nodes[0].devNode, 201, "PUT", fmt.Sprintf("/e2e/Counter/%s/0", g), map[string]any{"n": p}, "X-Doppio-Timeout", "5s")
	}
	waitFor(t, 15*time.Second, "settled", func() (bool, string) { return settled(clusterInfo(t, nodes[0]), partitions, 3) })

	// n3 goes away; the others take its leaderships.
	victim, through := nodes[2], nodes[:2]
	victim.kill()
	waitFor(t, 15*time.Second, "leaders on the survivors", func() (bool, string) {
		info := clusterInfo(t, through[0])
		js, _ := json.Marshal(info.Partitions)
		for _, p := range info.Partitions {
			if p.Leader == "" || p.Leader == victim.id {
				return false, string(js)
			}
		}
		return len(info.Partitions) == partitions, string(js)
	})

	// It comes back while clients write: it catches up, and the controller
	// moves leaderships back to it by Raft leadership transfer.
	type result struct {
		path   string
		n      int
		status int
		body   string
	}
	var (
		mu      sync.Mutex
		results []result
		wg      sync.WaitGroup
	)
	ctx, cancel := context.WithCancel(context.Background())
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 1; ctx.Err() == nil; i++ {
				g := groups[(i+w)%partitions]
				path := fmt.Sprintf("/e2e/Counter/%s/%d", g, 1_000_000*(w+1)+i)
				n := through[(i+w)%2]
				st, _, b, err := n.try(context.Background(), "PUT", path, map[string]any{"n": i}, "X-Doppio-Timeout", "5s")
				if err != nil {
					t.Errorf("PUT %s through %s: %v", path, n.id, err)
					return
				}
				mu.Lock()
				results = append(results, result{path, i, st, string(b)})
				mu.Unlock()
				if st == 201 {
					st, _, b, err = n.try(context.Background(), "GET", path, nil, "X-Doppio-Timeout", "5s")
					if err != nil || st != 200 {
						t.Errorf("GET %s through %s right after its write: %d %v %s", path, n.id, st, err, b)
						return
					}
				}
			}
		}()
	}
	victim.restart(t)
	waitFor(t, 30*time.Second, "the restarted node leads again", func() (bool, string) {
		info := clusterInfo(t, through[0])
		ok, state := settled(info, partitions, 3)
		for _, n := range info.Nodes {
			if n.ID == victim.id && n.Leads == 0 {
				ok = false
			}
		}
		return ok, state
	})
	time.Sleep(500 * time.Millisecond)
	cancel()
	wg.Wait()

	info := clusterInfo(t, through[0])
	var leads []string
	for _, n := range info.Nodes {
		leads = append(leads, fmt.Sprintf("%s:%d", n.ID, n.Leads))
	}
	sort.Strings(leads)
	failed := 0
	for _, r := range results {
		if r.status != 201 {
			failed++
			t.Errorf("PUT %s answered %d: %s", r.path, r.status, r.body)
		}
	}
	t.Logf("%d writes while leaderships moved back (leads now %v), %d not acknowledged", len(results), leads, failed)
	for _, r := range results {
		if r.status == 201 {
			b := victim.must(200, "GET", r.path, nil)
			if !bytes.Contains(b, []byte(fmt.Sprintf(`"n":%d`, r.n))) {
				t.Fatalf("acknowledged write %s reads %s", r.path, b)
			}
		}
	}
}

// TestClusterReadsAtTheLeaderNeedNoQuorumRound: a partition with three
// replicas answers linearizable reads at its leader under the leader's
// lease (doppio_linearizable_reads_total{confirmed="lease"}), not with a
// ReadIndex round each, and every read sees the write acknowledged before
// it.
func TestClusterReadsAtTheLeaderNeedNoQuorumRound(t *testing.T) {
	nodes := startCluster(t)
	nodes[0].must(201, "PUT", "/_schemas/lease", map[string]any{"partitions": 1, "replicas": 3})
	nodes[0].must(201, "PUT", "/_schemas/lease/Counter", counterSchema)
	mustRetrying503(t, nodes[0].devNode, 201, "PUT", "/lease/Counter/g/0", map[string]any{"n": 0}, "X-Doppio-Timeout", "5s")
	waitFor(t, 15*time.Second, "settled", func() (bool, string) { return settled(clusterInfo(t, nodes[0]), 1, 3) })
	var leader *clusterNode
	for _, n := range nodes {
		if n.id == clusterInfo(t, nodes[0]).Partitions[0].Leader {
			leader = n
		}
	}
	if leader == nil {
		t.Fatal("no leader")
	}
	// Counted over every node: the controller may still move the
	// leadership it just settled (seen in make test: every read was
	// forwarded to a leader elsewhere and counted there), and a read sent
	// to the node found leading is confirmed wherever the leader is.
	all := make([]*devNode, len(nodes))
	for i, n := range nodes {
		all[i] = n.devNode
	}
	count := func(how string) float64 {
		return metricSum(t, "doppio_linearizable_reads_total", `confirmed="`+how+`"`, all...)
	}
	leaseBefore, roundBefore := count("lease"), count("quorum")
	const rounds = 50
	for i := 1; i <= rounds; i++ {
		leader.must(200, "PUT", "/lease/Counter/g/0", map[string]any{"n": i})
		var doc struct{ N int }
		if err := json.Unmarshal(leader.must(200, "GET", "/lease/Counter/g/0", nil), &doc); err != nil {
			t.Fatal(err)
		}
		if doc.N != i {
			t.Fatalf("read %d after writing %d", doc.N, i)
		}
	}
	lease, round := count("lease")-leaseBefore, count("quorum")-roundBefore
	t.Logf("%d reads: %v under the lease, %v by a quorum round", rounds, lease, round)
	if lease+round < rounds {
		t.Fatalf("%v + %v confirmations for %d reads", lease, round, rounds)
	}
	// A read waits for a round only when the lease ran out between two
	// renewals (an idle moment, a starved loop): a few, not most.
	if lease < rounds*3/4 {
		t.Fatalf("only %v of %d reads were confirmed under the lease", lease, rounds)
	}
}
