// Command cache measures the cache tier (issue 31, docs/design/cache.md)
// the way LinkedIn measured the one in front of Espresso's member
// profiles: a profile-like workload (documents of 2–24 KB, zipfian keys,
// 95% reads with a staleness bound, 5% updates) offered at one fixed rate
// through a router, against
//
//	(a) no cache tier: the router sends every read to the storage nodes;
//	(b) the router's in-process hot-key cache only;
//	(c) the hot-key cache and Redis, kept in step by the updater (a
//	    datastream with a Redis sink) and its bootstrapper;
//	(d) the same documents in PostgreSQL with Redis in front, cache-aside
//	    done by hand as an application would (read Redis, on a miss read
//	    PostgreSQL and set Redis; on an update write PostgreSQL and delete
//	    the Redis key).
//
// It reports the hit rate per tier, read p50/p99 at the offered load,
// the storage processes' CPU per read served (from /proc/<pid>/stat of
// the nodes, or of PostgreSQL's processes), the updater's lag under the
// write load (from each acknowledged update to the moment Redis holds its
// SCN), and what the divergence checker finds after one bootstrap
// period. It writes cache.md and cache.png to -out. Run it with `make
// bench-cache`; -quick is a smoke run.
package main

import (
	"context"
	"flag"
	"log"
	"path/filepath"
	"time"

	"github.com/doppio-db/doppio/bench/internal/benchutil"
)

// config is everything a run depends on.
type config struct {
	Docs       int
	MinBytes   int
	MaxBytes   int
	Zipf       float64
	Rate       float64 // operations offered per second
	Updates    float64 // share of updates
	Staleness  time.Duration
	Warmup     time.Duration
	Measure    time.Duration
	Partitions int
	LocalBytes string
	TTL        time.Duration
	Bootstrap  time.Duration
	Configs    []string
	WorkDir    string
	Out        string
	Command    string
	Quick      bool
	Progress   func(format string, args ...any)
}

// The configurations, in the order they run and are reported.
const (
	cfgNone      = "none"
	cfgLocal     = "local"
	cfgRedis     = "local+redis"
	cfgPostgres  = "postgres+redis"
	defaultOrder = cfgNone + "," + cfgLocal + "," + cfgRedis + "," + cfgPostgres
)

func main() {
	var (
		docs       = flag.Int("docs", 20000, "profiles loaded (each of -min-bytes to -max-bytes)")
		minBytes   = flag.Int("min-bytes", 2048, "smallest profile, bytes of JSON")
		maxBytes   = flag.Int("max-bytes", 24576, "largest profile, bytes of JSON")
		zipf       = flag.Float64("zipf", 1.1, "zipfian exponent of the keys read and updated (s > 1)")
		rate       = flag.Float64("rate", 600, "operations offered per second, the same in every configuration (open loop)")
		updates    = flag.Float64("updates", 0.05, "share of operations that update a whole profile")
		staleness  = flag.Duration("staleness", 5*time.Second, "X-Doppio-Staleness of every read")
		warmup     = flag.Duration("warmup", 20*time.Second, "load before the measurement of each configuration (caches fill)")
		measure    = flag.Duration("measure", 60*time.Second, "measured load of each configuration")
		partitions = flag.Int("partitions", 8, "partitions of the database (3 replicas each)")
		localBytes = flag.String("local-bytes", "64MB", "--cache-local-bytes of the router in (b) and (c)")
		ttl        = flag.Duration("ttl", 10*time.Minute, "the table's cache TTL, and Redis's in (d)")
		bootstrap  = flag.Duration("bootstrap-every", 20*time.Second, "the table's bootstrap period; the divergence check runs one period after the load")
		configs    = flag.String("configs", defaultOrder, "configurations to run, comma-separated")
		out        = flag.String("out", "docs/benchmarks", "directory for cache.md and cache.png")
		work       = flag.String("workdir", "", "directory for the nodes' and PostgreSQL's data (default: the system's temporary directory)")
		quick      = flag.Bool("quick", false, "smoke run: 1,000 profiles, 150 operations/s, 4 s warm-up, 10 s measured, 4 s bootstrap period")
	)
	flag.Parse()
	cfg := config{Docs: *docs, MinBytes: *minBytes, MaxBytes: *maxBytes, Zipf: *zipf, Rate: *rate, Updates: *updates,
		Staleness: *staleness, Warmup: *warmup, Measure: *measure, Partitions: *partitions, LocalBytes: *localBytes,
		TTL: *ttl, Bootstrap: *bootstrap, Configs: benchutil.SplitList(*configs), WorkDir: *work,
		Out: benchutil.OutDir(*out), Command: benchutil.CommandLine("cd bench && go run ./cache"), Quick: *quick,
		Progress: func(format string, args ...any) { log.Printf(format, args...) }}
	if *quick {
		for name, set := range map[string]func(){
			"docs":            func() { cfg.Docs = 1000 },
			"rate":            func() { cfg.Rate = 150 },
			"warmup":          func() { cfg.Warmup = 4 * time.Second },
			"measure":         func() { cfg.Measure = 10 * time.Second },
			"bootstrap-every": func() { cfg.Bootstrap = 4 * time.Second },
		} {
			if !benchutil.FlagSet(name) {
				set()
			}
		}
	}
	switch {
	case cfg.Zipf <= 1:
		log.Fatalf("-zipf %v: the exponent must be above 1", cfg.Zipf)
	case cfg.MinBytes < 512 || cfg.MaxBytes < cfg.MinBytes:
		log.Fatalf("-min-bytes %d, -max-bytes %d: want 512 <= min <= max", cfg.MinBytes, cfg.MaxBytes)
	case cfg.Updates < 0 || cfg.Updates > 1 || cfg.Rate <= 0:
		log.Fatalf("-updates %v, -rate %v: want a share in [0, 1] and a positive rate", cfg.Updates, cfg.Rate)
	case cfg.Bootstrap >= cfg.TTL:
		log.Fatalf("-bootstrap-every %v must be shorter than -ttl %v", cfg.Bootstrap, cfg.TTL)
	}
	for _, c := range cfg.Configs {
		if _, ok := configLabels[c]; !ok {
			log.Fatalf("unknown configuration %q (have %s)", c, defaultOrder)
		}
	}
	benchutil.Main(func(ctx context.Context) error { return run(ctx, cfg) })
	log.Printf("wrote %s and cache.png", filepath.Join(cfg.Out, "cache.md"))
}

// configLabels name the configurations in the report.
var configLabels = map[string]string{
	cfgNone:     "(a) no cache tier",
	cfgLocal:    "(b) hot-key cache only",
	cfgRedis:    "(c) hot-key cache + Redis",
	cfgPostgres: "(d) PostgreSQL + Redis, cache-aside by hand",
}
