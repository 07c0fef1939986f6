package changes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/doppio-db/doppio/client"
	"github.com/doppio-db/doppio/client/changes"
	"github.com/doppio-db/doppio/internal/certs"
	"github.com/doppio-db/doppio/internal/embedetcd"
	"github.com/doppio-db/doppio/internal/node"
)

// TestConsumerGroupOverTLS: against a secure node, a consumer group reads
// the change stream over TLS with root's client certificate, and keeps its
// group and checkpoints in an etcd of the application's own: the
// cluster's etcd admits node certificates only.
func TestConsumerGroupOverTLS(t *testing.T) {
	dir := t.TempDir()
	certsDir := filepath.Join(dir, "certs")
	if _, err := certs.EnsureDev(certsDir); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	etcd, err := embedetcd.StartSecure(ctx, filepath.Join(dir, "etcd"), certsDir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	n, err := node.Start(ctx, node.Config{DataDir: filepath.Join(dir, "node"), HTTPAddr: "127.0.0.1:0",
		EtcdEndpoints: etcd.Endpoints(), CertsDir: certsDir, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	appEtcd, err := embedetcd.Start(ctx, filepath.Join(dir, "app-etcd"), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer appEtcd.Close()
	tlsCfg, err := certs.ClientTLS(certsDir, certs.DevUser)
	if err != nil {
		t.Fatal(err)
	}
	server := "https://" + n.Addr()
	docs := client.New(server, client.WithTLS(tlsCfg))
	if _, _, err := docs.PutDatabase(ctx, "sec", client.DatabaseSpec{Partitions: 2, Replicas: 1}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := docs.PutTable(ctx, "sec", "Item", client.TableSpec{
		Key:    []client.KeyPart{{Name: "g", Type: "string"}, {Name: "id", Type: "long"}},
		Schema: json.RawMessage(`{"type":"record","name":"Item","fields":[{"name":"n","type":"long"}]}`),
	}); err != nil {
		t.Fatal(err)
	}
	u := unique()
	rec := &recorder{}
	put := func(from, to int) {
		for i := from; i < to; i++ {
			if _, err := docs.Put(ctx, "sec", "Item", client.Key{u, int64(i)}, map[string]any{"n": i}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Written before the group starts: delivered by its bootstrap.
	put(0, 5)
	c := &changes.Consumer{Client: docs, DB: "sec", Handle: rec.handle, Bootstrap: true,
		Store:         &changes.EtcdStore{Endpoints: appEtcd.Endpoints(), Prefix: "/test/tls/" + u},
		EtcdEndpoints: appEtcd.Endpoints(), Group: u, Instance: "a", LeaseTTL: 2, SaveInterval: 50 * time.Millisecond}
	start(t, c)
	waitUntil(t, "the instance owns both partitions", func() bool { return len(c.Owned()) == 2 })
	put(5, 10)
	waitUntil(t, "every write handled", func() bool {
		for i := range 10 {
			if rec.count(fmt.Sprintf("%s/%d", u, i)) != 1 {
				return false
			}
		}
		return true
	})
}
