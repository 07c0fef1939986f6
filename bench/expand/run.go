package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/doppio-db/doppio/client/wire"

	"github.com/doppio-db/doppio/client"

	"github.com/doppio-db/doppio/bench/internal/benchutil"
	"github.com/doppio-db/doppio/bench/internal/localcluster"
)

// warmUp is the load before the measured "before" window: connections,
// routing tables and caches settle.
const warmUp = 3 * time.Second

const (
	dbName    = "ex"
	tableName = "Doc"
	tableSpec = `{"key":[{"name":"g","type":"string"},{"name":"id","type":"long"}],
 "schema":{"type":"record","name":"Doc","fields":[{"name":"n","type":"long","default":0},{"name":"payload","type":"string","default":""}]}}`
	replicas = 3
	initial  = 3 // active nodes before the expansion
)

// op is one client request: when it began (since the add), how long it
// took, and whether it failed after the client's retries.
type op struct {
	at     time.Duration
	took   time.Duration
	failed bool
}

// window summarises the requests that began within a time window.
type window struct {
	Seconds    float64
	Ops        int
	Failed     int
	Throughput float64 // ops/s
	Mean, P99  time.Duration
}

func summarize(ops []op, from, to time.Duration) window {
	w := window{Seconds: (to - from).Seconds()}
	var lat []time.Duration
	var sum time.Duration
	for _, o := range ops {
		if o.at < from || o.at >= to {
			continue
		}
		w.Ops++
		if o.failed {
			w.Failed++
			continue
		}
		lat = append(lat, o.took)
		sum += o.took
	}
	if w.Seconds > 0 {
		w.Throughput = float64(w.Ops-w.Failed) / w.Seconds
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		w.Mean = sum / time.Duration(len(lat))
		w.P99 = lat[min(len(lat)-1, int(0.99*float64(len(lat))))]
	}
	return w
}

// runResult is one expansion.
type runResult struct {
	Mode     string
	Added    int
	Replicas int // replicas of the database (partitions x 3)
	Moved    int // replicas on the new nodes once done
	// Moves is the controller's count (adds, removes, leader transfers).
	Moves          int
	Took           time.Duration
	Before, During window
	// PerSecond is the successful requests per second, from -before to
	// the end, second 0 being the add.
	PerSecond []float64
	// SnapshotBytes is what the moves streamed: the sstable bytes of
	// every snapshot sent during the expansion (doppio_snapshot_sent_bytes_total).
	SnapshotBytes float64
	LoadAvg       [2]float64 // 1-minute load average before and after
}

// Ideal is the replicas a minimal expansion moves: the new nodes' share
// of the capacity.
func (r runResult) Ideal() float64 {
	return float64(r.Replicas) * float64(r.Added) / float64(initial+r.Added)
}

// MovedOff is how far the moved replicas are from the ideal, as a fraction
// of the ideal.
func (r runResult) MovedOff() float64 { return (float64(r.Moved) - r.Ideal()) / r.Ideal() }

func (r runResult) ThroughputRatio() float64 {
	if r.Before.Throughput == 0 {
		return 0
	}
	return r.During.Throughput / r.Before.Throughput
}

func (r runResult) P99Ratio() float64 {
	if r.Before.P99 == 0 {
		return 0
	}
	return float64(r.During.P99) / float64(r.Before.P99)
}

