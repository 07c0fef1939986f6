package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/doppio-db/doppio/client"

	"github.com/doppio-db/doppio/bench/internal/benchutil"
	"github.com/doppio-db/doppio/bench/internal/bulkbuild"
	"github.com/doppio-db/doppio/bench/internal/loadgen"
	"github.com/doppio-db/doppio/bench/internal/localcluster"
	"github.com/doppio-db/doppio/bench/internal/pgserver"
)

const (
	db       = "Derived"
	table    = "KV"
	nodes    = 3
	replicas = 3
	// spec is the table: a string key and a string value.
	spec = `{"key":[{"name":"k","type":"string"}],
 "schema":{"type":"record","name":"KV","fields":[{"name":"v","type":"string"}]}}`
)

// results is what run measured.
type results struct {
	InputBytes, BuildBytes int64
	LoadAvg                [2]float64 // 1-minute load average at the start and the end
	GoBuild, SparkBuild    time.Duration
	// PushGo is the Go build's push until current and announced; PushSpark
	// the Spark build's until staged.
	PushGo, PushSpark time.Duration
	// Swap and Rollback are the requests' round trips, which answer once
	// every live node serves the change.
	Swap, Rollback                time.Duration
	Announced                     bool
	BeforeSwap, AfterSwap, Steady loadgen.Summary
	PGLoad, PGAnalyze             time.Duration
	PGVersion                     string
	DoppioCurve, PGCurve          []loadgen.Level
}

