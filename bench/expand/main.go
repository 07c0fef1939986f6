// Command expand measures the Espresso paper's Figure 6 on Doppio: online
// cluster expansion under live traffic.
//
// For each number of added nodes (-adds, default 1, 2 and 3) and each move
// schedule (-modes: serial, one replica move at a time; parallel, several
// at once), it starts a fresh local cluster of three active nodes plus the
// new ones in standby (`doppio start --standby`), loads a database of
// -partitions partitions with 3 replicas, runs closed-loop clients (half
// reads, half updates of loaded documents, through the Go client with
// smart routing and its retries) and, after -before of steady load, adds
// every new node in one step (`POST /_cluster/nodes/{id}/add`). It
// reports the fraction of replicas moved against the fraction of capacity
// added (the ideal of minimal movement), the time until the controller
// has no move left, and the clients' throughput and p99 during the
// expansion as fractions of before, with the failed requests. It writes
// expand.md and expand.png to -out. Run it with `make bench-expand`;
// -quick is a smoke run.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/doppio-db/doppio/bench/internal/benchutil"
	"github.com/doppio-db/doppio/bench/internal/localcluster"
)

// config is everything a run depends on.
type config struct {
	Binary     string
	Partitions int
	Docs       int
	DocBytes   int
	Groups     int
	Clients    int
	Before     time.Duration
	After      time.Duration
	MaxWait    time.Duration
	Adds       []int
	Modes      []string
	Parallel   int // --max-moves of a parallel expansion
	PerNode    int // --max-moves-per-node of a parallel expansion
	WorkDir    string
	Out        string
	Command    string
	Quick      bool
	Progress   func(format string, args ...any)
}

func main() {
	var (
		partitions = flag.Int("partitions", 24, "partitions of the database (3 replicas each)")
		docs       = flag.Int("docs", 40000, "documents loaded before the expansion")
		docBytes   = flag.Int("doc-bytes", 1000, "payload bytes per document")
		groups     = flag.Int("groups", 4000, "document groups (partition keys) the documents spread over")
		clients    = flag.Int("clients", 8, "closed-loop clients during the run (50% reads, 50% updates)")
		before     = flag.Duration("before", 10*time.Second, "steady load measured before the nodes are added")
		after      = flag.Duration("after", 3*time.Second, "load kept after the expansion completes")
		maxWait    = flag.Duration("max-wait", 10*time.Minute, "give up on an expansion not done this long after the add")
		adds       = flag.String("adds", "1,2,3", "nodes added to the 3-node cluster, one run each, comma-separated")
		modes      = flag.String("modes", "serial,parallel", "move schedules: serial (--max-moves 1) and parallel (see -parallel)")
		parallel   = flag.Int("parallel", 4, "--max-moves (cluster-wide) of a parallel expansion")
		perNode    = flag.Int("per-node", 2, "--max-moves-per-node of a parallel expansion")
		out        = flag.String("out", "docs/benchmarks", "directory for expand.md and expand.png")
		work       = flag.String("workdir", "", "directory for the nodes' data (default: the system's temporary directory)")
		quick      = flag.Bool("quick", false, "smoke run: 5,000 documents, 1 added node, 4 s before (output defaults to a temporary directory)")
	)
	flag.Parse()
	*out = benchutil.OutDir(*out)
	cfg := config{
		Partitions: *partitions, Docs: *docs, DocBytes: *docBytes, Groups: *groups, Clients: *clients,
		Before: *before, After: *after, MaxWait: *maxWait, Modes: benchutil.SplitList(*modes),
		Parallel: *parallel, PerNode: *perNode, WorkDir: *work, Out: *out, Command: benchutil.CommandLine("cd bench && go run ./expand"), Quick: *quick,
		Progress: func(format string, args ...any) { log.Printf(format, args...) },
	}
	for _, s := range benchutil.SplitList(*adds) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 9 {
			log.Fatalf("bad -adds entry %q (want 1 to 9)", s)
		}
		cfg.Adds = append(cfg.Adds, n)
	}
	for _, m := range cfg.Modes {
		if m != "serial" && m != "parallel" {
			log.Fatalf("unknown mode %q (want serial or parallel)", m)
		}
	}
	if *quick {
		if !benchutil.FlagSet("docs") {
			cfg.Docs = 5000
		}
		if !benchutil.FlagSet("adds") {
			cfg.Adds = []int{1}
		}
		if !benchutil.FlagSet("before") {
			cfg.Before = 4 * time.Second
		}
		if !benchutil.FlagSet("out") {
			cfg.Out = filepath.Join(os.TempDir(), "doppio-expand-quick")
		}
	}
	benchutil.Main(func(ctx context.Context) error { return run(ctx, cfg) })
	log.Printf("wrote %s and expand.png", filepath.Join(cfg.Out, "expand.md"))
}

func run(ctx context.Context, cfg config) error {
	cfg.Progress("building doppio")
	bin, cleanup, err := localcluster.Build(ctx, cfg.WorkDir)
	if err != nil {
		return err
	}
	defer cleanup()
	cfg.Binary = bin
	rep := &report{Run: benchutil.StartRun(cfg.Command), Cfg: cfg}
	for _, k := range cfg.Adds {
		for _, mode := range cfg.Modes {
			cfg.Progress("%s expansion by %d node(s)", mode, k)
			r, err := measure(ctx, cfg, mode, k)
			if err != nil {
				return fmt.Errorf("%s, +%d: %w", mode, k, err)
			}
			cfg.Progress("%s +%d: moved %d of %d replicas (ideal %.1f) in %v; throughput %.0f%% of before, p99 %.0f%%, %d failed",
				mode, k, r.Moved, r.Replicas, r.Ideal(), r.Took.Round(100*time.Millisecond), 100*r.ThroughputRatio(), 100*r.P99Ratio(), r.During.Failed)
			rep.Runs = append(rep.Runs, r)
		}
	}
	rep.Finish()
	return benchutil.WriteReport(cfg.Out, "expand", rep.markdown(), func(path string) error { return writePlot(rep, path) })
}
