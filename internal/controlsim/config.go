package controlsim

import (
	"fmt"
	"time"

	"github.com/doppio-db/doppio/internal/controller"
	"github.com/doppio-db/doppio/internal/lifecycle"
	"github.com/doppio-db/doppio/internal/placement"
)

// Config is one simulated run. Run with the same Config replays it
// exactly.
type Config struct {
	Seed     uint64
	Scenario string // a name from Scenarios
	// Nodes and Zones are the cluster at the start: node i is in zone
	// i mod Zones.
	Nodes int
	Zones int // default 3
	// Replicas is the partition replicas of the databases at the start,
	// Databases of them (default: one per 4,096 partitions) with
	// replication factor RF (default 3).
	Replicas  int
	Databases int
	RF        int
	// MaxMoves, MaxMovesPerNode and DeadNodeDelay are the controller's
	// options (default: the controller's defaults).
	MaxMoves        int
	MaxMovesPerNode int
	DeadNodeDelay   time.Duration
	// Short shortens the long scenarios for tests: churn lasts half an
	// hour instead of two.
	Short bool
	// Tail is how long the cluster may take to converge after the last
	// event (default 24 h).
	Tail   time.Duration
	Timing Timing
	Knobs  Knobs
	// Progress, if set, is told now and then how far the simulated
	// clock has gone towards the last event.
	Progress func(now, last time.Duration)
}

// Timing is how long the modelled world takes (see the package doc);
// a pair is a range drawn from uniformly. Zero fields take defaults.
type Timing struct {
	Settle time.Duration // the controller's coalescing (50 ms)
	// Round is how long a planning round takes (0: no time): changes
	// meanwhile wait for the next round, which starts Settle after it.
	Round        time.Duration
	LeaseTTL     time.Duration    // a dead node's registration lingers (3 s)
	Election     [2]time.Duration // a leaderless group elects (0.3 to 1.5 s)
	Pass         time.Duration    // a node's lifecycle pass after a change (100 ms)
	Change       [2]time.Duration // a membership change commits (20 to 200 ms)
	FailedChange time.Duration    // a failed change's timeout (10 s)
	Snapshot     [2]time.Duration // a learner's snapshot (10 to 60 s)
	CatchUp      time.Duration    // a restarted voter catches up from the log (1 s)
	// ChangeFailure and SnapshotFailure are the probabilities that a
	// membership change fails and that a snapshot fails and starts over.
	ChangeFailure   float64 // default 0.02; negative: never
	SnapshotFailure float64 // default 0.05; negative: never
}

// Knobs replace the real decisions, so that a test can feed a broken
// one and see the simulator report it. Nil fields keep the real ones.
type Knobs struct {
	Plan func(placement.Input) (placement.Plan, error) // placement.Compute
	Next func(lifecycle.State) lifecycle.Step          // lifecycle.Next
}

// partitionsPerDatabase is the default size of a database.
const partitionsPerDatabase = 4096

func (c Config) withDefaults() Config {
	if c.Zones == 0 {
		c.Zones = 3
	}
	if c.RF == 0 {
		c.RF = 3
	}
	if c.Databases == 0 && c.RF > 0 {
		parts := c.Replicas / c.RF
		c.Databases = max(1, (parts+partitionsPerDatabase-1)/partitionsPerDatabase)
	}
	if c.MaxMoves == 0 {
		c.MaxMoves = placement.DefaultMaxMoves
	}
	if c.MaxMovesPerNode == 0 {
		c.MaxMovesPerNode = controller.DefaultMaxMovesPerNode
	}
	if c.DeadNodeDelay == 0 {
		c.DeadNodeDelay = controller.DefaultDeadNodeDelay
	}
	if c.Tail == 0 {
		c.Tail = 24 * time.Hour
	}
	c.Timing = c.Timing.withDefaults()
	return c
}

func (t Timing) withDefaults() Timing {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	pair := func(p *[2]time.Duration, lo, hi time.Duration) {
		if *p == [2]time.Duration{} {
			*p = [2]time.Duration{lo, hi}
		}
	}
	def(&t.Settle, 50*time.Millisecond)
	def(&t.LeaseTTL, 3*time.Second)
	pair(&t.Election, 300*time.Millisecond, 1500*time.Millisecond)
	def(&t.Pass, 100*time.Millisecond)
	pair(&t.Change, 20*time.Millisecond, 200*time.Millisecond)
	def(&t.FailedChange, 10*time.Second)
	pair(&t.Snapshot, 10*time.Second, 60*time.Second)
	def(&t.CatchUp, time.Second)
	if t.ChangeFailure == 0 {
		t.ChangeFailure = 0.02
	}
	if t.SnapshotFailure == 0 {
		t.SnapshotFailure = 0.05
	}
	return t
}

// check refuses a configuration the simulation cannot run.
func (c Config) check() error {
	switch {
	case c.Nodes < 1:
		return fmt.Errorf("controlsim: %d nodes, want 1 or more", c.Nodes)
	case c.Zones < 1 || c.Zones > c.Nodes:
		return fmt.Errorf("controlsim: %d zones for %d nodes, want 1 to %d", c.Zones, c.Nodes, c.Nodes)
	case c.RF < 1 || c.RF > 5:
		return fmt.Errorf("controlsim: replication factor %d, want 1 to 5", c.RF)
	case c.Replicas < c.RF:
		return fmt.Errorf("controlsim: %d replicas, want at least the replication factor %d", c.Replicas, c.RF)
	case c.Databases < 1 || c.Databases > c.Replicas/c.RF:
		return fmt.Errorf("controlsim: %d databases for %d partitions", c.Databases, c.Replicas/c.RF)
	case c.MaxMoves < 0 || c.MaxMovesPerNode < 0 || c.DeadNodeDelay < 0 || c.Tail < 0:
		return fmt.Errorf("controlsim: negative throttle, delay or tail")
	case c.Timing.Snapshot[0] > c.Timing.Snapshot[1] || c.Timing.Change[0] > c.Timing.Change[1] || c.Timing.Election[0] > c.Timing.Election[1]:
		return fmt.Errorf("controlsim: a timing range ends before it starts")
	}
	if _, ok := scenarioNamed(c.Scenario); !ok {
		return fmt.Errorf("controlsim: unknown scenario %q (want one of %v)", c.Scenario, ScenarioNames())
	}
	return nil
}
