package torture

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"
)

// Report markers: WriteReport replaces what lies between them in
// docs/reliability.md and keeps the rest (the bugs found, the notes).
const (
	reportBegin = "<!-- torture:results:begin -->"
	reportEnd   = "<!-- torture:results:end -->"
)

// Machine describes where a run happened, for the report.
func Machine(netem bool) string {
	load := "?"
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	kernel := "?"
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = strings.TrimSpace(string(b))
	}
	links := "sch_netem available (loss and delay are netem's)"
	if !netem {
		links = "no sch_netem in the kernel: loss is a flapping link (blackhole routes on and off every 50–250 ms), delay a 512 kbit/s token bucket (tbf)"
	}
	return fmt.Sprintf("%s/%s, %d CPUs, Linux %s, load average at the end %s; %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), kernel, load, links)
}

// Markdown renders runs as the results section of docs/reliability.md: for
// each nemesis, its faults as they happened and a table per workload.
func Markdown(command string, seed uint64, machine string, runs []RunReport) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\n## Results\n\n", reportBegin)
	fmt.Fprintf(&b, "Produced by `%s` on %s.\n\n", command, time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "Seed %d. Machine: %s.\n\n", seed, machine)
	b.WriteString("Columns: operations attempted, acknowledged (the client saw success), indeterminate (timeout, reset, 5xx: the outcome is unknown), lost (acknowledged effects missing at the end; must be 0), violations (non-linearizable keys, a wrong bank total, a change-log gap or duplicate, a phantom; must be 0), and the longest stretch of the run with no write acknowledged.\n\n")
	b.WriteString("| nemesis | workload | attempted | acknowledged | indeterminate | lost | violations | longest write gap | verdict |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|---|\n")
	for _, r := range runs {
		for _, w := range r.Results {
			verdict := "ok"
			if !w.OK() {
				verdict = "**FAIL**"
			}
			fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d | %d | %v | %s |\n", r.Nemesis, w.Workload, w.Attempted, w.Acknowledged,
				w.Indeterminate, w.Lost, w.Violations, w.LongestWriteGap.Round(10*time.Millisecond), verdict)
		}
		if len(r.Results) == 0 {
			fmt.Fprintf(&b, "| %s | — | | | | | | | **FAIL** (no workload ran) |\n", r.Nemesis)
		}
	}
	b.WriteString("\n### Faults as they happened\n\n")
	for _, r := range runs {
		fmt.Fprintf(&b, "**%s** (%d nodes, %v; settled %v after the final heal)", r.Nemesis, r.Nodes, r.Duration, r.Settle.Round(10*time.Millisecond))
		if len(r.Events) == 0 {
			b.WriteString(": no faults.\n\n")
		} else {
			b.WriteString(":\n\n```\n")
			for _, e := range r.Events {
				b.WriteString(e.String() + "\n")
			}
			b.WriteString("```\n\n")
		}
		for _, e := range r.Errors {
			fmt.Fprintf(&b, "- run error: %s\n", e)
		}
		for _, w := range r.Results {
			for _, f := range w.Failures {
				fmt.Fprintf(&b, "- %s: %s\n", w.Workload, f)
			}
		}
		if len(r.Errors) > 0 {
			b.WriteString("\n")
		}
	}
	b.WriteString(reportEnd + "\n")
	return b.String()
}

// WriteReport puts section in place of the results section of the file at
// path (between the markers), creating the file if needed and keeping
// everything else in it.
func WriteReport(path, section string) error {
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	s := string(old)
	i, j := strings.Index(s, reportBegin), strings.Index(s, reportEnd)
	switch {
	case i >= 0 && j > i:
		s = s[:i] + section + strings.TrimPrefix(s[j+len(reportEnd):], "\n")
	case s == "":
		s = "# Reliability\n\n" + section
	default:
		s = strings.TrimRight(s, "\n") + "\n\n" + section
	}
	return os.WriteFile(path, []byte(s), 0o644)
}
