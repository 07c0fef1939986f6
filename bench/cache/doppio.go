package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/doppio-db/doppio/internal/cache"
	"github.com/doppio-db/doppio/internal/cache/cachecheck"
	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/partition"

	"github.com/doppio-db/doppio/bench/internal/benchutil"
	"github.com/doppio-db/doppio/bench/internal/localcluster"
)

const (
	benchDB    = "profiles"
	benchTable = "Profile"
	updater    = "profile_cache"
)

// doppioStore reads and updates profiles through one router.
type doppioStore struct {
	base      string // the router's http://host:port
	staleness string
	// lag, when set, is told of every acknowledged update and its SCN.
	lag *lagTracker
}

func (d *doppioStore) path(key string) string {
	return d.base + "/" + benchDB + "/" + benchTable + "/" + key
}

// Read implements store.
func (d *doppioStore) Read(ctx context.Context, key string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.path(key), nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("X-Doppio-Staleness", d.staleness)
	resp, err := localcluster.HTTPClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", key, resp.Status)
	}
	// Decoded, as an application would, and as configuration (d) does.
	var p profile
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
		return "", err
	}
	src := resp.Header.Get("X-Doppio-Cache")
	if src == "" {
		src = "nodes"
	}
	return src, nil
}

// Update implements store.
func (d *doppioStore) Update(ctx context.Context, key string, p profile) error {
	body, err := json.Marshal(p)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, d.path(key), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := localcluster.HTTPClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("PUT %s: %s %s", key, resp.Status, b)
	}
	if d.lag != nil {
		s, err := partition.ParseSCN(resp.Header.Get("X-Doppio-SCN"))
		if err != nil {
			return fmt.Errorf("PUT %s answered X-Doppio-SCN %q", key, resp.Header.Get("X-Doppio-SCN"))
		}
		d.lag.watch(key, s, time.Now())
	}
	return nil
}

// doppioBench is the cluster the first three configurations share.
type doppioBench struct {
	cfg        config
	bin        string
	cluster    *localcluster.Cluster
	redis      string
	generation int64
}

// startDoppio starts three nodes, creates the cacheable table and loads
// every profile.
func startDoppio(ctx context.Context, cfg config, bin, dir, redis string) (*doppioBench, error) {
	cfg.Progress("starting 3 nodes")
	c, err := localcluster.Start(ctx, bin, dir, 3, nil)
	if err != nil {
		return nil, err
	}
	b := &doppioBench{cfg: cfg, bin: bin, cluster: c, redis: redis}
	node := c.Nodes[0].Addr
	table := fmt.Sprintf(`{"key":[{"name":"member","type":"string"}],"schema":%s,"cache":{"ttl":%q,"bootstrapEvery":%q}}`,
		profileSchema, cfg.TTL, cfg.Bootstrap)
	for _, step := range []struct {
		path string
		body any
	}{
		{"/_schemas/" + benchDB, map[string]any{"partitions": cfg.Partitions, "replicas": 3}},
		{"/_schemas/" + benchDB + "/" + benchTable, table},
	} {
		if err := retry(ctx, func() error { return expect(ctx, node, "PUT", step.path, step.body, 200, 201) }); err != nil {
			b.stop()
			return nil, err
		}
	}
	var tv struct {
		CacheGeneration int64 `json:"cacheGeneration"`
	}
	st, body, err := localcluster.Do(ctx, node, "GET", "/_schemas/"+benchDB+"/"+benchTable, nil)
	if err != nil || st != 200 || json.Unmarshal(body, &tv) != nil || tv.CacheGeneration == 0 {
		b.stop()
		return nil, fmt.Errorf("read the table's cache generation: %d %s %v", st, body, err)
	}
	b.generation = tv.CacheGeneration
	cfg.Progress("loading %d profiles of %d–%d bytes", cfg.Docs, cfg.MinBytes, cfg.MaxBytes)
	put := func(ctx context.Context, key string, p profile) error {
		n := c.Nodes[int(key[len(key)-1])%len(c.Nodes)].Addr
		return retry(ctx, func() error { return expect(ctx, n, "PUT", "/"+benchDB+"/"+benchTable+"/"+key, p, 200, 201) })
	}
	if err := load(ctx, cfg, put); err != nil {
		b.stop()
		return nil, err
	}
	return b, nil
}

func (b *doppioBench) stop() { b.cluster.Stop() }

// router starts a router with the configuration's cache flags.
func (b *doppioBench) router(name string) (*localcluster.Proc, error) {
	var extra []string
	switch name {
	case cfgLocal:
		extra = []string{"--cache-local-bytes", b.cfg.LocalBytes}
	case cfgRedis:
		extra = []string{"--cache-local-bytes", b.cfg.LocalBytes, "--cache-redis", b.redis}
	}
	return localcluster.StartRouter(b.bin, "r-"+strings.ReplaceAll(name, "+", "-"), b.cluster.Etcd.Endpoints()[0], extra)
}

