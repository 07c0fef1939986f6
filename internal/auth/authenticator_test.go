package auth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/doppio-db/doppio/internal/embedetcd"
	"github.com/doppio-db/doppio/internal/problem"
)

const prefix = "/doppio"

func startEtcd(t testing.TB) *clientv3.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := embedetcd.Start(ctx, t.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("embedetcd: %v", err)
	}
	t.Cleanup(func() { srv.Close() })
	cli, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func openStore(t *testing.T, cli *clientv3.Client, o StoreOptions) *Store {
	t.Helper()
	if o.Hash == (HashParams{}) {
		o.Hash = cheap
	}
	s, err := OpenStore(context.Background(), cli, prefix, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// clock is a settable testing clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func request(header string) *http.Request {
	r := httptest.NewRequest("GET", "/x", nil)
	if header != "" {
		r.Header.Set("Authorization", header)
	}
	return r
}

func basic(user, pw string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pw))
}

func ptr(s string) *string { return &s }

func mustPut(t *testing.T, s *Store, name, pw string, grants ...Grant) {
	t.Helper()
	var p *string
	if pw != "" {
		p = ptr(pw)
	}
	if _, err := s.Put(context.Background(), name, p); err != nil {
		t.Fatalf("put %s: %v", name, err)
	}
	for _, g := range grants {
		if _, err := s.AddGrant(context.Background(), name, g); err != nil {
			t.Fatalf("grant %s to %s: %v", g, name, err)
		}
	}
}

// refusal asserts err is a Refusal of reason with HTTP status.
func refusal(t *testing.T, what string, err error, reason string, status int) {
	t.Helper()
	r, ok := err.(*Refusal)
	if !ok {
		t.Fatalf("%s: %v (%T), want a refusal %s", what, err, err, reason)
	}
	if r.Reason != reason || r.Problem.Kind.Status() != status {
		t.Fatalf("%s: refused %s %d (%s), want %s %d", what, r.Reason, r.Problem.Kind.Status(), r.Problem.Detail, reason, status)
	}
}

