package placement

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestComputeData runs the cluster states of testdata/compute through
// Compute. A compute directive's input lists the nodes, databases and
// current replicas, one per line:
//
//	node n1 zone=a state=down draining
//	db d partitions=1 replicas=3
//	place d/0 replicas=(n1,n2,n3) leader=n1 learners=(n4)
//	options max-moves=8 max-moves-per-node=2
//
// and its answer is the plan (creations, moves, pending moves, partitions
// left unavailable) or the error.
func TestComputeData(t *testing.T) {
	datadriven.RunTest(t, "testdata/compute", func(t *testing.T, d *datadriven.TestData) string {
		if d.Cmd != "compute" {
			d.Fatalf(t, "unknown directive %s", d.Cmd)
		}
		plan, err := Compute(parseInput(t, d))
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		return renderPlan(plan)
	})
}

// parseInput reads a compute directive's cluster state.
func parseInput(t *testing.T, d *datadriven.TestData) Input {
	in := Input{Current: Placement{}}
	for line := range strings.Lines(d.Input) {
		cmd, args, err := datadriven.ParseLine(line)
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		arg := func(key string) []string {
			for _, a := range args {
				if a.Key == key {
					return a.Vals
				}
			}
			return nil
		}
		one := func(key string) string {
			if v := arg(key); len(v) > 0 {
				return v[0]
			}
			return ""
		}
		num := func(key string) int {
			var n int
			if s := one(key); s != "" {
				if _, err := fmt.Sscan(s, &n); err != nil {
					d.Fatalf(t, "%s=%s: %v", key, s, err)
				}
			}
			return n
		}
		nodes := func(key string) []NodeID {
			var out []NodeID
			for _, v := range arg(key) {
				out = append(out, NodeID(v))
			}
			return out
		}
		name := func() string {
			if len(args) == 0 || args[0].Vals != nil {
				d.Fatalf(t, "%s: want a name first: %s", cmd, line)
			}
			return args[0].Key
		}
		switch cmd {
		case "node":
			n := Node{ID: NodeID(name()), Zone: one("zone"), Draining: slices.ContainsFunc(args, func(a datadriven.CmdArg) bool { return a.Key == "draining" })}
			switch s := one("state"); s {
			case "", "alive":
			case "down":
				n.State = Down
			case "gone":
				n.State = Gone
			default:
				d.Fatalf(t, "unknown state %s", s)
			}
			in.Nodes = append(in.Nodes, n)
		case "db":
			in.Databases = append(in.Databases, Database{Name: name(), Partitions: num("partitions"), Replicas: num("replicas")})
		case "place":
			var id PartitionID
			db, idx, _ := strings.Cut(name(), "/")
			id.Database = db
			if _, err := fmt.Sscan(idx, &id.Index); err != nil {
				d.Fatalf(t, "partition %s: %v", name(), err)
			}
			in.Current[id] = Assignment{Replicas: nodes("replicas"), Learners: nodes("learners"), Leader: NodeID(one("leader"))}
		case "options":
			in.Options = Options{MaxMoves: num("max-moves"), MaxMovesPerNode: num("max-moves-per-node")}
		default:
			d.Fatalf(t, "unknown line %s", line)
		}
	}
	return in
}

// renderPlan writes a plan's creations in partition order, its moves in
// order, and its pending and unavailable partitions.
func renderPlan(p Plan) string {
	var b strings.Builder
	ids := make([]PartitionID, 0, len(p.Create))
	for id := range p.Create {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b PartitionID) int {
		if a.less(b) {
			return -1
		}
		if b.less(a) {
			return 1
		}
		return 0
	})
	for _, id := range ids {
		a := p.Create[id]
		fmt.Fprintf(&b, "create %s replicas=%v leader=%s\n", id, a.Replicas, a.Leader)
	}
	for _, m := range p.Moves {
		fmt.Fprintf(&b, "%s\n", m)
	}
	if p.Pending > 0 {
		fmt.Fprintf(&b, "pending %d\n", p.Pending)
	}
	for _, id := range p.Unavailable {
		fmt.Fprintf(&b, "unavailable %s\n", id)
	}
	if b.Len() == 0 {
		return "nothing to do\n"
	}
	return b.String()
}
