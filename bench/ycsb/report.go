package main

import (
	"encoding/json"
	"fmt"
	"image/color"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/doppio-db/doppio/bench/internal/benchutil"
)

// results is everything one run measured; results.json is this, README.md
// and the charts are drawn from it.
type results struct {
	Command  string
	Started  time.Time
	Elapsed  time.Duration
	Machine  machine
	Records  int
	Fields   int
	FieldLen int
	Threads  int
	Duration time.Duration
	Sched    string            // the YCSB JVM's scheduling policy (-client-sched)
	Settings map[string]string // store id -> exact settings
	Runs     []*runResult
}

// runResult is one YCSB phase (the load, or a workload) against one store.
type runResult struct {
	Store      string
	Workload   string // "load", or A-F
	Threads    int
	Throughput float64 // operations per second
	RunTimeMS  float64
	Ops        map[string]*opStats
	Errors     int64
	LoadBefore float64 // 1-minute load average before and after the run
	LoadAfter  float64
	ClientCPU  time.Duration // the YCSB JVM's CPU time (start-up included)
}

// clientCPUPerOp is the YCSB client's CPU time per operation in
// microseconds: on a 2-CPU machine the client competes with the store.
func (x *runResult) clientCPUPerOp() string {
	ops := x.Throughput * x.RunTimeMS / 1000
	if ops <= 0 || x.ClientCPU == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f", float64(x.ClientCPU.Microseconds())/ops)
}

type machine struct {
	benchutil.Machine
	Java     string
	Postgres string
	MariaDB  string
	Doppio   string // git commit
}

const (
	ycsbVersion     = "0.17.0"
	pgJDBCVersion   = "42.7.4"
	mariaJDBCVesion = "3.4.1"
)

func describeMachine(root string) machine {
	m := machine{Machine: benchutil.DescribeMachine()}
	if out, err := exec.Command("java", "-version").CombinedOutput(); err == nil {
		m.Java = strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0]
	}
	m.Postgres = postgresVersion()
	m.MariaDB = mariadbVersion()
	if out, err := exec.Command("git", "-C", root, "describe", "--always", "--dirty").Output(); err == nil {
		m.Doppio = strings.TrimSpace(string(out))
	}
	return m
}

func (r *results) run(store, workload string) *runResult {
	for _, x := range r.Runs {
		if x.Store == store && x.Workload == workload {
			return x
		}
	}
	return nil
}

// stores are the store ids present, in the standard order.
func (r *results) stores() []string {
	var out []string
	for _, s := range allStores {
		for _, x := range r.Runs {
			if x.Store == s.ID {
				out = append(out, s.ID)
				break
			}
		}
	}
	return out
}

// workloadsRun are the workloads present, in the order they ran.
func (r *results) workloadsRun() []string {
	var out []string
	seen := map[string]bool{}
	for _, x := range r.Runs {
		if x.Workload != "load" && !seen[x.Workload] {
			seen[x.Workload] = true
			out = append(out, x.Workload)
		}
	}
	return out
}

// readOp and writeOp name the operation reported as "read" and "write" of a
// workload: E reads by scans, D and E write by inserts.
func readOp(w string) string {
	if w == "E" {
		return "SCAN"
	}
	return "READ"
}

func writeOp(w string) string {
	switch w {
	case "D", "E", "load":
		return "INSERT"
	case "F":
		return "READ-MODIFY-WRITE"
	}
	return "UPDATE"
}

func msCell(o *opStats, v func(*opStats) float64) string {
	if o == nil || o.Count == 0 {
		return "–"
	}
	x := v(o) / 1000
	switch {
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	}
	return fmt.Sprintf("%.2f", x)
}

func latencies(o *opStats) string {
	return msCell(o, func(o *opStats) float64 { return o.P50 }) + " / " +
		msCell(o, func(o *opStats) float64 { return o.P99 }) + " / " +
		msCell(o, func(o *opStats) float64 { return o.P999 })
}

