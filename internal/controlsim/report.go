package controlsim

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/doppio-db/doppio/internal/placement"
)

// Report is what a run found. Everything but Wall and Planning is a
// function of the Config: a replay reports the same.
type Report struct {
	Setup  Setup
	Events []EventResult
	// Rounds counts the controller's planning rounds, Writes those that
	// wrote placements.
	Rounds, Writes int
	Moves          Moves
	// InFlight is the replica adds in flight (placed replicas that are
	// not voters yet) each time the count changed; MaxInFlight and
	// MaxInFlightPerNode the most at once, in total and to one node.
	InFlight                        []Sample
	MaxInFlight, MaxInFlightPerNode int
	// MaxUnavailable is the most partitions without a live majority at
	// once (a run's events, not a move, take them there).
	MaxUnavailable int
	// Balance is at the last convergence, WorstBalance the worst over
	// every convergence.
	Balance, WorstBalance Balance
	// Converged: every event converged, and nothing changed after.
	Converged  bool
	End        time.Duration // the simulated time of the run's end
	Violations []Violation
	// History is the last lines of the run's log: events, rounds that
	// wrote, convergences, violations.
	History []string
	// Wall is how long the run took on this machine, Planning how much
	// of it went into the planning function.
	Wall, Planning time.Duration
}

// Setup is the run's configuration as a report states it.
type Setup struct {
	Scenario                              string
	Short                                 bool
	Seed                                  uint64
	Nodes, Zones, Replicas, Databases, RF int
	MaxMoves, MaxMovesPerNode             int
	DeadNodeDelay                         time.Duration
}

func setupOf(c Config) Setup {
	return Setup{
		Scenario: c.Scenario, Short: c.Short, Seed: c.Seed, Nodes: c.Nodes, Zones: c.Zones, Replicas: c.Replicas,
		Databases: c.Databases, RF: c.RF, MaxMoves: c.MaxMoves, MaxMovesPerNode: c.MaxMovesPerNode, DeadNodeDelay: c.DeadNodeDelay,
	}
}

// EventResult is one event and how long the cluster took to converge
// after it.
type EventResult struct {
	At        time.Duration
	What      string
	Converged bool
	After     time.Duration
}

// Moves counts what the cluster did.
type Moves struct {
	// Adds are the replicas added (learners); Ideal the fewest that
	// reach the same placements: at each convergence, each partition's
	// voters that were not voters at the one before.
	Adds, Ideal int
	Removes     int // replicas removed from their groups
	Transfers   int // leadership transfers
	Elections   int // leaders elected (a group's first, or after its leader died)
	// FailedChanges and FailedSnapshots were tried again.
	FailedChanges, FailedSnapshots int
}

// Sample is the adds in flight from At on.
type Sample struct {
	At       time.Duration
	InFlight int
}

// Balance is the spread (most minus fewest) over the eligible nodes.
type Balance struct {
	Leaders            int // leaders per node
	LeadersPerDatabase int // leaders of one database per node, the worst database
	Replicas           int // replicas per node within a zone, the worst zone
}

// ViolationKind names the invariant a violation breaks (see the
// package doc).
type ViolationKind int

const (
	Quorum ViolationKind = iota
	Replication
	Zone
	Throttle
)

var violationNames = [...]string{"quorum", "replication", "zone", "throttle"}

func (k ViolationKind) String() string { return nameOf(violationNames[:], int(k), "ViolationKind") }

// Violation is one broken invariant.
type Violation struct {
	At        time.Duration
	Kind      ViolationKind
	Partition placement.PartitionID // Quorum, Replication, Zone
	Node      placement.NodeID      // Throttle per node
	Detail    string
}

func (v Violation) String() string {
	where := ""
	if v.Partition.Database != "" {
		where = " " + v.Partition.String()
	}
	return fmt.Sprintf("%s %s%s: %s", clock(v.At), v.Kind, where, v.Detail)
}

// Failed reports whether the run broke an invariant or did not converge.
func (r Report) Failed() bool { return len(r.Violations) > 0 || !r.Converged }

// Replay is the command that runs the same simulation again (with the
// default timing and the real decisions).
func (r Report) Replay() string {
	s := r.Setup
	return fmt.Sprintf("go run ./internal/controlsim/cmd/controlsim -scenario %s -short=%t -seed %d -nodes %d -zones %d -replicas %d -databases %d -rf %d -max-moves %d -max-moves-per-node %d -dead-node-delay %s",
		s.Scenario, s.Short, s.Seed, s.Nodes, s.Zones, s.Replicas, s.Databases, s.RF, s.MaxMoves, s.MaxMovesPerNode, s.DeadNodeDelay)
}

