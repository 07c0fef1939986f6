// Command mailbox is the MailboxDB benchmark of the Espresso paper's
// section 7.4 (Figure 7): the same mailbox workload against Doppio's prefix
// index (a real node, REST over loopback), Bleve with one index per mailbox
// (behind a loopback HTTP server with the same requests and answers, and
// in-process) and PostgreSQL with JSONB documents (pgx over a Unix socket),
// durability on for all.
//
// It loads two data sets (A: small mailboxes, B: large mailboxes), runs
// sessions of 10 requests on uniformly chosen mailboxes at write shares of
// 0, 25, 50, 75 and 100%, and writes mailbox.md, mailbox.png and
// mailbox.json to -out. Run it with `make bench-mailbox`; -quick is a
// smoke run of about twenty seconds.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/doppio-db/doppio/bench/internal/benchutil"
	"github.com/doppio-db/doppio/bench/internal/mailboxdata"
)

// config is everything a run depends on.
type config struct {
	Systems  []string
	Sets     []setSpec
	Clients  int
	Seed     uint64
	Mixes    []int
	Warmup   int // warm-up sessions per system and set, as a share of Sessions in percent
	Out      string
	WorkDir  string
	Parts    int
	Command  string
	Quick    bool
	MixProf  string // prefix of the per-system CPU profiles of the measured mixes
	Progress func(format string, args ...any)
}