// ratio is Doppio's figure over the peer's: throughput (higher is better)
// and the read p99 (lower is better).
func ratioCell(d, p *runResult, w string) string {
	if d == nil || p == nil || p.Throughput == 0 {
		return "–"
	}
	s := fmt.Sprintf("%.2f×", d.Throughput/p.Throughput)
	dr, pr := d.Ops[readOp(w)], p.Ops[readOp(w)]
	if dr != nil && pr != nil && pr.P99 > 0 {
		s += fmt.Sprintf(" / %.2f", dr.P99/pr.P99)
	}
	return s
}

func label(id string) string {
	if l := labelOf(id); l != "" {
		return l
	}
	return id
}

func report(r *results) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# YCSB: Doppio, PostgreSQL and MariaDB side by side\n\n")
	w("YCSB %s core workloads A–F, the same client code (`site.ycsb.Client`) and thread count against each store in turn, in one run; bindings in `bench/ycsb/java`.\n\n", ycsbVersion)
	b.WriteString(benchutil.ProducedBy("bench-ycsb", r.Command))
	w("%s\n\n", benchutil.Took(r.Started, r.Elapsed))
	w("**Machine**: %d CPUs (`nproc`), %s, %s RAM, %s. Shared with other engineers' builds and tests during the run: the 1-minute load average before → after each run is in every table.\n\n",
		r.Machine.CPUs, r.Machine.CPUModel, r.Machine.RAM, r.Machine.Kernel)
	w("**Versions**: Doppio %s (built with %s); %s; %s; %s; YCSB core %s; pgJDBC %s; MariaDB Connector/J %s.\n\n",
		r.Machine.Doppio, r.Machine.Go, r.Machine.Postgres, r.Machine.MariaDB, r.Machine.Java, ycsbVersion, pgJDBCVersion, mariaJDBCVesion)
	w("**Data**: %d records of %d fields × %d bytes loaded into each store (YCSB keys `user<hash>`, `insertorder=hashed`); %d client threads for every workload (4× that for the load, not compared); each workload runs %s (`maxexecutiontime`, operation count unbounded) on every store back to back (all stores are started and loaded first and stay up; before each run the harness waits until the CPUs are at least 85%% idle for two seconds in a row, at most 45 s, so that no store is measured while another still flushes, checkpoints or compacts the previous run's writes), workloads in the order %s on the loaded data; `readallfields=true`, `writeallfields=false` (an update writes one field). Latencies in milliseconds, p50 / p99 / p99.9, from YCSB's HdrHistogram.\n\n",
		r.Records, r.Fields, r.FieldLen, r.Threads, r.Duration, strings.Join(r.workloadsRun(), ", "))
	w("**The client's scheduling**: %s\n\n", schedNote(r.Sched))
	w("**Settings** (durability on everywhere: a write is acknowledged after it is on disk):\n\n")
	for _, id := range r.stores() {
		w("- **%s**: %s\n", label(id), r.Settings[id])
	}
	w("\n## Load\n\n| store | records/s | insert p50 / p99 / p99.9 | errors | load avg |\n|---|---:|---:|---:|---:|\n")
	for _, id := range r.stores() {
		if x := r.run(id, "load"); x != nil {
			w("| %s | %.0f | %s | %d | %.1f → %.1f |\n", label(id), x.Throughput, latencies(x.Ops["INSERT"]), x.Errors, x.LoadBefore, x.LoadAfter)
		}
	}
	w("\n")
	for _, wl := range r.workloadsRun() {
		title := wl
		if wk, ok := workloadByName(wl); ok {
			title = wl + ": " + wk.Title
		}
		w("## Workload %s\n\n", title)
		w("| store | ops/s | %s p50 / p99 / p99.9 | %s p50 / p99 / p99.9 | errors | client CPU µs/op | load avg |\n|---|---:|---:|---:|---:|---:|---:|\n",
			strings.ToLower(readOp(wl)), strings.ToLower(writeOp(wl)))
		for _, id := range r.stores() {
			x := r.run(id, wl)
			if x == nil {
				continue
			}
			rd := "–"
			if o := x.Ops[readOp(wl)]; o != nil {
				rd = latencies(o)
			}
			wr := "–"
			if o := x.Ops[writeOp(wl)]; o != nil {
				wr = latencies(o)
			}
			w("| %s | %.0f | %s | %s | %d | %s | %.1f → %.1f |\n", label(id), x.Throughput, rd, wr, x.Errors, x.clientCPUPerOp(), x.LoadBefore, x.LoadAfter)
		}
		w("\n")
	}
	w("## Ratios\n\nDoppio's throughput over the peer's (above 1: Doppio serves more) / Doppio's %s p99 over the peer's (below 1: Doppio answers faster).\n\n", "read (scan in E)")
	w("| workload | 1 node / PostgreSQL | 1 node / MariaDB | 3 nodes / PostgreSQL | 3 nodes / MariaDB |\n|---|---:|---:|---:|---:|\n")
	for _, wl := range r.workloadsRun() {
		d1, d3, pg, my := r.run("doppio-1", wl), r.run("doppio-3", wl), r.run("postgres", wl), r.run("mariadb", wl)
		w("| %s | %s | %s | %s | %s |\n", wl, ratioCell(d1, pg, wl), ratioCell(d1, my, wl), ratioCell(d3, pg, wl), ratioCell(d3, my, wl))
	}
	w("\n![Throughput per workload and store](throughput.png)\n\n![Read p99 latency per workload and store](read-p99.png)\n\n")
	w("## Goal (issue 8)\n\n")
	w("Single node, durability on: Doppio's throughput at least 1.5× PostgreSQL's and MariaDB's on A, B and C with a lower p99; the 3-node cluster at least matching single-node PostgreSQL on B and C.\n\n")
	w("| check | measured | met |\n|---|---|---|\n")
	for _, wl := range []string{"A", "B", "C"} {
		d1 := r.run("doppio-1", wl)
		for _, peer := range []string{"postgres", "mariadb"} {
			p := r.run(peer, wl)
			if d1 == nil || p == nil {
				continue
			}
			t := d1.Throughput / p.Throughput
			ok := t >= 1.5 && p99(d1, wl) < p99(p, wl)
			w("| %s: 1 node ≥ 1.5× %s, lower read p99 | %.2f×, p99 %.2f vs %.2f ms | %s |\n", wl, label(peer), t, p99(d1, wl)/1000, p99(p, wl)/1000, yes(ok))
		}
	}
	for _, wl := range []string{"B", "C"} {
		d3, p := r.run("doppio-3", wl), r.run("postgres", wl)
		if d3 == nil || p == nil {
			continue
		}
		t := d3.Throughput / p.Throughput
		w("| %s: 3 nodes ≥ PostgreSQL | %.2f× | %s |\n", wl, t, yes(t >= 1))
	}
	r.writeSecurityCost(w)
	w("\n[ANALYSIS.md](ANALYSIS.md): where Doppio's time goes and what would change these numbers.\n")
	w("\n## Profiles\n\nCPU profiles of the single Doppio node (`doppio-1-…`) and of the 3-node cluster's first node n1 (`doppio-3-…`, which leads about a third of the partitions and follows the rest) during the workloads named by `-profile`, and their allocations since start after the last workload, in `profiles/` (`go tool pprof -top profiles/<file>`; the `.txt` next to each is its top 60 functions by cumulative share, from the node's binary).\n\n")
	return b.String()
}

