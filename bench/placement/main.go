// Command placement measures the cost of one placement call as the
// cluster grows (issue 32): internal/placement's BenchmarkScale, the
// initial placement of a database and the replan after each event (a node
// joins, goes down, is gone, drains; a zone is lost; a database is
// created), from 6 nodes and 6,144 replicas to 1,000 nodes and 100,002.
//
// It runs the benchmark against two versions of the package in the same
// run: the one at the commit -before and the one in the working tree. For
// each it copies the package's sources and the working tree's
// scale_test.go (which uses only the exported API) into a module of its
// own and builds the test binary; then it runs every case in its own
// process on one core (GOMAXPROCS=1), bounded by -limit. It writes
// placement.md and placement.png to -out. Run it with `make
// bench-placement`; -quick is a smoke run.
package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/doppio-db/doppio/bench/internal/benchutil"
)

// size is one cluster of BenchmarkScale: nodes in three zones, partitions
// of three replicas.
type size struct{ Nodes, Partitions int }

func (s size) Replicas() int { return 3 * s.Partitions }

// config is everything a run depends on.
type config struct {
	Before    string
	Sizes     []size
	Events    []string
	Limit     time.Duration
	BenchTime string
	Out       string
	Command   string
}

// result is one case measured on one version.
type result struct {
	Event    string
	Size     size
	Version  string // "before" or "after"
	PerCall  time.Duration
	TimedOut bool
	LoadAvg  [2]float64 // 1-minute load average before and after the case
}

func main() {
	var (
		before    = flag.String("before", "33f70d6", "commit whose internal/placement is the baseline (the parent of the incremental placement)")
		sizes     = flag.String("sizes", "6x2048,30x3334,100x10000,300x33334,1000x33334", "clusters, nodes x partitions (3 replicas each), comma-separated; each must be one of BenchmarkScale's")
		events    = flag.String("events", "initial,join,down,gone,drain,zone-gone,create", "BenchmarkScale events, comma-separated")
		limit     = flag.Duration("limit", 2*time.Minute, "give up on one case (one version, one event, one size) after this long")
		benchTime = flag.String("benchtime", "1s", "-test.benchtime of each case: a slow case runs once")
		out       = flag.String("out", "docs/benchmarks", "directory for placement.md and placement.png")
		quick     = flag.Bool("quick", false, "smoke run: up to 100 nodes, 20 s per case (output defaults to a temporary directory)")
	)
	flag.Parse()
	cfg := config{Before: *before, Events: benchutil.SplitList(*events), Limit: *limit, BenchTime: *benchTime,
		Command: benchutil.CommandLine("cd bench && go run ./placement")}
	for _, s := range benchutil.SplitList(*sizes) {
		n, p, ok := strings.Cut(s, "x")
		nodes, err1 := strconv.Atoi(n)
		parts, err2 := strconv.Atoi(p)
		if !ok || err1 != nil || err2 != nil {
			log.Fatalf("-sizes: %q is not nodes x partitions", s)
		}
		if !*quick || nodes <= 100 {
			cfg.Sizes = append(cfg.Sizes, size{nodes, parts})
		}
	}
	if *quick {
		if !benchutil.FlagSet("limit") {
			cfg.Limit = 20 * time.Second
		}
		if !benchutil.FlagSet("out") {
			*out = filepath.Join(os.TempDir(), "bench-placement")
		}
	}
	cfg.Out = benchutil.OutDir(*out)
	benchutil.Main(func(ctx context.Context) error { return run(ctx, cfg) })
}

