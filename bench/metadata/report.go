package main

import (
	"fmt"
	"strings"

	"github.com/doppio-db/doppio/bench/internal/benchutil"
	"github.com/doppio-db/doppio/internal/membership"
)

// report is the markdown section: per size, each event's bytes; then
// the ratio of the largest size's bytes to the smallest's.
func report(run benchutil.Run, sizes []size, results [][]event, load [2]float64, quick bool) string {
	var b strings.Builder
	m := run.Machine
	fmt.Fprintf(&b, "Produced by (from the repository root; `make bench-metadata` runs the same):\n\n```sh\n%s\n```\n\n", run.Command)
	fmt.Fprintf(&b, "%s Machine: %d CPUs (%s), %s RAM, %s, %s. The 1-minute load average was %.2f at the start and %.2f at the end.\n\n",
		benchutil.Took(run.Started, run.Duration), m.CPUs, m.CPUModel, m.RAM, m.Kernel, m.Go, load[0], load[1])
	b.WriteString(benchutil.SharedMachineNote(quick, load, m.CPUs, "bench-metadata", "10,000 and 100,000 replicas"))
	for i, s := range sizes {
		fmt.Fprintf(&b, "#### %d nodes, %d partitions × 3 = %d replicas\n\n", s.Nodes, s.Partitions, s.Replicas())
		b.WriteString("| event | partitions changed | puts | bytes put: placement | leaders + groups | other | etcd db size delta | routing watch received | bytes put per changed partition | until quiet |\n")
		b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, e := range results[i] {
			t := e.Traffic
			pl := t.PutBytes[membership.PlacementDir]
			lg := t.PutBytes[membership.LeadersDir] + t.PutBytes[membership.GroupsDir]
			per := "–"
			if e.Changed > 0 {
				per = bytes(t.PutTotal() / int64(e.Changed))
			}
			fmt.Fprintf(&b, "| %s | %d | %d | %s | %s | %s | %s | %s | %s | %s |\n", e.Name, e.Changed, t.Puts,
				bytes(pl), bytes(lg), bytes(t.PutTotal()-pl-lg), bytes(e.DBDelta), bytes(t.WatchRecv), per, e.Took.Round(1e6))
		}
		b.WriteString("\n")
	}
	if len(sizes) > 1 {
		last := len(sizes) - 1
		fmt.Fprintf(&b, "Same-run ratios, %d replicas against %d (a metadata that grows with what changed keeps the per-partition ratio near 1):\n\n", sizes[last].Replicas(), sizes[0].Replicas())
		b.WriteString("| event | bytes put | routing watch received | bytes put per changed partition |\n|---|---:|---:|---:|\n")
		for j, e := range results[last] {
			if j >= len(results[0]) {
				break
			}
			a := results[0][j]
			perA, perB := perChanged(a), perChanged(e)
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", eventKind(e.Name), ratio(e.Traffic.PutTotal(), a.Traffic.PutTotal()),
				ratio(e.Traffic.WatchRecv, a.Traffic.WatchRecv), ratio(perB, perA))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func perChanged(e event) int64 {
	if e.Changed == 0 {
		return 0
	}
	return e.Traffic.PutTotal() / int64(e.Changed)
}

// eventKind is an event's name without its size in parentheses.
func eventKind(name string) string {
	if i := strings.Index(name, " ("); i > 0 {
		return name[:i]
	}
	return name
}

func ratio(a, b int64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f×", float64(a)/float64(b))
}

// bytes formats n in B, KB or MB (powers of 1,000).
func bytes(n int64) string {
	switch {
	case n < 0:
		return "−" + bytes(-n)
	case n < 10_000:
		return fmt.Sprintf("%d B", n)
	case n < 10_000_000:
		return fmt.Sprintf("%.1f KB", float64(n)/1e3)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/1e6)
}
