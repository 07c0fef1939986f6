package benchutil

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Run is what a report records about the run itself, apart from its
// results: how to reproduce it, where and when it ran, how long it took.
type Run struct {
	Command  string
	Machine  Machine
	Started  time.Time
	Duration time.Duration
}

// StartRun describes the machine and starts the clock of a run that
// command reproduces; Finish stops it.
func StartRun(command string) Run {
	return Run{Command: command, Machine: DescribeMachine(), Started: time.Now()}
}

// Finish sets Duration to the time since Started.
func (r *Run) Finish() { r.Duration = time.Since(r.Started) }

// ProducedBy is the paragraph under a report's title that gives the
// command reproducing it and the make target that runs the same.
func ProducedBy(target, command string) string {
	return fmt.Sprintf("Produced by (from the repository root; `make %s` runs the same):\n\n```sh\n%s\n```\n\n", target, command)
}

// Took is the sentence saying when a run started (UTC, RFC 3339) and how
// long it took, to the second, with no line break after it.
func Took(started time.Time, took time.Duration) string {
	return fmt.Sprintf("Run %s, took %s.", started.UTC().Format(time.RFC3339), took.Round(time.Second))
}

// WriteReport creates dir and writes markdown to dir/name.md and the plot
// that plot draws to dir/name.png.
func WriteReport(dir, name, markdown string, plot func(path string) error) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".md"), []byte(markdown), 0o644); err != nil {
		return err
	}
	return plot(filepath.Join(dir, name+".png"))
}

// OutDir resolves an -out flag's value against the repository (see
// InRepo), wherever in bench/ the command runs; it exits if it cannot.
func OutDir(path string) string {
	p, err := InRepo(path)
	if err != nil {
		log.Fatal(err)
	}
	return p
}

// Main runs run under a context that ends at an interrupt, and exits
// with run's error if it fails; it returns only after a success.
func Main(run func(context.Context) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx); err != nil {
		log.Fatal(err)
	}
}

// SharedMachineNote is the paragraph a report opens with when its run
// was a quick one or shared the machine (a load average at the start
// above half the CPUs): what its figures are worth, and what the full
// run (make target, at size full) needs. It is "" otherwise.
func SharedMachineNote(quick bool, loadAvg [2]float64, cpus int, target, full string) string {
	if !quick && loadAvg[0] <= float64(cpus)/2 {
		return ""
	}
	kind := "A run"
	if quick {
		kind = "A quick run (`-quick`)"
	}
	return fmt.Sprintf("**%s on a shared machine.** Other work ran beside it (1-minute load average %.2f at the start, %.2f at the end, on %d CPUs), so its absolute figures say little: read each against its peer measured in the same run, as the ratios below give it. No goal of the issue is claimed from this run; the full run (`make %s`, %s) needs a quiet machine.\n\n",
		kind, loadAvg[0], loadAvg[1], cpus, target, full)
}

// Millis formats d in milliseconds, to the hundredth.
func Millis(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d.Microseconds())/1000) }

// JoinInts lists ns separated by commas.
func JoinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}

// Header opens a report: its title, the command that produced it, when
// it ran and on what (peer names the other systems' versions), the load
// average at its start and end, and SharedMachineNote's paragraph (full
// is the size of a full run).
func (r Run) Header(title, target, peer string, quick bool, loadAvg [2]float64, full string) string {
	m := r.Machine
	return fmt.Sprintf("# %s\n\n", title) + ProducedBy(target, r.Command) +
		fmt.Sprintf("%s Machine: %d CPUs (%s), %s RAM, %s, %s; %s. The 1-minute load average was %.2f at the start and %.2f at the end.\n\n",
			Took(r.Started, r.Duration), m.CPUs, m.CPUModel, m.RAM, m.Kernel, m.Go, peer, loadAvg[0], loadAvg[1]) +
		SharedMachineNote(quick, loadAvg, m.CPUs, target, full)
}