// Write prints the report for a person: the run, each event and how long
// it took to converge, the moves, the adds in flight over time, the
// balance, the invariants, and how to replay it.
func (r Report) Write(out io.Writer) {
	s := r.Setup
	parts := s.Replicas / max(s.RF, 1)
	fmt.Fprintf(out, "scenario %s, seed %d: %d nodes in %d zones, %d partitions × %d in %d databases; --max-moves %d, --max-moves-per-node %d, --dead-node-delay %s\n",
		s.Scenario, s.Seed, s.Nodes, s.Zones, parts, s.RF, s.Databases, s.MaxMoves, s.MaxMovesPerNode, s.DeadNodeDelay)
	fmt.Fprintf(out, "simulated %s in %s: %d planning rounds (%s planning), %d writes\n\n",
		clock(r.End), r.Wall.Round(time.Millisecond), r.Rounds, r.Planning.Round(time.Millisecond), r.Writes)

	fmt.Fprintln(out, "events (converged after):")
	var worst time.Duration
	for _, e := range r.Events {
		after := "not converged"
		if e.Converged {
			after = e.After.Round(time.Millisecond).String()
			worst = max(worst, e.After)
		}
		fmt.Fprintf(out, "  %s  %-40s %s\n", clock(e.At), e.What, after)
	}
	fmt.Fprintf(out, "  longest: %s\n\n", worst.Round(time.Millisecond))

	m := r.Moves
	ratio := "-"
	if m.Ideal > 0 {
		ratio = fmt.Sprintf("%.2f×", float64(m.Adds)/float64(m.Ideal))
	}
	fmt.Fprintf(out, "moves: %d replica adds against %d ideal (%s), %d removes, %d leadership transfers, %d elections; %d failed changes and %d failed snapshots retried\n",
		m.Adds, m.Ideal, ratio, m.Removes, m.Transfers, m.Elections, m.FailedChanges, m.FailedSnapshots)
	fmt.Fprintf(out, "in flight: at most %d adds (--max-moves %d), %d to one node (--max-moves-per-node %d); at most %d partitions without a live majority\n",
		r.MaxInFlight, s.MaxMoves, r.MaxInFlightPerNode, s.MaxMovesPerNode, r.MaxUnavailable)
	r.writeInFlight(out, 24)
	fmt.Fprintf(out, "balance, the most minus the fewest per node at the end (the worst at any convergence): leaders %d (%d), leaders of a database %d (%d), replicas within a zone %d (%d)\n\n",
		r.Balance.Leaders, r.WorstBalance.Leaders, r.Balance.LeadersPerDatabase, r.WorstBalance.LeadersPerDatabase, r.Balance.Replicas, r.WorstBalance.Replicas)

	switch {
	case len(r.Violations) == 0:
		fmt.Fprintln(out, "invariants: none broken")
	default:
		fmt.Fprintf(out, "invariants: %d broken\n", len(r.Violations))
		for i, v := range r.Violations {
			if i == 20 {
				fmt.Fprintf(out, "  … and %d more\n", len(r.Violations)-i)
				break
			}
			fmt.Fprintf(out, "  %s\n", v)
		}
	}
	if !r.Converged {
		fmt.Fprintln(out, "NOT CONVERGED")
	}
	if r.Failed() {
		fmt.Fprintln(out, "\nlast events:")
		for _, h := range r.History {
			fmt.Fprintf(out, "  %s\n", h)
		}
	}
	fmt.Fprintf(out, "\nreplay: %s\n", r.Replay())
}

// writeInFlight draws the most adds in flight in each of n slices of the
// run, one line per slice in which any were.
func (r Report) writeInFlight(out io.Writer, n int) {
	if r.MaxInFlight == 0 || r.End <= 0 {
		return
	}
	most := make([]int, n)
	slice := func(t time.Duration) int { return min(int(int64(t)*int64(n)/int64(r.End+1)), n-1) }
	for i, s := range r.InFlight {
		end := r.End
		if i+1 < len(r.InFlight) {
			end = r.InFlight[i+1].At
		}
		for k := slice(s.At); k <= slice(max(end-1, s.At)); k++ {
			most[k] = max(most[k], s.InFlight)
		}
	}
	width := r.MaxInFlight
	scale := 1
	for width/scale > 50 {
		scale++
	}
	for k, v := range most {
		if v == 0 {
			continue
		}
		from := time.Duration(int64(r.End) * int64(k) / int64(n))
		fmt.Fprintf(out, "  %s %4d %s\n", clock(from), v, strings.Repeat("#", (v+scale-1)/scale))
	}
}
