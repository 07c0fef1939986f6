// Command controlsim runs the control-plane simulator (internal/controlsim)
// through one scenario and prints its report. It exits 1 when an
// invariant broke or the cluster did not converge; the report's last
// line is the command that replays the run.
//
//	go run ./internal/controlsim/cmd/controlsim -scenario day -seed 1 -nodes 30 -replicas 3000
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/doppio-db/doppio/internal/controlsim"
)

func main() {
	var c controlsim.Config
	var list bool
	var docs []string
	for _, s := range controlsim.Scenarios() {
		docs = append(docs, fmt.Sprintf("%s (%s)", s.Name, s.Doc))
	}
	flag.StringVar(&c.Scenario, "scenario", "day", "the scenario: "+strings.Join(docs, "; "))
	flag.Uint64Var(&c.Seed, "seed", 0, "the seed (0: from the clock); printed to replay the run")
	flag.IntVar(&c.Nodes, "nodes", 30, "nodes at the start")
	flag.IntVar(&c.Zones, "zones", 3, "zones (node i is in zone i mod zones)")
	flag.IntVar(&c.Replicas, "replicas", 3000, "partition replicas at the start (partitions × replication factor)")
	flag.IntVar(&c.Databases, "databases", 0, "databases the partitions are split into (0: one per 4,096 partitions)")
	flag.IntVar(&c.RF, "rf", 3, "replication factor")
	flag.IntVar(&c.MaxMoves, "max-moves", 0, "the controller's --max-moves (0: its default)")
	flag.IntVar(&c.MaxMovesPerNode, "max-moves-per-node", 0, "the controller's --max-moves-per-node (0: its default)")
	flag.DurationVar(&c.DeadNodeDelay, "dead-node-delay", 0, "the controller's --dead-node-delay (0: its default)")
	flag.DurationVar(&c.Timing.Round, "round-time", 0, "how long a planning round takes in simulated time (0: none); changes meanwhile wait for the next round")
	flag.BoolVar(&c.Short, "short", false, "the tests' shorter scenarios (churn for half an hour)")
	flag.BoolVar(&list, "list", false, "list the scenarios and exit")
	flag.Parse()
	if list {
		for _, s := range controlsim.Scenarios() {
			fmt.Printf("%-16s %s\n", s.Name, s.Doc)
		}
		return
	}
	if c.Seed == 0 {
		c.Seed = uint64(time.Now().UnixNano())
	}
	fmt.Printf("seed %d\n", c.Seed)
	c.Progress = progress(os.Stderr, isTerminal(os.Stdout))
	r, err := controlsim.Run(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "controlsim:", err)
		if len(r.History) > 0 || r.Rounds > 0 {
			r.Write(os.Stderr)
		}
		os.Exit(2)
	}
	r.Write(os.Stdout)
	fmt.Printf("process CPU time: %s\n", cpuTime().Round(time.Millisecond))
	if r.Failed() {
		os.Exit(1)
	}
}

// progress draws a bar of simulated time on a terminal, and otherwise
// writes a line every ten seconds.
func progress(w io.Writer, terminal bool) func(now, last time.Duration) {
	started := time.Now()
	every := 10 * time.Second
	if terminal {
		every = 200 * time.Millisecond
	}
	var shown time.Time
	return func(now, last time.Duration) {
		done := now >= last
		if !done && time.Since(shown) < every {
			return
		}
		shown = time.Now()
		frac := 1.0
		if last > 0 {
			frac = float64(now) / float64(last)
		}
		line := fmt.Sprintf("simulated %s of %s in %s", now.Round(time.Second), last.Round(time.Second), time.Since(started).Round(time.Second))
		if !terminal {
			fmt.Fprintln(w, line)
			return
		}
		n := min(max(int(frac*30+0.5), 0), 30)
		eol := ""
		if done {
			eol = "\n"
		}
		fmt.Fprintf(w, "\r[%s%s] %3.0f%% %s\033[K%s", strings.Repeat("#", n), strings.Repeat("-", 30-n), frac*100, line, eol)
	}
}

// cpuTime is the CPU this process used, user and system: on a shared
// machine it says more of the simulation's cost than the wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
