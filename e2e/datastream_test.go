package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/datastream"
	"github.com/doppio-db/doppio/internal/datastream/streamcheck"
	"github.com/doppio-db/doppio/internal/kafkatest"
	"github.com/doppio-db/doppio/internal/partition"
)

// startBroker starts a Kafka broker while the caller does other work;
// wait returns it (failing the test if it did not start).
func startBroker(t *testing.T) (wait func() *kafkatest.Broker) {
	dir := t.TempDir()
	type result struct {
		b   *kafkatest.Broker
		err error
	}
	ch := make(chan result, 1)
	go func() {
		b, err := kafkatest.Run(context.Background(), dir, nil)
		ch <- result{b, err}
	}()
	return func() *kafkatest.Broker {
		t.Helper()
		r := <-ch
		if r.err != nil {
			t.Fatal(r.err)
		}
		t.Cleanup(func() { r.b.Stop() })
		return r.b
	}
}

func streamStatus(t *testing.T, n *clusterNode, name string) (datastream.Status, error) {
	st, _, b, err := n.try(context.Background(), "GET", "/_datastreams/"+name+"/status", nil)
	if err != nil {
		return datastream.Status{}, err
	}
	if st != 200 {
		return datastream.Status{}, fmt.Errorf("status %d: %s", st, b)
	}
	var s datastream.Status
	err = json.Unmarshal(b, &s)
	return s, err
}