// startUpdater creates the updater: a datastream with a Redis sink, from
// now on (its bootstrapper writes every profile into Redis at once).
func (b *doppioBench) startUpdater(ctx context.Context) error {
	def := map[string]any{"database": benchDB, "from": "now",
		"sink": map[string]any{"type": "redis", "addresses": []string{b.redis}}}
	return retry(ctx, func() error {
		return expect(ctx, b.cluster.Nodes[0].Addr, "PUT", "/_datastreams/"+updater, def, 200, 201)
	})
}

// nodePids are the storage nodes' process ids.
func (b *doppioBench) nodePids() ([]int, error) {
	var out []int
	for _, n := range b.cluster.Nodes {
		out = append(out, n.Pid())
	}
	return out, nil
}

// ref names profile key's entry in Redis.
func (b *doppioBench) ref(key string) cache.Ref {
	enc, _ := keys.EncodeTuple(keys.Tuple{key})
	return cache.Ref{DB: benchDB, Generation: b.generation, Table: benchTable, Partition: keys.PartitionOf(enc, b.cfg.Partitions), Key: enc}
}

// diverged runs the divergence checker over the table's entries.
func (b *doppioBench) diverged(ctx context.Context) (cachecheck.Report, error) {
	st, err := cache.Open(cache.Config{Addrs: []string{b.redis}})
	if err != nil {
		return cachecheck.Report{}, err
	}
	defer st.Close()
	return cachecheck.Check(ctx, st, cachecheck.HTTPSource{URL: b.cluster.Nodes[0].Addr, Client: localcluster.HTTPClient},
		benchDB, b.cfg.Partitions, []cachecheck.Table{{Name: benchTable, Generation: b.generation}})
}

// lagTracker measures the updater's lag: from an update's acknowledgement
// until Redis holds the profile at that update's SCN (or a later one).
type lagTracker struct {
	b     *doppioBench
	store *cache.Store
	mu    sync.Mutex
	lags  []time.Duration
	lost  int // not seen within lagLimit
	wg    sync.WaitGroup
}

// lagLimit bounds the wait for one update to reach Redis.
const lagLimit = 10 * time.Second

// lagPoll is how often Redis is polled for an update: the lags measured
// are this coarse.
const lagPoll = 2 * time.Millisecond

func newLagTracker(b *doppioBench) (*lagTracker, error) {
	st, err := cache.Open(cache.Config{Addrs: []string{b.redis}})
	if err != nil {
		return nil, err
	}
	return &lagTracker{b: b, store: st}, nil
}

func (l *lagTracker) watch(key string, s partition.SCN, acked time.Time) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		ref := l.b.ref(key)
		for time.Since(acked) < lagLimit {
			e, _, err := l.store.Get(context.Background(), ref)
			if err == nil && !e.SCN.Less(s) {
				l.mu.Lock()
				l.lags = append(l.lags, time.Since(acked))
				l.mu.Unlock()
				return
			}
			time.Sleep(lagPoll)
		}
		l.mu.Lock()
		l.lost++
		l.mu.Unlock()
	}()
}

// done waits for every watched update and returns the lags, sorted.
func (l *lagTracker) done() ([]time.Duration, int) {
	l.wg.Wait()
	l.store.Close()
	sortDurations(l.lags)
	return l.lags, l.lost
}

// expect sends one request and fails unless the status is one of want.
func expect(ctx context.Context, base, method, path string, body any, want ...int) error {
	st, b, err := localcluster.Do(ctx, base, method, path, body)
	if err != nil {
		return err
	}
	for _, w := range want {
		if st == w {
			return nil
		}
	}
	return fmt.Errorf("%s %s: %d %s", method, path, st, b)
}

// retry calls f until it succeeds, for 30 s (a new table, a leader being
// elected).
func retry(ctx context.Context, f func() error) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// cpuTimes are the user and system CPU time of processes pids so far,
// from /proc/<pid>/stat; a process gone meanwhile is left out.
func cpuTimes(pids []int) map[int]time.Duration {
	out := map[int]time.Duration{}
	for _, pid := range pids {
		f, err := benchutil.ProcStat(pid)
		if err != nil || len(f) < 13 {
			continue
		}
		for _, v := range f[11:13] {
			if ticks, err := strconv.ParseInt(v, 10, 64); err == nil {
				out[pid] += time.Duration(ticks) * time.Second / clockTicks
			}
		}
	}
	return out
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on
// every Linux architecture Go supports.
const clockTicks = 100
