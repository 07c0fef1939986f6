package datastream

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/doppio-db/doppio/internal/changes"
	"github.com/doppio-db/doppio/internal/embedetcd"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/schema"
	"github.com/doppio-db/doppio/internal/testwait"
)

// fakeSchemas knows database shop with one partition.
type fakeSchemas struct{ fakeCatalog }

func (fakeSchemas) Database(name string) (schema.Database, bool) {
	return fakeCatalog{}.LookupDatabase(context.Background(), name)
}

func (fakeSchemas) Table(db, table string) (*schema.Table, bool) {
	return fakeCatalog{}.LookupTable(context.Background(), db, table)
}

func (fakeSchemas) Tables(string) []*schema.Table { return nil }

// fakeCluster is a shape tests change at will.
type fakeCluster struct {
	mu    sync.Mutex
	shape Shape
	ch    chan struct{}
}

func newFakeCluster(live ...string) *fakeCluster {
	c := &fakeCluster{ch: make(chan struct{}, 1)}
	c.set(live...)
	return c
}

// set makes live the live nodes; every partition of shop is placed on a
// and b, a the preferred leader: a runs the tasks alone, b when live.
func (c *fakeCluster) set(live ...string) {
	c.mu.Lock()
	s := Shape{Live: map[string]bool{}, Partitions: map[PartitionRef]Placement{}}
	for _, n := range live {
		s.Live[n] = true
	}
	for p := range 8 {
		s.Partitions[PartitionRef{"shop", p}] = Placement{Nodes: []string{"a", "b"}, Leader: "a"}
	}
	c.shape = s
	c.mu.Unlock()
	select {
	case c.ch <- struct{}{}:
	default:
	}
}

func (c *fakeCluster) Shape() Shape {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.shape
}

func (c *fakeCluster) Subscribe() (<-chan struct{}, func()) { return c.ch, func() {} }

// oneLog hosts the same log for every partition.
type oneLog struct{ l changes.Log }

func (o oneLog) Local(string, int) (changes.Log, string, bool) { return o.l, "follower", true }

