package main

import (
	"context"
	"io"
	"log/slog"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/auth"
	"github.com/doppio-db/doppio/internal/node"
)

// TestCLIUserCommands drives `doppio user …` and `doppio login` (the
// built binary) against a node with authentication on.
func TestCLIUserCommands(t *testing.T) {
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "doppio")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := node.Start(ctx, node.Config{
		DataDir: filepath.Join(tmp, "data"), HTTPAddr: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Authenticate: true, Users: auth.StoreOptions{Hash: auth.HashParams{Time: 1, MemoryKiB: 64, Threads: 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	rootPW := "root password"
	if _, err := n.Users().Put(ctx, auth.RootUser, &rootPW); err != nil {
		t.Fatal(err)
	}
	c := &cli{t: t, bin: bin, server: "http://" + n.Addr()}
	root := []string{"--user", "root", "--password", rootPW}

	_, errs, code := c.run("", "user", "list")
	if code != 1 || !strings.Contains(errs, "requires authentication") {
		t.Fatalf("user list without credentials: exit %d, %s", code, errs)
	}
	c.ok("", append(root, "schema", "put", "Shop", "--partitions", "1")...)
	c.ok(`{"key":[{"name":"id","type":"string"}],"schema":{"type":"record","name":"T","fields":[{"name":"v","type":"int"}]}}`,
		append(root, "schema", "put", "Shop/T")...)
	created := regexp.MustCompile(`"created": "[^"]+"`)
	out := created.ReplaceAllString(c.ok("alice password\n", append(root, "user", "create", "alice", "--stdin")...), `"created": "CREATED"`)
	expect(t, "user create", out, `{
  "name": "alice",
  "hasPassword": true,
  "grants": [],
  "created": "CREATED"
}
`)
	c.ok("", append(root, "user", "grant", "alice", "readWrite", "Shop")...)
	c.ok("", append(root, "user", "create", "ops")...)
	c.ok("", append(root, "user", "grant", "ops", "clusterAdmin")...)
	expect(t, "user list", c.ok("", append(root, "user", "list")...), `NAME   PASSWORD  ROLES
alice  yes       readWrite on Shop
ops    no        clusterAdmin
root   yes       root
`)
	_, errs, code = c.run("", "user", "grant", "alice", "owner", "--user", "root", "--password", rootPW)
	if code != 1 || !strings.Contains(errs, `unknown role "owner"`) {
		t.Fatalf("grant an unknown role: exit %d, %s", code, errs)
	}

	token := strings.TrimSpace(c.ok("", "login", "--user", "alice", "--password", "alice password"))
	if !strings.HasPrefix(token, "dpt1.") {
		t.Fatalf("login printed %q", token)
	}
	c.ok("", "--token", token, "put", "Shop/T/k1", "-d", `{"v":1}`)
	// The commands that make their own requests send the credentials too.
	if out := c.ok("", "--token", token, "changes", "tail", "Shop", "--bootstrap", "--count", "1"); !strings.Contains(out, `"after":{"v":1}`) {
		t.Fatalf("changes tail: %s", out)
	}
	if out := c.ok("", append(root, "check", "Shop")...); !strings.Contains(out, "consistent") {
		t.Fatalf("check: %s", out)
	}
	_, errs, code = c.run("", "--token", token, "user", "list")
	if code != 1 || !strings.Contains(errs, `user "alice" lacks the userAdmin privilege`) {
		t.Fatalf("alice lists users: exit %d, %s", code, errs)
	}
	c.ok("", append(root, "user", "revoke", "alice", "readWrite", "Shop")...)
	_, errs, code = c.run("", "--token", token, "get", "Shop/T/k1")
	if code != 1 || !strings.Contains(errs, "lacks the read privilege on database Shop") {
		t.Fatalf("alice reads after the revocation: exit %d, %s", code, errs)
	}
	c.ok("", append(root, "user", "passwd", "alice", "--new-password", "alice second password")...)
	_, errs, code = c.run("", "--token", token, "user", "get", "alice")
	if code != 1 || !strings.Contains(errs, "session token revoked") {
		t.Fatalf("a token of the old password: exit %d, %s", code, errs)
	}
	c.ok("", append(root, "user", "delete", "alice")...)
	_, errs, code = c.run("", append(root, "user", "get", "alice")...)
	if code != exitNotFound || !strings.Contains(errs, `no user "alice"`) {
		t.Fatalf("get a deleted user: exit %d, %s", code, errs)
	}
	_, errs, code = c.run("", append(root, "user", "delete", "root")...)
	if code != exitConflict || !strings.Contains(errs, "cannot be deleted") {
		t.Fatalf("delete root: exit %d, %s", code, errs)
	}
}