func main() {
	var (
		systems   = flag.String("systems", "doppio,bleve-http,bleve,postgres", "systems to run, comma-separated: doppio, bleve-http (Bleve behind a loopback HTTP server), bleve (in-process), postgres (over TCP on the loopback interface), postgres-unix (over its Unix socket)")
		sets      = flag.String("sets", "A,B", "data sets to run, comma-separated")
		aBoxes    = flag.Int("a-mailboxes", 1000, "set A: number of small mailboxes")
		aMsgs     = flag.Int("a-messages", 100, "set A: messages per mailbox")
		aSessions = flag.Int("a-sessions", 600, "set A: sessions (of 10 requests) per mix")
		bBoxes    = flag.Int("b-mailboxes", 4, "set B: number of large mailboxes")
		bMsgs     = flag.Int("b-messages", 50000, "set B: messages per mailbox")
		bSessions = flag.Int("b-sessions", 300, "set B: sessions (of 10 requests) per mix")
		clients   = flag.Int("clients", 8, "concurrent clients (closed loop, no think time)")
		seed      = flag.Uint64("seed", 1, "seed of the data and request generators")
		parts     = flag.Int("partitions", 8, "Doppio: hash partitions of the database")
		out       = flag.String("out", "docs/benchmarks", "directory for mailbox.md, mailbox.png and mailbox.json")
		work      = flag.String("workdir", "", "directory for the systems' data (default: a new temporary directory, removed at the end)")
		quick     = flag.Bool("quick", false, "a smoke run of about twenty seconds: tiny sets, few sessions (output defaults to a temporary directory)")
		render    = flag.String("render", "", "only rewrite mailbox.md and mailbox.png in -out from this mailbox.json of an earlier run")
		mixes     = flag.String("mixes", "0,25,50,75,100", "write shares (percent) to run, in order, comma-separated")
		cpuProf   = flag.String("cpuprofile", "", "write a CPU profile of the whole run (every system, load and mixes) to this file")
		mixProf   = flag.String("mixprofile", "", "write a CPU profile of each set and system's measured mixes (no load, no warm-up) to this prefix followed by .<set>.<system>")
	)
	flag.Parse()
	*out = benchutil.OutDir(*out)
	if *cpuProf != "" {
		f, err := os.Create(*cpuProf)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	if *render != "" {
		if err := rerender(*render, *out); err != nil {
			log.Fatal(err)
		}
		return
	}
	cfg := config{
		Systems: strings.Split(*systems, ","),
		Clients: *clients,
		MixProf: *mixProf,
		Seed:    *seed,
		Mixes:   parseMixes(*mixes),
		Warmup:  20,
		Out:     *out,
		WorkDir: *work,
		Parts:   *parts,
		Command: commandLine(),
		Quick:   *quick,
	}
	all := map[string]setSpec{
		"A": {Name: "A", Mailboxes: *aBoxes, Messages: *aMsgs, Sessions: *aSessions},
		"B": {Name: "B", Mailboxes: *bBoxes, Messages: *bMsgs, Sessions: *bSessions},
	}
	if *quick {
		all = quickSets()
		cfg.Clients = min(cfg.Clients, 4)
		if !flagSet("out") {
			cfg.Out = filepath.Join(os.TempDir(), "doppio-mailbox-quick")
		}
	}
	for _, n := range strings.Split(*sets, ",") {
		s, ok := all[strings.ToUpper(strings.TrimSpace(n))]
		if !ok {
			log.Fatalf("unknown set %q (want A or B)", n)
		}
		cfg.Sets = append(cfg.Sets, s)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cfg.Progress = func(format string, args ...any) { log.Printf(format, args...) }
	if err := runBenchmark(ctx, cfg); err != nil {
		pprof.StopCPUProfile()
		log.Fatal(err)
	}
	log.Printf("wrote %s", filepath.Join(cfg.Out, "mailbox.md"))
}

func parseMixes(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 || n > 100 {
			log.Fatalf("-mixes: %q is not a percentage", f)
		}
		out = append(out, n)
	}
	return out
}

func quickSets() map[string]setSpec {
	return map[string]setSpec{
		"A": {Name: "A", Mailboxes: 40, Messages: 100, Sessions: 24},
		"B": {Name: "B", Mailboxes: 2, Messages: 2000, Sessions: 12},
	}
}

func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func commandLine() string {
	if len(os.Args) <= 1 {
		return "cd bench && go run ./mailbox"
	}
	return "cd bench && go run ./mailbox " + strings.Join(os.Args[1:], " ")
}

// systemRun is one system's results on one set.
type systemRun struct {
	System    string
	Set       string
	LoadTime  time.Duration
	DiskBytes int64
	Mixes     []mixResult
	Notes     []string
}

// results is the whole run, as written to mailbox.json.
type results struct {
	Command  string
	Machine  machine
	Started  time.Time
	Duration time.Duration
	Clients  int
	Seed     uint64
	Sets     []setSpec
	Systems  []string
	DocBytes float64 // mean JSON size of a message
	Runs     []*systemRun
}

func runBenchmark(ctx context.Context, cfg config) error {
	for _, s := range cfg.Systems {
		if !slices.Contains([]string{"doppio", "bleve", "bleve-http", "postgres", "postgres-unix"}, s) {
			return fmt.Errorf("unknown system %q (want doppio, bleve, bleve-http, postgres or postgres-unix)", s)
		}
	}
	work := cfg.WorkDir
	if work == "" {
		d, err := os.MkdirTemp("", "doppio-mailbox-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		work = d
	}
	res := &results{Command: cfg.Command, Machine: describeMachine(), Started: time.Now(), Clients: cfg.Clients, Seed: cfg.Seed, Sets: cfg.Sets, Systems: cfg.Systems}
	res.DocBytes = meanDocBytes(cfg.Seed)
	for _, set := range cfg.Sets {
		for _, name := range cfg.Systems {
			dir := filepath.Join(work, set.Name, name)
			r, err := runSystem(ctx, cfg, set, name, dir)
			if err != nil {
				return fmt.Errorf("set %s, %s: %w", set.Name, name, err)
			}
			res.Runs = append(res.Runs, r)
			if err := os.RemoveAll(dir); err != nil {
				return err
			}
		}
	}
	res.Duration = time.Since(res.Started)
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(cfg.Out, "mailbox.json"), js, 0o644); err != nil {
		return err
	}
	return writeReport(res, cfg.Out)
}

func writeReport(res *results, out string) error {
	if err := writePlot(res, filepath.Join(out, "mailbox.png")); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "mailbox.md"), []byte(report(res)), 0o644)
}

// rerender rewrites the report and plot of an earlier run from its JSON.
func rerender(path, out string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var res results
	if err := json.Unmarshal(b, &res); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	return writeReport(&res, out)
}

func openSystem(ctx context.Context, cfg config, name, dir string) (System, error) {
	switch name {
	case "doppio":
		return openDoppio(ctx, dir, cfg.Clients, cfg.Parts)
	case "bleve":
		return openBleve(dir)
	case "bleve-http":
		return openBleveHTTP(dir, cfg.Clients)
	case "postgres", "postgres-unix":
		return openPostgres(ctx, dir, cfg.Clients, name == "postgres-unix", cfg.Progress)
	}
	return nil, fmt.Errorf("unknown system %q", name)
}

