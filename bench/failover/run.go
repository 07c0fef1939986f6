package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/doppio-db/doppio/client/wire"

	"github.com/doppio-db/doppio/internal/keys"

	"github.com/doppio-db/doppio/bench/internal/localcluster"
)

const dbName = "fo"

const counterSchema = `{"key":[{"name":"group","type":"string"},{"name":"id","type":"long"}],
 "schema":{"type":"record","name":"Counter","fields":[{"name":"n","type":"long","default":0},{"name":"writer","type":"string","default":""}]}}`

// runResult is one (mode, partition count) measurement.
type runResult struct {
	Mode       string
	Partitions int
	Nodes      int
	Victim     string
	Led        int             // partitions the killed node led
	Leads      map[string]int  // leaders per node before the kill
	Times      []time.Duration // per partition it led: kill → first acknowledged write, sorted
	NotWritten int             // partitions not writable within MaxWait
	Acked      int             // acknowledged writes checked afterwards
	Lost       int             // acknowledged writes missing or wrong afterwards
	LoadWrites int             // load writes acknowledged from the load start to the end
	LoadFailed int             // load write attempts that failed
	// ProbeFailures counts the probes' failed attempts by answer (status
	// and problem type, or "error: …"), to see where failover time goes.
	ProbeFailures map[string]int
	SettleTime    time.Duration // database creation until every partition led (and settled)
	Settled       bool
	Note          string
}

func (r runResult) quantile(q float64) time.Duration {
	if len(r.Times) == 0 {
		return 0
	}
	i := int(q*float64(len(r.Times))+0.999999) - 1
	return r.Times[min(max(i, 0), len(r.Times)-1)]
}

// groupsByPartition finds a partition key (document group) for each
// partition of a database of n partitions.
func groupsByPartition(n int) []string {
	out := make([]string, n)
	for i, left := 0, n; left > 0; i++ {
		g := fmt.Sprint("g", i)
		enc, _ := keys.EncodeTuple(keys.Tuple{g})
		if p := keys.PartitionOf(enc, n); out[p] == "" {
			out[p] = g
			left--
		}
	}
	return out
}

type ack struct {
	path string
	n    int64
}

