package api_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/api"
	"github.com/doppio-db/doppio/internal/audit"
	"github.com/doppio-db/doppio/internal/auth"
	"github.com/doppio-db/doppio/internal/node"
)

// cheapHash keeps password hashing out of the tests' time.
var cheapHash = auth.HashParams{Time: 1, MemoryKiB: 64, Threads: 1}

const rootPassword = "root password"

// secureNode starts a node with authentication on, root's password set,
// and returns its address and data directory.
func secureNode(t *testing.T, ac auth.Config) (host, dir string) {
	t.Helper()
	dir = t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	n, err := node.Start(ctx, node.Config{
		DataDir: dir, HTTPAddr: "127.0.0.1:0", Logger: log,
		Authenticate: true, Auth: ac, Users: auth.StoreOptions{Hash: cheapHash},
	})
	if err != nil {
		t.Fatalf("start node: %v", err)
	}
	t.Cleanup(func() { n.Close() })
	pw := rootPassword
	if _, err := n.Users().Put(ctx, auth.RootUser, &pw); err != nil {
		t.Fatal(err)
	}
	return n.Addr(), dir
}

func basicAuth(user, pw string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pw))
}

// asRoot is the header pair that authenticates root.
var asRoot = []string{"Authorization", basicAuth("root", rootPassword)}

// sendTo is send to another node than the package's.
func sendTo(t testing.TB, host, method, path string, body any, hdr ...string) answer {
	t.Helper()
	a, err := probe(host, method, path, false, body, hdr...)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return a
}

const authTable = `{"key":[{"name":"id","type":"string"}],
  "schema":{"type":"record","name":"Item","fields":[{"name":"v","type":"int"}]}}`

const authTableV2 = `{"key":[{"name":"id","type":"string"}],
  "schema":{"type":"record","name":"Item","fields":[{"name":"v","type":"int"},{"name":"w","type":"int","default":0}]}}`

// principal is a user of the matrix and its grants; "" sends no
// credentials.
type principal struct {
	name   string
	grants []auth.Grant
}

var principals = []principal{
	{name: ""},
	{name: "nobody"},
	{name: "reader", grants: []auth.Grant{{Role: auth.RoleRead, DB: "A"}}},
	{name: "writer", grants: []auth.Grant{{Role: auth.RoleReadWrite, DB: "A"}}},
	{name: "dba", grants: []auth.Grant{{Role: auth.RoleDBAdmin, DB: "A"}}},
	{name: "ops", grants: []auth.Grant{{Role: auth.RoleClusterAdmin}}},
	{name: "admin", grants: []auth.Grant{{Role: auth.RoleUserAdmin}}},
	{name: "root", grants: []auth.Grant{{Role: auth.RoleRoot}}},
}

func (p principal) header() []string {
	switch p.name {
	case "":
		return nil
	case "root":
		return asRoot
	}
	return []string{"Authorization", basicAuth(p.name, p.name+" password")}
}

// instance is a route's pattern made a concrete request path on database
// db, and a body that would change something were the request allowed.
func instance(rt api.RouteInfo, db string) (path string, body any) {
	name := "ghost"
	if strings.HasPrefix(rt.Pattern, "/_users") {
		name = "target"
	}
	path = strings.NewReplacer("{db}", db, "{table}", "T", "{key}", "k1", "{partition}", "0",
		"{version}", "1", "{name}", name, "{role}", "read").Replace(rt.Pattern)
	switch {
	case rt.Method == "PUT" && rt.Pattern == "/{db}/{table}/{key}", rt.Method == "POST" && rt.Pattern == "/{db}/{table}/{key}":
		body = `{"v":99}`
	case rt.Method == "PATCH":
		body = `{"v":98}`
	case rt.Pattern == "/{db}/_txn" || rt.Pattern == "/{db}/_batch":
		body = `{"ops":[{"op":"put","table":"T","key":["k1"],"doc":{"v":97}}]}`
	case rt.Pattern == "/_schemas/{db}":
		body = `{"partitions":1}`
	case rt.Pattern == "/_schemas/{db}/{table}":
		body = authTableV2
	case rt.Pattern == "/_users/{name}" && rt.Method == "PUT":
		body = `{"password":"a new password"}`
	case rt.Pattern == "/_users/{name}/grants":
		body = `{"role":"readWrite","db":"` + db + `"}`
	case rt.Pattern == "/_auth/login":
		body = `{"user":"target","password":"target password"}`
	case rt.Method == "PUT" || rt.Method == "POST":
		body = `{}`
	}
	return path, body
}

