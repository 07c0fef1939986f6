package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/doppio-db/doppio/client/wire"
)

// peerAddr is the address of a node's peer listener: its --grpc flag.
func peerAddr(t *testing.T, args []string) string {
	t.Helper()
	i := slices.Index(args, "--grpc")
	if i < 0 || i+1 >= len(args) {
		t.Fatalf("no --grpc in %v", args)
	}
	return args[i+1]
}

// peerDo sends a request to the peer listener of the node started with
// args, as another node would.
func peerDo(t *testing.T, args []string, method, path string, body any, headers ...string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, mode.url(peerAddr(t, args))+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	resp, err := mode.peer.Do(req)
	if err != nil {
		t.Fatalf("%s %s on the peer listener: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// peerMust is peerDo that fails the test unless the status is want.
func peerMust(t *testing.T, args []string, want int, method, path string, body any, headers ...string) []byte {
	t.Helper()
	got, b := peerDo(t, args, method, path, body, headers...)
	if got != want {
		t.Fatalf("%s %s on the peer listener: status %d, want %d: %s", method, path, got, want, b)
	}
	return b
}

// TestNodeOnlyRoutesAnswerOnlyOnThePeerPort runs three nodes and checks
// that the node-only routes are unknown on every REST port and served on
// every peer port, that what crosses nodes (forwarded writes and reads,
// scatter queries, consistency checks, the cluster view) still works, and
// that X-Doppio-Caller counts on the peer port alone.
func TestNodeOnlyRoutesAnswerOnlyOnThePeerPort(t *testing.T) {
	nodes := startCluster(t)
	const partitions = 3
	nodes[0].must(201, "PUT", "/_schemas/peer", map[string]any{"partitions": partitions, "replicas": 1})
	nodes[0].must(201, "PUT", "/_schemas/peer/Counter", counterSchema)
	// A node that registers after the database is placed gets its share
	// by a move: wait until each node hosts exactly one replica.
	waitFor(t, 30*time.Second, "placed, one replica per node", func() (bool, string) {
		if ok, why := settled(clusterInfo(t, nodes[0]), partitions, 1); !ok {
			return false, why
		}
		for _, n := range nodes {
			var local wire.LocalInfo
			if err := json.Unmarshal(peerMust(t, n.args, 200, "GET", "/_internal/replicas", nil), &local); err != nil {
				t.Fatal(err)
			}
			if len(local.Replicas) != 1 {
				return false, fmt.Sprintf("%s hosts %d replicas", n.id, len(local.Replicas))
			}
		}
		return true, ""
	})

	for _, n := range nodes {
		for _, rq := range []struct{ method, path string }{
			{"GET", "/_internal/replicas"},
			{"GET", "/_internal/query/peer/Counter/0"},
			{"POST", "/_internal/check/peer/0"},
			{"GET", "/_internal/backup/peer/0"},
		} {
			st, h, b := n.do(rq.method, rq.path, nil)
			if st != 404 || h.Get("Content-Type") != "application/problem+json" || !strings.Contains(string(b), "no resource at "+rq.path) {
				t.Errorf("%s: REST %s %s: %d %s, want the 404 of an unknown route", n.id, rq.method, rq.path, st, b)
			}
		}
		var local wire.LocalInfo
		if err := json.Unmarshal(peerMust(t, n.args, 200, "GET", "/_internal/replicas", nil), &local); err != nil {
			t.Fatal(err)
		}
		if local.Node != n.id || len(local.Replicas) != 1 {
			t.Errorf("%s: peer /_internal/replicas: %+v, want its one replica", n.id, local)
		}
	}

	// Every node writes to and reads every partition: with one replica
	// each, two of three go to another node's peer port.
	groups := groupsByPartition(partitions)
	for i, n := range nodes {
		for p, g := range groups {
			path := fmt.Sprintf("/peer/Counter/%s/%d", g, i)
			mustRetrying503(t, n.devNode, 201, "PUT", path, map[string]any{"n": 10*i + p})
			if b := n.must(200, "GET", path, nil); !strings.Contains(string(b), fmt.Sprintf(`"n":%d`, 10*i+p)) {
				t.Errorf("%s: GET %s: %s", n.id, path, b)
			}
		}
	}
	// A query over all partitions gathers every leader's page.
	for _, n := range nodes {
		var page struct {
			Documents []json.RawMessage `json:"documents"`
		}
		if err := json.Unmarshal(n.must(200, "GET", "/peer/Counter?query=*&limit=100", nil), &page); err != nil {
			t.Fatal(err)
		}
		if len(page.Documents) != len(nodes)*partitions {
			t.Errorf("%s: the query found %d documents, want %d", n.id, len(page.Documents), len(nodes)*partitions)
		}
	}
	// A check of the database runs on each partition's leader.
	var check wire.DatabaseCheck
	if err := json.Unmarshal(nodes[1].must(200, "POST", "/_cluster/check/peer", nil), &check); err != nil {
		t.Fatal(err)
	}
	if check.Result != "consistent" || len(check.Partitions) != partitions {
		t.Errorf("check of the database: %+v, want %d consistent partitions", check, partitions)
	}
	for _, pc := range check.Partitions {
		if pc.Result != "consistent" {
			t.Errorf("check of partition %d: %+v", pc.Partition, pc)
		}
	}
	// The cluster view assembles every node's report, over the peer ports
	// (the controller may still be moving replicas: wait for it).
	waitFor(t, 30*time.Second, "cluster view through n3 settled", func() (bool, string) {
		return settled(clusterInfo(t, nodes[2]), partitions, 1)
	})

	// X-Doppio-Caller: ignored on the REST port, read on the peer port
	// (where "node", reserved for node certificates, is no user: 400).
	for _, n := range nodes {
		const all = "/peer/Counter?query=*&limit=1"
		n.must(200, "GET", all, nil, "X-Doppio-Caller", "node")
		if b := peerMust(t, n.args, 400, "GET", all, nil, "X-Doppio-Caller", "node"); !strings.Contains(string(b), `"field":"X-Doppio-Caller"`) {
			t.Errorf("%s: peer port with X-Doppio-Caller: node: %s, want a 400 about the header", n.id, b)
		}
		peerMust(t, n.args, 200, "GET", all, nil, "X-Doppio-Caller", "alice")
	}
}