// measure runs one failover: a fresh cluster in mode, a database of
// partitions, load, kill -9 of the node leading the most partitions, and
// the per-partition time until a write is acknowledged again.
func measure(ctx context.Context, cfg config, mode string, partitions int) (runResult, error) {
	res := runResult{Mode: mode, Partitions: partitions, Nodes: cfg.Nodes}
	dir, err := os.MkdirTemp(cfg.WorkDir, fmt.Sprintf("failover-%s-%d-", mode, partitions))
	if err != nil {
		return res, err
	}
	c, err := localcluster.Start(ctx, cfg.Binary, dir, cfg.Nodes, append([]string{"--placement-mode", mode}, cfg.NodeArgs...))
	if err != nil {
		os.RemoveAll(dir)
		return res, err
	}
	defer c.Stop()
	fail := func(err error) (runResult, error) {
		for _, n := range c.Nodes {
			cfg.Progress("log tail of %s:\n%s", n.ID, n.Tail(15))
		}
		return res, err
	}
	base := c.Nodes[0].Addr
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	st, b, err := localcluster.Do(cctx, base, "PUT", "/_schemas/"+dbName, map[string]any{"partitions": partitions, "replicas": 3})
	if err == nil && st != 201 {
		err = fmt.Errorf("create database: %d %s", st, b)
	}
	if err == nil {
		st, b, err = localcluster.Do(cctx, base, "PUT", "/_schemas/"+dbName+"/Counter", counterSchema)
		if err == nil && st != 201 {
			err = fmt.Errorf("create table: %d %s", st, b)
		}
	}
	cancel()
	if err != nil {
		return fail(err)
	}
	created := time.Now()
	groups := groupsByPartition(partitions)

	// Every partition led, its placement's 3 members up, the layout the
	// mode asks for, and the leaders unchanged over a few polls.
	var info wire.ClusterInfo
	var last string
	stable := 0
	for {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		info, err = localcluster.Info(ctx, base)
		if err == nil {
			ok, sig := ready(info, partitions, mode)
			if ok && sig == last {
				stable++
			} else {
				stable = 0
			}
			last = sig
			if ok && stable >= 2 {
				res.Settled = true
				break
			}
		}
		if time.Since(created) > cfg.SettleWait {
			if ok, _ := ready(info, partitions, ""); !ok {
				return fail(fmt.Errorf("%d partitions not led with 3 members after %v", partitions, cfg.SettleWait))
			}
			res.Note = fmt.Sprintf("leader layout not stable/as the mode asks after %v; measured anyway", cfg.SettleWait)
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	res.SettleTime = time.Since(created)
	cfg.Progress("%s/%d: settled in %v", mode, partitions, res.SettleTime.Round(100*time.Millisecond))

	// One write per partition, through every node in turn: all routes work.
	var (
		mu    sync.Mutex
		acked []ack
	)
	record := func(a ack) {
		mu.Lock()
		acked = append(acked, a)
		mu.Unlock()
	}
	if err := parallel(ctx, 16, partitions, func(p int) error {
		through := c.Nodes[p%len(c.Nodes)].Addr
		path := fmt.Sprintf("/%s/Counter/%s/0", dbName, groups[p])
		for attempt := 0; ; attempt++ {
			actx, acancel := context.WithTimeout(ctx, 6*time.Second)
			st, b, err := localcluster.Do(actx, through, "PUT", path, map[string]any{"n": p, "writer": "init"}, "X-Doppio-Timeout", "5s")
			acancel()
			if err == nil && st == 201 {
				record(ack{path, int64(p)})
				return nil
			}
			if attempt == 5 {
				return fmt.Errorf("first write to partition %d: %d %s %v", p, st, b, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}); err != nil {
		return fail(err)
	}

	// The victim: the node leading the most partitions (in sharded-mysql
	// mode, a node that leads all of its partitions).
	info, err = localcluster.Info(ctx, base)
	if err != nil {
		return fail(err)
	}
	led := map[string][]int{}
	res.Leads = map[string]int{}
	for _, p := range info.Partitions {
		led[p.Leader] = append(led[p.Leader], p.Partition)
		res.Leads[p.Leader]++
	}
	victim := c.Nodes[0]
	for _, n := range c.Nodes {
		if len(led[n.ID]) > len(led[victim.ID]) {
			victim = n
		}
	}
	var survivors []*localcluster.Proc
	for _, n := range c.Nodes {
		if n != victim {
			survivors = append(survivors, n)
		}
	}
	res.Victim, res.Led = victim.ID, len(led[victim.ID])
	victimLed := led[victim.ID]
	sort.Ints(victimLed)

	// Steady load through the survivors: closed-loop clients writing new
	// documents to uniformly random partitions.
	var (
		seq        atomic.Int64
		loadOK     atomic.Int64
		loadFailed atomic.Int64
		wg         sync.WaitGroup
	)
	lctx, lcancel := context.WithCancel(ctx)
	defer lcancel()
	for w := range cfg.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for lctx.Err() == nil {
				p := rng.IntN(partitions)
				i := seq.Add(1)
				path := fmt.Sprintf("/%s/Counter/%s/%d", dbName, groups[p], i)
				through := survivors[rng.IntN(len(survivors))].Addr
				actx, acancel := context.WithTimeout(lctx, 2*time.Second)
				st, _, err := localcluster.Do(actx, through, "PUT", path, map[string]any{"n": i, "writer": fmt.Sprint("w", w)}, "X-Doppio-Timeout", "1s")
				acancel()
				if err == nil && st == 201 {
					record(ack{path, i})
					loadOK.Add(1)
				} else {
					if lctx.Err() == nil {
						loadFailed.Add(1)
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
		}()
	}
	time.Sleep(cfg.PreKill)

	// kill -9, then one prober per partition the victim led: writes through
	// a survivor until one is acknowledged.
	var fmu sync.Mutex
	res.ProbeFailures = map[string]int{}
	failure := func(err error, st int, body []byte, took time.Duration) {
		var why string
		if err != nil {
			why = "error: " + err.Error()
			if i := strings.LastIndex(why, ": "); i > 0 {
				why = "error: " + why[i+2:]
			}
		} else {
			var pb struct{ Type string }
			_ = json.Unmarshal(body, &pb)
			why = fmt.Sprintf("%d %s", st, strings.TrimPrefix(pb.Type, "https://doppio.dev/problems/"))
		}
		if took > cfg.ProbeTimeout/2 {
			why += " (slow)"
		}
		fmu.Lock()
		res.ProbeFailures[why]++
		fmu.Unlock()
	}
	killedAt := time.Now()
	victim.Kill()
	times := make([]time.Duration, len(victimLed))
	var pwg sync.WaitGroup
	for k, p := range victimLed {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			times[k] = -1
			for attempt := 0; time.Since(killedAt) < cfg.MaxWait && ctx.Err() == nil; attempt++ {
				i := seq.Add(1)
				path := fmt.Sprintf("/%s/Counter/%s/%d", dbName, groups[p], i)
				through := survivors[(p+attempt)%len(survivors)].Addr
				actx, acancel := context.WithTimeout(ctx, cfg.ProbeTimeout+500*time.Millisecond)
				sent := time.Now()
				st, body, err := localcluster.Do(actx, through, "PUT", path, map[string]any{"n": i, "writer": "probe"}, "X-Doppio-Timeout", cfg.ProbeTimeout.String())
				acancel()
				if err == nil && st == 201 {
					times[k] = time.Since(killedAt)
					record(ack{path, i})
					return
				}
				failure(err, st, body, time.Since(sent))
				// A failed attempt is often fast (the old leader refuses
				// connections): pace the retries so probing does not
				// starve the cluster.
				time.Sleep(cfg.ProbeInterval/2 + rand.N(cfg.ProbeInterval))
			}
		}()
	}
	pwg.Wait()
	if cfg.LogDir != "" {
		for _, n := range survivors {
			name := filepath.Join(cfg.LogDir, fmt.Sprintf("%s-%d-%s.log", mode, partitions, n.ID))
			tail := fmt.Sprintf("killed %s at %s\n%s\n", victim.ID, killedAt.Format(time.RFC3339Nano), n.Tail(400))
			_ = os.WriteFile(name, []byte(tail), 0o644)
		}
	}
	time.Sleep(500 * time.Millisecond) // the load goes on past the last partition's recovery
	lcancel()
	wg.Wait()
	res.LoadWrites, res.LoadFailed = int(loadOK.Load()), int(loadFailed.Load())
	for _, d := range times {
		if d < 0 {
			res.NotWritten++
		} else {
			res.Times = append(res.Times, d)
		}
	}
	slices.Sort(res.Times)

	// Every acknowledged write reads back (linearizable reads through the
	// survivors).
	res.Acked = len(acked)
	var lost atomic.Int64
	_ = parallel(ctx, 16, len(acked), func(i int) error {
		a := acked[i]
		through := survivors[i%len(survivors)].Addr
		for attempt := 0; ; attempt++ {
			actx, acancel := context.WithTimeout(ctx, 6*time.Second)
			st, b, err := localcluster.Do(actx, through, "GET", a.path, nil, "X-Doppio-Timeout", "5s")
			acancel()
			if err == nil && (st == 200 || st == 404) {
				var doc struct{ N int64 }
				if st == 404 || json.Unmarshal(b, &doc) != nil || doc.N != a.n {
					lost.Add(1)
					if lost.Load() <= 5 {
						cfg.Progress("LOST: %s: %d %s (want n=%d)", a.path, st, b, a.n)
					}
				}
				return nil
			}
			if attempt == 10 || ctx.Err() != nil {
				lost.Add(1)
				cfg.Progress("could not read %s: %d %s %v", a.path, st, b, err)
				return nil
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
	res.Lost = int(lost.Load())
	return res, nil
}

// ready reports whether every partition has a leader and three members in
// the leader or follower role, and (for mode sharded-mysql) whether each
// node leads all or none of its partitions; sig summarizes the leaders.
func ready(info wire.ClusterInfo, partitions int, mode string) (bool, string) {
	if len(info.Partitions) != partitions {
		return false, ""
	}
	leads := map[string]int{}
	hosts := map[string]int{}
	for _, p := range info.Partitions {
		if p.Leader == "" || len(p.Members) != 3 {
			return false, ""
		}
		for _, m := range p.Members {
			if m.Role != "leader" && m.Role != "follower" {
				return false, ""
			}
			hosts[m.Node]++
		}
		leads[p.Leader]++
	}
	if mode == "sharded-mysql" {
		for n, h := range hosts {
			if leads[n] != 0 && leads[n] != h {
				return false, ""
			}
		}
	}
	var ids []string
	for n := range leads {
		ids = append(ids, n)
	}
	sort.Strings(ids)
	sig := ""
	for _, n := range ids {
		sig += fmt.Sprintf("%s=%d ", n, leads[n])
	}
	if mode == "spread" {
		lo, hi := partitions, 0
		for n := range hosts {
			lo, hi = min(lo, leads[n]), max(hi, leads[n])
		}
		if hi-lo > 1 {
			return false, sig
		}
	}
	return true, sig
}

// parallel runs f(0..n-1) on k workers and returns the first error.
func parallel(ctx context.Context, k, n int, f func(int) error) error {
	var (
		next  atomic.Int64
		first error
		once  sync.Once
		wg    sync.WaitGroup
	)
	for range min(k, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := f(i); err != nil {
					once.Do(func() { first = err })
					next.Store(int64(n))
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}