// authState is the state refused requests must leave as it was.
func authState(t *testing.T, host string) string {
	t.Helper()
	var b strings.Builder
	for _, path := range []string{"/A/T/k1", "/B/T/k1", "/_schemas/A/T", "/_schemas/B/T", "/_schemas/A", "/_schemas/B", "/_users", "/_users/target", "/_datastreams"} {
		a := sendTo(t, host, "GET", path, nil, asRoot...)
		b.WriteString(path + " " + strconv.Itoa(a.status) + " " + string(a.body) + "\n")
	}
	return b.String()
}

// TestPrivilegeMatrix drives every route of the table, for every role,
// on the database the role is granted on and on another, against a
// real node with authentication on: each request is refused (401 without
// credentials, 403 with) or admitted exactly as the privilege table
// says, and the refused ones change nothing.
func TestPrivilegeMatrix(t *testing.T) {
	host, dir := secureNode(t, auth.Config{LoginBurst: 1 << 20})
	for _, db := range []string{"A", "B"} {
		expect(t, sendTo(t, host, "PUT", "/_schemas/"+db, `{"partitions":1}`, asRoot...), 201, "create "+db)
		expect(t, sendTo(t, host, "PUT", "/_schemas/"+db+"/T", authTable, asRoot...), 201, "create "+db+".T")
		expect(t, sendTo(t, host, "PUT", "/"+db+"/T/k1", `{"v":1}`, asRoot...), 201, "put "+db+"/T/k1")
	}
	users := append([]principal{{name: "target"}}, principals[1:len(principals)-1]...)
	for _, p := range users {
		expect(t, sendTo(t, host, "PUT", "/_users/"+p.name, `{"password":"`+p.name+` password"}`, asRoot...), 201, "create user "+p.name)
		for _, g := range p.grants {
			b, _ := json.Marshal(g)
			expect(t, sendTo(t, host, "POST", "/_users/"+p.name+"/grants", b, asRoot...), 201, "grant "+g.String()+" to "+p.name)
		}
	}

	type call struct {
		rt      api.RouteInfo
		who     principal
		db      string
		allowed bool
	}
	var calls []call
	for _, rt := range api.RouteTable() {
		if rt.NodeOnly {
			// Not served on the REST listener at all, whoever asks.
			path, body := instance(rt, "A")
			for _, who := range principals {
				a, err := probe(host, rt.Method, path, rt.Stream, body, who.header()...)
				if err != nil || a.status != 404 {
					t.Errorf("%s %s as %q on the REST listener: %d %s (%v), want 404", rt.Method, path, who.name, a.status, a.body, err)
				}
			}
			continue
		}
		dbs := []string{""}
		if strings.Contains(rt.Pattern, "{db}") {
			dbs = []string{"A", "B"} // A: the database the roles are granted on
		}
		for _, who := range principals {
			for _, db := range dbs {
				c := auth.Caller{User: who.name}
				calls = append(calls, call{rt, who, db, auth.Allows(c, who.grants, rt.Priv, db)})
			}
		}
	}
	run := func(c call) answer {
		path, body := instance(c.rt, c.db)
		a, err := probe(host, c.rt.Method, path, c.rt.Stream, body, c.who.header()...)
		if err != nil {
			t.Fatalf("%s %s as %q: %v", c.rt.Method, path, c.who.name, err)
		}
		return a
	}

	// The refused first, all of them, then the state is compared.
	before := authState(t, host)
	refused := 0
	for _, c := range calls {
		if c.allowed {
			continue
		}
		refused++
		a := run(c)
		want := 403
		if c.who.name == "" {
			want = 401
		}
		if a.status != want {
			t.Errorf("%s %s on %q as %q (%s): %d %s, want %d", c.rt.Method, c.rt.Pattern, c.db, c.who.name, c.rt.Priv, a.status, a.body, want)
			continue
		}
		if ct := a.header.Get("Content-Type"); ct != "application/problem+json" {
			t.Errorf("%s %s as %q: Content-Type %q", c.rt.Method, c.rt.Pattern, c.who.name, ct)
		}
		if got := a.header.Get("WWW-Authenticate"); (want == 401) != (got == auth.Challenge) {
			t.Errorf("%s %s as %q: %d with WWW-Authenticate %q", c.rt.Method, c.rt.Pattern, c.who.name, want, got)
		}
	}
	if after := authState(t, host); after != before {
		t.Fatalf("refused requests changed the state:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	// Then the admitted: whatever they answer, it is not a refusal.
	admitted := 0
	for _, c := range calls {
		if !c.allowed {
			continue
		}
		admitted++
		if a := run(c); a.status == 401 || a.status == 403 {
			t.Errorf("%s %s on %q as %q (%s): refused %d %s", c.rt.Method, c.rt.Pattern, c.db, c.who.name, c.rt.Priv, a.status, a.body)
		}
	}
	t.Logf("%d requests refused, %d admitted, as the table says", refused, admitted)

	// Refusals are counted by reason.
	m := string(sendTo(t, host, "GET", "/metrics", nil, asRoot...).body)
	for _, reason := range []string{"forbidden", "none"} {
		if !strings.Contains(m, `doppio_auth_refusals_total{reason="`+reason+`"}`) {
			t.Errorf("/metrics has no refusals counted as %s", reason)
		}
	}

	// The audit log has the refused schema change, with who and from where.
	evs := readAudit(t, dir)
	found := false
	for _, e := range evs {
		if e.Action == "schema.put" && e.User == "reader" && e.Outcome == audit.Denied && e.Status == 403 &&
			e.Target == "PUT /_schemas/A/T" && e.From == "127.0.0.1" {
			found = true
		}
	}
	if !found {
		t.Errorf("the audit log lacks reader's refused schema change; it has %d events", len(evs))
	}
	// And the refused drops: a table's needs dbAdmin, a database's clusterAdmin.
	for _, target := range []string{"DELETE /_schemas/A/T", "DELETE /_schemas/A"} {
		if !slices.ContainsFunc(evs, func(e audit.Event) bool {
			return e.Action == "schema.drop" && e.User == "reader" && e.Outcome == audit.Denied && e.Target == target
		}) {
			t.Errorf("the audit log lacks reader's refused %s", target)
		}
	}
}

func readAudit(t *testing.T, dir string) []audit.Event {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []audit.Event
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e audit.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		out = append(out, e)
	}
	return out
}

// hashes reads doppio_auth_password_hashes_total.
func hashes(t *testing.T, host string) int {
	t.Helper()
	for _, l := range strings.Split(string(sendTo(t, host, "GET", "/metrics", nil, asRoot...).body), "\n") {
		if v, ok := strings.CutPrefix(l, "doppio_auth_password_hashes_total "); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(l)
			}
			return n
		}
	}
	t.Fatal("no doppio_auth_password_hashes_total in /metrics")
	return 0
}

