package etcdhttp_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/doppio-db/doppio/client/changes/internal/etcdhttp"
	"github.com/doppio-db/doppio/internal/embedetcd"
)

func startEtcd(t *testing.T) *etcdhttp.Client {
	t.Helper()
	srv, err := embedetcd.Start(context.Background(), t.TempDir(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return &etcdhttp.Client{Endpoints: append([]string{"127.0.0.1:1"}, srv.Endpoints()...)}
}

// The calls consumer groups make, against a real etcd's gateway: leased
// keys, prefix ranges, guarded transactions, watches and revocation.
func TestGatewayCallsAgainstARealEtcd(t *testing.T) {
	c := startEtcd(t)
	ctx := context.Background()
	lease, err := c.Grant(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	if ttl, err := c.KeepAlive(ctx, lease); err != nil || ttl != 5 {
		t.Fatalf("keepalive: %d, %v", ttl, err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watch := c.Watch(wctx, "/g/")
	time.Sleep(200 * time.Millisecond) // let the watch open before writing
	if err := c.Put(ctx, "/g/m/a", "a", lease); err != nil {
		t.Fatal(err)
	}
	if err := c.Put(ctx, "/g/m/b", "b", 0); err != nil {
		t.Fatal(err)
	}
	kvs, err := c.GetPrefix(ctx, "/g/m/", true)
	if err != nil || len(kvs) != 2 || kvs[0].Key != "/g/m/a" || kvs[1].Key != "/g/m/b" || kvs[0].Value != "" {
		t.Fatalf("prefix: %+v, %v", kvs, err)
	}
	// Create-if-absent, then the loser reads the holder.
	r, err := c.Txn(ctx, []etcdhttp.Compare{etcdhttp.Absent("/g/o/0")}, []etcdhttp.Op{etcdhttp.PutOp("/g/o/0", "a", lease)}, []etcdhttp.Op{etcdhttp.GetOp("/g/o/0")})
	if err != nil || !r.Succeeded {
		t.Fatalf("first acquire: %+v, %v", r, err)
	}
	r, err = c.Txn(ctx, []etcdhttp.Compare{etcdhttp.Absent("/g/o/0")}, []etcdhttp.Op{etcdhttp.PutOp("/g/o/0", "b", 0)}, []etcdhttp.Op{etcdhttp.GetOp("/g/o/0")})
	if err != nil || r.Succeeded || len(r.Reads) != 1 || len(r.Reads[0]) != 1 || r.Reads[0][0].Value != "a" {
		t.Fatalf("second acquire: %+v, %v", r, err)
	}
	r, err = c.Txn(ctx, []etcdhttp.Compare{etcdhttp.ValueIs("/g/o/0", "b")}, []etcdhttp.Op{etcdhttp.PutOp("/g/cp", "x", 0)}, nil)
	if err != nil || r.Succeeded {
		t.Fatalf("guard of a non-owner: %+v, %v", r, err)
	}
	r, err = c.Txn(ctx, []etcdhttp.Compare{etcdhttp.ValueIs("/g/o/0", "a")}, []etcdhttp.Op{etcdhttp.PutOp("/g/cp", "x", 0), etcdhttp.DeleteOp("/g/m/b")}, nil)
	if err != nil || !r.Succeeded {
		t.Fatalf("guard of the owner: %+v, %v", r, err)
	}
	if kv, err := c.Get(ctx, "/g/cp"); err != nil || kv == nil || kv.Value != "x" {
		t.Fatalf("get: %+v, %v", kv, err)
	}
	if kv, err := c.Get(ctx, "/g/none"); err != nil || kv != nil {
		t.Fatalf("get of a missing key: %+v, %v", kv, err)
	}
	if err := c.Revoke(ctx, lease); err != nil {
		t.Fatal(err)
	}
	if ttl, err := c.KeepAlive(ctx, lease); err != nil || ttl != 0 {
		t.Fatalf("keepalive of a revoked lease: %d, %v", ttl, err)
	}
	var got []string
	want := []string{"PUT /g/m/a", "PUT /g/m/b", "PUT /g/o/0", "PUT /g/cp", "DELETE /g/m/b", "DELETE /g/m/a", "DELETE /g/o/0"}
	deadline := time.After(10 * time.Second)
	for len(got) < len(want) {
		select {
		case wr := <-watch:
			if wr.Err != nil {
				t.Fatal(wr.Err)
			}
			for _, e := range wr.Events {
				op := "PUT"
				if e.Delete {
					op = "DELETE"
				}
				got = append(got, op+" "+e.KV.Key)
			}
		case <-deadline:
			t.Fatalf("watched %v, want %v", got, want)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("watched %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("watched %v, want %v", got, want)
		}
	}
}
