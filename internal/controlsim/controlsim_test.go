package controlsim

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/doppio-db/doppio/internal/placement"
)

// small is the cluster the tests simulate: three zones of two nodes,
// two databases of 12 partitions × 3, so that every scenario moves
// replicas across zones and the whole test stays short under -race.
func small(scenario string, seed uint64) Config {
	return Config{Scenario: scenario, Seed: seed, Nodes: 6, Zones: 3, Replicas: 2 * 12 * 3, Databases: 2, Short: true}
}

func run(t *testing.T, c Config) Report {
	t.Helper()
	r, err := Run(c)
	if err != nil {
		t.Fatalf("scenario %s, seed %d: %v", c.Scenario, c.Seed, err)
	}
	t.Logf("scenario %s, seed %d: %d events, %d rounds, %d adds (ideal %d), simulated %s in %s (planning %s)",
		c.Scenario, c.Seed, len(r.Events), r.Rounds, r.Moves.Adds, r.Moves.Ideal, clock(r.End), r.Wall, r.Planning)
	return r
}

// written is the report as a person reads it, for a failure's message.
func written(r Report) string {
	var b strings.Builder
	r.Write(&b)
	return b.String()
}

func TestScenariosConvergeWithoutBreakingAnInvariant(t *testing.T) {
	// Outages shorter than the dead-node delay move leaderships only.
	noAdds := map[string]bool{"zone-outage": true, "rolling-restart": true}
	for _, name := range ScenarioNames() {
		t.Run(name, func(t *testing.T) {
			r := run(t, small(name, 2))
			if r.Failed() {
				t.Fatalf("the run failed:\n%s", written(r))
			}
			for _, e := range r.Events {
				if !e.Converged {
					t.Errorf("%s at %s never converged", e.What, clock(e.At))
				}
			}
			m := r.Moves
			switch {
			case noAdds[name] && m.Adds != 0:
				t.Errorf("%d replica adds, want none:\n%s", m.Adds, written(r))
			case !noAdds[name] && (m.Ideal == 0 || m.Adds < m.Ideal):
				t.Errorf("%d replica adds against %d ideal, want at least one and at least the ideal:\n%s", m.Adds, m.Ideal, written(r))
			}
			// Placement's own guarantee, whatever the zones' sizes.
			if r.Balance.Replicas > 1 {
				t.Errorf("replicas within a zone differ by %d at the end, want at most 1:\n%s", r.Balance.Replicas, written(r))
			}
			if r.MaxInFlight > r.Setup.MaxMoves || r.MaxInFlightPerNode > r.Setup.MaxMovesPerNode {
				t.Errorf("%d adds in flight, %d to one node, past the throttles", r.MaxInFlight, r.MaxInFlightPerNode)
			}
		})
	}
}

func TestTheSameSeedReplaysExactly(t *testing.T) {
	c := small("node-loss", 7)
	a, b := run(t, c), run(t, c)
	a.Wall, a.Planning, b.Wall, b.Planning = 0, 0, 0, 0
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two runs of seed %d differ:\n%s\n---\n%s", c.Seed, written(a), written(b))
	}
	o := run(t, small("node-loss", 8))
	if reflect.DeepEqual(a.Events, o.Events) {
		t.Fatalf("seeds 7 and 8 drew the same events: %v", a.Events)
	}
}

// violated returns the violations of kind k.
func violated(r Report, k ViolationKind) []Violation {
	var out []Violation
	for _, v := range r.Violations {
		if v.Kind == k {
			out = append(out, v)
		}
	}
	return out
}

func TestAPlannerIgnoringTheThrottleIsReported(t *testing.T) {
	// A drained node's replicas (12) are more than --max-moves, and more
	// than --max-moves-per-node to the other node of its zone.
	c := small("drain", 1)
	c.MaxMoves = 8
	c.Knobs.Plan = func(in placement.Input) (placement.Plan, error) {
		in.Options.MaxMoves, in.Options.MaxMovesPerNode = 1000, 0
		return placement.Compute(in)
	}
	r := run(t, c)
	vs := violated(r, Throttle)
	perNode := slices.ContainsFunc(vs, func(v Violation) bool { return v.Node != "" })
	total := slices.ContainsFunc(vs, func(v Violation) bool { return v.Node == "" })
	if !perNode || !total {
		t.Fatalf("throttle violations %v, want one in total and one per node:\n%s", vs, written(r))
	}
}

func TestAPlannerShrinkingPartitionsIsReported(t *testing.T) {
	c := small("expand", 1)
	// Once the databases exist, it reads their replication factor one
	// too low.
	c.Knobs.Plan = func(in placement.Input) (placement.Plan, error) {
		if len(in.Current) == 0 {
			return placement.Compute(in)
		}
		in.Databases = slices.Clone(in.Databases)
		for i := range in.Databases {
			in.Databases[i].Replicas--
		}
		return placement.Compute(in)
	}
	r := run(t, c)
	if len(violated(r, Replication)) == 0 {
		t.Fatalf("no replication violation:\n%s", written(r))
	}
}

func TestAPlannerBlindToZonesIsReported(t *testing.T) {
	c := small("expand", 1)
	c.Knobs.Plan = func(in placement.Input) (placement.Plan, error) {
		in.Nodes = slices.Clone(in.Nodes)
		for i := range in.Nodes {
			in.Nodes[i].Zone = ""
		}
		return placement.Compute(in)
	}
	r := run(t, c)
	if len(violated(r, Zone)) == 0 {
		t.Fatalf("no zone violation:\n%s", written(r))
	}
}

func TestABadConfigurationIsRefused(t *testing.T) {
	for _, c := range []Config{
		{Scenario: "day", Nodes: 0, Replicas: 3},
		{Scenario: "day", Nodes: 3, Replicas: 2},
		{Scenario: "day", Nodes: 3, Zones: 4, Replicas: 3},
		{Scenario: "day", Nodes: 3, Replicas: 3, RF: 6},
		{Scenario: "no-such", Nodes: 3, Replicas: 3},
	} {
		if _, err := Run(c); err == nil {
			t.Errorf("%+v ran", c)
		}
	}
}
