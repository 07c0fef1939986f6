// Command ycsb runs YCSB's core workloads A-F against Doppio (one node, and a
// 3-node cluster with 3 replicas), PostgreSQL (JSONB) and MariaDB (InnoDB
// JSON), one store after the other in the same run, with the same YCSB
// client (bench/ycsb/java: YCSB core from Maven Central and the three
// bindings), and writes docs/benchmarks/ycsb/: README.md (tables, ratios,
// machine, versions, settings), results.json, PNG charts and Doppio's pprof
// profiles under the load. `make bench-ycsb` runs it; -quick is a smoke run.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/doppio-db/doppio/bench/internal/benchutil"
)

type config struct {
	Records     int
	FieldLength int
	Threads     int
	Duration    time.Duration
	Partitions  int
	Stores      []string
	Workloads   []string
	Profile     []string
	DoppioHTTP  string
	Routing     string
	RowCache    int64
	Out         string
	Dir         string
	Quick       bool
	ClientSched string
}

func main() {
	var c config
	var stores, wls, prof string
	flag.IntVar(&c.Records, "records", 100_000, "records loaded into each store (YCSB recordcount)")
	flag.IntVar(&c.FieldLength, "fieldlength", 100, "bytes per field (10 fields per record)")
	flag.IntVar(&c.Threads, "threads", 16, "YCSB client threads, the same for every store")
	flag.DurationVar(&c.Duration, "duration", 20*time.Second, "run time of each workload (YCSB maxexecutiontime)")
	flag.IntVar(&c.Partitions, "partitions", 8, "Doppio partitions")
	flag.StringVar(&stores, "stores", "doppio-1,doppio-3,postgres,mariadb", "stores to run, in order")
	flag.StringVar(&wls, "workloads", "A,B,C,F,D,E", "workloads, in order (D and E insert; E after D)")
	flag.StringVar(&prof, "profile", "A,C", "workloads during which Doppio's single node is profiled (CPU; allocations after the last)")
	flag.StringVar(&c.DoppioHTTP, "doppio-http", "socket", "Doppio binding's HTTP client: socket (a blocking keep-alive connection per thread, like JDBC's) or jdk (one shared java.net.http.HttpClient)")
	flag.StringVar(&c.Routing, "doppio-routing", "smart", "Doppio binding's routing: smart (each request to its partition's leader, from GET /_cluster, as the Go client's smart routing) or node (thread i to node i mod n, which forwards)")
	flag.Int64Var(&c.RowCache, "doppio-row-cache", 512<<20, "each Doppio node's --row-cache-bytes; with Pebble's 512 MiB block cache, 1 GiB of caches, as PostgreSQL's shared_buffers and MariaDB's buffer pool")
	flag.StringVar(&c.Out, "out", "docs/benchmarks/ycsb", "report directory")
	flag.StringVar(&c.Dir, "dir", "", "working directory for the stores' data (default a new temporary directory, removed after)")
	flag.StringVar(&c.ClientSched, "client-sched", "normal", "the YCSB JVM's Linux scheduling policy, the same for every store: normal (SCHED_OTHER) or batch (SCHED_BATCH through chrt: its threads take their fair share of the CPUs but do not preempt a running thread when they wake, as a client on another machine would not)")
	flag.BoolVar(&c.Quick, "quick", false, "smoke run: 5,000 records, 3 s per workload, 8 threads; report under -out/quick")
	flag.Parse()
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if c.Quick {
		if !set["records"] {
			c.Records = 5000
		}
		if !set["duration"] {
			c.Duration = 3 * time.Second
		}
		if !set["threads"] {
			c.Threads = 8
		}
		if !set["out"] {
			c.Out = filepath.Join(c.Out, "quick")
		}
	}
	c.Stores = splitList(stores)
	c.Workloads = splitList(wls)
	c.Profile = splitList(prof)
	for _, s := range c.Stores {
		if labelOf(s) == "" {
			fatalf("unknown store %q", s)
		}
	}
	if c.DoppioHTTP != "socket" && c.DoppioHTTP != "jdk" {
		fatalf("-doppio-http must be socket or jdk")
	}
	if c.ClientSched != "batch" && c.ClientSched != "normal" {
		fatalf("-client-sched must be batch or normal")
	}
	if c.Routing != "smart" && c.Routing != "node" {
		fatalf("-doppio-routing must be smart or node")
	}
	for _, w := range c.Workloads {
		if _, ok := workloadByName(w); !ok {
			fatalf("unknown workload %q", w)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runAll(ctx, c, strings.Join(os.Args[1:], " ")); err != nil {
		fatalf("%v", err)
	}
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "ycsb: "+format+"\n", args...)
	os.Exit(1)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s ycsb: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, strings.ToUpper(p[:1])+p[1:])
		}
	}
	return out
}