func problemType(t *testing.T, a answer) string {
	t.Helper()
	return decode(t, a.body)["type"].(string)
}

// TestLoginTokensAndBasic goes through the credentials a client presents:
// a token from a login, Basic verified once, and each way they fail.
func TestLoginTokensAndBasic(t *testing.T) {
	host, dir := secureNode(t, auth.Config{})
	expect(t, sendTo(t, host, "PUT", "/_users/alice", `{"password":"alice password"}`, asRoot...), 201, "create alice")
	expect(t, sendTo(t, host, "PUT", "/_schemas/A", `{"partitions":1}`, asRoot...), 201, "create A")
	expect(t, sendTo(t, host, "POST", "/_users/alice/grants", `{"role":"read","db":"A"}`, asRoot...), 201, "grant")

	a := sendTo(t, host, "POST", "/_auth/login", `{"user":"alice","password":"alice password"}`)
	expect(t, a, 200, "login")
	var s struct {
		Token   string    `json:"token"`
		Expires time.Time `json:"expires"`
	}
	if err := json.Unmarshal(a.body, &s); err != nil || s.Token == "" {
		t.Fatalf("login answer %s: %v", a.body, err)
	}
	if d := time.Until(s.Expires); d < 59*time.Minute || d > time.Hour {
		t.Fatalf("token expires in %v, want 1 h", d)
	}
	bearer := []string{"Authorization", "Bearer " + s.Token}
	expect(t, sendTo(t, host, "GET", "/_schemas/A", nil, bearer...), 200, "read A with the token")
	expect(t, sendTo(t, host, "PUT", "/_schemas/A", `{"partitions":1}`, bearer...), 403, "change A with a read token")
	// Only what alice may read is listed.
	expect(t, sendTo(t, host, "PUT", "/_schemas/B", `{"partitions":1}`, asRoot...), 201, "create B")
	if l := string(sendTo(t, host, "GET", "/_schemas", nil, bearer...).body); !strings.Contains(l, `"A"`) || strings.Contains(l, `"B"`) {
		t.Fatalf("alice's database list: %s", l)
	}

	for name, hdr := range map[string]string{
		"tampered token": "Bearer " + s.Token[:len(s.Token)-3] + "AAA",
		"forged token":   "Bearer dpt1.YWxpY2U.1.9999999999.AAAA",
		"wrong password": basicAuth("alice", "not her password"),
		"unknown user":   basicAuth("mallory", "whatever1"),
		"no such scheme": "Digest username=alice",
	} {
		a := sendTo(t, host, "GET", "/_schemas/A", nil, "Authorization", hdr)
		expect(t, a, 401, name)
		if problemType(t, a) != "https://doppio.dev/problems/unauthenticated" || a.header.Get("WWW-Authenticate") != auth.Challenge {
			t.Fatalf("%s: %s %v", name, a.body, a.header)
		}
	}
	a = sendTo(t, host, "POST", "/_auth/login", `{"user":"alice","password":"nope nope"}`)
	expect(t, a, 401, "login with a wrong password")

	// Basic: one slow hash, however many requests.
	aliceBasic := []string{"Authorization", basicAuth("alice", "alice password")}
	n0 := hashes(t, host)
	for range 10 {
		expect(t, sendTo(t, host, "GET", "/_schemas/A", nil, aliceBasic...), 200, "Basic")
	}
	if n := hashes(t, host) - n0; n != 1 {
		t.Fatalf("10 Basic requests cost %d slow hashes, want 1", n)
	}

	// A revoked grant, a new password, a deletion: each takes effect at once.
	expect(t, sendTo(t, host, "DELETE", "/_users/alice/grants/read/A", nil, asRoot...), 204, "revoke")
	expect(t, sendTo(t, host, "GET", "/_schemas/A", nil, bearer...), 403, "read A after the revocation")
	expect(t, sendTo(t, host, "PUT", "/_users/alice", `{"password":"alice second password"}`, asRoot...), 200, "new password")
	expect(t, sendTo(t, host, "GET", "/_cluster", nil, bearer...), 401, "the token of the old password")
	expect(t, sendTo(t, host, "GET", "/_cluster", nil, aliceBasic...), 401, "Basic with the old password")
	expect(t, sendTo(t, host, "GET", "/_cluster", nil, "Authorization", basicAuth("alice", "alice second password")), 200, "Basic with the new one")
	expect(t, sendTo(t, host, "DELETE", "/_users/alice", nil, asRoot...), 204, "delete alice")
	expect(t, sendTo(t, host, "GET", "/_cluster", nil, "Authorization", basicAuth("alice", "alice second password")), 401, "a deleted user")

	// Bad input is refused precisely and changes nothing.
	for _, c := range []struct {
		method, path, body string
		status             int
		field              string
	}{
		{"PUT", "/_users/node", `{"password":"long enough"}`, 400, "name"},
		{"PUT", "/_users/bob", `{"password":"short"}`, 422, "password"},
		{"PUT", "/_users/bob", `{"pasword":"long enough"}`, 400, ""},
		{"POST", "/_users/root/grants", `{"role":"read"}`, 422, "role"},
		{"POST", "/_users/root/grants", `{"role":"owner"}`, 422, "role"},
		{"POST", "/_users/nobody/grants", `{"role":"userAdmin"}`, 404, ""},
		{"DELETE", "/_users/root", "", 409, ""},
		{"DELETE", "/_users/root/grants/root", "", 409, ""},
		{"POST", "/_auth/login", `{"user":"root"}`, 400, "password"},
	} {
		var body any
		if c.body != "" {
			body = c.body
		}
		a := sendTo(t, host, c.method, c.path, body, asRoot...)
		expect(t, a, c.status, c.method+" "+c.path+" "+c.body)
		if f, _ := decode(t, a.body)["field"].(string); f != c.field {
			t.Errorf("%s %s %s: field %q, want %q", c.method, c.path, c.body, f, c.field)
		}
	}
	users := string(sendTo(t, host, "GET", "/_users", nil, asRoot...).body)
	if strings.Contains(users, "bob") || strings.Contains(users, `"node"`) || strings.Count(users, `"name"`) != 1 {
		t.Fatalf("users after refused changes: %s", users)
	}

	// Logins are audited, failures too.
	var ok, failed bool
	for _, e := range readAudit(t, dir) {
		if e.Action == "login" && e.User == "alice" {
			ok = ok || (e.Outcome == audit.Success && e.Status == 200)
			failed = failed || (e.Outcome == audit.Denied && e.Status == 401)
		}
	}
	if !ok || !failed {
		t.Fatalf("audit log: alice's login success %v, failure %v", ok, failed)
	}
}