// writeSecurityCost compares each store run secure (TLS and credentials)
// with the same store run insecure in this run (issue 28's goal: at most 10%
// less throughput, at most 10% more p99), when both were run.
func (r *results) writeSecurityCost(w func(string, ...any)) {
	pairs := [][2]string{{"doppio-1", "doppio-1-secure"}, {"doppio-3", "doppio-3-secure"}, {"postgres", "postgres-secure"}}
	header := false
	for _, wl := range r.workloadsRun() {
		for _, pr := range pairs {
			plain, sec := r.run(pr[0], wl), r.run(pr[1], wl)
			if plain == nil || sec == nil {
				continue
			}
			if !header {
				w("\n## Cost of security\n\nEach store secure (TLS; Doppio: a session token, PostgreSQL: SCRAM) over the same store insecure, in this run. Goal (issue 28, Doppio): throughput ratio ≥ 0.90 and p99 ratio ≤ 1.10.\n\n")
				w("| workload | store | throughput secure / insecure | read p99 secure / insecure | write p99 secure / insecure |\n|---|---|---:|---:|---:|\n")
				header = true
			}
			w("| %s | %s | %.2f | %s | %s |\n", wl, label(pr[0]), sec.Throughput/plain.Throughput,
				opRatio(sec.Ops[readOp(wl)], plain.Ops[readOp(wl)]), opRatio(sec.Ops[writeOp(wl)], plain.Ops[writeOp(wl)]))
		}
	}
}