func startEtcd(t *testing.T) *clientv3.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := embedetcd.Start(ctx, t.TempDir(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	cli, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func openManager(t *testing.T, cli *clientv3.Client, node string, c Cluster, l changes.Log) *Manager {
	t.Helper()
	m, err := Open(context.Background(), Config{
		Client: cli, Prefix: "/test", Node: node, Schemas: fakeSchemas{}, Cluster: c, Replicas: oneLog{l},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), LeaseTTL: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func taskRecord(t *testing.T, cli *clientv3.Client, key string) (TaskRecord, bool) {
	t.Helper()
	resp, err := cli.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return TaskRecord{}, false
	}
	var r TaskRecord
	if err := json.Unmarshal(resp.Kvs[0].Value, &r); err != nil {
		t.Fatal(err)
	}
	return r, true
}

func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testwait.Until(t, d, what, cond)
}

// TestOwnershipIsExclusiveAndFencesCheckpoints, with a real etcd: a task
// runs on one node at a time; it moves to another node with its
// checkpoint when the assignment says so; a node whose ownership was taken
// (a zombie) cannot move the checkpoint and stops; when a node leaves and
// its lease ends, its task is taken over from its last checkpoint.
func TestOwnershipIsExclusiveAndFencesCheckpoints(t *testing.T) {
	cli := startEtcd(t)
	// Transactions without writes: tasks read them and move their
	// checkpoints, producing nothing.
	log := &fakeLog{}
	log.add(20)
	cluster := newFakeCluster("a")
	a := openManager(t, cli, "a", cluster, log)
	defer a.Close()
	def, err := Parse(context.Background(), "s", []byte(`{"database":"shop","partitions":[3],"from":"earliest",`+okSink+`}`), fakeCatalog{})
	if err != nil {
		t.Fatal(err)
	}
	if _, created, err := a.Put(context.Background(), def); err != nil || !created {
		t.Fatalf("Put: created %v, %v", created, err)
	}
	id := TaskID{"s", "shop", 3}
	owner := func() string {
		resp, err := cli.Get(context.Background(), a.ownerKey(id))
		if err != nil || len(resp.Kvs) == 0 {
			return ""
		}
		return string(resp.Kvs[0].Value)
	}
	eventually(t, 5*time.Second, "node a owns the task and wrote its start", func() bool {
		r, ok := taskRecord(t, cli, a.taskKey(id))
		return owner() == "a" && ok && r.Started && r.SCN.Sequence == 20
	})

	// The task moves to b (a's last checkpoint goes with it).
	ta := a.running()[0]
	b := openManager(t, cli, "b", cluster, log)
	defer b.Close()
	cluster.set("a", "b")
	eventually(t, 5*time.Second, "the task moves to b", func() bool {
		bs := b.running()
		return owner() == "b" && len(bs) == 1 && bs[0].started()
	})
	<-ta.done
	if got := b.running()[0].checkpoint(); got.Sequence != 20 {
		t.Fatalf("b continues from %s, want a's 1:20", got)
	}
	log.add(25)
	eventually(t, 2*time.Second, "b reads on and writes its checkpoint", func() bool {
		r, _ := taskRecord(t, cli, a.taskKey(id))
		return r.SCN.Sequence == 25
	})

	// A zombie: a believes it still owns the task (it missed the move)
	// and tries to move the checkpoint. The write is refused.
	zombie := newTask(a, id, def)
	zombie.ownRev = ta.ownRev
	zombie.rec = TaskRecord{SCN: partition.SCN{Generation: 1, Sequence: 19}, Started: true}
	if err := a.flush(context.Background(), []*task{zombie}); err != nil {
		t.Fatal(err)
	}
	if r, _ := taskRecord(t, cli, a.taskKey(id)); r.SCN.Sequence != 25 {
		t.Fatalf("a zombie moved the checkpoint to %s", r.SCN)
	}
	if zombie.ctx.Err() == nil {
		t.Fatalf("the zombie task was not stopped")
	}

	// b leaves (its view and a's agree), and its lease is revoked as if
	// it had expired: a takes the task over from b's last checkpoint.
	b.sessMu.Lock()
	lease := b.session.Lease()
	b.sessMu.Unlock()
	cluster.set("a")
	if _, err := cli.Revoke(context.Background(), lease); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "a takes the task over", func() bool {
		as := a.running()
		return owner() == "a" && len(as) == 1 && as[0].started() && as[0].checkpoint().Sequence == 25
	})
	log.add(30)
	eventually(t, 2*time.Second, "a reads on from b's checkpoint", func() bool {
		r, _ := taskRecord(t, cli, a.taskKey(id))
		return r.SCN.Sequence == 30
	})
}

// TestOrphanOwnerKeysAreDropped: an owner key a node holds for a task it
// does not run (an acquisition answered too late, a failed release) is
// deleted, so the task's assigned node can take it.
func TestOrphanOwnerKeysAreDropped(t *testing.T) {
	cli := startEtcd(t)
	log := &fakeLog{}
	cluster := newFakeCluster("a", "b")
	a := openManager(t, cli, "a", cluster, log)
	defer a.Close()
	def, err := Parse(context.Background(), "s", []byte(`{"database":"shop","partitions":[3],`+okSink+`}`), fakeCatalog{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Put(context.Background(), def); err != nil {
		t.Fatal(err)
	}
	// The task is b's (a is the preferred leader), and b is not running:
	// a's stray key under its lease must go.
	lease, err := a.lease(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	key := a.ownerKey(TaskID{"s", "shop", 3})
	if _, err := cli.Put(context.Background(), key, "a", clientv3.WithLease(lease)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	eventually(t, 2*orphanSweep, "the stray key is deleted", func() bool {
		resp, err := cli.Get(context.Background(), key)
		return err == nil && len(resp.Kvs) == 0
	})
	t.Logf("deleted after %v", time.Since(start).Round(time.Millisecond))
	if len(a.running()) != 0 {
		t.Fatalf("a runs a task assigned to b")
	}
}
