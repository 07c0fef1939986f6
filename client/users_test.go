package client_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/doppio-db/doppio/client"
	"github.com/doppio-db/doppio/internal/auth"
	"github.com/doppio-db/doppio/internal/node"
)

// secureServer starts a node with authentication on and root's password
// set, and returns its URL.
func secureServer(t *testing.T, rootPassword string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := node.Start(ctx, node.Config{
		DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Authenticate: true, Users: auth.StoreOptions{Hash: auth.HashParams{Time: 1, MemoryKiB: 64, Threads: 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	if _, err := n.Users().Put(ctx, auth.RootUser, &rootPassword); err != nil {
		t.Fatal(err)
	}
	return "http://" + n.Addr()
}

func TestUsersGrantsAndCredentials(t *testing.T) {
	url := secureServer(t, "root password")
	ctx := context.Background()
	if _, err := client.New(url).ListUsers(ctx); !client.IsUnauthenticated(err) {
		t.Fatalf("without credentials: %v", err)
	}
	root := client.New(url, client.WithBasicAuth("root", "root password"))
	if _, _, err := root.PutDatabase(ctx, "Shop", client.DatabaseSpec{Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	u, created, err := root.PutUser(ctx, "carol", "carol password")
	if err != nil || !created || u.Name != "carol" || !u.HasPassword || len(u.Grants) != 0 {
		t.Fatalf("create carol: %+v, %v, %v", u, created, err)
	}
	if _, added, err := root.GrantRole(ctx, "carol", client.Grant{Role: "read", DB: "Shop"}); err != nil || !added {
		t.Fatalf("grant: %v, %v", added, err)
	}
	s, err := client.New(url).Login(ctx, "carol", "carol password")
	if err != nil || s.Token == "" || time.Until(s.Expires) < 59*time.Minute {
		t.Fatalf("login: %+v, %v", s, err)
	}
	carol := client.New(url, client.WithToken(s.Token))
	if _, err := carol.GetDatabase(ctx, "Shop"); err != nil {
		t.Fatalf("carol reads Shop: %v", err)
	}
	if _, err := carol.ListUsers(ctx); !client.IsForbidden(err) {
		t.Fatalf("carol lists users: %v", err)
	}
	if err := root.RevokeRole(ctx, "carol", client.Grant{Role: "read", DB: "Shop"}); err != nil {
		t.Fatal(err)
	}
	if _, err := carol.GetDatabase(ctx, "Shop"); !client.IsForbidden(err) {
		t.Fatalf("carol reads Shop after the revocation: %v", err)
	}
	users, err := root.ListUsers(ctx)
	if err != nil || len(users) != 2 || users[0].Name != "carol" || users[1].Name != "root" {
		t.Fatalf("users: %+v, %v", users, err)
	}
	if err := root.DeleteUser(ctx, "carol"); err != nil {
		t.Fatal(err)
	}
	if _, err := carol.Cluster(ctx); !client.IsUnauthenticated(err) {
		t.Fatalf("a deleted user's token: %v", err)
	}
	if _, err := root.GetUser(ctx, "carol"); !client.IsNotFound(err) {
		t.Fatalf("get carol after deletion: %v", err)
	}
}