func TestBasicIsHashedOnceThenRemembered(t *testing.T) {
	s := openStore(t, startEtcd(t), StoreOptions{})
	a := New(s, Config{})
	mustPut(t, s, "alice", "alice password")
	before := s.Hashes()
	for i := range 5 {
		c, err := a.Authenticate(request(basic("alice", "alice password")))
		if err != nil || c != (Caller{User: "alice"}) {
			t.Fatalf("request %d: %+v, %v", i, c, err)
		}
	}
	if got := s.Hashes() - before; got != 1 {
		t.Fatalf("5 Basic requests computed %d slow hashes, want 1", got)
	}
	_, err := a.Authenticate(request(basic("alice", "another password")))
	refusal(t, "wrong password", err, ReasonWrongPassword, 401)
	// A new password forgets the remembered one: the old one fails (one
	// hash), the new one is hashed once and remembered.
	mustPut(t, s, "alice", "new alice password")
	before = s.Hashes()
	_, err = a.Authenticate(request(basic("alice", "alice password")))
	refusal(t, "old password", err, ReasonWrongPassword, 401)
	for range 3 {
		if _, err := a.Authenticate(request(basic("alice", "new alice password"))); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.Hashes() - before; got != 2 {
		t.Fatalf("hashes after the change: %d, want 2", got)
	}
	if err := s.Delete(context.Background(), "alice"); err != nil {
		t.Fatal(err)
	}
	_, err = a.Authenticate(request(basic("alice", "new alice password")))
	refusal(t, "deleted user", err, ReasonUnknownUser, 401)
}

func TestTokensExpireAndDieWithTheirCredentials(t *testing.T) {
	s := openStore(t, startEtcd(t), StoreOptions{})
	clk := &clock{now: time.Unix(2_000_000_000, 0)}
	a := New(s, Config{TokenLifetime: time.Minute, Now: clk.Now})
	mustPut(t, s, "alice", "alice password")
	ctx := context.Background()
	tok, exp, err := a.Login(ctx, "alice", "alice password", "10.0.0.1")
	if err != nil || !exp.Equal(clk.Now().Add(time.Minute)) {
		t.Fatalf("login: %v, expires %v", err, exp)
	}
	if c, err := a.Authenticate(request("Bearer " + tok)); err != nil || c.User != "alice" {
		t.Fatalf("bearer: %+v, %v", c, err)
	}
	clk.add(time.Minute)
	_, err = a.Authenticate(request("Bearer " + tok))
	refusal(t, "expired", err, ReasonExpired, 401)

	tok, _, _ = a.Login(ctx, "alice", "alice password", "10.0.0.1")
	other := New(openStore(t, startEtcd(t), StoreOptions{}), Config{Now: clk.Now})
	_, err = other.Authenticate(request("Bearer " + tok))
	refusal(t, "another cluster's key", err, ReasonBadToken, 401)
	_, err = a.Authenticate(request("Bearer " + tok[:len(tok)-2] + "AA"))
	refusal(t, "tampered", err, ReasonBadToken, 401)

	mustPut(t, s, "alice", "changed password")
	_, err = a.Authenticate(request("Bearer " + tok))
	refusal(t, "after a password change", err, ReasonRevoked, 401)

	tok, _, _ = a.Login(ctx, "alice", "changed password", "10.0.0.1")
	if err := s.Delete(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, "alice", "changed password") // same name and password, a new user
	_, err = a.Authenticate(request("Bearer " + tok))
	refusal(t, "a deleted user's token", err, ReasonRevoked, 401)

	_, _, err = a.Login(ctx, "alice", "wrong password", "10.0.0.1")
	refusal(t, "login with a wrong password", err, ReasonWrongPassword, 401)
	_, _, err = a.Login(ctx, "nobody", "whatever1", "10.0.0.1")
	refusal(t, "login of nobody", err, ReasonUnknownUser, 401)
}

func TestLoginsAreRateLimitedPerUserAndAddress(t *testing.T) {
	s := openStore(t, startEtcd(t), StoreOptions{})
	clk := &clock{now: time.Unix(2_000_000_000, 0)}
	a := New(s, Config{LoginRate: 0.5, LoginBurst: 2, Now: clk.Now})
	mustPut(t, s, "alice", "alice password")
	mustPut(t, s, "bob", "bob password")
	ctx := context.Background()
	for range 2 {
		_, _, err := a.Login(ctx, "alice", "wrong password", "10.0.0.1")
		refusal(t, "guess", err, ReasonWrongPassword, 401)
	}
	before := s.Hashes()
	_, _, err := a.Login(ctx, "alice", "alice password", "10.0.0.1")
	refusal(t, "third attempt", err, ReasonRateLimited, 429)
	if pe, _ := problem.As(err); pe.RetryAfter != 2 {
		t.Fatalf("Retry-After %d, want 2", pe.RetryAfter)
	}
	_, _, err = a.Login(ctx, "alice", "alice password", "10.0.0.2")
	refusal(t, "the same user from elsewhere", err, ReasonRateLimited, 429)
	_, _, err = a.Login(ctx, "bob", "bob password", "10.0.0.1")
	refusal(t, "another user from the same address", err, ReasonRateLimited, 429)
	if s.Hashes() != before {
		t.Fatal("a refused attempt computed a hash")
	}
	if _, _, err := a.Login(ctx, "bob", "bob password", "10.0.0.2"); err != nil {
		t.Fatalf("another user from another address: %v", err)
	}
	clk.add(2 * time.Second)
	if _, _, err := a.Login(ctx, "alice", "alice password", "10.0.0.1"); err != nil {
		t.Fatalf("after the wait: %v", err)
	}
}

func TestClientCertificates(t *testing.T) {
	s := openStore(t, startEtcd(t), StoreOptions{})
	a := New(s, Config{})
	mustPut(t, s, "carol", "")
	withCert := func(cn, header string) *http.Request {
		r := request(header)
		r.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{{Subject: pkix.Name{CommonName: cn}}}}}
		return r
	}
	for cn, want := range map[string]Caller{"root": {User: "root"}, "carol": {User: "carol"}} {
		if c, err := a.Authenticate(withCert(cn, "")); err != nil || c != want {
			t.Fatalf("certificate %s: %+v, %v", cn, c, err)
		}
	}
	_, err := a.Authenticate(withCert("node", ""))
	refusal(t, "node certificate", err, ReasonNodeCert, 401)
	_, err = a.Authenticate(withCert("mallory", ""))
	refusal(t, "unknown user's certificate", err, ReasonUnknownUser, 401)
	// An unverified certificate is no credential.
	r := request("")
	r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{{Subject: pkix.Name{CommonName: "root"}}}}
	_, err = a.Authenticate(r)
	refusal(t, "unverified certificate", err, ReasonNone, 401)
	// carol has no password: Basic cannot name her.
	_, err = a.Authenticate(request(basic("carol", "anything1")))
	refusal(t, "password of a certificate-only user", err, ReasonNoPassword, 401)
	_, err = a.Authenticate(request("Digest x"))
	refusal(t, "another scheme", err, ReasonMalformed, 401)
}

