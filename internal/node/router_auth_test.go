package node

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/api"
	"github.com/doppio-db/doppio/internal/auth"
)

// TestRouterAuthenticatesWithTheClustersUsers: a router with
// authentication on refuses what the nodes would refuse, logs users in
// itself, and the requests it relays carry the caller's credentials to
// the node, which checks them again.
func TestRouterAuthenticatesWithTheClustersUsers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cheap := auth.StoreOptions{Hash: auth.HashParams{Time: 1, MemoryKiB: 64, Threads: 1}}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	n, err := Start(ctx, Config{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", Authenticate: true, Users: cheap, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	pw := "root password"
	if _, err := n.Users().Put(ctx, auth.RootUser, &pw); err != nil {
		t.Fatal(err)
	}
	rt, err := StartRouter(ctx, RouterConfig{HTTPAddr: "127.0.0.1:0", EtcdEndpoints: n.etcdEndpoints(),
		API: api.Config{Authenticate: true}, Users: cheap, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	send := func(method, path, body, authz string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, "http://"+rt.Addr()+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if authz != "" {
			req.Header.Set("Authorization", authz)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	root := "Basic " + base64.StdEncoding.EncodeToString([]byte("root:"+pw))
	for _, c := range []struct {
		method, path, body, authz string
		status                    int
	}{
		{"GET", "/_schemas", "", "", 401},
		{"PUT", "/_schemas/db", `{"partitions":1}`, root, 201},
		{"PUT", "/_users/bob", `{"password":"bob password"}`, root, 201},
		{"GET", "/_schemas/db", "", "Basic " + base64.StdEncoding.EncodeToString([]byte("bob:bob password")), 403},
		{"POST", "/_users/bob/grants", `{"role":"read","db":"db"}`, root, 201},
	} {
		if status, body := send(c.method, c.path, c.body, c.authz); status != c.status {
			t.Fatalf("%s %s through the router: %d %s, want %d", c.method, c.path, status, body, c.status)
		}
	}
	status, body := send("POST", "/_auth/login", `{"user":"bob","password":"bob password"}`, "")
	var s struct{ Token string }
	if status != 200 || json.Unmarshal([]byte(body), &s) != nil {
		t.Fatalf("login through the router: %d %s", status, body)
	}
	if status, body := send("GET", "/_schemas/db", "", "Bearer "+s.Token); status != 200 {
		t.Fatalf("bob's token through the router: %d %s", status, body)
	}
}
