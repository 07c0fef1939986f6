package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/datastream"
	"github.com/doppio-db/doppio/internal/datastream/streamcheck"
)

// snapEvent is a consumed record's change event, as far as the check
// needs it.
type snapEvent struct {
	Key      []any           `json:"key"`
	Op       string          `json:"op"`
	After    json.RawMessage `json:"after"`
	Snapshot bool            `json:"snapshot"`
}

// TestDatastreamSnapshotAcrossANodeKill starts a "from":"snapshot"
// datastream over a 3-partition database (three replicas, three node
// processes) that holds documents and keeps being written to, and kills
// -9 the node running the most tasks while their snapshots are under
// way; the node is restarted later. Replaying what Kafka received (after
// the SCN deduplication rule) must rebuild the database exactly: every
// document arrives once, in the snapshot or as a log insert after it, and
// every change after its snapshot SCN follows, none twice, none missing.
func TestDatastreamSnapshotAcrossANodeKill(t *testing.T) {
	const (
		partitions = 3
		preloaded  = 200 // documents per group before the stream starts
		ids        = 260 // writers insert the ids from preloaded on, and delete
	)
	waitBroker := startBroker(t)
	nodes, _ := startClusterAt(t)
	nodes[0].must(201, "PUT", "/_schemas/snap", map[string]any{"partitions": partitions, "replicas": 3})
	nodes[0].must(201, "PUT", "/_schemas/snap/Counter", counterSchema)
	waitFor(t, 20*time.Second, "3 caught-up replicas and one leader per partition", func() (bool, string) {
		return settled(clusterInfo(t, nodes[1]), partitions, 3)
	})
	groups := streamcheck.GroupsPer(partitions, 4)
	var all []string
	for _, gs := range groups {
		all = append(all, gs...)
	}
	for _, g := range all {
		for from := 0; from < preloaded; from += 100 {
			var ops []map[string]any
			for id := from; id < from+100; id++ {
				ops = append(ops, map[string]any{"op": "put", "table": "Counter", "key": []any{g, id}, "document": map[string]any{"n": 0, "writer": "load"}})
			}
			nodes[0].must(200, "POST", "/snap/_txn", map[string]any{"ops": ops})
		}
	}
	broker := waitBroker()
	broker.CreateTopic(t, "snap.snap", 3, nil)
	c := streamcheck.Consume(t, broker.Addr(), "snap.snap")

	// Writers update, insert and delete through the nodes all along.
	var (
		mu   sync.Mutex
		live = []*clusterNode{nodes[0], nodes[1], nodes[2]}
		wg   sync.WaitGroup
	)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			for i := 0; ctx.Err() == nil; i++ {
				g, id := all[r.IntN(len(all))], r.IntN(ids)
				op := map[string]any{"op": "put", "table": "Counter", "key": []any{g, id}, "document": map[string]any{"n": i + 1, "writer": fmt.Sprint("w", w)}}
				if r.IntN(8) == 0 {
					op = map[string]any{"op": "delete", "table": "Counter", "key": []any{g, id}}
				}
				mu.Lock()
				through := live[i%len(live)]
				mu.Unlock()
				rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				_, _, _, _ = through.try(rctx, "POST", "/snap/_txn", map[string]any{"ops": []any{op}}, "X-Doppio-Timeout", "2s")
				cancel()
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)

	// About 800 documents per partition at 200 a second: four seconds of
	// snapshot, with the kill in the middle.
	def := fmt.Sprintf(`{"database":"snap","from":"snapshot","snapshotRate":200,"sink":{"type":"kafka","brokers":[%q],"topics":"per-database","topicPrefix":"snap."}}`, broker.Addr())
	nodes[0].must(201, "PUT", "/_datastreams/snap", def)
	var (
		victim *clusterNode
		moved  []int
	)
	waitFor(t, 20*time.Second, "a node's tasks halfway through their snapshots", func() (bool, string) {
		st, err := streamStatus(t, nodes[1], "snap")
		if err != nil {
			return false, err.Error()
		}
		owned := map[string][]int{}
		for _, p := range st.Partitions {
			if p.Snapshot == nil || p.Snapshot.Documents == 0 || p.Owner == "" {
				return false, fmt.Sprintf("%+v", st.Partitions)
			}
			owned[p.Owner] = append(owned[p.Owner], p.Partition)
		}
		for _, n := range nodes {
			if victim == nil || len(owned[n.id]) > len(owned[victim.id]) {
				victim = n
			}
		}
		moved = owned[victim.id]
		return true, ""
	})
	mu.Lock()
	live = nil
	for _, n := range nodes {
		if n != victim {
			live = append(live, n)
		}
	}
	survivor := live[0]
	mu.Unlock()
	victim.kill()
	t.Logf("killed %s mid-snapshot, owner of partitions %v", victim.id, moved)
	waitFor(t, 20*time.Second, "the killed node's tasks running on survivors", func() (bool, string) {
		st, err := streamStatus(t, survivor, "snap")
		if err != nil {
			return false, err.Error()
		}
		for _, p := range st.Partitions {
			if p.Owner == "" || p.Owner == victim.id || p.State != datastream.StateRunning {
				return false, fmt.Sprintf("%+v", st.Partitions)
			}
		}
		return true, ""
	})
	time.Sleep(time.Second)
	victim.restart(t)
	mu.Lock()
	live = []*clusterNode{nodes[0], nodes[1], nodes[2]}
	mu.Unlock()
	time.Sleep(2 * time.Second)
	stop()
	wg.Wait()

	// Every partition past its snapshot and caught up.
	waitFor(t, 60*time.Second, "every partition's snapshot delivered and caught up", func() (bool, string) {
		st, err := streamStatus(t, survivor, "snap")
		if err != nil {
			return false, err.Error()
		}
		for _, p := range st.Partitions {
			if p.State != datastream.StateRunning || p.Snapshot != nil || p.Checkpoint == "" || p.Checkpoint != p.Latest {
				return false, fmt.Sprintf("%+v", st.Partitions)
			}
		}
		return true, ""
	})
	time.Sleep(time.Second) // the last records reach the consumer

	// What the database holds now.
	want := map[string]string{}
	for _, g := range all {
		cursor := ""
		for {
			q := url.Values{"limit": {"1000"}}
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			var page struct {
				Documents []struct {
					Key      []any           `json:"key"`
					Document json.RawMessage `json:"document"`
				} `json:"documents"`
				Next string `json:"next"`
			}
			if err := json.Unmarshal(survivor.must(200, "GET", "/snap/Counter/"+g+"?"+q.Encode(), nil), &page); err != nil {
				t.Fatal(err)
			}
			for _, d := range page.Documents {
				want[docKey(d.Key)] = string(d.Document)
			}
			if cursor = page.Next; cursor == "" {
				break
			}
		}
	}

	// Replay the deduplicated records, judging each against what came
	// before it for its document.
	d, err := streamcheck.Dedupe(c.Events())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	// snapshotAt holds a document's snapshot record's SCN sequence until
	// a log event of it follows.
	snapshotAt := map[string]uint64{}
	snapshotted := map[string]bool{}
	killed := map[int]bool{}
	for _, p := range moved {
		killed[p] = true
	}
	resent := map[int]int{}
	records, snaps := 0, 0
	for _, evs := range d.Groups {
		for _, e := range evs {
			var ev snapEvent
			if err := json.Unmarshal(e.Value, &ev); err != nil {
				t.Fatalf("record %s: %v", e.Value, err)
			}
			key := docKey(ev.Key)
			_, exists := got[key]
			records++
			if !ev.Snapshot {
				delete(snapshotAt, key)
			}
			switch {
			case ev.Snapshot:
				snaps++
				// The one repeat a kill -9 allows (see the design note):
				// a chunk Kafka acknowledged just before the kill, whose
				// cursor was never written, comes again as of the next
				// owner's later view, with no change of it in between.
				if at, ok := snapshotAt[key]; ok && killed[e.Partition] && at < e.SCN.Sequence {
					resent[e.Partition]++
				} else if snapshotted[key] || exists {
					t.Fatalf("%s: snapshot record %s #%d after the document was delivered already", key, e.SCN, e.Index)
				}
				snapshotted[key] = true
				snapshotAt[key] = e.SCN.Sequence
				got[key] = string(ev.After)
			case ev.Op == "insert" && exists, ev.Op != "insert" && ev.Op != "delete" && !exists:
				t.Fatalf("%s: %s at %s #%d, but the document does %sexist in the replay", key, ev.Op, e.SCN, e.Index, map[bool]string{true: "", false: "not "}[exists])
			case ev.Op == "delete":
				delete(got, key)
			default:
				got[key] = string(ev.After)
			}
		}
	}
	for p, n := range resent {
		if n > 200 {
			t.Errorf("partition %d: %d documents snapshotted twice, more than the one chunk (200) a kill may leave unrecorded", p, n)
		}
	}
	if len(got) != len(want) {
		t.Errorf("replay holds %d documents, the database %d", len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: replay %q, database %q", k, got[k], v)
		}
	}
	t.Logf("%d records after dedupe (%d redelivered), %d in snapshots, %d documents rebuilt exactly; snapshotted again after the kill: %v", records, d.Dups, snaps, len(want), resent)
}

// docKey names a document by its key as JSON decodes it.
func docKey(key []any) string { return fmt.Sprintf("%v/%v", key...) }