func TestRootAlwaysExistsAndKeepsRoot(t *testing.T) {
	s := openStore(t, startEtcd(t), StoreOptions{})
	ctx := context.Background()
	if u, err := s.Get("root"); err != nil || u.HasPassword || len(u.Grants) != 1 || u.Grants[0] != (Grant{Role: RoleRoot}) {
		t.Fatalf("root before any change: %+v, %v", u, err)
	}
	if err := s.Delete(ctx, "root"); !problem.Is(err, problem.Conflict) {
		t.Fatalf("delete root: %v", err)
	}
	if err := s.RemoveGrant(ctx, "root", Grant{Role: RoleRoot}); !problem.Is(err, problem.Conflict) {
		t.Fatalf("revoke root from root: %v", err)
	}
	a := New(s, Config{})
	_, err := a.Authenticate(request(basic("root", "root password")))
	refusal(t, "root before a password is set", err, ReasonNoPassword, 401)
	if created, err := s.Put(ctx, "root", ptr("root password")); err != nil || !created {
		t.Fatalf("set root's password: created %v, %v", created, err)
	}
	if c, err := a.Authenticate(request(basic("root", "root password"))); err != nil || c.User != "root" {
		t.Fatalf("root by password: %+v, %v", c, err)
	}
	if u, _ := s.Get("root"); !u.HasPassword || len(u.Grants) != 1 {
		t.Fatalf("root after its password: %+v", u)
	}
	if names := s.List(); len(names) != 1 || names[0].Name != "root" {
		t.Fatalf("list: %+v", names)
	}
}

func TestUserChangesAreValidated(t *testing.T) {
	s := openStore(t, startEtcd(t), StoreOptions{})
	ctx := context.Background()
	for _, c := range []struct {
		name string
		pw   *string
		kind problem.Kind
	}{
		{"node", nil, problem.Malformed},
		{"", nil, problem.Malformed},
		{"a/b", nil, problem.Malformed},
		{"alice", ptr("short"), problem.Invalid},
	} {
		if _, err := s.Put(ctx, c.name, c.pw); !problem.Is(err, c.kind) {
			t.Errorf("put %q: %v, want kind %d", c.name, err, c.kind)
		}
	}
	if _, err := s.AddGrant(ctx, "nobody", Grant{Role: RoleRead, DB: "A"}); !problem.Is(err, problem.NotFound) {
		t.Errorf("grant to nobody: %v", err)
	}
	mustPut(t, s, "alice", "")
	for _, g := range []Grant{{Role: "owner"}, {Role: RoleRead}, {Role: RoleUserAdmin, DB: "A"}} {
		if _, err := s.AddGrant(ctx, "alice", g); !problem.Is(err, problem.Invalid) {
			t.Errorf("grant %+v: %v", g, err)
		}
	}
	if added, err := s.AddGrant(ctx, "alice", Grant{Role: RoleRead, DB: "A"}); err != nil || !added {
		t.Fatal(added, err)
	}
	if added, err := s.AddGrant(ctx, "alice", Grant{Role: RoleRead, DB: "A"}); err != nil || added {
		t.Fatalf("granting twice: added %v, %v", added, err)
	}
	if err := s.RemoveGrant(ctx, "alice", Grant{Role: RoleRead, DB: "B"}); !problem.Is(err, problem.NotFound) {
		t.Errorf("revoke what is not held: %v", err)
	}
	if u, _ := s.Get("alice"); len(u.Grants) != 1 || u.HasPassword {
		t.Fatalf("alice after refused changes: %+v", u)
	}
}

func reason(err error) string {
	if r, ok := err.(*Refusal); ok {
		return r.Reason
	}
	return ""
}

