// Command derived measures derived tables (issue 30, Voldemort's
// read-only stores) against PostgreSQL, in one run on one machine:
//
//   - a store of -records small key-value records (a 16-character key, a
//     -value-bytes string) as a JSON Lines file;
//   - built by the Go builder (`doppio bulk build`) and by the Spark job
//     in local mode, whose builds must be byte-identical;
//   - each pushed as a version of a derived table on a 3-node cluster
//     (replicas 3): the Go build swapped in, the Spark build staged;
//   - under -readers closed-loop readers of random keys, the staged
//     version swapped in, its read latency in the first -after-swap and at
//     steady state (-steady from -steady-after), then a rollback;
//   - PostgreSQL loading the same records (COPY into a table with a
//     primary key, then ANALYZE);
//   - both read at each of -levels concurrencies, for throughput at equal
//     p99.
//
// It writes derived.md and derived.png to -out. Run it with `make
// bench-derived` (DERIVED_FLAGS=-quick for a smoke run).
package main

import (
	"context"
	"flag"
	"log"
	"path/filepath"
	"runtime"
	"time"

	"github.com/doppio-db/doppio/bench/internal/benchutil"
)

// config is everything a run depends on.
type config struct {
	benchutil.Common
	Records, ValueBytes int
	Partitions          int
	SparkThreads        int
	SparkMemory         string
	Readers             int
	AfterSwap           time.Duration
	SteadyAfter, Steady time.Duration
	Levels              []int
	LevelWarm, Level    time.Duration
}

func main() {
	var (
		records     = flag.Int("records", 10_000_000, "key-value records in the store (about 100 bytes of JSON each)")
		valueBytes  = flag.Int("value-bytes", 64, "bytes of each record's value")
		partitions  = flag.Int("partitions", 8, "partitions of the database (3 replicas each)")
		sparkCores  = flag.Int("spark-threads", runtime.NumCPU(), "Spark's local worker threads")
		sparkMem    = flag.String("spark-memory", "4g", "Spark's driver memory (local mode runs the tasks in the driver)")
		readers     = flag.Int("readers", 16, "closed-loop readers around the swap")
		afterSwap   = flag.Duration("after-swap", time.Minute, "the window after the swap whose latency is reported")
		steadyAfter = flag.Duration("steady-after", 2*time.Minute, "when, after the swap, the steady-state window starts")
		steady      = flag.Duration("steady", time.Minute, "the steady-state window")
		levels      = flag.String("levels", "1,4,16,64", "reader concurrencies of the throughput and p99 curves")
		levelTime   = flag.Duration("level", 15*time.Second, "how long each concurrency is measured (after a warm-up of a fifth of it)")
	)
	common := benchutil.CommonFlags("derived", "smoke run: 200,000 records, 10 s windows, 4 s levels")
	flag.Parse()
	cfg := config{
		Records: *records, ValueBytes: *valueBytes, Partitions: *partitions, SparkThreads: *sparkCores, SparkMemory: *sparkMem,
		Readers: *readers, AfterSwap: *afterSwap, SteadyAfter: *steadyAfter, Steady: *steady, Level: *levelTime,
		Common: common(),
	}
	var err error
	if cfg.Levels, err = benchutil.ParseInts(*levels); err != nil {
		log.Fatalf("-levels: %v", err)
	}
	if cfg.Quick {
		benchutil.Unset(map[string]func(){
			"records":      func() { cfg.Records = 200_000 },
			"after-swap":   func() { cfg.AfterSwap = 10 * time.Second },
			"steady-after": func() { cfg.SteadyAfter = 15 * time.Second },
			"steady":       func() { cfg.Steady = 10 * time.Second },
			"levels":       func() { cfg.Levels = []int{1, 8, 32} },
			"level":        func() { cfg.Level = 4 * time.Second },
		})
	}
	cfg.LevelWarm = cfg.Level / 5
	if cfg.Records < 1 || cfg.ValueBytes < 1 || cfg.SteadyAfter < cfg.AfterSwap || len(cfg.Levels) == 0 {
		log.Fatal("want -records and -value-bytes ≥ 1, -steady-after ≥ -after-swap and at least one -levels")
	}
	benchutil.Main(func(ctx context.Context) error { return run(ctx, cfg) })
	log.Printf("wrote %s and derived.png", filepath.Join(cfg.Out, "derived.md"))
}
