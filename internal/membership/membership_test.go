package membership

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/doppio-db/doppio/internal/embedetcd"
	"github.com/doppio-db/doppio/internal/testwait"
)

func etcdClient(t *testing.T) *clientv3.Client {
	t.Helper()
	srv, err := embedetcd.Start(context.Background(), filepath.Join(t.TempDir(), "etcd"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close(); srv.Close() })
	return cli
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.Until(t, 5*time.Second, what, cond)
}

// openView starts etcd and opens a view of prefix /t on it, closed when
// the test ends; log discards what the view and registrations write.
func openView(t *testing.T) (*clientv3.Client, *View, *slog.Logger) {
	t.Helper()
	cli := etcdClient(t)
	log := slog.New(slog.DiscardHandler)
	v, err := Open(context.Background(), cli, "/t", log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	return cli, v, log
}

// TestLeadershipsAreRoutedAndVanishWithTheNode registers two nodes, has
// them publish leaderships, and checks the view routes to the highest term
// of a live node, and forgets a node that leaves.
func TestLeadershipsAreRoutedAndVanishWithTheNode(t *testing.T) {
	cli, v, log := openView(t)
	ctx := context.Background()
	a, err := Register(ctx, cli, "/t", Node{ID: "a", HTTP: "h:1", GRPC: "g:1"}, time.Second, log)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Register(ctx, cli, "/t", Node{ID: "b", HTTP: "h:2", GRPC: "g:2"}, time.Second, log)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	a.SetLeader("db", 0, 2)
	a.SetLeader("db", 1, 2)
	b.SetLeader("db", 1, 3) // a newer term: b took over partition 1
	eventually(t, "leaders routed", func() bool {
		n0, _, ok0 := v.Leader("db", 0)
		n1, t1, ok1 := v.Leader("db", 1)
		return ok0 && n0 == "a" && ok1 && n1 == "b" && t1 == 3
	})
	if n, ok := v.NodeByRaft(RaftID("b")); !ok || n.GRPC != "g:2" {
		t.Fatalf("NodeByRaft(b) = %+v, %v", n, ok)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a forgotten", func() bool {
		_, ok := v.Node("a")
		_, _, led := v.Leader("db", 0)
		return !ok && !led
	})
}

// TestPlacementIsCreatedOnceAndItsFirstVersionKept checks create-if-absent
// and that the initial placement survives later rewrites.
func TestPlacementIsCreatedOnceAndItsFirstVersionKept(t *testing.T) {
	cli := etcdClient(t)
	ctx := context.Background()
	v, err := Open(ctx, cli, "/t", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	first := Placement{Version: 1, Partitions: []PartitionPlacement{{Replicas: []string{"a", "b", "c"}, Leader: "a"}}}
	if ok, err := CreatePlacement(ctx, cli, "/t", "db", first); err != nil || !ok {
		t.Fatalf("create: %v %v", ok, err)
	}
	if ok, err := CreatePlacement(ctx, cli, "/t", "db", Placement{Version: 1}); err != nil || ok {
		t.Fatalf("second create: %v %v, want refused", ok, err)
	}
	if _, err := cli.Put(ctx, PlacementKey("/t", "db", 0), `{"version":2,"partitions":1,"placements":[{"replicas":["a","b","d"],"leader":"d"}]}`); err != nil {
		t.Fatal(err)
	}
	eventually(t, "version 2 seen", func() bool {
		p, ok := v.Placement("db")
		return ok && p.Version == 2
	})
	init, ok, err := v.InitialPlacement(ctx, "db")
	if err != nil || !ok || init.Version != 1 || init.Partitions[0].Leader != "a" {
		t.Fatalf("initial placement = %+v %v %v", init, ok, err)
	}
}

// TestGroupReportsAreBatchedAndVanishWithTheNode: a leader's reports of
// many partitions reach the view together, the highest term wins, and
// they vanish with the node.
func TestGroupReportsAreBatchedAndVanishWithTheNode(t *testing.T) {
	cli, v, log := openView(t)
	ctx := context.Background()
	a, err := Register(ctx, cli, "/t", Node{ID: "a"}, time.Second, log)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Register(ctx, cli, "/t", Node{ID: "b"}, time.Second, log)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	start, err := cli.Get(ctx, "/t")
	if err != nil {
		t.Fatal(err)
	}
	for p := range 100 {
		a.SetGroup("db", p, &GroupReport{Term: 2, Voters: []string{"a", "b", "c"}})
	}
	b.SetGroup("db", 7, &GroupReport{Term: 3, Voters: []string{"a", "b"}, Learners: []string{"d"}})
	eventually(t, "reports seen", func() bool {
		g, leader, ok := v.Group("db", 99)
		g7, l7, ok7 := v.Group("db", 7)
		return ok && leader == "a" && g.Has("c") && ok7 && l7 == "b" && g7.Has("d") && !g7.Has("c")
	})
	end, err := cli.Get(ctx, "/t")
	if err != nil {
		t.Fatal(err)
	}
	// Each node's batch is one transaction: at most a few revisions for
	// 101 reports.
	if writes := end.Header.Revision - start.Header.Revision; writes > 4 {
		t.Fatalf("%d etcd writes for 101 reports", writes)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a's reports gone", func() bool {
		_, _, ok := v.Group("db", 99)
		return !ok
	})
}
