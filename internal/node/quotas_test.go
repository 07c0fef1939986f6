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
	"github.com/doppio-db/doppio/internal/embedetcd"
	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/testwait"
)

// TestEachNodeEnforcesItsLeadersShareOfAQuota: two nodes each lead one of
// a database's two partitions, so each enforces half of its quota, with no
// exchange between them per request. Writes of one partition, sent to
// either node, meet the half that the partition's leader enforces.
func TestEachNodeEnforcesItsLeadersShareOfAQuota(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	quiet := slog.New(slog.DiscardHandler)
	dir := t.TempDir()
	etcd, err := embedetcd.Start(ctx, filepath.Join(dir, "etcd"), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	var nodes []*Node
	for _, id := range []string{"a", "b"} {
		n, err := Start(ctx, Config{ID: id, DataDir: filepath.Join(dir, id), HTTPAddr: "127.0.0.1:0",
			EtcdEndpoints: etcd.Endpoints(), Logger: quiet, QuotaBurst: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		nodes = append(nodes, n)
	}
	base := "http://" + nodes[0].Addr()
	send := func(method, path, body string) (int, http.Header, string) {
		req, _ := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	must := func(want int, method, path, body string) {
		t.Helper()
		if code, _, b := send(method, path, body); code != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, code, b, want)
		}
	}
	must(201, "PUT", "/_schemas/D", `{"partitions":2,"replicas":1}`)
	must(201, "PUT", "/_schemas/D/T", `{"key":[{"name":"id","type":"string"}],"schema":{"type":"record","name":"T","fields":[{"name":"s","type":"string"}]}}`)
	testwait.Until(t, time.Minute, "each node leads one partition of D", func() bool {
		_, _, b := send("GET", "/_cluster", "")
		var ci wire.ClusterInfo
		if json.Unmarshal([]byte(b), &ci) != nil {
			return false
		}
		leaders := map[string]bool{}
		for _, p := range ci.Partitions {
			if p.Database == "D" && p.Leader != "" {
				leaders[p.Leader] = true
			}
		}
		return len(leaders) == 2
	})
	time.Sleep(1500 * time.Millisecond) // every node's shares follow, once a second

	// 10 units a second: 5 on each node, a bucket of 5 units (1 s). A
	// 4500-byte document is 5 units: the first write spends the credit,
	// the second goes into 5 units of debt, the third is refused for 1 s.
	// With the whole quota on one node the third would pass.
	must(201, "PUT", "/_quotas/databases/D", `{"writeUnitsPerSecond":10}`)
	doc := `{"s":"` + strings.Repeat("x", 4500) + `"}`
	for p := range 2 {
		var ks []string
		for i := 0; len(ks) < 3; i++ {
			k := fmt.Sprintf("k%d", i)
			enc, _ := keys.EncodeTuple(keys.Tuple{k})
			if keys.PartitionOf(enc, 2) == p {
				ks = append(ks, k)
			}
		}
		must(201, "PUT", "/D/T/"+ks[0], doc)
		must(201, "PUT", "/D/T/"+ks[1], doc)
		code, h, b := send("PUT", "/D/T/"+ks[2], doc)
		if code != 429 || h.Get("Retry-After") != "1" || !strings.Contains(b, "database D is over its write quota of 10 units per second") {
			t.Fatalf("partition %d, third write: %d Retry-After %q %s", p, code, h.Get("Retry-After"), b)
		}
	}
}
