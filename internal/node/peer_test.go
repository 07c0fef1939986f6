package node

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/doppio-db/doppio/client/wire"
	"github.com/doppio-db/doppio/internal/certs"
	"github.com/doppio-db/doppio/internal/embedetcd"
	"github.com/doppio-db/doppio/internal/peer"
)

// TestClusterTalksOverTLSPeerListeners runs three nodes in secure mode,
// whose peer listeners require mutual TLS with node certificates: Raft
// (gRPC, ALPN h2) replicates, writes and reads through every node are
// forwarded to their leaders (HTTP), /_cluster gathers every node's
// replicas, a router forwards and relays; a plaintext client gets no
// answer from a peer port, and the REST ports do not know the node-only
// routes.
func TestClusterTalksOverTLSPeerListeners(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	quiet := slog.New(slog.DiscardHandler)
	certsDir := certsFor(t)
	etcd, err := embedetcd.StartSecure(ctx, filepath.Join(dir, "etcd"), certsDir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	loader, err := certs.NewLoader(certsDir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	peers := peer.NewClient(loader.DialTLS) // as a node dials its peers
	hc := httpsClient(t, certsDir, false)
	var nodes []*Node
	for i := range 3 {
		id := fmt.Sprintf("n%d", i+1)
		n, err := Start(ctx, Config{
			ID: id, DataDir: filepath.Join(dir, id), HTTPAddr: "127.0.0.1:0", EtcdEndpoints: etcd.Endpoints(),
			CertsDir: certsDir, Logger: quiet,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		nodes = append(nodes, n)
	}
	do := func(n interface{ Addr() string }, method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, "https://"+n.Addr()+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, b := do(nodes[0], "PUT", "/_schemas/db", `{"partitions":3,"replicas":3}`); st != 201 {
		t.Fatalf("create database: %d %s", st, b)
	}
	if st, b := do(nodes[0], "PUT", "/_schemas/db/T", `{"key":[{"name":"id","type":"string"}],"schema":{"type":"record","name":"T","fields":[{"name":"v","type":"long"}]}}`); st != 201 {
		t.Fatalf("create table: %d %s", st, b)
	}
	// Every node writes keys of every partition: two in three are led
	// elsewhere and forwarded; a 503 while leaders are elected is retried.
	for i, n := range nodes {
		for k := range 6 {
			path := fmt.Sprintf("/db/T/k%d-%d", i, k)
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				st, b := do(n, "PUT", path, fmt.Sprintf(`{"v":%d}`, 10*i+k))
				if st == 201 {
					break
				}
				if st != 503 || time.Now().After(deadline) {
					t.Fatalf("PUT %s through n%d: %d %s", path, i+1, st, b)
				}
			}
		}
	}
	for i := range nodes {
		for k := range 6 {
			path := fmt.Sprintf("/db/T/k%d-%d", i, k)
			reader := nodes[(i+k)%3]
			if st, b := do(reader, "GET", path, ""); st != 200 || !strings.Contains(b, fmt.Sprintf(`"v":%d`, 10*i+k)) {
				t.Errorf("GET %s through %s: %d %s", path, reader.cfg.ID, st, b)
			}
		}
	}
	// /_cluster through n2 lists every replica of every partition, which
	// it can only learn from the other nodes' peer listeners.
	st, b := do(nodes[1], "GET", "/_cluster", "")
	var info wire.ClusterInfo
	if st != 200 || json.Unmarshal([]byte(b), &info) != nil {
		t.Fatalf("GET /_cluster: %d %s", st, b)
	}
	for _, p := range info.Partitions {
		if len(p.Members) != 3 {
			t.Errorf("partition %d: %d members reported, want 3: %+v", p.Partition, len(p.Members), p.Members)
		}
	}

	for _, n := range nodes {
		if st, _ := do(n, "GET", "/_internal/replicas", ""); st != 404 {
			t.Errorf("%s: REST /_internal/replicas: %d, want 404", n.cfg.ID, st)
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", peers.URL(n.PeerAddr(), "/_internal/replicas"), nil)
		resp, err := peers.Do(req)
		if err != nil {
			t.Fatalf("%s: peer /_internal/replicas over TLS: %v", n.cfg.ID, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s: peer /_internal/replicas over TLS: %d", n.cfg.ID, resp.StatusCode)
		}
		plain := &http.Client{Timeout: 5 * time.Second}
		if resp, err := plain.Get("http://" + n.PeerAddr() + "/_internal/replicas"); err == nil {
			resp.Body.Close()
			t.Errorf("%s: plaintext to the TLS peer port answered %d", n.cfg.ID, resp.StatusCode)
		}
	}

	// A router has no peer listener; it dials the nodes' over TLS.
	rt, err := StartRouter(ctx, RouterConfig{HTTPAddr: "127.0.0.1:0", EtcdEndpoints: etcd.Endpoints(), CertsDir: certsDir, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if st, b := do(rt, "PUT", "/db/T/via-router", `{"v":99}`); st != 201 {
		t.Fatalf("PUT through the router: %d %s", st, b)
	}
	if st, b := do(rt, "GET", "/db/T/via-router", ""); st != 200 || !strings.Contains(b, `"v":99`) {
		t.Errorf("GET through the router: %d %s", st, b)
	}
	if st, b := do(rt, "GET", "/_schemas/db", ""); st != 200 || !strings.Contains(b, `"partitions":3`) {
		t.Errorf("GET /_schemas/db relayed by the router: %d %s", st, b)
	}
	if st, _ := do(rt, "GET", "/_internal/replicas", ""); st != 404 {
		t.Errorf("router REST /_internal/replicas: %d, want 404", st)
	}
}
