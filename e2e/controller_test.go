package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/doppio-db/doppio/client/wire"
)

// loggedNode is a `doppio start` process whose log the test reads while
// it runs.
type loggedNode struct {
	*devNode
	id   string
	args []string
	mu   sync.Mutex
	log  strings.Builder
}

func startLoggedNode(t *testing.T, id string, args []string) *loggedNode {
	n := &loggedNode{id: id, args: args}
	n.start(t)
	return n
}

func (n *loggedNode) start(t *testing.T) {
	t.Helper()
	cmd := exec.Command(binary, mode.args(n.args)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &devNode{t: t, cmd: cmd}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			n.mu.Lock()
			n.log.WriteString(sc.Text() + "\n")
			n.mu.Unlock()
			if m := readyLine.FindStringSubmatch(sc.Text()); m != nil && !sent {
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
			t.Fatalf("doppio %v exited before it was ready:\n%s", n.args, n.logs())
		}
		d.addr = mode.url(addr)
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("doppio %v not ready after 30s", n.args)
	}
	t.Cleanup(func() { d.kill() })
	n.devNode = d
}

func (n *loggedNode) logs() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.log.String()
}

func (n *loggedNode) info(t *testing.T) wire.ClusterInfo {
	t.Helper()
	var info wire.ClusterInfo
	if err := json.Unmarshal(n.must(200, "GET", "/_cluster", nil), &info); err != nil {
		t.Fatal(err)
	}
	return info
}

// restored reports whether every partition has rf caught-up voters and a
// leader, all on live nodes, and its placement names exactly them.
func restored(info wire.ClusterInfo, partitions, rf int, dead ...string) (bool, string) {
	if ok, state := settled(info, partitions, rf); !ok {
		return false, state
	}
	for _, p := range info.Partitions {
		for _, m := range p.Members {
			if slices.Contains(dead, m.Node) || (m.Role != "leader" && m.Role != "follower") {
				return false, fmt.Sprintf("partition %d: member %+v", p.Partition, m)
			}
		}
		for _, r := range p.Replicas {
			if slices.Contains(dead, r) {
				return false, fmt.Sprintf("partition %d: placed on dead %s", p.Partition, r)
			}
		}
	}
	return true, ""
}