// TestDatastreamDeliversEveryTransactionAcrossANodeKill runs a datastream
// on three node processes (a 6-partition database, three replicas each;
// created through a stateless router) to a real Kafka broker while writers
// commit transactions through the nodes. The node running the most tasks is killed -9 mid-run: its tasks
// move to the survivors (from their last checkpoints) and move back when
// it restarts. At the end every acknowledged transaction is in Kafka,
// exactly once after SCN deduplication, in SCN order per document group
// with its boundaries; every committed transaction of each partition
// since the stream began is there (no gap in the sequences); and the
// status shows every partition owned and caught up.
func TestDatastreamDeliversEveryTransactionAcrossANodeKill(t *testing.T) {
	const partitions = 6
	began := time.Now()
	waitBroker := startBroker(t)
	nodes, ep := startClusterAt(t)
	rt := runNode(t, []string{"router", "--etcd", ep, "--http", freePort(t), "--id", "r1"})
	nodes[0].must(201, "PUT", "/_schemas/e2e", map[string]any{"partitions": partitions, "replicas": 3})
	nodes[0].must(201, "PUT", "/_schemas/e2e/Counter", counterSchema)
	waitFor(t, 20*time.Second, "3 caught-up replicas and one leader per partition", func() (bool, string) {
		return settled(clusterInfo(t, nodes[1]), partitions, 3)
	})
	broker := waitBroker()
	broker.CreateTopic(t, "ds.e2e", 3, nil)
	def := fmt.Sprintf(`{"database":"e2e","sink":{"type":"kafka","brokers":[%q],"topics":"per-database","topicPrefix":"ds."}}`, broker.Addr())
	rt.must(201, "PUT", "/_datastreams/ds", def) // a router relays datastream requests to a node
	c := streamcheck.Consume(t, broker.Addr(), "ds.e2e")
	owners := func() map[string][]int {
		st, err := streamStatus(t, nodes[2], "ds")
		if err != nil {
			t.Logf("status: %v", err)
			return nil
		}
		out := map[string][]int{}
		for _, p := range st.Partitions {
			if p.State == datastream.StateRunning && p.Detail == "" {
				out[p.Owner] = append(out[p.Owner], p.Partition)
			}
		}
		return out
	}
	waitFor(t, 20*time.Second, "every partition's task running", func() (bool, string) {
		o := owners()
		n := 0
		for id, ps := range o {
			if id != "" {
				n += len(ps)
			}
		}
		return n == partitions, fmt.Sprint(o)
	})
	t.Logf("cluster, broker and datastream up after %v; tasks: %v", time.Since(began).Round(time.Millisecond), owners())

	// Writers: each owns some groups and commits 1-2 write transactions in
	// them one after another, through the live nodes.
	groups := streamcheck.GroupsPer(partitions, 2)
	var all []string
	for _, gs := range groups {
		all = append(all, gs...)
	}
	var (
		mu      sync.Mutex
		acked   []streamcheck.Txn
		unknown int
		live    = []*clusterNode{nodes[0], nodes[1], nodes[2]}
		wg      sync.WaitGroup
	)
	ctx, stop := context.WithCancel(context.Background())
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	const writers = 4
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			id := int64(w) * 1_000_000
			for i := 0; ctx.Err() == nil; i++ {
				g := all[(i*writers+w)%len(all)]
				var ops []streamcheck.Op
				var body []map[string]any
				for range 1 + r.IntN(2) {
					ops = append(ops, streamcheck.Op{Table: "Counter", ID: id})
					body = append(body, map[string]any{"op": "put", "table": "Counter", "key": []any{g, id}, "document": map[string]any{"n": i, "writer": fmt.Sprint("w", w)}})
					id++
				}
				mu.Lock()
				through := live[(i+w)%len(live)]
				mu.Unlock()
				rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				st, _, b, err := through.try(rctx, "POST", "/e2e/_txn", map[string]any{"ops": body}, "X-Doppio-Timeout", "2s")
				cancel()
				var res struct{ SCN string }
				if err == nil && st == 200 && json.Unmarshal(b, &res) == nil {
					scn, perr := partition.ParseSCN(res.SCN)
					if perr == nil {
						mu.Lock()
						acked = append(acked, streamcheck.Txn{Group: g, SCN: scn, Ops: ops})
						mu.Unlock()
						continue
					}
				}
				// Not acknowledged: it may or may not be committed.
				mu.Lock()
				unknown++
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}

	time.Sleep(2 * time.Second)
	var o map[string][]int
	waitFor(t, 10*time.Second, "the status names every task's owner", func() (bool, string) {
		o = owners()
		n := 0
		for _, ps := range o {
			n += len(ps)
		}
		return n == partitions, fmt.Sprint(o)
	})
	victim := nodes[0]
	for _, n := range nodes {
		if len(o[n.id]) > len(o[victim.id]) {
			victim = n
		}
	}
	if len(o[victim.id]) == 0 {
		t.Fatalf("no node owns a task: %v", o)
	}
	moved := o[victim.id]
	mu.Lock()
	live = nil
	for _, n := range nodes {
		if n != victim {
			live = append(live, n)
		}
	}
	mu.Unlock()
	survivor := live[0]
	killed := time.Now()
	victim.kill()
	t.Logf("killed %s, owner of the tasks of partitions %v", victim.id, moved)
	waitFor(t, 20*time.Second, "the killed node's tasks running on survivors", func() (bool, string) {
		st, err := streamStatus(t, survivor, "ds")
		if err != nil {
			return false, err.Error()
		}
		for _, p := range st.Partitions {
			if p.Owner == "" || p.Owner == victim.id || p.State != datastream.StateRunning || p.Detail != "" {
				return false, fmt.Sprintf("%+v", st.Partitions)
			}
		}
		return true, ""
	})
	t.Logf("tasks of %v taken over %v after the kill: %v", moved, time.Since(killed).Round(time.Millisecond), owners())
	time.Sleep(time.Second)

	victim.restart(t)
	mu.Lock()
	live = []*clusterNode{nodes[0], nodes[1], nodes[2]}
	mu.Unlock()
	time.Sleep(3 * time.Second)
	stop()
	wg.Wait()
	mu.Lock()
	t.Logf("%d transactions acknowledged, %d not", len(acked), unknown)
	mu.Unlock()

	// Every acknowledged transaction arrives, in order, exactly once after
	// dedupe.
	deadline := time.Now().Add(60 * time.Second)
	for {
		ok, why := streamcheck.Delivered(c.Events(), acked, false)
		if ok {
			break
		}
		if time.Now().After(deadline) {
			st, _, b, _ := survivor.try(context.Background(), "GET", "/_datastreams/ds/status", nil)
			t.Logf("status (%d): %s", st, b)
			_, _, b, _ = survivor.try(context.Background(), "GET", "/_cluster", nil)
			t.Logf("cluster: %s", b)
			t.Fatalf("every acknowledged transaction delivered: not within 60s: %s", why)
		}
		time.Sleep(100 * time.Millisecond)
	}
	evs := c.Events()
	// Every partition owned and caught up, the restarted node running
	// tasks again.
	var final datastream.Status
	waitFor(t, 30*time.Second, "every partition owned and caught up", func() (bool, string) {
		st, err := streamStatus(t, victim, "ds")
		if err != nil {
			return false, err.Error()
		}
		for _, p := range st.Partitions {
			if p.State != datastream.StateRunning || p.Owner == "" || p.Detail != "" || p.Lag.Transactions != 0 || p.Lag.Seconds == nil || *p.Lag.Seconds != 0 || p.Checkpoint != p.Latest {
				return false, fmt.Sprintf("%+v", st.Partitions)
			}
		}
		final = st
		return true, ""
	})
	evs = c.Events()
	d, err := streamcheck.Dedupe(evs)
	if err == nil {
		err = streamcheck.Check(d, acked, false, false)
	}
	if err != nil {
		t.Fatal(err)
	}
	// No committed transaction is missing: per partition, the delivered
	// sequences run without a gap up to the checkpoint (every transaction
	// here writes documents, so every sequence has events).
	seqs := streamcheck.Sequences(d)
	byOwner := map[string][]int{}
	for _, p := range final.Partitions {
		last, err := partition.ParseSCN(p.Checkpoint)
		if err != nil {
			t.Fatalf("partition %d checkpoint %q", p.Partition, p.Checkpoint)
		}
		s := seqs[p.Partition]
		if len(s) == 0 || s[len(s)-1] != last.Sequence || s[len(s)-1]-s[0]+1 != uint64(len(s)) {
			t.Fatalf("partition %d: delivered sequences %v..%v (%d distinct), checkpoint %s: a committed transaction is missing", p.Partition, first(s), lastOf(s), len(s), p.Checkpoint)
		}
		byOwner[p.Owner] = append(byOwner[p.Owner], p.Partition)
	}
	var owned []string
	for id, ps := range byOwner {
		sort.Ints(ps)
		owned = append(owned, fmt.Sprintf("%s:%v", id, ps))
	}
	sort.Strings(owned)
	t.Logf("%d records consumed, %d redelivered (at least once across the kill); final owners %s", len(evs), d.Dups, strings.Join(owned, " "))
	// Through the router too.
	var viaRouter datastream.Status
	if err := json.Unmarshal(rt.must(200, "GET", "/_datastreams/ds/status", nil), &viaRouter); err != nil || len(viaRouter.Partitions) != partitions {
		t.Fatalf("status through the router: %+v, %v", viaRouter, err)
	}
	if b := rt.must(200, "GET", "/_datastreams", nil); !strings.Contains(string(b), `"name":"ds"`) {
		t.Fatalf("list through the router: %s", b)
	}
	if len(byOwner[victim.id]) == 0 {
		t.Errorf("the restarted node %s runs no task: %s", victim.id, strings.Join(owned, " "))
	}
}

func first(s []uint64) uint64 {
	if len(s) == 0 {
		return 0
	}
	return s[0]
}

func lastOf(s []uint64) uint64 {
	if len(s) == 0 {
		return 0
	}
	return s[len(s)-1]
}