// opRatio is a's p99 over b's, or "–" when either did not run the operation.
func opRatio(a, b *opStats) string {
	if a == nil || b == nil || b.P99 <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", a.P99/b.P99)
}

func p99(x *runResult, w string) float64 {
	if o := x.Ops[readOp(w)]; o != nil {
		return o.P99
	}
	return 0
}

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

var storeColors = map[string]color.Color{
	"doppio-1": color.RGBA{R: 0xc0, G: 0x39, B: 0x2b, A: 0xff},
	"doppio-3": color.RGBA{R: 0xe6, G: 0x7e, B: 0x22, A: 0xff},
	"postgres": color.RGBA{R: 0x29, G: 0x80, B: 0xb9, A: 0xff},
	"mariadb":  color.RGBA{R: 0x27, G: 0xae, B: 0x60, A: 0xff},
	// Secure runs: the insecure store's hue, darker.
	"doppio-1-secure": color.RGBA{R: 0x7b, G: 0x24, B: 0x1c, A: 0xff},
	"doppio-3-secure": color.RGBA{R: 0x9c, G: 0x55, B: 0x17, A: 0xff},
	"postgres-secure": color.RGBA{R: 0x1a, G: 0x52, B: 0x76, A: 0xff},
}

// writeBars draws one group of bars per workload, one bar per store.
func writeBars(r *results, path, title, ylabel string, value func(x *runResult, w string) float64) error {
	stores, wls := r.stores(), r.workloadsRun()
	if len(stores) == 0 || len(wls) == 0 {
		return nil
	}
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.Add(plotter.NewGrid())
	width := vg.Points(14)
	for i, id := range stores {
		vals := make(plotter.Values, len(wls))
		for j, wl := range wls {
			if x := r.run(id, wl); x != nil {
				vals[j] = value(x, wl)
			}
		}
		bars, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return err
		}
		bars.LineStyle.Width = 0
		bars.Color = storeColors[id]
		bars.Offset = width * vg.Length(float64(i)-float64(len(stores)-1)/2)
		p.Add(bars)
		p.Legend.Add(label(id), bars)
	}
	p.Legend.Top = true
	p.NominalX(wls...)
	img := vgimg.New(vg.Points(720), vg.Points(400))
	p.Draw(draw.New(img))
	return benchutil.WritePNG(img, path)
}

func writeReport(r *results, out string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "README.md"), []byte(report(r)), 0o644); err != nil {
		return err
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "results.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	if err := writeBars(r, filepath.Join(out, "throughput.png"), "YCSB throughput (higher is better)", "operations/s",
		func(x *runResult, _ string) float64 { return x.Throughput }); err != nil {
		return err
	}
	return writeBars(r, filepath.Join(out, "read-p99.png"), "YCSB read p99 latency, scan in E (lower is better)", "ms",
		func(x *runResult, w string) float64 { return p99(x, w) / 1000 })
}

// schedNote says under which Linux scheduling policy the YCSB JVM ran.
func schedNote(sched string) string {
	if sched == "batch" {
		return "the YCSB JVM runs under `SCHED_BATCH` (`chrt --batch 0`, `-client-sched batch`) against every store. " +
			"Its threads take their fair share of the CPUs, but a thread that wakes (its answer arrived) does not preempt the thread running on its CPU, " +
			"as a client on another machine would not. The report run under the default policy is `../README.md`; ANALYSIS.md compares the two."
	}
	return "the YCSB JVM runs under the default policy (`SCHED_OTHER`) against every store: the client shares the two CPUs with the store, " +
		"and a client thread that wakes (its answer arrived) may preempt the store's thread on its CPU in the middle of a request. " +
		"That costs a store with a few busy threads (Doppio: two Go threads serve every connection) more than one with a thread per connection. " +
		"The same run with the client under `SCHED_BATCH` (no wake-up preemption) is `client-batch/README.md`; ANALYSIS.md compares the two."
}
