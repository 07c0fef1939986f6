package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/doppio-db/doppio/client/wire"
)

// TestDropReachesEveryReplicaOfEveryPartition drops a table through the
// CLI on a node that leads only some of its partitions (the others' steps
// are forwarded to their leaders), then checks that every replica of
// every partition dropped the same keys and that the name starts empty.
func TestDropReachesEveryReplicaOfEveryPartition(t *testing.T) {
	d := startDevCluster(t)
	n1 := &devNode{t: t, addr: "http://" + d.nodes["n1"]}
	n1.must(201, "PUT", "/_schemas/shop", map[string]any{"partitions": 4, "replicas": 3})
	n1.must(201, "PUT", "/_schemas/shop/Order", orderTable)
	for i := range 40 {
		n1.must(201, "PUT", fmt.Sprintf("/shop/Order/c%d/1", i), map[string]any{"total": i, "status": "open"})
	}
	server := "http://" + d.nodes["n2"]
	if out, code := runCLI(t, server, "schema", "drop", "shop/Order"); code != 4 || !strings.Contains(out, "force=true") {
		t.Fatalf("unforced drop of a table holding documents exited %d:\n%s", code, out)
	}
	if out, code := runCLI(t, server, "schema", "drop", "shop/Order", "--force"); code != 0 || out != "table shop/Order dropped\n" {
		t.Fatalf("forced drop exited %d:\n%s", code, out)
	}
	var check wire.DatabaseCheck
	if err := json.Unmarshal(n1.must(200, "POST", "/_cluster/check/shop?repair=false", nil), &check); err != nil {
		t.Fatal(err)
	}
	for _, p := range check.Partitions {
		if p.Result != "consistent" {
			t.Fatalf("partition %d after the drop: %+v", p.Partition, p)
		}
	}
	n1.must(201, "PUT", "/_schemas/shop/Order", orderTable)
	for i := range 40 {
		n1.must(404, "GET", fmt.Sprintf("/shop/Order/c%d/1", i), nil)
	}
	if b := n1.must(200, "GET", "/shop/Order?query=status:open", nil); !strings.Contains(string(b), `"documents":[]`) {
		t.Fatalf("query after the drop: %s", b)
	}
}