func run(ctx context.Context, cfg config) error {
	root, err := benchutil.RepoRoot()
	if err != nil {
		return err
	}
	rep := &report{Run: benchutil.StartRun(cfg.Command), Cfg: cfg}
	work, err := os.MkdirTemp("", "bench-placement-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	bins := map[string]string{}
	for _, v := range []string{"before", "after"} {
		log.Printf("building the %s version", v)
		if bins[v], err = build(ctx, root, work, v, cfg.Before); err != nil {
			return fmt.Errorf("%s: %w", v, err)
		}
	}
	total := 2 * len(cfg.Events) * len(cfg.Sizes)
	for _, ev := range cfg.Events {
		for _, sz := range cfg.Sizes {
			for _, v := range []string{"before", "after"} {
				r, err := measure(ctx, bins[v], ev, sz, cfg)
				if err != nil {
					return fmt.Errorf("%s %s nodes=%d: %w", v, ev, sz.Nodes, err)
				}
				r.Version = v
				rep.Results = append(rep.Results, r)
				log.Printf("[%d/%d] %s %-9s nodes=%-4d replicas=%-6d %s (load %.1f)", len(rep.Results), total, v, ev, sz.Nodes, sz.Replicas(), r.Text(cfg.Limit), r.LoadAvg[1])
			}
		}
	}
	rep.Finish()
	return benchutil.WriteReport(cfg.Out, "placement", rep.markdown(), func(path string) error { return writePlot(rep, path) })
}

// build writes a module holding one version of internal/placement (the
// commit ref's for "before", the working tree's for "after") with the
// working tree's scale_test.go, and compiles its test binary.
func build(ctx context.Context, root, work, version, ref string) (string, error) {
	dir := filepath.Join(work, version)
	pkg := filepath.Join(dir, "internal", "placement")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		return "", err
	}
	src := filepath.Join(root, "internal", "placement")
	files := map[string][]byte{}
	if version == "before" {
		cmd := exec.CommandContext(ctx, "git", "archive", "--format=tar", ref, "internal/placement")
		cmd.Dir, cmd.Stderr = root, os.Stderr
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("git archive %s: %w", ref, err)
		}
		tr := tar.NewReader(bytes.NewReader(out))
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return "", err
			}
			if name := h.Name; filepath.Dir(name) == "internal/placement" && isSource(name) {
				if files[filepath.Base(name)], err = io.ReadAll(tr); err != nil {
					return "", err
				}
			}
		}
	} else {
		entries, err := os.ReadDir(src)
		if err != nil {
			return "", err
		}
		for _, e := range entries {
			if isSource(e.Name()) {
				if files[e.Name()], err = os.ReadFile(filepath.Join(src, e.Name())); err != nil {
					return "", err
				}
			}
		}
	}
	bench, err := os.ReadFile(filepath.Join(src, "scale_test.go"))
	if err != nil {
		return "", err
	}
	files["scale_test.go"] = bench
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(pkg, name), b, 0o644); err != nil {
			return "", err
		}
	}
	// The package imports only the standard library: a module of the
	// same path needs no dependency.
	mod := "module github.com/doppio-db/doppio\n\ngo " + goVersion(root) + "\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644); err != nil {
		return "", err
	}
	bin := filepath.Join(work, version+".test")
	cmd := exec.CommandContext(ctx, "go", "test", "-c", "-o", bin, "./internal/placement")
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, os.Stderr, os.Stderr
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go test -c: %w", err)
	}
	return bin, nil
}

// isSource reports whether name is a non-test Go file of the package.
func isSource(name string) bool {
	return strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go")
}

// goVersion returns the go directive of the repository's go.mod.
func goVersion(root string) string {
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err == nil {
		for l := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), "go "); ok {
				return v
			}
		}
	}
	return "1.26"
}

var nsPerOp = regexp.MustCompile(`\s([0-9.]+) ns/op`)

// measure runs one case of BenchmarkScale in its own process on one core.
func measure(ctx context.Context, bin, event string, sz size, cfg config) (result, error) {
	r := result{Event: event, Size: sz}
	pattern := fmt.Sprintf("^BenchmarkScale$/^%s$/^nodes=%d$/^replicas=%d$", event, sz.Nodes, sz.Replicas())
	// The process is killed at the limit; -test.timeout is a backstop.
	cmd := exec.CommandContext(ctx, bin, "-test.run=^$", "-test.bench="+pattern, "-test.benchtime="+cfg.BenchTime,
		"-test.cpu=1", "-test.timeout="+(cfg.Limit+time.Minute).String())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	r.LoadAvg[0] = benchutil.LoadAvg()
	start := time.Now()
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		return r, err
	}
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(cfg.Limit):
		_ = cmd.Process.Kill()
		<-done
		r.TimedOut = true
	}
	r.LoadAvg[1] = benchutil.LoadAvg()
	if r.TimedOut {
		return r, nil
	}
	if err != nil {
		return r, fmt.Errorf("%w after %v:\n%s", err, time.Since(start).Round(time.Second), out.String())
	}
	m := nsPerOp.FindStringSubmatch(out.String())
	if m == nil {
		return r, fmt.Errorf("no ns/op in the output (is the case one of BenchmarkScale's?):\n%s", out.String())
	}
	ns, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return r, err
	}
	r.PerCall = time.Duration(ns)
	return r, nil
}

// Text is the case's time per call, or how long it ran without finishing.
func (r result) Text(limit time.Duration) string {
	if r.TimedOut {
		return "> " + limit.String()
	}
	return ms(r.PerCall) + " ms"
}

// ms writes d in milliseconds, with two decimals below 10.
func ms(d time.Duration) string {
	v := float64(d) / 1e6
	if v < 10 {
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.0f", v)
}