func labelOf(id string) string {
	for _, s := range allStores {
		if strings.EqualFold(s.ID, id) {
			return s.Label
		}
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// buildJar packages bench/ycsb/java with Maven unless the jar is newer than
// every source file.
func buildJar(root string) (string, error) {
	dir := filepath.Join(root, "bench", "ycsb", "java")
	jar := filepath.Join(dir, "target", "doppio-ycsb.jar")
	if ji, err := os.Stat(jar); err == nil {
		fresh := true
		_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
			if err == nil && !fi.IsDir() && !strings.Contains(p, "/target/") && fi.ModTime().After(ji.ModTime()) {
				fresh = false
			}
			return nil
		})
		if fresh {
			return jar, nil
		}
	}
	logf("building the YCSB bindings: mvn -q -B package in %s", dir)
	cmd := exec.Command("mvn", "-q", "-B", "package")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("mvn package (needs Java 17 and Maven): %w", err)
	}
	return jar, nil
}

func runAll(ctx context.Context, c config, args string) error {
	root, err := benchutil.RepoRoot()
	if err != nil {
		return err
	}
	if !filepath.IsAbs(c.Out) {
		c.Out = filepath.Join(root, c.Out)
	}
	if err := os.MkdirAll(filepath.Join(c.Out, "profiles"), 0o755); err != nil {
		return err
	}
	jar, err := buildJar(root)
	if err != nil {
		return err
	}
	work := c.Dir
	if work == "" {
		if work, err = os.MkdirTemp("", "doppio-ycsb-"); err != nil {
			return err
		}
		defer os.RemoveAll(work)
	}
	bin := filepath.Join(work, "doppio")
	logf("building doppio into %s", bin)
	build := exec.Command("go", "build", "-o", bin, "./cmd/doppio")
	build.Dir = root
	if err := run(build); err != nil {
		return err
	}
	res := &results{
		Command:  "cd bench && go run ./ycsb " + args,
		Started:  time.Now(),
		Machine:  describeMachine(root),
		Records:  c.Records,
		Fields:   10,
		FieldLen: c.FieldLength,
		Threads:  c.Threads,
		Duration: c.Duration,
		Sched:    c.ClientSched,
		Settings: map[string]string{},
	}
	// Every store is started and loaded first; then each workload runs on
	// every store back to back, so the stores of one workload are measured
	// within minutes of each other on this shared machine.
	var running []*storeRun
	defer func() {
		for _, sr := range running {
			if err := sr.s.Close(); err != nil {
				logf("%s: close: %v", sr.id, err)
			}
		}
	}()
	for _, id := range c.Stores {
		sr, err := startStore(ctx, c, res, jar, bin, work, strings.ToLower(id))
		if err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		running = append(running, sr)
	}
	// Starting a store may have installed it: read the versions now.
	res.Machine.Postgres, res.Machine.MariaDB = postgresVersion(), mariadbVersion()
	if err := writeReport(res, c.Out); err != nil {
		return err
	}
	for _, name := range c.Workloads {
		w, _ := workloadByName(name)
		for _, sr := range running {
			// No run starts while the previous one's writes are still
			// being flushed, checkpointed or compacted by its store.
			if waited, idle, err := benchutil.Settle(ctx, settleIdle, settleLimit); err != nil {
				return err
			} else if waited > 2*time.Second {
				logf("settled for %s (CPUs %.0f%% idle)", waited.Round(time.Second), 100*idle)
			}
			if err := sr.run(ctx, c, res, jar, w); err != nil {
				return fmt.Errorf("%s: workload %s: %w", sr.id, w.Name, err)
			}
		}
		// Written after every workload, so an interrupted run keeps what it measured.
		if err := writeReport(res, c.Out); err != nil {
			return err
		}
	}
	for _, sr := range running {
		if addr := sr.s.PprofAddr(); addr != "" && len(c.Profile) > 0 {
			if err := fetch(ctx, "http://"+addr+"/debug/pprof/allocs", filepath.Join(c.Out, "profiles", sr.id+"-allocs.pprof")); err != nil {
				logf("%s: allocation profile: %v", sr.id, err)
			}
		}
	}
	summarizeProfiles(filepath.Join(c.Out, "profiles"), bin)
	res.Elapsed = time.Since(res.Started)
	if err := writeReport(res, c.Out); err != nil {
		return err
	}
	logf("report written to %s", c.Out)
	return nil
}

