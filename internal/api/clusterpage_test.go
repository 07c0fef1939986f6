package api_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/doppio-db/doppio/client/wire"
	"github.com/doppio-db/doppio/internal/testwait"
)

// TestClusterPartitionsArePagedAndFiltered reads one database's partitions
// from GET /_cluster three at a time, following next, and checks the
// filters and the refusals of a bad limit, cursor, database or node.
func TestClusterPartitionsArePagedAndFiltered(t *testing.T) {
	db := newDB(t) // 4 partitions
	var all wire.ClusterInfo
	testwait.For(t, 10*time.Second, db+" placed", func() (bool, string) {
		all = wire.ClusterInfo{}
		if err := json.Unmarshal(send(t, "GET", "/_cluster", nil).body, &all); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, p := range all.Partitions {
			if p.Database == db {
				n++
			}
		}
		return n == 4, fmt.Sprintf("%d partitions of %s", n, db)
	})
	if all.Next != "" || len(all.Nodes) != 1 {
		t.Fatalf("whole answer: next %q, %d nodes", all.Next, len(all.Nodes))
	}
	var pages [][]int
	cursor := ""
	for range 3 {
		path := "/_cluster?database=" + db + "&limit=3"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		a := send(t, "GET", path, nil)
		expect(t, a, 200, "a page")
		var page wire.ClusterInfo
		if err := json.Unmarshal(a.body, &page); err != nil {
			t.Fatal(err)
		}
		var ps []int
		for _, p := range page.Partitions {
			if p.Database != db {
				t.Fatalf("page of %s holds %s/%d", db, p.Database, p.Partition)
			}
			ps = append(ps, p.Partition)
		}
		pages = append(pages, ps)
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	if fmt.Sprint(pages) != "[[0 1 2] [3]]" {
		t.Fatalf("pages of %s: %v, want [[0 1 2] [3]]", db, pages)
	}
	node := all.Nodes[0].ID
	var onNode wire.ClusterInfo
	if err := json.Unmarshal(send(t, "GET", "/_cluster?node="+url.QueryEscape(node), nil).body, &onNode); err != nil {
		t.Fatal(err)
	}
	if len(onNode.Partitions) != len(all.Partitions) || len(all.Partitions) < 4 {
		t.Fatalf("partitions on the only node: %d of %d", len(onNode.Partitions), len(all.Partitions))
	}
	for _, c := range []struct{ query, slug, field string }{
		{"limit=0", "malformed", "limit"},
		{"limit=10001", "malformed", "limit"},
		{"limit=x", "malformed", "limit"},
		{"cursor=nopartition", "malformed", "cursor"},
		{"cursor=" + db + "/-1", "malformed", "cursor"},
		{"database=nosuchdb", "not-found", ""},
		{"node=nosuchnode", "not-found", ""},
		{"node=", "malformed", "node"},
		{"database=", "malformed", "database"},
		{"limit=", "malformed", "limit"},
		{"cursor=", "malformed", "cursor"},
	} {
		expectProblem(t, send(t, "GET", "/_cluster?"+c.query, nil), map[string]int{"malformed": 400, "not-found": 404}[c.slug], c.slug, c.field, c.query)
	}
}
