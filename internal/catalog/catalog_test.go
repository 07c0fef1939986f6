package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/doppio-db/doppio/internal/embedetcd"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/schema"
	"github.com/doppio-db/doppio/internal/testport"
	"github.com/doppio-db/doppio/internal/testwait"
)

const prefix = "/doppio/test/schemas"

var msgKey = []schema.KeyPart{
	{Name: "mailboxId", Type: schema.KeyString},
	{Name: "messageId", Type: schema.KeyLong, AutoIncrement: true},
}

const msgV1 = `{"type":"record","name":"Message","fields":[
	{"name":"subject","type":"string"},
	{"name":"body","type":"string","index":"text"}]}`

// msgV2 adds a field with a default: readable both ways with v1.
const msgV2 = `{"type":"record","name":"Message","fields":[
	{"name":"subject","type":"string"},
	{"name":"body","type":"string","index":"text"},
	{"name":"unread","type":"boolean","default":true}]}`

// msgBad changes subject's type: not compatible with v2.
const msgBad = `{"type":"record","name":"Message","fields":[
	{"name":"subject","type":"long"},
	{"name":"body","type":"string","index":"text"},
	{"name":"unread","type":"boolean","default":true}]}`

func startEtcd(t *testing.T, dir string) *embedetcd.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, err := embedetcd.Start(ctx, dir, logger)
	if err != nil {
		t.Fatalf("embedetcd: %v", err)
	}
	return srv
}

// startEtcdOn starts (or restarts) the single etcd member under dir on
// the given client and peer addresses, so clients of an earlier start
// still reach it; a restart that cannot bind them fails the test.
func startEtcdOn(t *testing.T, dir, client, peer string) *embedetcd.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, err := embedetcd.StartMember(ctx, embedetcd.MemberConfig{
		Dir: dir, Name: "catalog", ClientURL: "http://" + client, PeerURL: "http://" + peer,
	}, logger)
	if err != nil {
		t.Fatalf("embedetcd on %s: %v", client, err)
	}
	return srv
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func newClient(t *testing.T, srv *embedetcd.Server) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func open(t *testing.T, cli *clientv3.Client) *Catalog {
	t.Helper()
	c, err := Open(ctx(t), cli, prefix)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

// setup starts an etcd and returns a client and a catalog on it.
func setup(t *testing.T) (*embedetcd.Server, *clientv3.Client, *Catalog) {
	srv := startEtcd(t, t.TempDir())
	t.Cleanup(func() { srv.Close() })
	cli := newClient(t, srv)
	return srv, cli, open(t, cli)
}

func wantKind(t *testing.T, err error, k problem.Kind, field string) {
	t.Helper()
	e, ok := problem.As(err)
	if !ok || e.Kind != k {
		t.Fatalf("error = %v (%T), want problem kind %v", err, err, k)
	}
	if field != "" && e.Field != field {
		t.Fatalf("error field = %q, want %q (%v)", e.Field, field, err)
	}
}

// eventually polls cond for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.Until(t, 10*time.Second, what, cond)
}

