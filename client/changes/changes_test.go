package changes_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/doppio-db/doppio/client"
	"github.com/doppio-db/doppio/client/changes"
	"github.com/doppio-db/doppio/internal/embedetcd"
	"github.com/doppio-db/doppio/internal/node"
	"github.com/doppio-db/doppio/internal/testwait"
)

// One real node and its etcd per test binary.
var (
	serverURL string
	etcdEPs   []string
	docs      *client.Client
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "doppio-changes-test-")
	if err != nil {
		return 1
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	etcd, err := embedetcd.Start(ctx, filepath.Join(dir, "etcd"), quiet)
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcd:", err)
		return 1
	}
	defer etcd.Close()
	etcdEPs = etcd.Endpoints()
	n, err := node.Start(ctx, node.Config{DataDir: filepath.Join(dir, "node"), HTTPAddr: "127.0.0.1:0", EtcdEndpoints: etcdEPs, Logger: quiet})
	if err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		return 1
	}
	defer n.Close()
	serverURL = "http://" + n.Addr()
	docs = client.New(serverURL)
	if _, _, err := docs.PutDatabase(ctx, "cdc", client.DatabaseSpec{Partitions: 4, Replicas: 1}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, _, err := docs.PutTable(ctx, "cdc", "Item", client.TableSpec{
		Key:    []client.KeyPart{{Name: "g", Type: "string"}, {Name: "id", Type: "long"}},
		Schema: json.RawMessage(`{"type":"record","name":"Item","fields":[{"name":"n","type":"long"}]}`),
	}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// unique names this run of a test, so -count=N runs do not meet each
// other's documents and checkpoints.
func unique() string { return fmt.Sprint("u", time.Now().UnixNano()) }

// severable is an HTTP client for etcd whose connection can be cut, as
// an instance that dies is cut off: every request in flight or to come
// fails.
type severable struct {
	client *http.Client
	cut    context.CancelFunc
}

func etcdClient(t *testing.T) *severable {
	ctx, cut := context.WithCancel(context.Background())
	t.Cleanup(cut)
	rt := roundTripper(func(req *http.Request) (*http.Response, error) {
		rctx, cancel := context.WithCancel(req.Context())
		stop := context.AfterFunc(ctx, cancel)
		resp, err := http.DefaultTransport.RoundTrip(req.WithContext(rctx))
		if err != nil {
			stop()
			cancel()
		}
		return resp, err
	})
	return &severable{client: &http.Client{Transport: rt}, cut: cut}
}

// Close cuts the connection.
func (s *severable) Close() { s.cut() }

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// recorder is a Handle that remembers every transaction.
type recorder struct {
	mu   sync.Mutex
	txns []changes.Txn
	keys map[string]int // "g/id" → times handled
}

func (r *recorder) handle(_ context.Context, t changes.Txn) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.keys == nil {
		r.keys = map[string]int{}
	}
	r.txns = append(r.txns, t)
	for _, e := range t.Events {
		r.keys[fmt.Sprintf("%v/%v", e.Key[0], e.Key[1])]++
	}
	return nil
}

func (r *recorder) count(k string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.keys[k]
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.Until(t, 15*time.Second, what, cond)
}

func put(t *testing.T, g string, id int64) {
	t.Helper()
	if _, err := docs.Put(context.Background(), "cdc", "Item", client.Key{g, id}, map[string]any{"n": id}); err != nil {
		t.Fatal(err)
	}
}

// start runs c until the test ends or the returned stop is called.
func start(t *testing.T, c *changes.Consumer) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func TestConsumerDeliversWholeTransactionsAndResumesFromItsStore(t *testing.T) {
	u := unique()
	store := &changes.EtcdStore{Endpoints: etcdEPs, HTTPClient: etcdClient(t).client, Prefix: "/test/resume/" + u}
	rec := &recorder{}
	c := &changes.Consumer{Client: client.New(serverURL), DB: "cdc", Store: store, Handle: rec.handle, SaveInterval: 50 * time.Millisecond}
	stop := start(t, c)
	// Start positions are known (and saved) before writing, so nothing is
	// missed between subscribing and the first write.
	waitUntil(t, "start positions saved", func() bool {
		cps, _ := store.Load(context.Background(), "cdc", []int{0, 1, 2, 3})
		return len(cps) == 4
	})
	ctx := context.Background()
	if _, err := docs.Txn(ctx, "cdc", client.Txn{PartitionKey: u, Ops: []client.TxnOp{
		client.PutOp("Item", client.Key{u, 1}, map[string]any{"n": 1}),
		client.PutOp("Item", client.Key{u, 2}, map[string]any{"n": 2}),
	}}); err != nil {
		t.Fatal(err)
	}
	put(t, u, 3)
	waitUntil(t, "both transactions", func() bool { return rec.count(u+"/3") == 1 })
	rec.mu.Lock()
	if len(rec.txns) != 2 || len(rec.txns[0].Events) != 2 || !rec.txns[0].Events[1].TxnEnd || rec.txns[0].Events[0].TxnEnd || len(rec.txns[1].Events) != 1 {
		t.Fatalf("transactions: %+v", rec.txns)
	}
	rec.mu.Unlock()
	stop()

	// Written while no consumer runs: delivered to the next one, and
	// nothing it already handled comes again.
	put(t, u, 4)
	rec2 := &recorder{}
	c2 := &changes.Consumer{Client: client.New("http://127.0.0.1:1"), Servers: []string{serverURL}, DB: "cdc", Store: store, Handle: rec2.handle}
	start(t, c2)
	waitUntil(t, "the write made while stopped", func() bool { return rec2.count(u+"/4") == 1 })
	put(t, u, 5)
	waitUntil(t, "a live write", func() bool { return rec2.count(u+"/5") == 1 })
	for _, k := range []string{u + "/1", u + "/2", u + "/3"} {
		if n := rec2.count(k); n != 0 {
			t.Fatalf("%s delivered again after a clean stop", k)
		}
	}
}

func TestHandleErrorsAreRetriedNotSkipped(t *testing.T) {
	u := unique()
	var mu sync.Mutex
	var seen []string
	fails := 2
	store := &changes.MemoryStore{}
	c := &changes.Consumer{Client: client.New(serverURL), DB: "cdc", Partitions: []int{0, 1, 2, 3}, Store: store, SaveInterval: 20 * time.Millisecond, Handle: func(_ context.Context, tx changes.Txn) error {
		mu.Lock()
		defer mu.Unlock()
		k := fmt.Sprintf("%v/%v", tx.Events[0].Key[0], tx.Events[0].Key[1])
		seen = append(seen, k)
		if k == u+"/1" && fails > 0 {
			fails--
			return errors.New("sink down")
		}
		return nil
	}}
	start(t, c)
	waitUntil(t, "start positions saved", func() bool {
		cps, _ := store.Load(context.Background(), "cdc", []int{0, 1, 2, 3})
		return len(cps) == 4
	})
	put(t, u, 1)
	put(t, u, 2)
	waitUntil(t, "e/2 handled", func() bool { mu.Lock(); defer mu.Unlock(); return slices.Contains(seen, u+"/2") })
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(seen, []string{u + "/1", u + "/1", u + "/1", u + "/2"}) {
		t.Fatalf("handled %v, want e/1 three times (two failures) then e/2", seen)
	}
}

func TestBootstrapDeliversTheSnapshotThenTheLog(t *testing.T) {
	u := unique()
	put(t, u, 1)
	put(t, u, 2)
	rec := &recorder{}
	c := &changes.Consumer{Client: client.New(serverURL), DB: "cdc", Bootstrap: true, Handle: rec.handle}
	start(t, c)
	waitUntil(t, "snapshot", func() bool { return rec.count(u+"/2") == 1 })
	put(t, u, 3)
	waitUntil(t, "log after the snapshot", func() bool { return rec.count(u+"/3") == 1 })
	rec.mu.Lock()
	defer rec.mu.Unlock()
	last := rec.txns[len(rec.txns)-1]
	if last.Snapshot || !rec.txns[0].Snapshot || rec.keys[u+"/1"] != 1 {
		t.Fatalf("bootstrap: %+v", rec.txns)
	}
}

// TestGroupSplitsPartitionsAndRebalances runs two instances of a group:
// they split the partitions, every write is handled exactly once, and when
// one stops (cleanly, then by losing its etcd connection) the other takes
// its partitions over from the saved checkpoints.
func TestGroupSplitsPartitionsAndRebalances(t *testing.T) {
	cli := etcdClient(t)
	u := unique()
	store := &changes.EtcdStore{Endpoints: etcdEPs, HTTPClient: cli.client, Prefix: "/test/group/" + u}
	rec := &recorder{}
	mk := func(id string, etcd *severable) *changes.Consumer {
		return &changes.Consumer{Client: client.New(serverURL), DB: "cdc", Store: store, Handle: rec.handle,
			EtcdEndpoints: etcdEPs, EtcdHTTPClient: etcd.client, Group: u, Instance: id, LeaseTTL: 2, SaveInterval: 50 * time.Millisecond}
	}
	a, b := mk("a", cli), mk("b", etcdClient(t))
	stopA := start(t, a)
	waitUntil(t, "a alone owns every partition", func() bool { return len(a.Owned()) == 4 })
	stopB := start(t, b)
	waitUntil(t, "a and b split the partitions", func() bool {
		return slices.Equal(a.Owned(), []int{0, 2}) && slices.Equal(b.Owned(), []int{1, 3})
	})
	write := func(from, to int) {
		for i := from; i < to; i++ {
			put(t, fmt.Sprint(u, "k", i), int64(i))
		}
	}
	write(0, 40)
	waitUntil(t, "every write handled", func() bool {
		for i := range 40 {
			if rec.count(fmt.Sprintf("%sk%d/%d", u, i, i)) == 0 {
				return false
			}
		}
		return true
	})
	stopB()
	waitUntil(t, "a took b's partitions", func() bool { return len(a.Owned()) == 4 })
	write(40, 80)
	waitUntil(t, "writes after the handover", func() bool {
		for i := 40; i < 80; i++ {
			if rec.count(fmt.Sprintf("%sk%d/%d", u, i, i)) == 0 {
				return false
			}
		}
		return true
	})
	for i := range 80 {
		if n := rec.count(fmt.Sprintf("%sk%d/%d", u, i, i)); n != 1 {
			t.Fatalf("k%d handled %d times", i, n)
		}
	}

	// An instance that dies (its etcd connection gone, no goodbye): after
	// its lease expires the survivor takes its partitions.
	deadCli := etcdClient(t)
	c := mk("c", deadCli)
	start(t, c)
	waitUntil(t, "a and c split the partitions", func() bool { return len(c.Owned()) == 2 && len(a.Owned()) == 2 })
	deadCli.Close()
	waitUntil(t, "a took the dead instance's partitions", func() bool { return len(a.Owned()) == 4 })
	write(80, 100)
	waitUntil(t, "writes after the death", func() bool {
		for i := 80; i < 100; i++ {
			if rec.count(fmt.Sprintf("%sk%d/%d", u, i, i)) == 0 {
				return false
			}
		}
		return true
	})
	stopA()
}
