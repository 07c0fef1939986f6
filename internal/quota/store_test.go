package quota

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

// TestStoreKeepsEveryNodesLimiterCurrent: two stores on one etcd, as on
// two nodes; what one writes reaches the other's limiter through the
// watch, and a store opened later loads what is there.
func TestStoreKeepsEveryNodesLimiterCurrent(t *testing.T) {
	ctx := context.Background()
	cli := etcdClient(t)
	open := func() *Store {
		s, err := Open(ctx, StoreConfig{Client: cli, Prefix: "/t", Limiter: NewLimiter(LimiterConfig{}), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
	a, b := open(), open()

	q := Quota{ReadUnitsPerSecond: 100, WriteUnitsPerSecond: 5}
	created, err := a.Put(ctx, Database, "A", q)
	if err != nil || !created {
		t.Fatalf("Put: %v, %v", created, err)
	}
	if got := a.Limiter().Quota(Database, "A"); got != q {
		t.Fatalf("the writer's limiter has %+v at once, want %+v", got, q)
	}
	testwait.Until(t, 5*time.Second, "the other node's limiter has A's quota", func() bool {
		return b.Limiter().Quota(Database, "A") == q
	})
	if created, err := b.Put(ctx, User, "alice", Quota{WriteUnitsPerSecond: 7}); err != nil || !created {
		t.Fatalf("Put alice: %v, %v", created, err)
	}
	if created, err := b.Put(ctx, User, "alice", Quota{WriteUnitsPerSecond: 8}); err != nil || created {
		t.Fatalf("Put alice again: created %v, %v", created, err)
	}
	testwait.Until(t, 5*time.Second, "alice's new quota reaches the first node", func() bool {
		return a.Limiter().Quota(User, "alice") == Quota{WriteUnitsPerSecond: 8}
	})
	got, ok, err := a.Get(ctx, User, "alice")
	if err != nil || !ok || got != (Quota{WriteUnitsPerSecond: 8}) {
		t.Fatalf("Get alice: %+v %v %v", got, ok, err)
	}
	all, err := a.List(ctx)
	if err != nil || len(all[Database]) != 1 || all[Database]["A"] != q || len(all[User]) != 1 {
		t.Fatalf("List: %+v, %v", all, err)
	}

	c := open()
	if c.Limiter().Quota(Database, "A") != q || c.Limiter().Quota(User, "alice") != (Quota{WriteUnitsPerSecond: 8}) {
		t.Fatalf("a store opened later did not load the quotas")
	}

	if existed, err := a.Delete(ctx, Database, "A"); err != nil || !existed {
		t.Fatalf("Delete: %v, %v", existed, err)
	}
	if existed, err := a.Delete(ctx, Database, "A"); err != nil || existed {
		t.Fatalf("Delete again: %v, %v", existed, err)
	}
	for _, s := range []*Store{a, b, c} {
		testwait.Until(t, 5*time.Second, "A's quota is gone everywhere", func() bool {
			return s.Limiter().Quota(Database, "A").Unlimited()
		})
	}
	if _, ok, err := b.Get(ctx, Database, "A"); ok || err != nil {
		t.Fatalf("Get after delete: %v %v", ok, err)
	}
}