func run(ctx context.Context, cfg config) error {
	p := cfg.Progress
	rep := &report{Run: benchutil.StartRun(cfg.Command), Cfg: cfg}
	res := &rep.Res
	res.LoadAvg[0] = benchutil.LoadAvg()
	work, err := os.MkdirTemp(cfg.WorkDir, "doppio-bench-derived-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	input, specFile := filepath.Join(work, "kv.jsonl"), filepath.Join(work, "kv.json")
	if err := os.WriteFile(specFile, []byte(spec), 0o644); err != nil {
		return err
	}
	p("writing %d records to %s", cfg.Records, input)
	if res.InputBytes, err = benchutil.WriteJSONLines(input, func(emit func(any) error) error {
		for i := range cfg.Records {
			if err := emit(record{K: key(i), V: value(cfg.Seed, i, cfg.ValueBytes)}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	p("store: %.1f MiB of JSON Lines", float64(res.InputBytes)/(1<<20))

	p("building doppio")
	bin, cleanup, err := localcluster.Build(ctx, work)
	if err != nil {
		return err
	}
	defer cleanup()

	// The two builders.
	buildArgs := func(out string) []string {
		return []string{"--db", db, "--table", table, "--schema-file", specFile, "--schema-version", "1",
			"--partitions", strconv.Itoa(cfg.Partitions), "--input", input, "--out", out}
	}
	goBuild, sparkBuild := filepath.Join(work, "build-go"), filepath.Join(work, "build-spark")
	benchutil.Calm(ctx, cfg.Settle, p)
	if res.GoBuild, err = bulkbuild.Go(ctx, bin, buildArgs(goBuild)...); err != nil {
		return err
	}
	p("Go builder: %v", res.GoBuild.Round(time.Millisecond))
	p("preparing Spark's virtualenv (installed once per machine)")
	spark, err := bulkbuild.PrepareSpark()
	if err != nil {
		return err
	}
	benchutil.Calm(ctx, cfg.Settle, p)
	if res.SparkBuild, err = bulkbuild.Spark(ctx, spark, cfg.SparkThreads, cfg.SparkMemory, buildArgs(sparkBuild)...); err != nil {
		return err
	}
	p("Spark builder: %v", res.SparkBuild.Round(time.Millisecond))
	m, err := bulkbuild.Same(goBuild, sparkBuild)
	if err != nil {
		return fmt.Errorf("the builders disagree: %w", err)
	}
	if m.Records != int64(cfg.Records) {
		return fmt.Errorf("the build holds %d records, want %d (%d rejected)", m.Records, cfg.Records, m.Rejected)
	}
	res.BuildBytes = bulkbuild.Bytes(m)

	// Push both to a derived table.
	c, err := localcluster.Start(ctx, bin, filepath.Join(work, "cluster"), nodes, nil)
	if err != nil {
		return err
	}
	defer c.Stop()
	cl := client.New(c.Nodes[0].Addr, client.WithSmartRouting(time.Second))
	var ts client.TableSpec
	if err := json.Unmarshal([]byte(spec), &ts); err != nil {
		return err
	}
	ts.Kind = client.KindDerived
	if err := c.CreateTable(ctx, cl, db, cfg.Partitions, replicas, table, ts); err != nil {
		return err
	}
	benchutil.Calm(ctx, cfg.Settle, p)
	if res.PushGo, err = push(ctx, cl, client.DerivedPush{Source: goBuild}, 1, client.VersionCurrent); err != nil {
		return err
	}
	p("push of the Go build, until current: %v", res.PushGo.Round(time.Millisecond))
	benchutil.Calm(ctx, cfg.Settle, p)
	if res.PushSpark, err = push(ctx, cl, client.DerivedPush{Source: sparkBuild, NoSwap: true}, 2, client.VersionStaged); err != nil {
		return err
	}
	p("push of the Spark build, until staged: %v", res.PushSpark.Round(time.Millisecond))

	// Reads around the swap and the rollback.
	benchutil.Calm(ctx, cfg.Settle, p)
	readers := make([]*client.Client, len(c.Nodes))
	for i, n := range c.Nodes {
		readers[i] = client.New(n.Addr, client.WithSmartRouting(time.Second))
	}
	get := func(ctx context.Context, w int, r *rand.Rand) (string, error) {
		_, err := readers[w%len(readers)].Get(ctx, db, table, client.Key{key(r.IntN(cfg.Records))})
		return "get", err
	}
	const warm = 5 * time.Second
	reads := loadgen.Start(ctx, cfg.Readers, cfg.Seed, get)
	if err := sleep(ctx, warm+cfg.AfterSwap); err != nil {
		reads.Stop()
		return err
	}
	swapAt := reads.Now()
	began := time.Now()
	t, err := cl.SwapVersion(ctx, db, table)
	res.Swap, res.Announced = time.Since(began), t.Announced
	if err == nil && t.Current != 2 {
		err = fmt.Errorf("after the swap version %d is current, want 2", t.Current)
	}
	if err == nil {
		err = sleep(ctx, cfg.SteadyAfter+cfg.Steady)
	}
	if err == nil {
		began = time.Now()
		t, err = cl.RollbackVersion(ctx, db, table)
		res.Rollback = time.Since(began)
		res.Announced = res.Announced && t.Announced
		if err == nil && t.Current != 1 {
			err = fmt.Errorf("after the rollback version %d is current, want 1", t.Current)
		}
	}
	ops := reads.Stop()
	if err != nil {
		return err
	}
	res.BeforeSwap = loadgen.Summarize(ops, "", swapAt-cfg.AfterSwap, swapAt)
	res.AfterSwap = loadgen.Summarize(ops, "", swapAt, swapAt+cfg.AfterSwap)
	res.Steady = loadgen.Summarize(ops, "", swapAt+cfg.SteadyAfter, swapAt+cfg.SteadyAfter+cfg.Steady)
	p("swap %v, rollback %v; read p99 before %v, after %v, steady %v", res.Swap, res.Rollback, res.BeforeSwap.P99, res.AfterSwap.P99, res.Steady.P99)

	benchutil.Calm(ctx, cfg.Settle, p)
	if res.DoppioCurve, err = loadgen.Ramp(ctx, cfg.Levels, cfg.LevelWarm, cfg.Level, cfg.Seed, get); err != nil {
		return err
	}
	c.Stop()

	// PostgreSQL.
	benchutil.Calm(ctx, cfg.Settle, p)
	if err := postgres(ctx, cfg, filepath.Join(work, "postgres"), res); err != nil {
		return err
	}
	res.LoadAvg[1] = benchutil.LoadAvg()
	rep.Finish()
	return benchutil.WriteReport(cfg.Out, "derived", rep.markdown(), rep.plot)
}

// record is one line of the store's input.
type record struct {
	K string `json:"k"`
	V string `json:"v"`
}

// key is record i's key: a bijective mix of i, so keys arrive in no
// order and spread over every partition.
func key(i int) string {
	x := uint64(i) + 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return fmt.Sprintf("%016x", x^(x>>31))
}

// value is record i's value: n letters drawn from seed and i.
func value(seed uint64, i, n int) string {
	r := rand.New(rand.NewPCG(seed, uint64(i)))
	var b strings.Builder
	b.Grow(n)
	for range n {
		b.WriteByte(byte('a' + r.IntN(26)))
	}
	return b.String()
}

// push pushes a version and waits until it reaches state want (and, for
// current, every live node serves it); it returns the time since the
// request.
func push(ctx context.Context, cl *client.Client, req client.DerivedPush, version int, want string) (time.Duration, error) {
	start := time.Now()
	if _, err := cl.PushVersion(ctx, db, table, req); err != nil {
		return 0, fmt.Errorf("push version %d: %w", version, err)
	}
	var last client.DerivedTable
	var failed error // ends the wait: a failed version stays failed
	err := localcluster.Poll(ctx, 50*time.Millisecond, time.Hour, fmt.Sprintf("version %d %s", version, want), func() (bool, string, error) {
		t, err := cl.DerivedStatus(ctx, db, table)
		if err != nil {
			return false, "", err
		}
		last = t
		for _, v := range t.Versions {
			if v.Version == version {
				if v.State == client.VersionFailed {
					failed = fmt.Errorf("version %d failed: %s", version, v.Error)
					return true, "", nil
				}
				return v.State == want && (want != client.VersionCurrent || t.Announced), v.State, nil
			}
		}
		return false, "not listed", nil
	})
	took := time.Since(start)
	if err == nil {
		err = failed
	}
	if err != nil {
		return 0, fmt.Errorf("%w (%+v)", err, last.Versions)
	}
	return took, nil
}

// postgres loads the records into a table with a primary key (one COPY,
// then ANALYZE) and measures its reads at each concurrency.
func postgres(ctx context.Context, cfg config, dir string, res *results) error {
	maxLevel := 0
	for _, l := range cfg.Levels {
		maxLevel = max(maxLevel, l)
	}
	pg, err := pgserver.Start(ctx, pgserver.Config{Dir: dir, Clients: maxLevel, Logf: cfg.Progress})
	if err != nil {
		return err
	}
	defer pg.Close()
	res.PGVersion = pg.Version()
	if err := pg.Exec(ctx, `CREATE TABLE kv (k text PRIMARY KEY, v text NOT NULL)`); err != nil {
		return err
	}
	i := 0
	start := time.Now()
	n, err := pg.Copy(ctx, "kv", []string{"k", "v"}, func() ([]any, error) {
		if i == cfg.Records {
			return nil, nil
		}
		i++
		return []any{key(i - 1), value(cfg.Seed, i-1, cfg.ValueBytes)}, nil
	})
	if err != nil {
		return fmt.Errorf("postgres: COPY: %w", err)
	}
	res.PGLoad = time.Since(start)
	if n != int64(cfg.Records) {
		return fmt.Errorf("postgres: COPY wrote %d rows, want %d", n, cfg.Records)
	}
	start = time.Now()
	if err := pg.Exec(ctx, `ANALYZE kv`); err != nil {
		return err
	}
	res.PGAnalyze = time.Since(start)
	cfg.Progress("postgres: COPY %v, ANALYZE %v", res.PGLoad.Round(time.Millisecond), res.PGAnalyze.Round(time.Millisecond))
	benchutil.Calm(ctx, cfg.Settle, cfg.Progress)
	res.PGCurve, err = loadgen.Ramp(ctx, cfg.Levels, cfg.LevelWarm, cfg.Level, cfg.Seed, func(ctx context.Context, _ int, r *rand.Rand) (string, error) {
		var v string
		err := pg.Pool.QueryRow(ctx, `SELECT v FROM kv WHERE k = $1`, key(r.IntN(cfg.Records))).Scan(&v)
		if errors.Is(err, pgx.ErrNoRows) {
			err = fmt.Errorf("postgres: a loaded key is missing")
		}
		return "get", err
	})
	return err
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