// TestDeadNodesAreReplacedAndTheControllerFailsOver runs four nodes with
// a 3 s dead-node delay and a database of replication factor 3:
//   - kill -9 of a node (not the active controller) while clients write:
//     within a bound every partition again has 3 caught-up voters on live
//     nodes, and every acknowledged write reads back;
//   - the node restarts: the replicas it held that moved away are deleted,
//     and it hosts only what the placement puts on it;
//   - kill -9 of the node whose controller is active: another node's
//     controller takes over, and replaces that node's replicas too.
func TestDeadNodesAreReplacedAndTheControllerFailsOver(t *testing.T) {
	const partitions, rf, delay = 8, 3, 3 * time.Second
	data := t.TempDir()
	etcd := mode.startEtcd(t, filepath.Join(data, "etcd"))
	nodes := make([]*loggedNode, 4)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("n%d", i+1)
			nodes[i] = startLoggedNode(t, id, []string{"start", "--id", id, "--data", filepath.Join(data, id),
				"--http", freePortOn(t, nodeHost(id)), "--grpc", freePortOn(t, nodeHost(id)), "--etcd", etcd.Endpoints()[0],
				"--dead-node-delay", delay.String()})
		}()
	}
	wg.Wait()
	byID := func(id string) *loggedNode {
		for _, n := range nodes {
			if n.id == id {
				return n
			}
		}
		t.Fatalf("no node %q", id)
		return nil
	}
	nodes[0].must(201, "PUT", "/_schemas/e2e", map[string]any{"partitions": partitions, "replicas": rf})
	nodes[0].must(201, "PUT", "/_schemas/e2e/Counter", counterSchema)
	groups := groupsByPartition(partitions)
	for p, g := range groups {
		// Leaders move toward the preferred ones right after placement: a
		// request meeting a transfer answers 503, and is retried.
		mustRetrying503(t, nodes[p%4].devNode, 201, "PUT", fmt.Sprintf("/e2e/Counter/%s/0", g), map[string]any{"n": p}, "X-Doppio-Timeout", "5s")
	}
	waitFor(t, 15*time.Second, "placed and settled", func() (bool, string) { return restored(nodes[0].info(t), partitions, rf) })
	info := nodes[0].info(t)
	if info.Controller == "" {
		t.Fatalf("/_cluster names no active controller")
	}
	controller := byID(info.Controller)

	// 1. Kill -9 a node that hosts replicas and is not the controller.
	var victim *loggedNode
	held := map[int]bool{}
	for _, n := range nodes {
		if n == controller {
			continue
		}
		for _, p := range info.Partitions {
			if slices.Contains(p.Replicas, n.id) {
				held[p.Partition] = true
			}
		}
		if len(held) > 0 {
			victim = n
			break
		}
	}
	var survivors []*loggedNode
	for _, n := range nodes {
		if n != victim {
			survivors = append(survivors, n)
		}
	}
	t.Logf("controller %s; killing %s, which holds replicas of partitions %v", controller.id, victim.id, sortedKeys(held))

	type ack struct {
		path string
		n    int64
	}
	var (
		mu    sync.Mutex
		acked []ack
	)
	ctx, cancel := context.WithCancel(context.Background())
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int64(1); ctx.Err() == nil; i++ {
				p := int(i+int64(w)) % partitions
				path := fmt.Sprintf("/e2e/Counter/%s/%d", groups[p], 1_000_000*int64(w+1)+i)
				through := survivors[(int(i)+w)%len(survivors)]
				for ctx.Err() == nil {
					rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
					st, _, _, err := through.try(rctx, "PUT", path, map[string]any{"n": i}, "X-Doppio-Timeout", "2s")
					rcancel()
					if err == nil && st == 201 {
						mu.Lock()
						acked = append(acked, ack{path, i})
						mu.Unlock()
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	killed := time.Now()
	victim.kill()
	waitFor(t, 30*time.Second, "replication factor restored without "+victim.id, func() (bool, string) {
		return restored(survivors[0].info(t), partitions, rf, victim.id)
	})
	took := time.Since(killed)
	t.Logf("%s's replicas recreated: every partition has %d caught-up voters on live nodes %v after the kill (dead-node delay %v)", victim.id, rf, took.Round(100*time.Millisecond), delay)
	time.Sleep(500 * time.Millisecond)
	cancel()
	wg.Wait()
	if took < delay {
		t.Errorf("replicas replaced %v after the kill, before the dead-node delay %v", took, delay)
	}
	for _, a := range acked {
		st, _, b := survivors[0].do("GET", a.path, nil)
		var doc struct{ N int64 }
		if st != 200 || json.Unmarshal(b, &doc) != nil || doc.N != a.n {
			t.Fatalf("acknowledged write %s (n=%d): status %d %s", a.path, a.n, st, b)
		}
	}
	t.Logf("%d acknowledged writes read back", len(acked))

	// 2. The victim comes back: what moved away is deleted; it hosts only
	// what the placement puts on it (the controller may rebalance onto it).
	victim.start(t)
	waitFor(t, 30*time.Second, victim.id+"'s stale replicas removed", func() (bool, string) {
		info := victim.info(t)
		if ok, state := restored(info, partitions, rf); !ok {
			return false, state
		}
		var local wire.LocalInfo
		if err := json.Unmarshal(peerMust(t, victim.args, 200, "GET", "/_internal/replicas", nil), &local); err != nil {
			t.Fatal(err)
		}
		placedHere := map[int]bool{}
		for _, p := range info.Partitions {
			if slices.Contains(p.Replicas, victim.id) {
				placedHere[p.Partition] = true
			}
		}
		for _, r := range local.Replicas {
			if !placedHere[r.Partition] {
				return false, fmt.Sprintf("hosts partition %d, placed on %v", r.Partition, info.Partitions[r.Partition].Replicas)
			}
		}
		logs := victim.logs()
		for p := range held {
			if !placedHere[p] && !strings.Contains(logs, fmt.Sprintf(`msg="removed stale replica" db=e2e partition=%d`, p)) {
				return false, fmt.Sprintf("stale replica of partition %d not removed", p)
			}
		}
		return true, ""
	})
	t.Logf("%s back: %d stale replicas deleted, the rest placed on it again", victim.id, strings.Count(victim.logs(), `msg="removed stale replica"`))
	// Leaders spread evenly again through the preferred leaders.
	waitFor(t, 30*time.Second, "leaders spread evenly", func() (bool, string) {
		info := victim.info(t)
		lo, hi := partitions, 0
		var state []string
		for _, n := range info.Nodes {
			lo, hi = min(lo, n.Leads), max(hi, n.Leads)
			state = append(state, fmt.Sprintf("%s leads %d, follows %d", n.ID, n.Leads, n.Follows))
		}
		return len(info.Nodes) == 4 && hi-lo <= 1, strings.Join(state, "; ")
	})

	// 3. Kill -9 the active controller's node: another takes over and
	// replaces its replicas.
	var others []*loggedNode
	for _, n := range nodes {
		if n != controller {
			others = append(others, n)
		}
	}
	killed = time.Now()
	controller.kill()
	var next string
	waitFor(t, 10*time.Second, "another controller active", func() (bool, string) {
		next = others[0].info(t).Controller
		return next != "" && next != controller.id, next
	})
	t.Logf("controller %s killed; %s active %v later", controller.id, next, time.Since(killed).Round(100*time.Millisecond))
	waitFor(t, 30*time.Second, "replication factor restored without "+controller.id, func() (bool, string) {
		return restored(others[0].info(t), partitions, rf, controller.id)
	})
	t.Logf("%s's replicas recreated by %s %v after the kill", controller.id, next, time.Since(killed).Round(100*time.Millisecond))
	for p, g := range groups {
		mustRetrying503(t, others[p%3].devNode, 201, "PUT", fmt.Sprintf("/e2e/Counter/%s/7", g), map[string]any{"n": p}, "X-Doppio-Timeout", "5s")
	}
}

func sortedKeys(m map[int]bool) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
