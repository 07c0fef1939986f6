package replication

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/storage"
)

// cluster runs several hosts in one process, each with its own Pebble
// store in a temp dir and its own gRPC listener on 127.0.0.1.
type cluster struct {
	t    testing.TB
	root string

	mu      sync.Mutex
	addrs   map[uint64]string
	hosts   map[uint64]*Host
	engines map[uint64]*storage.Engine
	// configure, if set, adjusts each host's configuration.
	configure func(*Config)
}

func newCluster(t testing.TB, ids ...uint64) *cluster {
	return newConfiguredCluster(t, nil, ids...)
}

// newConfiguredCluster is newCluster with each host's configuration
// adjusted by configure (if not nil).
func newConfiguredCluster(t testing.TB, configure func(*Config), ids ...uint64) *cluster {
	c := &cluster{t: t, root: t.TempDir(), addrs: map[uint64]string{}, hosts: map[uint64]*Host{}, engines: map[uint64]*storage.Engine{}, configure: configure}
	for _, id := range ids {
		c.start(id)
	}
	t.Cleanup(func() {
		for _, id := range c.ids() {
			c.stop(id)
		}
	})
	return c
}

func (c *cluster) resolve(id uint64) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.addrs[id]
	if !ok {
		return "", fmt.Errorf("node %d unknown", id)
	}
	return a, nil
}

func (c *cluster) ids() []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []uint64
	for id := range c.hosts {
		out = append(out, id)
	}
	return out
}

// start opens (or reopens) node id's store and host.
func (c *cluster) start(id uint64) *Host {
	c.t.Helper()
	e, err := storage.Open(filepath.Join(c.root, fmt.Sprint(id)), storage.Options{CacheBytes: 8 << 20})
	if err != nil {
		c.t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		c.t.Fatal(err)
	}
	cfg := Config{NodeID: id, Engine: e, Resolve: c.resolve, Listener: lis}
	if c.configure != nil {
		c.configure(&cfg)
	}
	if os.Getenv("DOPPIO_TEST_LOG") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	h, err := NewHost(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	c.mu.Lock()
	c.addrs[id] = h.Addr()
	c.hosts[id] = h
	c.engines[id] = e
	c.mu.Unlock()
	return h
}

// stop closes node id abruptly: its streams break, nothing is handed over.
func (c *cluster) stop(id uint64) {
	c.mu.Lock()
	h, e := c.hosts[id], c.engines[id]
	delete(c.hosts, id)
	delete(c.engines, id)
	c.mu.Unlock()
	if h != nil {
		h.Close()
		e.Close()
	}
}

func (c *cluster) host(id uint64) *Host {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hosts[id]
}

func (c *cluster) engine(id uint64) *storage.Engine {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.engines[id]
}

// startRaftGroup starts partition p on the given nodes with voters.
func (c *cluster) startRaftGroup(p keys.Partition, voters []uint64, on ...uint64) {
	c.t.Helper()
	if len(on) == 0 {
		on = voters
	}
	for _, id := range on {
		if _, err := c.host(id).Start(p, voters); err != nil {
			c.t.Fatal(err)
		}
	}
}

// leader waits until one running node leads p and is ready.
func (c *cluster) leader(p keys.Partition, within time.Duration) uint64 {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		for _, id := range c.ids() {
			h := c.host(id)
			if h == nil {
				continue
			}
			if g := h.Member(p); g != nil {
				if _, ok := g.Leader(); ok {
					return id
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.t.Fatalf("no leader for %x within %v", []byte(p), within)
	return 0
}

func testPartition(i int) keys.Partition { return keys.PartitionPrefix("db", i) }

func docKey(i int) []byte {
	k, err := keys.EncodeTuple(keys.Tuple{fmt.Sprintf("k%05d", i)})
	if err != nil {
		panic(err)
	}
	return k
}

func writeSet(i int) *partition.WriteSet {
	return &partition.WriteSet{
		Mtime: time.Now().UnixMilli(),
		Writes: []partition.Write{{
			Table: "t", Key: docKey(i), Op: partition.OpInsert,
			AfterVersion: 1, After: fmt.Appendf(nil, "value %d", i),
		}},
	}
}

// write replicates write set i through node id's replica of p.
func (c *cluster) write(ctx context.Context, id uint64, p keys.Partition, i int) (partition.SCN, error) {
	h := c.host(id)
	if h == nil {
		return partition.SCN{}, fmt.Errorf("node %d down", id)
	}
	g := h.Member(p)
	if err := g.Lead(ctx); err != nil {
		return partition.SCN{}, err
	}
	return g.Replicate(ctx, writeSet(i))
}

// waitApplied waits until every given node applied sequence seq of p.
func (c *cluster) waitApplied(p keys.Partition, seq uint64, within time.Duration, ids ...uint64) {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for _, id := range ids {
		for {
			if c.host(id).Member(p).Applied().Sequence >= seq {
				break
			}
			if time.Now().After(deadline) {
				st, _ := c.host(id).Member(p).Status()
				c.t.Fatalf("node %d applied %v of %x, want sequence %d (status %+v)", id, c.host(id).Member(p).Applied(), []byte(p), seq, st)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// state returns every key of p on node id outside the Raft section.
func (c *cluster) state(id uint64, p keys.Partition) map[string]string {
	c.t.Helper()
	it, err := c.engine(id).NewIter(p, p.End())
	if err != nil {
		c.t.Fatal(err)
	}
	defer it.Close()
	out := map[string]string{}
	for ok := it.First(); ok; ok = it.Next() {
		if bytes.HasPrefix(it.Key(), p.Raft()) {
			continue
		}
		out[string(it.Key())] = string(it.Value())
	}
	return out
}

// sameState fails unless every given node holds identical data for p.
func (c *cluster) sameState(p keys.Partition, ids ...uint64) map[string]string {
	c.t.Helper()
	want := c.state(ids[0], p)
	for _, id := range ids[1:] {
		got := c.state(id, p)
		if len(got) != len(want) {
			c.t.Fatalf("node %d holds %d keys of %x, node %d holds %d", id, len(got), []byte(p), ids[0], len(want))
		}
		for k, v := range want {
			if got[k] != v {
				c.t.Fatalf("node %d differs from node %d at key %x", id, ids[0], k)
			}
		}
	}
	return want
}

func hasDoc(state map[string]string, p keys.Partition, i int) bool {
	_, ok := state[string(p.Document("t", docKey(i)))]
	return ok
}

// threeReplicas starts partition 0 on nodes 1, 2 and 3 of a new cluster
// and waits for its leader; ctx bounds the test at a minute.
func threeReplicas(t *testing.T) (*cluster, keys.Partition, uint64, context.Context) {
	c := newCluster(t, 1, 2, 3)
	p := testPartition(0)
	c.startRaftGroup(p, []uint64{1, 2, 3})
	lead := c.leader(p, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c, p, lead, ctx
}