// storeRun is a started, loaded store and what its workloads need.
type storeRun struct {
	id       string
	s        store
	class    string
	common   map[string]string
	dir      string
	inserted int // records inserted by earlier workloads (D, E)
}

func startStore(ctx context.Context, c config, res *results, jar, bin, work, id string) (*storeRun, error) {
	dir := filepath.Join(work, id)
	var s store
	var err error
	switch id {
	case "doppio-1", "doppio-1-secure":
		s, err = startDoppio(ctx, bin, dir, 1, c.Partitions, 10, c.RowCache, c.DoppioHTTP, c.Routing, strings.HasSuffix(id, "-secure"), logf)
	case "doppio-3", "doppio-3-secure":
		s, err = startDoppio(ctx, bin, dir, 3, c.Partitions, 10, c.RowCache, c.DoppioHTTP, c.Routing, strings.HasSuffix(id, "-secure"), logf)
	case "postgres":
		s, err = startPostgres(ctx, dir, c.Threads*4, false, logf)
	case "postgres-secure":
		s, err = startPostgres(ctx, dir, c.Threads*4, true, logf)
	case "mariadb":
		s, err = startMariaDB(ctx, dir, c.Threads*4, logf)
	}
	if err != nil {
		return nil, err
	}
	res.Settings[id] = s.Settings()
	class, props := s.Binding()
	common := map[string]string{
		"workload":                 "site.ycsb.workloads.CoreWorkload",
		"recordcount":              strconv.Itoa(c.Records),
		"fieldcount":               "10",
		"fieldlength":              strconv.Itoa(c.FieldLength),
		"readallfields":            "true",
		"writeallfields":           "false",
		"measurementtype":          "hdrhistogram",
		"hdrhistogram.percentiles": "50,99,99.9",
	}
	for k, v := range props {
		common[k] = v
	}
	loadProps := clone(common)
	loadProps["operationcount"] = "0"
	// The load is not what is compared; more threads fill every store
	// faster (Doppio's and the databases' commits group more writes).
	loadThreads := c.Threads * 4
	logf("%s: loading %d records with %d threads", id, c.Records, loadThreads)
	lr, err := runYCSB(ctx, c.ClientSched, jar, class, "-load", loadProps, loadThreads, filepath.Join(dir, "load.out"))
	if err != nil {
		s.Close()
		return nil, err
	}
	res.Runs = append(res.Runs, lr.as(id, "load", loadThreads))
	logf("%s: loaded: %.0f records/s, errors %d, load avg %.2f", id, lr.out.Throughput, lr.out.errors(), lr.loadAfter)
	return &storeRun{id: id, s: s, class: class, common: common, dir: dir}, nil
}