func measure(ctx context.Context, cfg config, mode string, added int) (runResult, error) {
	res := runResult{Mode: mode, Added: added, Replicas: cfg.Partitions * replicas, LoadAvg: [2]float64{benchutil.LoadAvg(), 0}}
	dir, err := os.MkdirTemp(cfg.WorkDir, "doppio-expand-")
	if err != nil {
		return res, err
	}
	moves := []string{"--max-moves", "1", "--max-moves-per-node", "1"}
	if mode == "parallel" {
		moves = []string{"--max-moves", fmt.Sprint(cfg.Parallel), "--max-moves-per-node", fmt.Sprint(cfg.PerNode)}
	}
	c, err := localcluster.Start(ctx, cfg.Binary, dir, initial, moves)
	if err != nil {
		return res, err
	}
	defer c.Stop()
	var newIDs []string
	for i := range added {
		id := fmt.Sprintf("n%d", initial+i+1)
		p, err := localcluster.StartNode(cfg.Binary, id, dir+"/"+id, c.Etcd.Endpoints()[0], append([]string{"--standby"}, moves...))
		if err != nil {
			return res, err
		}
		c.Nodes = append(c.Nodes, p)
		newIDs = append(newIDs, id)
	}
	base := c.Nodes[0].Addr
	cl := client.New(base, client.WithSmartRouting(time.Second))
	if _, _, err := cl.PutDatabase(ctx, dbName, client.DatabaseSpec{Partitions: cfg.Partitions, Replicas: replicas}); err != nil {
		return res, fmt.Errorf("create database: %w", err)
	}
	var spec client.TableSpec
	if err := json.Unmarshal([]byte(tableSpec), &spec); err != nil {
		return res, err
	}
	if _, _, err := cl.PutTable(ctx, dbName, tableName, spec); err != nil {
		return res, fmt.Errorf("create table: %w", err)
	}
	if err := localcluster.WaitUntil(ctx, 2*time.Minute, "placed on the first three nodes", func() (bool, string, error) {
		info, err := localcluster.Info(ctx, base)
		if err != nil {
			return false, "", err
		}
		ok, state := localcluster.Settled(info, cfg.Partitions, replicas, nil)
		return ok, state, nil
	}); err != nil {
		return res, err
	}
	cfg.Progress("loading %d documents of %d bytes", cfg.Docs, cfg.DocBytes)
	if err := load(ctx, cfg, cl); err != nil {
		return res, err
	}
	// The load leaves compactions behind; measured before them, "before"
	// would be slower than "during".
	if err := localcluster.WaitUntil(ctx, 2*time.Minute, "compactions after the load", func() (bool, string, error) {
		busy := c.MetricSum(ctx, "doppio_storage_compactions_in_progress")
		return busy == 0, fmt.Sprintf("%v compactions running", busy), nil
	}); err != nil {
		return res, err
	}

	// The measured load.
	payload := strings.Repeat("x", cfg.DocBytes)
	var (
		mu   sync.Mutex
		ops  []op
		t0   time.Time // the add; ops before it have a negative at
		wg   sync.WaitGroup
		lctx context.Context
	)
	lctx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	start := time.Now()
	t0 = start.Add(warmUp + cfg.Before)
	for w := range cfg.Clients {
		wc := client.New(c.Nodes[w%initial].Addr, client.WithSmartRouting(time.Second))
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			var mine []op
			for lctx.Err() == nil {
				i := rng.IntN(cfg.Docs)
				key := client.Key{group(i, cfg.Groups), int64(i)}
				began := time.Now()
				var err error
				if rng.IntN(2) == 0 {
					_, err = wc.Get(lctx, dbName, tableName, key)
				} else {
					_, err = wc.Put(lctx, dbName, tableName, key, map[string]any{"n": rng.Int64(), "payload": payload})
				}
				if lctx.Err() != nil {
					break
				}
				mine = append(mine, op{at: began.Sub(t0), took: time.Since(began), failed: err != nil})
			}
			mu.Lock()
			ops = append(ops, mine...)
			mu.Unlock()
		}()
	}
	select {
	case <-ctx.Done():
		return res, ctx.Err()
	case <-time.After(time.Until(t0)):
	}
	sentBefore := snapshotBytes(ctx, c)
	added0 := time.Now()
	for _, id := range newIDs {
		if _, err := cl.AddNode(ctx, id); err != nil {
			return res, fmt.Errorf("add %s: %w", id, err)
		}
	}
	var final wire.ClusterInfo
	err = localcluster.WaitUntil(ctx, cfg.MaxWait, "expansion done", func() (bool, string, error) {
		info, err := localcluster.Info(ctx, base)
		if err != nil {
			return false, "", err
		}
		r := info.Rebalance
		if r == nil || r.Started == nil || r.Started.Before(added0.Add(-time.Second)) || r.Active {
			return false, fmt.Sprintf("rebalance %+v", r), nil
		}
		ok, state := localcluster.Settled(info, cfg.Partitions, replicas, newIDs)
		final = info
		return ok, state, nil
	})
	done := time.Now()
	if err != nil {
		return res, err
	}
	time.Sleep(cfg.After)
	stopLoad()
	wg.Wait()
	res.Took = final.Rebalance.Finished.Sub(*final.Rebalance.Started)
	res.Moves = final.Rebalance.Done
	for _, p := range final.Partitions {
		for _, r := range p.Replicas {
			if slices.Contains(newIDs, r) {
				res.Moved++
			}
		}
	}
	res.Before = summarize(ops, -cfg.Before, 0) // after the warm-up
	res.During = summarize(ops, 0, done.Sub(t0))
	end := time.Since(t0)
	for s := -cfg.Before; s+time.Second <= end; s += time.Second { // whole seconds only
		res.PerSecond = append(res.PerSecond, summarize(ops, s, s+time.Second).Throughput)
	}
	res.SnapshotBytes = snapshotBytes(ctx, c) - sentBefore
	res.LoadAvg[1] = benchutil.LoadAvg()
	return res, nil
}

// load writes the documents with 32 concurrent writers.
func load(ctx context.Context, cfg config, cl *client.Client) error {
	payload := strings.Repeat("x", cfg.DocBytes)
	next := make(chan int)
	errs := make(chan error, 32)
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if _, err := cl.Put(ctx, dbName, tableName, client.Key{group(i, cfg.Groups), int64(i)}, map[string]any{"n": i, "payload": payload}); err != nil {
					errs <- fmt.Errorf("load document %d: %w", i, err)
					return
				}
			}
		}()
	}
	var err error
feed:
	for i := range cfg.Docs {
		select {
		case next <- i:
		case err = <-errs:
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return err
}

func group(i, groups int) string { return fmt.Sprintf("g%06d", i%groups) }

// snapshotBytes sums doppio_snapshot_sent_bytes_total over the nodes.
func snapshotBytes(ctx context.Context, c *localcluster.Cluster) float64 {
	return c.MetricSum(ctx, "doppio_snapshot_sent_bytes_total")
}
