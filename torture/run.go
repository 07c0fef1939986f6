package torture

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// Options say what one run does.
type Options struct {
	Nemesis   Nemesis
	Workloads []Workload
	Duration  time.Duration
	Seed      uint64
	// Dir receives the workloads' artifacts, one directory per workload
	// under Dir/<nemesis>/.
	Dir string
	// Log receives the seed, the schedule, the nemesis's events as they
	// happen and the results; nil for none.
	Log io.Writer
}

// RunReport is what one run of a nemesis against a set of workloads found.
type RunReport struct {
	Nemesis  string
	Seed     uint64
	Nodes    int
	Duration time.Duration
	Plan     []Fault
	Events   []Event
	Results  []Result
	// Settle is how long the healed cluster took to have a caught-up
	// leader for every partition.
	Settle time.Duration
	// Errors are failures of the run itself (a workload's Setup or Run, a
	// heal, a cluster that did not settle): they fail the run too.
	Errors []string
}

// OK reports whether every workload's check passed and the run itself did
// not fail.
func (o RunReport) OK() bool {
	if len(o.Errors) > 0 {
		return false
	}
	for _, r := range o.Results {
		if !r.OK() {
			return false
		}
	}
	return true
}

// Run runs opt.Workloads against c for opt.Duration while opt.Nemesis
// fires on its schedule, then heals the cluster, waits for it to settle
// and checks every workload.
func Run(ctx context.Context, c *Cluster, opt Options) RunReport {
	out := RunReport{Nemesis: opt.Nemesis.Name, Seed: opt.Seed, Nodes: len(c.Nodes), Duration: opt.Duration}
	out.Plan = opt.Nemesis.Plan(opt.Seed, opt.Duration, len(c.Nodes))
	logf := func(format string, args ...any) {
		if opt.Log != nil {
			fmt.Fprintf(opt.Log, format+"\n", args...)
		}
	}
	var names []string
	for _, w := range opt.Workloads {
		names = append(names, w.Name())
	}
	mode, flag := "", ""
	if c.Secure() {
		mode, flag = ", secure", " -secure"
	}
	logf("=== torture: nemesis %s, workloads %s, %d nodes%s, %v, seed %d", out.Nemesis, strings.Join(names, ","), out.Nodes, mode, opt.Duration, opt.Seed)
	logf("    replay: go run ./torture/cmd/torture -nemesis %s -workload %s -nodes %d -duration %v -seed %d%s",
		out.Nemesis, strings.Join(names, ","), out.Nodes, opt.Duration, opt.Seed, flag)
	logf("schedule:")
	for _, f := range out.Plan {
		logf("  %v", f)
	}
	if len(out.Plan) == 0 {
		logf("  (no faults)")
	}

	// Setup: every workload creates its own database and tables.
	setupCtx, cancel := context.WithTimeout(ctx, 90*time.Second)
	errs := make([]error, len(opt.Workloads))
	var wg sync.WaitGroup
	for i, w := range opt.Workloads {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = w.Setup(setupCtx, c) }()
	}
	wg.Wait()
	cancel()
	var ready []Workload
	for i, err := range errs {
		if err != nil {
			out.Errors = append(out.Errors, fmt.Sprintf("%s: setup: %v", opt.Workloads[i].Name(), err))
			continue
		}
		ready = append(ready, opt.Workloads[i])
	}

	// Run: workloads and nemesis together.
	start := time.Now()
	runCtx, stop := context.WithTimeout(ctx, opt.Duration)
	var mu sync.Mutex
	runErrs := make([]error, len(ready))
	for i, w := range ready {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(opt.Seed, uint64(i)+1))
			runErrs[i] = w.Run(runCtx, c, rng)
		}()
	}
	execute(runCtx, c, out.Plan, start, func(e Event) {
		mu.Lock()
		out.Events = append(out.Events, e)
		mu.Unlock()
		logf("  %v", e)
	})
	<-runCtx.Done()
	stop()
	wg.Wait()
	for i, err := range runErrs {
		if err != nil && ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			out.Errors = append(out.Errors, fmt.Sprintf("%s: run: %v", ready[i].Name(), err))
		}
	}

	// Heal and settle.
	healCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	if err := c.HealAll(healCtx); err != nil {
		out.Errors = append(out.Errors, "heal: "+err.Error())
	}
	settleCtx, cancel2 := context.WithTimeout(healCtx, 60*time.Second)
	defer cancel2()
	d, err := c.Settle(settleCtx)
	out.Settle = d
	if err != nil {
		out.Errors = append(out.Errors, "settle: "+err.Error())
	}
	logf("  +%6.2fs healed; settled in %v", time.Since(start).Seconds(), d.Round(time.Millisecond))

	// Check.
	results := make([]Result, len(ready))
	checkCtx, cancel3 := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel3()
	for i, w := range ready {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dir := filepath.Join(opt.Dir, out.Nemesis, w.Name())
			if err := os.MkdirAll(dir, 0o755); err != nil {
				results[i] = Result{Workload: w.Name(), Failures: []string{err.Error()}}
				return
			}
			results[i] = w.Check(checkCtx, c, dir)
			if results[i].Workload == "" {
				results[i].Workload = w.Name()
			}
		}()
	}
	wg.Wait()
	out.Results = results
	sort.Slice(out.Results, func(i, j int) bool { return out.Results[i].Workload < out.Results[j].Workload })
	printOutcome(opt.Log, c, out)
	return out
}

func printOutcome(w io.Writer, c *Cluster, o RunReport) {
	if w == nil {
		return
	}
	fmt.Fprintf(w, "results (nemesis %s, seed %d):\n", o.Nemesis, o.Seed)
	fmt.Fprintf(w, "  %-10s %9s %6s %6s %5s %5s %9s\n", "workload", "attempted", "acked", "indet", "lost", "viol", "write gap")
	for _, r := range o.Results {
		verdict := "ok"
		if !r.OK() {
			verdict = "FAIL"
		}
		fmt.Fprintf(w, "  %-10s %9d %6d %6d %5d %5d %9v %s\n", r.Workload, r.Attempted, r.Acknowledged, r.Indeterminate,
			r.Lost, r.Violations, r.LongestWriteGap.Round(time.Millisecond), verdict)
		for _, f := range r.Failures {
			fmt.Fprintf(w, "    %s\n", f)
		}
		for _, a := range r.Artifacts {
			fmt.Fprintf(w, "    artifact: %s\n", a)
		}
	}
	for _, e := range o.Errors {
		fmt.Fprintf(w, "  error: %s\n", e)
	}
	if !o.OK() {
		fmt.Fprintf(w, "FAILED: nemesis %s, seed %d; node logs under %s\n", o.Nemesis, o.Seed, filepath.Join(c.Dir, "logs"))
	}
}
