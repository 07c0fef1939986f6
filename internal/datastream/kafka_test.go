package datastream_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/datastream"
	"github.com/doppio-db/doppio/internal/datastream/streamcheck"
	"github.com/doppio-db/doppio/internal/kafkatest"
)

// writeRound commits, in every group concurrently (one writer per
// partition), rounds transactions of 1-3 writes across Order and Item,
// and returns them.
func writeRound(n *testNode, groups [][]string, rounds int, seed uint64, nextID *int64) []txn {
	var (
		mu  sync.Mutex
		out []txn
		wg  sync.WaitGroup
	)
	base := *nextID
	*nextID += int64(rounds * 3 * len(groups) * len(groups[0]))
	for p, gs := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(p)))
			id := base + int64(p*rounds*3*len(gs))
			for range rounds {
				for _, g := range gs {
					var ops []op
					for k := range 1 + r.IntN(3) {
						table := "Order"
						if k == 1 {
							table = "Item"
						}
						ops = append(ops, op{Table: table, ID: id})
						id++
					}
					tx := n.commit(g, ops, 0)
					mu.Lock()
					out = append(out, tx)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return out
}

// TestDatastreamDeliversEveryTransactionInOrder runs a datastream from a
// 4-partition database to a real Kafka broker (one topic for the
// database): every committed transaction arrives exactly once after SCN
// deduplication, in SCN order per document group, with its boundaries.
// Pausing the whole stream stops delivery (the status shows the lag
// growing); resuming continues from the checkpoint with no gap. Pausing
// one partition stops only its groups.
func TestDatastreamDeliversEveryTransactionInOrder(t *testing.T) {
	broker := kafkatest.Start(t)
	n := startNode(t)
	const partitions = 4
	setupShop(n, partitions)
	groups := streamcheck.GroupsPer(partitions, 3)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	broker.CreateTopic(t, "cdc.shop", 3, nil)

	// Written before the datastream exists: "from":"now" leaves them out.
	var nextID int64
	before := writeRound(n, groups, 1, seed, &nextID)
	time.Sleep(5 * time.Millisecond) // commit times are in milliseconds: "now" includes the creation's

	def := fmt.Sprintf(`{"database":"shop","sink":{"type":"kafka","brokers":[%q],"topics":"per-database","topicPrefix":"cdc."}}`, broker.Addr())
	b := n.must(201, "PUT", "/_datastreams/cdc", def)
	if !strings.Contains(string(b), `"state":"running"`) || !strings.Contains(string(b), `"topics":"per-database"`) || !strings.Contains(string(b), `"failures":5`) {
		t.Fatalf("PUT answer %s", b)
	}
	n.must(200, "PUT", "/_datastreams/cdc", def) // the same again: an update
	c := consume(t, broker.Addr(), "cdc.shop")

	txns := writeRound(n, groups, 5, seed+1, &nextID)
	evs := c.WaitFor(30*time.Second, "every transaction delivered", func(evs []event) (bool, string) { return delivered(evs, txns) })
	d, err := streamcheck.Dedupe(evs)
	if err != nil {
		t.Fatal(err)
	}
	if err := streamcheck.Check(d, txns, true, false); err != nil {
		t.Fatalf("%v (the %d transactions written before the datastream must not be delivered)", err, len(before))
	}
	t.Logf("%d transactions delivered exactly once after dedupe (%d records, %d redelivered)", len(txns), len(evs), d.Dups)

	// Every partition is owned, running and caught up.
	waitStatus(t, n, "cdc", 10*time.Second, func(p datastream.PartitionStatus) bool {
		return p.State == datastream.StateRunning && p.Owner == "n1" && p.Lag.Transactions == 0 && p.Lag.Seconds != nil && *p.Lag.Seconds == 0
	})

	// Pause: nothing more is delivered; the lag shows.
	n.must(200, "POST", "/_datastreams/cdc/pause", nil)
	time.Sleep(time.Second) // a round in flight completes
	consumed := len(c.Events())
	paused := writeRound(n, groups, 2, seed+2, &nextID)
	time.Sleep(2 * time.Second)
	if got := len(c.Events()); got != consumed {
		t.Fatalf("%d records arrived while the datastream was paused", got-consumed)
	}
	st := waitStatus(t, n, "cdc", 5*time.Second, func(p datastream.PartitionStatus) bool {
		return p.State == datastream.StatePaused && p.Lag.Transactions >= uint64(2*len(groups[p.Partition])) && p.Lag.Seconds != nil && *p.Lag.Seconds >= 1
	})
	if st.State != datastream.StatePaused {
		t.Fatalf("stream state %q while paused", st.State)
	}

	// Resume: the paused transactions follow with no gap.
	n.must(200, "POST", "/_datastreams/cdc/resume", nil)
	txns = append(txns, paused...)
	c.WaitFor(30*time.Second, "transactions written while paused delivered after resume", func(evs []event) (bool, string) { return delivered(evs, txns) })

	// Pause one partition: the others keep delivering.
	n.must(200, "POST", "/_datastreams/cdc/pause?partitions=2", nil)
	time.Sleep(time.Second)
	more := writeRound(n, groups, 2, seed+3, &nextID)
	var others, held []txn
	for _, tx := range more {
		if contains(groups[2], tx.Group) {
			held = append(held, tx)
		} else {
			others = append(others, tx)
		}
	}
	c.WaitFor(30*time.Second, "unpaused partitions deliver", func(evs []event) (bool, string) { return delivered(evs, append(txns, others...)) })
	time.Sleep(time.Second)
	if ok, _ := delivered(c.Events(), held); ok || hasAny(c.Events(), held) {
		t.Fatalf("partition 2 delivered while paused")
	}
	ps := n.status("cdc").Partitions
	if ps[2].State != datastream.StatePaused || ps[1].State != datastream.StateRunning {
		t.Fatalf("partition states %s/%s, want paused/running", ps[2].State, ps[1].State)
	}
	n.must(200, "POST", "/_datastreams/cdc/resume?partitions=2", nil)
	txns = append(txns, more...)
	evs = c.WaitFor(30*time.Second, "paused partition delivers after resume", func(evs []event) (bool, string) { return delivered(evs, txns) })
	if d, err = streamcheck.Dedupe(evs); err == nil {
		err = streamcheck.Check(d, txns, true, false)
	}
	if err != nil {
		t.Fatal(err)
	}

	// Metrics count what was produced.
	metrics := string(n.must(200, "GET", "/metrics", nil))
	for _, m := range []string{`doppio_datastream_events_produced_total{datastream="cdc"}`, `doppio_datastream_lag_seconds{datastream="cdc"}`} {
		if !strings.Contains(metrics, m) {
			t.Errorf("/metrics has no %s", m)
		}
	}

	// Delete: 204, then 404; the checkpoints are gone.
	n.must(204, "DELETE", "/_datastreams/cdc", nil)
	n.must(404, "GET", "/_datastreams/cdc", nil)
	n.must(404, "GET", "/_datastreams/cdc/status", nil)
	n.must(404, "DELETE", "/_datastreams/cdc", nil)
}

func contains(gs []string, g string) bool {
	for _, x := range gs {
		if x == g {
			return true
		}
	}
	return false
}

// hasAny reports whether a record of one of txns was consumed.
func hasAny(evs []event, txns []txn) bool {
	scns := map[string]bool{}
	for _, tx := range txns {
		scns[tx.Group+"@"+tx.SCN.String()] = true
	}
	for _, e := range evs {
		if scns[e.Group+"@"+e.SCN.String()] {
			return true
		}
	}
	return false
}

// waitStatus polls a datastream's status until every partition satisfies
// ok, and returns it.
func waitStatus(t *testing.T, n *testNode, name string, d time.Duration, ok func(datastream.PartitionStatus) bool) datastream.Status {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		st := n.status(name)
		all := len(st.Partitions) > 0
		for _, p := range st.Partitions {
			all = all && ok(p)
		}
		if all {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("status of %s not as expected within %v: %+v", name, d, st)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
