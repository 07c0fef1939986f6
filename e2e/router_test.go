package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/doppio-db/doppio/client/wire"
)

// TestRouterSendsEveryRequestToItsLeaderThroughAFailover runs a stateless
// `doppio router` in front of three nodes: schemas, documents, collection
// reads and the cluster view all go through it; then the node leading the
// most partitions is killed and every partition is written and read
// through the router again, with the client's retry contract (503 +
// Retry-After, within 10 s); the writes acknowledged before the kill are
// all there.
func TestRouterSendsEveryRequestToItsLeaderThroughAFailover(t *testing.T) {
	const partitions = 8
	nodes, ep := startClusterAt(t)
	rt := runNode(t, []string{"router", "--etcd", ep, "--http", freePort(t), "--id", "r1"})
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		rt.must(200, "GET", path, nil)
	}
	rt.must(201, "PUT", "/_schemas/e2e", map[string]any{"partitions": partitions, "replicas": 3})
	rt.must(201, "PUT", "/_schemas/e2e/Counter", counterSchema)
	if b := rt.must(200, "GET", "/_schemas/e2e/Counter", nil); !bytes.Contains(b, []byte(`"Counter"`)) {
		t.Fatalf("table through the router: %s", b)
	}
	groups := groupsByPartition(partitions)
	for p, g := range groups {
		mustRetrying503(t, rt, 201, "PUT", fmt.Sprintf("/e2e/Counter/%s/1", g), map[string]any{"n": p}, "X-Doppio-Timeout", "5s")
	}
	waitFor(t, 15*time.Second, "settled", func() (bool, string) { return settled(clusterInfo(t, nodes[0]), partitions, 3) })
	for p, g := range groups {
		rt.must(201, "PUT", fmt.Sprintf("/e2e/Counter/%s/2", g), map[string]any{"n": 10 + p})
		b := rt.must(200, "GET", "/e2e/Counter/"+g, nil)
		if !bytes.Contains(b, []byte(fmt.Sprintf(`"n":%d`, p))) || !bytes.Contains(b, []byte(fmt.Sprintf(`"n":%d`, 10+p))) {
			t.Fatalf("collection %s through the router: %s", g, b)
		}
	}
	var info wire.ClusterInfo
	if err := json.Unmarshal(rt.must(200, "GET", "/_cluster", nil), &info); err != nil {
		t.Fatal(err)
	}
	if len(info.Nodes) != 3 || len(info.Partitions) != partitions {
		t.Fatalf("/_cluster through the router: %d nodes, %d partitions", len(info.Nodes), len(info.Partitions))
	}
	led := map[string]int{}
	for _, p := range info.Partitions {
		led[p.Leader]++
	}
	victim := nodes[0]
	for _, n := range nodes {
		if led[n.id] > led[victim.id] {
			victim = n
		}
	}
	t.Logf("killing %s, leader of %d partitions", victim.id, led[victim.id])
	victim.kill()
	killed := time.Now()
	for p, g := range groups {
		// A write the router sent to the killed node on a connection it
		// had open may answer 504 (outcome unknown); this PUT replaces the
		// document whole, so sending it again is safe.
		mustPutAgainUntilDone(t, rt, fmt.Sprintf("/e2e/Counter/%s/3", g), map[string]any{"n": 20 + p})
		for id := 1; id <= 3; id++ {
			b := mustRetrying503(t, rt, 200, "GET", fmt.Sprintf("/e2e/Counter/%s/%d", g, id), nil)
			if want := fmt.Sprintf(`"n":%d`, 10*(id-1)+p); !bytes.Contains(b, []byte(want)) {
				t.Fatalf("%s/%d through the router after the kill: %s, want %s", g, id, b, want)
			}
		}
	}
	t.Logf("every partition written and read through the router %v after the kill", time.Since(killed).Round(time.Millisecond))
	rt.must(200, "GET", "/_schemas/e2e", nil)
	rt.must(200, "GET", "/_cluster", nil)
}

// mustPutAgainUntilDone sends an unconditional PUT (idempotent: it
// replaces the document) until it is acknowledged (201, or 200 if an
// attempt whose outcome was unknown had applied it), retrying 503 and 504
// for at most 10 s.
func mustPutAgainUntilDone(t *testing.T, n *devNode, path string, body any) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, _, b := n.do("PUT", path, body, "X-Doppio-Timeout", "5s")
		switch {
		case st == 201 || st == 200:
			return
		case (st == 503 || st == 504) && time.Now().Before(deadline):
			time.Sleep(100 * time.Millisecond)
		default:
			t.Fatalf("PUT %s: status %d: %s", path, st, b)
		}
	}
}