func (sr *storeRun) run(ctx context.Context, c config, res *results, jar string, w workload) error {
	p := clone(sr.common)
	for k, v := range w.Props {
		p[k] = v
	}
	// Run until the time is up: an operation count no store reaches.
	p["operationcount"] = "100000000"
	p["maxexecutiontime"] = strconv.Itoa(int(c.Duration.Seconds()))
	// Inserts continue after the records of earlier inserting workloads.
	p["recordcount"] = strconv.Itoa(c.Records + sr.inserted)
	var profDone chan error
	if addr := sr.s.PprofAddr(); addr != "" && contains(c.Profile, w.Name) {
		profDone = make(chan error, 1)
		secs := max(int(c.Duration.Seconds())-2, 1)
		go func() {
			time.Sleep(2 * time.Second) // past the JVM's start and warm-up
			profDone <- fetch(ctx, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, secs),
				filepath.Join(c.Out, "profiles", fmt.Sprintf("%s-cpu-workload%s.pprof", sr.id, strings.ToLower(w.Name))))
		}()
	}
	logf("%s: workload %s (%s), %d threads, %s", sr.id, w.Name, w.Title, c.Threads, c.Duration)
	r, err := runYCSB(ctx, c.ClientSched, jar, sr.class, "-t", p, c.Threads, filepath.Join(sr.dir, "workload"+w.Name+".out"))
	if err != nil {
		return err
	}
	if profDone != nil {
		if err := <-profDone; err != nil {
			logf("%s: cpu profile: %v", sr.id, err)
		}
	}
	res.Runs = append(res.Runs, r.as(sr.id, w.Name, c.Threads))
	logf("%s: workload %s: %.0f ops/s, errors %d, load avg %.2f", sr.id, w.Name, r.out.Throughput, r.out.errors(), r.loadAfter)
	if o := r.out.Ops["INSERT"]; o != nil {
		sr.inserted += int(o.Count)
	}
	return nil
}

func clone(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

type ycsbRun struct {
	out                   ycsbOutput
	loadBefore, loadAfter float64
	wall                  time.Duration
	clientCPU             time.Duration // the JVM's user + system CPU time
}

func (r ycsbRun) as(store, workload string, threads int) *runResult {
	return &runResult{Store: store, Workload: workload, Threads: threads, Throughput: r.out.Throughput,
		RunTimeMS: r.out.RunTimeMS, Ops: r.out.Ops, Errors: r.out.errors(), LoadBefore: r.loadBefore, LoadAfter: r.loadAfter,
		ClientCPU: r.clientCPU}
}

// runYCSB runs site.ycsb.Client in a JVM under the scheduling policy sched
// (see -client-sched) and parses its summary; the full output is kept in
// outPath.
func runYCSB(ctx context.Context, sched, jar, class, phase string, props map[string]string, threads int, outPath string) (ycsbRun, error) {
	args := []string{"-Xms512m", "-Xmx1g", "-cp", jar, "site.ycsb.Client", phase, "-db", class, "-threads", strconv.Itoa(threads), "-s"}
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "-p", k+"="+props[k])
	}
	var r ycsbRun
	r.loadBefore = benchutil.LoadAvg()
	start := time.Now()
	f, err := os.Create(outPath)
	if err != nil {
		return r, err
	}
	defer f.Close()
	args = append([]string{"java"}, args...)
	if sched == "batch" {
		// Every thread of the JVM inherits the policy from its start.
		args = append([]string{"chrt", "--batch", "0"}, args...)
	}
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Stdout = f
	cmd.Stderr = f
	if err := cmd.Run(); err != nil {
		tail, _ := os.ReadFile(outPath)
		if len(tail) > 2000 {
			tail = tail[len(tail)-2000:]
		}
		return r, fmt.Errorf("%s: %w\n%s", strings.Join(args, " "), err, tail)
	}
	r.wall = time.Since(start)
	r.loadAfter = benchutil.LoadAvg()
	r.clientCPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return r, err
	}
	if r.out, err = parseYCSB(f); err != nil {
		return r, fmt.Errorf("%s: %w", outPath, err)
	}
	return r, nil
}

func fetch(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// summarizeProfiles writes next to each profile its top functions by
// cumulative share (`go tool pprof -top -cum`), for readers without Go.
func summarizeProfiles(dir, bin string) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.pprof"))
	for _, f := range files {
		args := []string{"tool", "pprof", "-top", "-cum", "-nodecount=60"}
		if strings.HasSuffix(f, "-allocs.pprof") {
			args = append(args, "-sample_index=alloc_space")
		}
		out, err := exec.Command("go", append(args, bin, f)...).Output()
		if err != nil {
			logf("pprof %s: %v", f, err)
			continue
		}
		if err := os.WriteFile(strings.TrimSuffix(f, ".pprof")+".txt", out, 0o644); err != nil {
			logf("%v", err)
		}
	}
}

// Before each run the CPUs must be settleIdle idle for two seconds in a
// row, waited for at most settleLimit.
const (
	settleIdle  = 0.85
	settleLimit = 45 * time.Second
)