// TestOnlyRootMakesRoot: a userAdmin manages users but cannot grant root,
// nor take over a root's password.
func TestOnlyRootMakesRoot(t *testing.T) {
	host, _ := secureNode(t, auth.Config{})
	expect(t, sendTo(t, host, "PUT", "/_users/admin", `{"password":"admin password"}`, asRoot...), 201, "create admin")
	expect(t, sendTo(t, host, "POST", "/_users/admin/grants", `{"role":"userAdmin"}`, asRoot...), 201, "grant userAdmin")
	asAdmin := []string{"Authorization", basicAuth("admin", "admin password")}
	expect(t, sendTo(t, host, "PUT", "/_users/eve", `{"password":"eve password"}`, asAdmin...), 201, "admin creates eve")
	expect(t, sendTo(t, host, "POST", "/_users/eve/grants", `{"role":"clusterAdmin"}`, asAdmin...), 201, "admin grants clusterAdmin")
	expect(t, sendTo(t, host, "POST", "/_users/admin/grants", `{"role":"root"}`, asAdmin...), 403, "admin makes itself root")
	expect(t, sendTo(t, host, "PUT", "/_users/root", `{"password":"taken over"}`, asAdmin...), 403, "admin sets root's password")
	expect(t, sendTo(t, host, "POST", "/_users/eve/grants", `{"role":"root"}`, asRoot...), 201, "root makes eve root")
	expect(t, sendTo(t, host, "PUT", "/_users/eve", `{"password":"taken over"}`, asAdmin...), 403, "admin sets a root's password")
	expect(t, sendTo(t, host, "DELETE", "/_users/eve", nil, asAdmin...), 403, "admin deletes a root")
	expect(t, sendTo(t, host, "GET", "/_cluster", nil, asRoot...), 200, "root's password is unchanged")
	expect(t, sendTo(t, host, "GET", "/_cluster", nil, "Authorization", basicAuth("eve", "eve password")), 200, "eve's password is unchanged")
}

// TestLoginsAreRateLimited: beyond the burst, 429 with Retry-After, and
// no hash computed.
func TestLoginsAreRateLimited(t *testing.T) {
	host, _ := secureNode(t, auth.Config{LoginBurst: 3, LoginRate: 0.1})
	for range 3 {
		expect(t, sendTo(t, host, "POST", "/_auth/login", `{"user":"root","password":"a guess at it"}`), 401, "guess")
	}
	a := sendTo(t, host, "POST", "/_auth/login", `{"user":"root","password":"`+rootPassword+`"}`)
	expect(t, a, 429, "fourth attempt")
	if a.header.Get("Retry-After") != "10" || problemType(t, a) != "https://doppio.dev/problems/too-many-requests" {
		t.Fatalf("429: Retry-After %q, %s", a.header.Get("Retry-After"), a.body)
	}
}