func runSystem(ctx context.Context, cfg config, set setSpec, name, dir string) (_ *systemRun, err error) {
	p := cfg.Progress
	sys, err := openSystem(ctx, cfg, name, dir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := sys.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close: %w", cerr)
		}
	}()
	run := &systemRun{System: sys.Name(), Set: set.Name}

	p("set %s, %s: loading %d mailboxes of %d messages", set.Name, sys.Name(), set.Mailboxes, set.Messages)
	start := time.Now()
	if err := load(ctx, sys, set, cfg); err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	if err := sys.Ready(ctx); err != nil {
		return nil, err
	}
	run.LoadTime = time.Since(start)
	run.DiskBytes = sys.DiskBytes()
	p("set %s, %s: loaded in %s, %.1f MiB on disk", set.Name, sys.Name(), run.LoadTime.Round(time.Millisecond), float64(run.DiskBytes)/(1<<20))
	if err := verify(ctx, sys, set, cfg.Seed); err != nil {
		return nil, err
	}
	if pg, ok := sys.(*postgresSystem); ok {
		plans, err := pg.Explain(ctx, mailboxdata.MailboxName(set.Name, 0), mailboxdata.Vocabulary[0])
		if err != nil {
			return nil, err
		}
		run.Notes = append(run.Notes, plans)
	}

	w := newWorkload(sys, set, cfg.Clients, cfg.Seed)
	if n := set.Sessions * cfg.Warmup / 100; n > 0 {
		if r := w.run(ctx, 0, n, 0x3a3a); r.Errors > 0 {
			return nil, fmt.Errorf("warm-up: %d errors, first: %s", r.Errors, r.FirstError)
		}
	}
	if cfg.MixProf != "" {
		stop, err := startProfile(fmt.Sprintf("%s.%s.%s", cfg.MixProf, set.Name, strings.ReplaceAll(strings.ToLower(sys.Name()), " ", "-")))
		if err != nil {
			return nil, err
		}
		defer stop()
	}
	for _, mix := range cfg.Mixes {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		r := w.run(ctx, mix, set.Sessions, 0)
		a := r.all()
		p("set %s, %s, %3d%% writes: %d requests in %s, mean %.2f ms, p99 %.2f ms, %d errors",
			set.Name, sys.Name(), mix, a.N, r.Elapsed.Round(time.Millisecond), a.Mean, a.P99, r.Errors)
		if r.Errors > 0 {
			p("  first error: %s", r.FirstError)
		}
		if r.Errors*100 > a.N+r.Errors {
			return nil, fmt.Errorf("%d%% writes: %d of %d requests failed, first: %s", mix, r.Errors, a.N+r.Errors, r.FirstError)
		}
		run.Mixes = append(run.Mixes, r)
	}
	return run, nil
}

// load writes every mailbox's initial messages, cfg.Clients mailboxes at a
// time.
func load(ctx context.Context, sys System, set setSpec, cfg config) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, cfg.Clients)
	var done atomic.Int64
	last := time.Now()
	var mu sync.Mutex
	for c := range cfg.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= set.Mailboxes || ctx.Err() != nil {
					return
				}
				msgs := mailboxdata.Loaded(cfg.Seed, set.Name, i, set.Messages)
				if err := sys.Load(ctx, mailboxdata.MailboxName(set.Name, i), msgs); err != nil {
					errs[c] = err
					return
				}
				n := done.Add(1)
				mu.Lock()
				if time.Since(last) > 10*time.Second {
					last = time.Now()
					cfg.Progress("  %d of %d mailboxes loaded", n, set.Mailboxes)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return ctx.Err()
}

func meanDocBytes(seed uint64) float64 {
	msgs := mailboxdata.Loaded(seed, "A", 0, 200)
	var n int
	for _, m := range msgs {
		b, _ := json.Marshal(m)
		n += len(b)
	}
	return float64(n) / float64(len(msgs))
}

// dirBytes is the size of the regular files under dir.
func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// startProfile starts a CPU profile into the file at path; stop ends it.
func startProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