func TestDatabaseLifecycle(t *testing.T) {
	_, cli, c := setup(t)

	d, created, err := c.PutDatabase(ctx(t), schema.Database{Name: "mail", Partitions: 16, Replicas: 1})
	if err != nil || !created {
		t.Fatalf("create: %v created=%v", err, created)
	}
	if d.Partitioner != "hash" || d.Partitions != 16 {
		t.Fatalf("create returned %+v", d)
	}
	if got, ok := c.Database("mail"); !ok || got != d {
		t.Fatalf("read-your-writes: Database = %+v %v", got, ok)
	}

	// Update replicas only; zero partitions means "keep".
	d, created, err = c.PutDatabase(ctx(t), schema.Database{Name: "mail", Replicas: 3})
	if err != nil || created {
		t.Fatalf("update: %v created=%v", err, created)
	}
	if d.Replicas != 3 || d.Partitions != 16 {
		t.Fatalf("update returned %+v", d)
	}
	if got, _ := c.Database("mail"); got.Replicas != 3 {
		t.Fatalf("read-your-writes after update: %+v", got)
	}

	// Same again: no write.
	before, _ := cli.Get(ctx(t), prefix+"/db/mail")
	if _, created, err := c.PutDatabase(ctx(t), schema.Database{Name: "mail", Partitions: 16, Replicas: 3}); err != nil || created {
		t.Fatalf("idempotent put: %v %v", err, created)
	}
	after, _ := cli.Get(ctx(t), prefix+"/db/mail")
	if before.Kvs[0].ModRevision != after.Kvs[0].ModRevision {
		t.Errorf("unchanged PutDatabase wrote to etcd")
	}

	_, _, err = c.PutDatabase(ctx(t), schema.Database{Name: "mail", Partitions: 32, Replicas: 3})
	wantKind(t, err, problem.Conflict, "partitions")
	if got, _ := c.Database("mail"); got.Partitions != 16 {
		t.Fatalf("partition change stored: %+v", got)
	}

	_, _, err = c.PutDatabase(ctx(t), schema.Database{Name: "bad/name"})
	wantKind(t, err, problem.Malformed, "")
	_, _, err = c.PutDatabase(ctx(t), schema.Database{Name: "x", Replicas: 9})
	wantKind(t, err, problem.Malformed, "replicas")

	if _, _, err := c.PutDatabase(ctx(t), schema.Database{Name: "analytics"}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range c.Databases() {
		names = append(names, d.Name)
	}
	if !slices.Equal(names, []string{"analytics", "mail"}) {
		t.Fatalf("Databases = %v", names)
	}
}

func TestTableVersions(t *testing.T) {
	_, cli, c := setup(t)

	_, _, _, err := c.PutTable(ctx(t), "mail", "Message", msgKey, json.RawMessage(msgV1), TableOptions{})
	wantKind(t, err, problem.NotFound, "")

	if _, _, err := c.PutDatabase(ctx(t), schema.Database{Name: "mail"}); err != nil {
		t.Fatal(err)
	}
	tb, created, changed, err := c.PutTable(ctx(t), "mail", "Message", msgKey, json.RawMessage(msgV1), TableOptions{})
	if err != nil || !created || !changed {
		t.Fatalf("create: %v created=%v changed=%v", err, created, changed)
	}
	if tb.Latest() != 1 || !tb.AutoIncrement() {
		t.Fatalf("created table: latest %d", tb.Latest())
	}
	if got, ok := c.Table("mail", "Message"); !ok || got.Latest() != 1 {
		t.Fatalf("read-your-writes: Table = %v %v", got, ok)
	}

	// Same schema (other whitespace): unchanged.
	tb, created, changed, err = c.PutTable(ctx(t), "mail", "Message", msgKey, json.RawMessage(strings.ReplaceAll(msgV1, "\n\t", " ")), TableOptions{})
	if err != nil || created || changed || tb.Latest() != 1 {
		t.Fatalf("unchanged: %v created=%v changed=%v", err, created, changed)
	}

	tb, created, changed, err = c.PutTable(ctx(t), "mail", "Message", msgKey, json.RawMessage(msgV2), TableOptions{})
	if err != nil || created || !changed || tb.Latest() != 2 {
		t.Fatalf("v2: %v created=%v changed=%v", err, created, changed)
	}
	if got, _ := c.Table("mail", "Message"); got.Latest() != 2 {
		t.Fatalf("read-your-writes v2: latest %d", got.Latest())
	}

	before, _ := cli.Get(ctx(t), prefix+"/table/mail/Message")
	_, _, _, err = c.PutTable(ctx(t), "mail", "Message", msgKey, json.RawMessage(msgBad), TableOptions{})
	wantKind(t, err, problem.Conflict, "")
	after, _ := cli.Get(ctx(t), prefix+"/table/mail/Message")
	if before.Kvs[0].ModRevision != after.Kvs[0].ModRevision {
		t.Fatalf("incompatible schema was stored")
	}
	if got, _ := c.Table("mail", "Message"); got.Latest() != 2 {
		t.Fatalf("incompatible schema reached the cache")
	}

	otherKey := []schema.KeyPart{{Name: "mailboxId", Type: schema.KeyString}}
	_, _, _, err = c.PutTable(ctx(t), "mail", "Message", otherKey, json.RawMessage(msgV2), TableOptions{})
	wantKind(t, err, problem.Conflict, "key")

	_, _, _, err = c.PutTable(ctx(t), "mail", "Bad", msgKey, json.RawMessage(`{"type":"string"}`), TableOptions{})
	wantKind(t, err, problem.Malformed, "")
	if _, ok := c.Table("mail", "Bad"); ok {
		t.Fatal("malformed table cached")
	}

	if _, _, _, err := c.PutTable(ctx(t), "mail", "Mailbox", msgKey[:1], json.RawMessage(`{"type":"record","name":"Mailbox","fields":[{"name":"unread","type":"long","default":0}]}`), TableOptions{}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tb := range c.Tables("mail") {
		names = append(names, tb.Def.Name)
	}
	if !slices.Equal(names, []string{"Mailbox", "Message"}) {
		t.Fatalf("Tables = %v", names)
	}

	// A fresh catalog loads both versions from etcd.
	c2 := open(t, cli)
	got, ok := c2.Table("mail", "Message")
	if !ok || got.Latest() != 2 || got.Def.Versions[1].Version != 2 {
		t.Fatalf("reloaded table: %v %v", got, ok)
	}
}

func TestTwoCatalogsSeeEachOther(t *testing.T) {
	srv, _, a := setup(t)
	b := open(t, newClient(t, srv))

	sub, cancel := b.Subscribe()
	defer cancel()

	if _, _, err := a.PutDatabase(ctx(t), schema.Database{Name: "mail"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sub:
	case <-time.After(10 * time.Second):
		t.Fatal("no notification for a new database")
	}
	eventually(t, "b sees database", func() bool { _, ok := b.Database("mail"); return ok })

	if _, _, _, err := b.PutTable(ctx(t), "mail", "Message", msgKey, json.RawMessage(msgV1), TableOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a sees table v1", func() bool { tb, ok := a.Table("mail", "Message"); return ok && tb.Latest() == 1 })
	if _, _, _, err := a.PutTable(ctx(t), "mail", "Message", msgKey, json.RawMessage(msgV2), TableOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "b sees table v2", func() bool { tb, _ := b.Table("mail", "Message"); return tb.Latest() == 2 })
	if _, _, err := b.PutDatabase(ctx(t), schema.Database{Name: "mail", Replicas: 2}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a sees replicas 2", func() bool { d, _ := a.Database("mail"); return d.Replicas == 2 })
}

// fieldSchema is Message with one extra defaulted field, so any two of them
// resolve each other both ways.
func fieldSchema(i int) string {
	return fmt.Sprintf(`{"type":"record","name":"Message","fields":[
		{"name":"subject","type":"string"},
		{"name":"extra%d","type":"long","default":%d}]}`, i, i)
}

func TestConcurrentPutTable(t *testing.T) {
	srv, _, _ := setup(t)
	const n = 8
	// Each writer is its own catalog with its own client, as on separate
	// nodes.
	cats := make([]*Catalog, n)
	for i := range cats {
		cats[i] = open(t, newClient(t, srv))
	}
	if _, _, err := cats[0].PutDatabase(ctx(t), schema.Database{Name: "mail"}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			_, _, changed, err := cats[i].PutTable(ctx(t), "mail", "Message", msgKey[:1], json.RawMessage(fieldSchema(i)), TableOptions{})
			if err == nil && !changed {
				err = fmt.Errorf("writer %d: not changed", i)
			}
			errs[i] = err
		})
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}

	for i, c := range cats {
		eventually(t, fmt.Sprintf("catalog %d sees %d versions", i, n), func() bool {
			tb, ok := c.Table("mail", "Message")
			return ok && tb.Latest() == n
		})
	}
	tb, _ := cats[0].Table("mail", "Message")
	seen := map[string]int{}
	for i, v := range tb.Def.Versions {
		if v.Version != i+1 {
			t.Fatalf("version at %d is %d", i, v.Version)
		}
		for j := range n {
			if strings.Contains(string(v.Schema), fmt.Sprintf(`"extra%d"`, j)) {
				seen[fmt.Sprint(j)]++
			}
		}
	}
	for j := range n {
		if seen[fmt.Sprint(j)] != 1 {
			t.Errorf("schema of writer %d stored %d times", j, seen[fmt.Sprint(j)])
		}
	}
}

// TestWatchAfterCompaction starts the watch from a revision etcd has already
// compacted away: the catalog must reload and keep watching.
func TestWatchAfterCompaction(t *testing.T) {
	_, cli, a := setup(t)
	if _, _, err := a.PutDatabase(ctx(t), schema.Database{Name: "mail"}); err != nil {
		t.Fatal(err)
	}

	c := newCatalog(cli, prefix)
	if err := c.load(ctx(t)); err != nil {
		t.Fatal(err)
	}
	// Changes c's watch will not see as events: a new database, an update,
	// and a deletion, all compacted.
	if _, _, err := a.PutDatabase(ctx(t), schema.Database{Name: "other"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.PutDatabase(ctx(t), schema.Database{Name: "mail", Replicas: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Delete(ctx(t), prefix+"/db/other"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.PutDatabase(ctx(t), schema.Database{Name: "third"}); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx(t), "nothing")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx(t), resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	c.start()
	defer c.Close()
	eventually(t, "reload after compaction", func() bool {
		d, _ := c.Database("mail")
		_, third := c.Database("third")
		_, other := c.Database("other")
		return d.Replicas == 2 && third && !other
	})
	// And the watch runs again afterwards.
	if _, _, err := a.PutDatabase(ctx(t), schema.Database{Name: "fourth"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "watch after reload", func() bool { _, ok := c.Database("fourth"); return ok })
}

// TestSurvivesEtcdRestart restarts etcd under a live catalog, on the same
// ports (reserved through testport, below the range the kernel gives
// outgoing connections): the client reconnects and the watch resumes.
func TestSurvivesEtcdRestart(t *testing.T) {
	dir := t.TempDir()
	client, err := testport.Free("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	peer, err := testport.Free("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	srv := startEtcdOn(t, dir, client, peer)
	// Registered first so it runs last, after the catalogs and clients
	// below closed their watches; else Close waits out the open streams.
	t.Cleanup(func() { srv.Close() })
	eps := srv.Endpoints()
	c := open(t, newClient(t, srv))
	if _, _, err := c.PutDatabase(ctx(t), schema.Database{Name: "mail"}); err != nil {
		t.Fatal(err)
	}
	// Closing under an open watch makes etcd wait its request timeout (~7 s)
	// before cutting the stream: the price of restarting etcd in-process.
	srv.Close()

	srv = startEtcdOn(t, dir, client, peer)
	if !slices.Equal(srv.Endpoints(), eps) {
		t.Fatalf("etcd came back on %v, was %v", srv.Endpoints(), eps)
	}
	other := open(t, newClient(t, srv))
	if _, _, err := other.PutDatabase(ctx(t), schema.Database{Name: "after"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "watch resumes after etcd restart", func() bool { _, ok := c.Database("after"); return ok })
	// Writes through the reconnected client work too.
	if _, _, err := c.PutDatabase(ctx(t), schema.Database{Name: "mail", Replicas: 2}); err != nil {
		t.Fatal(err)
	}
}

func TestSubscribeCancel(t *testing.T) {
	_, _, c := setup(t)
	sub, cancel := c.Subscribe()
	cancel()
	cancel() // idempotent
	if _, _, err := c.PutDatabase(ctx(t), schema.Database{Name: "mail"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sub:
		t.Fatal("notified after cancel")
	case <-time.After(100 * time.Millisecond):
	}
}

// TestLookupReadsThroughOnAMiss: a catalog whose watch has not delivered a
// database or table another writer created (here: no watch at all) still
// finds them with LookupDatabase and LookupTable, because a miss reads etcd;
// names that do not exist stay missing.
func TestLookupReadsThroughOnAMiss(t *testing.T) {
	srv, _, a := setup(t)
	b := newCatalog(newClient(t, srv), prefix)
	if err := b.load(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.PutDatabase(ctx(t), schema.Database{Name: "mail"}); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := a.PutTable(ctx(t), "mail", "Message", msgKey, json.RawMessage(msgV1), TableOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Database("mail"); ok {
		t.Fatal("the unwatched catalog already holds the database; the test proves nothing")
	}
	if d, ok := b.LookupDatabase(ctx(t), "mail"); !ok || d.Name != "mail" {
		t.Fatalf("LookupDatabase(mail) = %+v, %v; want the database", d, ok)
	}
	if tb, ok := b.LookupTable(ctx(t), "mail", "Message"); !ok || tb.Latest() != 1 {
		t.Fatalf("LookupTable(mail, Message) = %v, %v; want version 1", tb, ok)
	}
	if _, ok := b.Database("mail"); !ok {
		t.Fatal("the read-through did not fill the cache")
	}
	if _, ok := b.LookupDatabase(ctx(t), "nope"); ok {
		t.Fatal("LookupDatabase(nope) found a database that was never created")
	}
	if _, ok := b.LookupTable(ctx(t), "mail", "Nope"); ok {
		t.Fatal("LookupTable(mail, Nope) found a table that was never created")
	}
}

// TestTheWatchCarriesOnlyCatalogKeys: the other components' keys under
// the prefix (leaderships, reports, checks: some written every second by
// every node) never reach the catalog's watch, while a database and a
// table written after them arrive, through the other catalog's watch.
func TestTheWatchCarriesOnlyCatalogKeys(t *testing.T) {
	srv, cli, a := setup(t)
	b := open(t, newClient(t, srv))
	for i := range 50 {
		for _, dir := range []string{"/da/", "/dc/", "/leaders/", "/reports/", "/tablet/", "/zz/"} {
			if _, err := cli.Put(ctx(t), fmt.Sprintf("%s%s%d", prefix, dir, i), "x"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, _, err := a.PutDatabase(ctx(t), schema.Database{Name: "mail"}); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := a.PutTable(ctx(t), "mail", "Message", msgKey, json.RawMessage(msgV1), TableOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "b sees the table", func() bool { _, ok := b.Table("mail", "Message"); return ok })
	b.mu.RLock()
	events := b.events
	b.mu.RUnlock()
	if events != 2 {
		t.Fatalf("b's watch applied %d events, want 2 (the database and the table)", events)
	}
}

// TestLookupTableSinceReadsWhatTheWatchHasNotBrought: a catalog whose
// watch has not delivered a new schema version (here: it runs none) finds
// it when asked on behalf of a node that holds it (LookupTableSince with
// that node's Revision), and keeps its cache when asked with a revision
// it has already reached.
func TestLookupTableSinceReadsWhatTheWatchHasNotBrought(t *testing.T) {
	srv, _, a := setup(t)
	if _, _, err := a.PutDatabase(ctx(t), schema.Database{Name: "mail"}); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := a.PutTable(ctx(t), "mail", "Message", msgKey, json.RawMessage(msgV1), TableOptions{}); err != nil {
		t.Fatal(err)
	}
	b := newCatalog(newClient(t, srv), prefix) // no watch: only what it reads
	if err := b.load(ctx(t)); err != nil {
		t.Fatal(err)
	}
	behind := b.Revision()
	if _, _, _, err := a.PutTable(ctx(t), "mail", "Message", msgKey, json.RawMessage(msgV2), TableOptions{}); err != nil {
		t.Fatal(err)
	}
	if a.Revision().Table <= behind.Table || a.Revision().DB != behind.DB {
		t.Fatalf("a's position %v after a new version, b's %v", a.Revision(), behind)
	}
	if tb, _ := b.LookupTableSince(ctx(t), "mail", "Message", behind); tb.Latest() != 1 {
		t.Fatalf("asked since a position it has, b read etcd: version %d", tb.Latest())
	}
	tb, ok := b.LookupTableSince(ctx(t), "mail", "Message", a.Revision())
	if !ok || tb.Latest() != 2 {
		t.Fatalf("asked since a's position, b has version %v (found %v), want 2", tb.Latest(), ok)
	}
	if b.Revision() != a.Revision() {
		t.Errorf("b's position %v after the read, a's %v", b.Revision(), a.Revision())
	}
}

// A catalog that holds a newer entry than the forwarding node's (another
// table's version, read through; a database created since) has not
// thereby seen the forwarded table's new version: each kind is compared
// with how far its own stream has come, not with the newest entry held.
func TestLookupTableSinceComparesEachKindWithItsOwnStream(t *testing.T) {
	srv, _, a := setup(t)
	if _, _, err := a.PutDatabase(ctx(t), schema.Database{Name: "mail"}); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"Message", "Draft"} {
		if _, _, _, err := a.PutTable(ctx(t), "mail", table, msgKey, json.RawMessage(msgV1), TableOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	b := newCatalog(newClient(t, srv), prefix) // no watch: only what it reads
	if err := b.load(ctx(t)); err != nil {
		t.Fatal(err)
	}
	// Message v2, then Draft v2 and a new database, all after b's load.
	if _, _, _, err := a.PutTable(ctx(t), "mail", "Message", msgKey, json.RawMessage(msgV2), TableOptions{}); err != nil {
		t.Fatal(err)
	}
	forwarder := a.Revision() // holds Message v2
	if _, _, _, err := a.PutTable(ctx(t), "mail", "Draft", msgKey, json.RawMessage(msgV2), TableOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.PutDatabase(ctx(t), schema.Database{Name: "archive"}); err != nil {
		t.Fatal(err)
	}
	// b reads Draft and the new database through: it now holds entries
	// newer than any the forwarder holds, of both kinds.
	if tb, ok := b.LookupTableSince(ctx(t), "mail", "Draft", a.Revision()); !ok || tb.Latest() != 2 {
		t.Fatalf("Draft read through: version %v (found %v), want 2", tb.Latest(), ok)
	}
	if _, ok := b.LookupDatabase(ctx(t), "archive"); !ok {
		t.Fatal("the new database not read through")
	}
	if held := b.Revision(); held.DB <= forwarder.DB || held.Table <= forwarder.Table {
		t.Fatalf("b holds %v, not newer than the forwarder's %v: the test proves nothing", held, forwarder)
	}
	tb, ok := b.LookupTableSince(ctx(t), "mail", "Message", forwarder)
	if !ok || tb.Latest() != 2 {
		t.Fatalf("forwarded from a node holding Message v2, b has version %v (found %v), want 2", tb.Latest(), ok)
	}
}

func TestPositionsRoundTripThroughTheHeader(t *testing.T) {
	for in, want := range map[string]Position{
		"12/34": {12, 34},
		"0/7":   {0, 7},
		"56":    {56, 56}, // a node that sent one revision for both
	} {
		if got, ok := ParsePosition(in); !ok || got != want {
			t.Errorf("ParsePosition(%q) = %v, %v; want %v", in, got, ok, want)
		}
	}
	for _, bad := range []string{"", "/", "1/", "/2", "a/b", "-1/2", "1/2/3", " 1/2"} {
		if p, ok := ParsePosition(bad); ok {
			t.Errorf("ParsePosition(%q) = %v, accepted", bad, p)
		}
	}
	if p := (Position{12, 34}); p.String() != "12/34" {
		t.Errorf("String = %q", p.String())
	}
}

func TestTableKindNeverChanges(t *testing.T) {
	_, _, c := setup(t)
	if _, _, err := c.PutDatabase(ctx(t), schema.Database{Name: "mail"}); err != nil {
		t.Fatal(err)
	}
	_, _, _, err := c.PutTable(ctx(t), "mail", "Message", msgKey, json.RawMessage(msgV1), TableOptions{Kind: "view"})
	wantKind(t, err, problem.Malformed, "kind")
	tb, created, _, err := c.PutTable(ctx(t), "mail", "Message", msgKey, json.RawMessage(msgV1), TableOptions{Kind: schema.KindDerived})
	if err != nil || !created || !tb.Derived() {
		t.Fatalf("create a derived table: %v created=%v derived=%v", err, created, tb != nil && tb.Derived())
	}
	_, _, _, err = c.PutTable(ctx(t), "mail", "Message", msgKey, json.RawMessage(msgV2), TableOptions{})
	wantKind(t, err, problem.Conflict, "kind")
	tb, _, changed, err := c.PutTable(ctx(t), "mail", "Message", msgKey, json.RawMessage(msgV2), TableOptions{Kind: schema.KindDerived})
	if err != nil || !changed || tb.Latest() != 2 || !tb.Derived() {
		t.Fatalf("a derived table's next version: %v changed=%v", err, changed)
	}
}

// TestCacheGenerationIsSetAtCreationAndOnlyGrows: a table's cache
// generation is above every revision before its creation, a raise puts
// it above every revision before the raise, and a settings change keeps
// it; a second catalog sees the raised one.
func TestCacheGenerationIsSetAtCreationAndOnlyGrows(t *testing.T) {
	_, cli, a := setup(t)
	if _, _, err := a.PutDatabase(ctx(t), schema.Database{Name: "mail"}); err != nil {
		t.Fatal(err)
	}
	before, err := cli.Get(ctx(t), "/unrelated")
	if err != nil {
		t.Fatal(err)
	}
	tb, _, _, err := a.PutTable(ctx(t), "mail", "Message", msgKey, json.RawMessage(msgV1),
		TableOptions{SetCache: true, Cache: &schema.CacheSettings{TTL: time.Minute, BootstrapEvery: 20 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	created := tb.Def.CacheGeneration
	if created <= before.Header.Revision || !tb.Def.Cacheable() || tb.Def.Cache.BootstrapEvery != 20*time.Second {
		t.Fatalf("created with generation %d (etcd was at %d) and cache %+v", created, before.Header.Revision, tb.Def.Cache)
	}
	if err := a.RaiseCacheGeneration(ctx(t), "mail", "Message", "Absent"); err != nil {
		t.Fatal(err)
	}
	raised, _ := a.Table("mail", "Message")
	if raised.Def.CacheGeneration <= created {
		t.Fatalf("raised generation %d, was %d", raised.Def.CacheGeneration, created)
	}
	tb, _, changed, err := a.PutTable(ctx(t), "mail", "Message", nil, nil, TableOptions{SetCache: true, Cache: &schema.CacheSettings{TTL: time.Hour, BootstrapEvery: time.Minute}})
	if err != nil || !changed || tb.Latest() != 1 || tb.Def.CacheGeneration != raised.Def.CacheGeneration || tb.Def.Cache.TTL != time.Hour {
		t.Fatalf("settings change: %+v changed=%v %v", tb.Def, changed, err)
	}
	b, err := Open(ctx(t), cli, prefix)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got, ok := b.Table("mail", "Message"); !ok || got.Def.CacheGeneration != raised.Def.CacheGeneration || got.Def.Cache.TTL != time.Hour {
		t.Fatalf("another catalog sees %+v", got)
	}
}