// waitFor polls cond until it holds, failing after bound.
func waitFor(t *testing.T, bound time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > bound {
			t.Fatalf("%s: not within %v", what, bound)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

// TestRevocationReachesEveryNodeWithinTheBound drives two nodes'
// authenticators on one etcd: a deletion, a password change and a
// revoked grant made through one take effect on the other within the
// stated bound (DefaultResyncInterval), by the watch; and, with the watch
// stalled, by the resync alone.
func TestRevocationReachesEveryNodeWithinTheBound(t *testing.T) {
	cli := startEtcd(t)
	for _, mode := range []struct {
		name string
		opts StoreOptions
	}{
		{"watch", StoreOptions{}},
		{"resync only", StoreOptions{NoWatch: true, ResyncInterval: 300 * time.Millisecond}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			bound := DefaultResyncInterval
			if mode.opts.ResyncInterval > 0 {
				bound = mode.opts.ResyncInterval + time.Second
			}
			one := openStore(t, cli, StoreOptions{})
			two := openStore(t, cli, mode.opts)
			// Polling node two must never meet its rate limit.
			a1, a2 := New(one, Config{}), New(two, Config{LoginBurst: 1 << 20})
			ctx := context.Background()
			mustPut(t, one, "dave", "dave password", Grant{Role: RoleReadWrite, DB: "A"})
			waitFor(t, bound, "the new user and grant reach node two", func() bool {
				c, err := a2.Authenticate(request(basic("dave", "dave password")))
				return err == nil && a2.Authorize(c, ReadWrite, "A") == nil
			})
			tok, _, err := a1.Login(ctx, "dave", "dave password", "10.0.0.9")
			if err != nil {
				t.Fatal(err)
			}
			if c, err := a2.Authenticate(request("Bearer " + tok)); err != nil || a2.Authorize(c, ReadWrite, "A") != nil {
				t.Fatalf("token on node two: %+v, %v", c, err)
			}

			if err := one.RemoveGrant(ctx, "dave", Grant{Role: RoleReadWrite, DB: "A"}); err != nil {
				t.Fatal(err)
			}
			d := waitFor(t, bound, "the revoked grant on node two", func() bool {
				return reason(a2.Authorize(Caller{User: "dave"}, ReadWrite, "A")) == ReasonForbidden
			})
			t.Logf("grant revocation took effect on node two after %v", d)

			mustPut(t, one, "dave", "dave new password")
			d = waitFor(t, bound, "the password change on node two", func() bool {
				_, e1 := a2.Authenticate(request("Bearer " + tok))
				_, e2 := a2.Authenticate(request(basic("dave", "dave password")))
				return reason(e1) == ReasonRevoked && reason(e2) == ReasonWrongPassword
			})
			t.Logf("password change took effect on node two after %v", d)

			if err := one.Delete(ctx, "dave"); err != nil {
				t.Fatal(err)
			}
			d = waitFor(t, bound, "the deletion on node two", func() bool {
				_, err := a2.Authenticate(request(basic("dave", "dave new password")))
				return reason(err) == ReasonUnknownUser
			})
			t.Logf("deletion took effect on node two after %v", d)
		})
	}
}

func TestAStaleCopyRefusesEveryCredential(t *testing.T) {
	s := openStore(t, startEtcd(t), StoreOptions{ResyncInterval: time.Hour, MaxStale: 200 * time.Millisecond})
	a := New(s, Config{})
	mustPut(t, s, "erin", "erin password")
	time.Sleep(300 * time.Millisecond)
	_, err := a.Authenticate(request(basic("erin", "erin password")))
	refusal(t, "stale copy", err, ReasonStale, 503)
}

func TestAllows(t *testing.T) {
	alice := Caller{User: "alice"}
	grants := []Grant{{Role: RoleReadWrite, DB: "A"}, {Role: RoleRead, DB: "B"}, {Role: RoleClusterAdmin}}
	for _, c := range []struct {
		c    Caller
		gs   []Grant
		p    Privilege
		db   string
		want bool
	}{
		{Caller{}, nil, Public, "", true},
		{Caller{}, nil, Authenticated, "", false},
		{Caller{}, nil, Read, "A", false},
		{alice, nil, Authenticated, "", true},
		{alice, grants, Read, "A", true},
		{alice, grants, ReadWrite, "A", true},
		{alice, grants, DBAdmin, "A", false},
		{alice, grants, Read, "B", true},
		{alice, grants, ReadWrite, "B", false},
		{alice, grants, Read, "C", false},
		{alice, grants, ClusterAdmin, "", true},
		{alice, grants, UserAdmin, "", false},
		{alice, grants, NodeOnly, "", false},
		{alice, []Grant{{Role: RoleDBAdmin, DB: "A"}}, Read, "A", true},
		{alice, []Grant{{Role: RoleRoot}}, DBAdmin, "Z", true},
		{alice, []Grant{{Role: RoleRoot}}, UserAdmin, "", true},
		{alice, []Grant{{Role: RoleRoot}}, NodeOnly, "", false},
		{Caller{Node: true}, nil, NodeOnly, "", true},
		{alice, []Grant{{Role: RoleRoot}}, Closed, "", false},
		{Caller{}, nil, Closed, "", false},
		{Caller{Node: true}, nil, ReadWrite, "A", true},
	} {
		if got := Allows(c.c, c.gs, c.p, c.db); got != c.want {
			t.Errorf("Allows(%+v, %v, %s, %q) = %v", c.c, c.gs, c.p, c.db, got)
		}
	}
	for _, p := range Privileges {
		if q, ok := ParsePrivilege(p.String()); !ok || q != p {
			t.Errorf("ParsePrivilege(%q) = %v, %v", p, q, ok)
		}
	}
	if _, ok := ParsePrivilege("closed"); ok {
		t.Error("a route can name the closed privilege")
	}
	if !strings.Contains(Challenge, "Bearer") || !strings.Contains(Challenge, "Basic") {
		t.Fatal(Challenge)
	}
}
