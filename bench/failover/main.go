// Command failover measures the Espresso paper's Figures 4 and 5 on
// Doppio: how long after a kill -9 of a node every partition it led accepts
// writes again, for databases of growing partition counts, under Doppio's
// spread placement and under a placement that mimics sharded MySQL (a node
// leads all of its partitions or none).
//
// For each placement mode and partition count it builds the doppio binary
// once, starts an etcd in this process and -nodes `doppio start` processes
// on free loopback ports, creates a database of that many partitions with 3
// replicas, waits until every partition is led, runs a steady write load
// through the nodes that will survive, kills -9 the node leading the most
// partitions and, for every partition it led, writes through a survivor
// until a write is acknowledged. It reports the median, p99 and max of
// those times, checks that every acknowledged write reads back, and writes
// failover.md and failover.png to -out. Run it with `make bench-failover`;
// -quick is a smoke run.
package main

import (
	"context"
	"flag"
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
	Binary        string
	Nodes         int
	Sizes         []int
	Modes         []string
	Clients       int
	PreKill       time.Duration
	MaxWait       time.Duration
	SettleWait    time.Duration
	ProbeTimeout  time.Duration
	ProbeInterval time.Duration
	NodeArgs      []string
	WorkDir       string
	Out           string
	Command       string
	Quick         bool
	LogDir        string // survivors' logs are written here after each run
	Progress      func(format string, args ...any)
}

func main() {
	var (
		nodes    = flag.Int("nodes", 3, "node processes (3 to 6)")
		sizes    = flag.String("partitions", "64,256,512,1024", "partition counts, comma-separated")
		modes    = flag.String("modes", "spread,sharded-mysql", "placement modes, comma-separated: spread, sharded-mysql")
		clients  = flag.Int("clients", 4, "closed-loop load clients writing to random partitions through the surviving nodes")
		preKill  = flag.Duration("pre-kill", 2*time.Second, "load time before the kill")
		maxWait  = flag.Duration("max-wait", 30*time.Second, "give up on a partition not writable this long after the kill")
		settle   = flag.Duration("settle-wait", 3*time.Minute, "wait at most this long for every partition to be led after creating the database")
		probeTO  = flag.Duration("probe-timeout", 500*time.Millisecond, "X-Doppio-Timeout of each probing write")
		probeInt = flag.Duration("probe-interval", 40*time.Millisecond, "mean pause after a failed probing write")
		raftTick = flag.Duration("raft-tick", 0, "--raft-tick of the nodes (0: the nodes' default)")
		out      = flag.String("out", "docs/benchmarks", "directory for failover.md and failover.png")
		work     = flag.String("workdir", "", "directory for the nodes' data (default: the system's temporary directory)")
		logDir   = flag.String("logs", "", "write each survivor's log tail here after each run (to see where failover time goes)")
		quick    = flag.Bool("quick", false, "smoke run: 64 and 256 partitions, one pass of each mode (output defaults to a temporary directory)")
	)
	flag.Parse()
	*out = benchutil.OutDir(*out)
	cfg := config{
		Nodes:         *nodes,
		Modes:         benchutil.SplitList(*modes),
		Clients:       *clients,
		PreKill:       *preKill,
		MaxWait:       *maxWait,
		SettleWait:    *settle,
		ProbeTimeout:  *probeTO,
		ProbeInterval: *probeInt,
		WorkDir:       *work,
		Out:           *out,
		Command:       benchutil.CommandLine("cd bench && go run ./failover"),
		Quick:         *quick,
		LogDir:        *logDir,
		Progress:      func(format string, args ...any) { log.Printf(format, args...) },
	}
	if *raftTick > 0 {
		cfg.NodeArgs = append(cfg.NodeArgs, "--raft-tick", raftTick.String())
	}
	for _, s := range benchutil.SplitList(*sizes) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			log.Fatalf("bad partition count %q", s)
		}
		cfg.Sizes = append(cfg.Sizes, n)
	}
	if *quick {
		if !benchutil.FlagSet("partitions") {
			cfg.Sizes = []int{64, 256}
		}
		if !benchutil.FlagSet("out") {
			cfg.Out = filepath.Join(os.TempDir(), "doppio-failover-quick")
		}
	}
	for _, m := range cfg.Modes {
		if m != "spread" && m != "sharded-mysql" {
			log.Fatalf("unknown mode %q (want spread or sharded-mysql)", m)
		}
	}
	if cfg.Nodes < 3 {
		log.Fatalf("-nodes %d: a database of 3 replicas needs 3 nodes at least", cfg.Nodes)
	}
	benchutil.Main(func(ctx context.Context) error { return run(ctx, cfg) })
	log.Printf("wrote %s and failover.png", filepath.Join(cfg.Out, "failover.md"))
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
	for _, mode := range cfg.Modes {
		for _, n := range cfg.Sizes {
			cfg.Progress("%s, %d partitions: starting %d nodes", mode, n, cfg.Nodes)
			r, err := measure(ctx, cfg, mode, n)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				cfg.Progress("%s/%d FAILED: %v", mode, n, err)
				r.Note = "run failed: " + err.Error()
			} else {
				cfg.Progress("%s/%d: killed %s (led %d of %d): median %v p99 %v max %v, %d not writable, %d acked, %d lost",
					mode, n, r.Victim, r.Led, n, r.quantile(.5).Round(time.Millisecond), r.quantile(.99).Round(time.Millisecond),
					r.quantile(1).Round(time.Millisecond), r.NotWritten, r.Acked, r.Lost)
			}
			rep.Runs = append(rep.Runs, r)
		}
	}
	rep.Finish()
	return benchutil.WriteReport(cfg.Out, "failover", rep.markdown(), func(path string) error { return writePlot(rep, path) })
}
