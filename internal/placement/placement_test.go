package placement

import (
	"fmt"
	"slices"
	"testing"
)

func nodesIn(zones ...string) []Node {
	var ns []Node
	for i, z := range zones {
		ns = append(ns, Node{ID: NodeID(fmt.Sprintf("n%d", i+1)), Zone: z})
	}
	return ns
}

// converged runs the controller loop from cur to a fixed point and returns
// the placement and the moves made.
func converged(t *testing.T, in Input) (Placement, []Move) {
	t.Helper()
	s := &sim{t: t, in: in}
	var all []Move
	for {
		plan, changed := s.step()
		all = append(all, plan.Moves...)
		if !changed {
			if v := violations(s.in, s.in.Current, plan.Unavailable); len(v) > 0 {
				t.Fatalf("constraints broken:\n%s", joinLines(v))
			}
			return s.in.Current, all
		}
		if s.calls > 10000 {
			t.Fatal("no convergence")
		}
	}
}

func count(ms []Move, k MoveKind) int {
	n := 0
	for _, m := range ms {
		if m.Kind == k {
			n++
		}
	}
	return n
}

// spreadOf returns max - min of f over the given nodes.
func spreadOf(nodes []Node, f func(NodeID) int) int {
	lo, hi := 1<<30, -1
	for _, n := range nodes {
		v := f(n.ID)
		lo, hi = min(lo, v), max(hi, v)
	}
	return hi - lo
}

func assertEven(t *testing.T, p Placement, nodes []Node) {
	t.Helper()
	c := Count(p)
	if d := spreadOf(nodes, func(n NodeID) int { return c.Total[n].Replicas }); d > 1 {
		t.Errorf("replicas spread %d: %v", d, c.Total)
	}
	if d := spreadOf(nodes, func(n NodeID) int { return c.Total[n].Leaders }); d > 1 {
		t.Errorf("leaders spread %d: %v", d, c.Total)
	}
}

func zonesOf(nodes []Node, ids []NodeID) map[string]int {
	z := map[string]int{}
	for _, id := range ids {
		for _, n := range nodes {
			if n.ID == id {
				z[n.Zone]++
			}
		}
	}
	return z
}

func TestNewDatabaseOnThreeZonesIsPlacedInOneCall(t *testing.T) {
	nodes := nodesIn("a", "b", "c")
	in := Input{Nodes: nodes, Databases: []Database{{Name: "mail", Partitions: 64, Replicas: 3}}}
	plan, err := Compute(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Moves) != 0 || len(plan.Create) != 64 {
		t.Fatalf("want 64 creations and no moves, got %d, %v", len(plan.Create), plan.Moves)
	}
	for id, a := range plan.Create {
		if z := zonesOf(nodes, a.Replicas); len(z) != 3 {
			t.Errorf("%s replicas %v not on 3 zones", id, a.Replicas)
		}
	}
	assertEven(t, plan.Create, nodes)
	// Created as planned, nothing more to do.
	in.Current = plan.Create
	if again, _ := Compute(in); len(again.Moves)+len(again.Create) != 0 {
		t.Fatalf("second call: %v", again.Moves)
	}
}

func TestSixNodesThreeZonesRF3(t *testing.T) {
	nodes := nodesIn("a", "b", "c", "a", "b", "c")
	p, _ := converged(t, Input{Nodes: nodes, Databases: []Database{{Name: "d", Partitions: 120, Replicas: 3}}})
	for id, a := range p {
		if z := zonesOf(nodes, a.Replicas); len(z) != 3 {
			t.Errorf("%s replicas %v not on 3 zones", id, a.Replicas)
		}
	}
	c := Count(p)
	for _, n := range nodes {
		if got := c.Total[n.ID]; got.Replicas != 60 || got.Leaders != 20 {
			t.Errorf("%s holds %+v, want 60 replicas, 20 leaders", n.ID, got)
		}
	}
}

func TestNodeJoinMovesOnlyItsShare(t *testing.T) {
	nodes := nodesIn("z", "z", "z", "z", "z", "z")
	dbs := []Database{{Name: "d", Partitions: 210, Replicas: 3}}
	before, _ := converged(t, Input{Nodes: nodes, Databases: dbs})
	nodes = append(nodes, Node{ID: "n7", Zone: "z"})
	after, moves := converged(t, Input{Nodes: nodes, Databases: dbs, Current: before, Options: Options{MaxMoves: 8}})
	// 630 replicas over 7 nodes: the new node takes 90, nothing else moves.
	if adds := count(moves, AddReplica); adds != 90 {
		t.Errorf("%d replicas moved, want 90 (1/7 of 630)", adds)
	}
	for _, m := range moves {
		if m.Kind == AddReplica && m.To != "n7" {
			t.Errorf("move %v does not go to the new node", m)
		}
	}
	assertEven(t, after, nodes)
}

func TestDownNodeKeepsReplicasAndLosesLeaderships(t *testing.T) {
	nodes := nodesIn("a", "b", "c", "a", "b", "c")
	dbs := []Database{{Name: "d", Partitions: 96, Replicas: 3}}
	cur, _ := converged(t, Input{Nodes: nodes, Databases: dbs})
	led := Count(cur).Total["n1"].Leaders
	nodes[0].State = Down
	after, moves := converged(t, Input{Nodes: nodes, Databases: dbs, Current: cur, Options: Options{MaxMoves: 100}})
	// Every leadership of the down node moves; the other transfers spread
	// leaders over the live nodes.
	from := 0
	for _, m := range moves {
		if m.Kind != TransferLeader {
			t.Errorf("unexpected move %v", m)
		}
		if m.From == "n1" {
			from++
		}
	}
	if from != led {
		t.Errorf("%d transfers from the down node, want %d", from, led)
	}
	c := Count(after)
	if c.Total["n1"].Replicas != Count(cur).Total["n1"].Replicas || c.Total["n1"].Leaders != 0 {
		t.Errorf("down node holds %+v", c.Total["n1"])
	}
	if d := spreadOf(nodes[1:], func(n NodeID) int { return c.Total[n].Leaders }); d > 1 {
		t.Errorf("leaders of live nodes spread %d: %v", d, c.Total)
	}
}

func TestGoneNodeReplicasAreRecreatedAcrossZones(t *testing.T) {
	nodes := nodesIn("a", "b", "c", "a", "b", "c")
	dbs := []Database{{Name: "d", Partitions: 96, Replicas: 3}}
	cur, _ := converged(t, Input{Nodes: nodes, Databases: dbs})
	held := Count(cur).Total["n1"].Replicas
	nodes[0].State = Gone
	after, moves := converged(t, Input{Nodes: nodes, Databases: dbs, Current: cur, Options: Options{MaxMoves: 8}})
	if adds := count(moves, AddReplica); adds != held {
		t.Errorf("%d adds, want %d (the gone node's replicas)", adds, held)
	}
	for id, a := range after {
		if len(a.Replicas) != 3 || slices.Contains(a.Replicas, "n1") || len(zonesOf(nodes, a.Replicas)) != 3 {
			t.Errorf("%s: %v", id, a.Replicas)
		}
		if a.Leader == "n1" {
			t.Errorf("%s led by gone node", id)
		}
	}
	// Zone a has one node left: it holds a replica of every partition.
	if got := Count(after).Total["n4"].Replicas; got != 96 {
		t.Errorf("n4 holds %d, want 96", got)
	}
}

func TestRF5OnThreeZones(t *testing.T) {
	nodes := nodesIn("a", "b", "c", "a", "b", "c", "a")
	p, _ := converged(t, Input{Nodes: nodes, Databases: []Database{{Name: "d", Partitions: 70, Replicas: 5}}})
	for id, a := range p {
		z := zonesOf(nodes, a.Replicas)
		if len(a.Replicas) != 5 || len(z) != 3 || z["a"] > 2 || z["b"] > 2 || z["c"] > 2 {
			t.Errorf("%s: %v, zones %v", id, a.Replicas, z)
		}
	}
	// Zone a (3 nodes) can hold at most 2 of every 5 replicas, so its nodes
	// hold fewer than b's and c's; within each zone replicas are even
	// (checked by converged), and leaders are even everywhere.
	c := Count(p)
	if d := spreadOf(nodes, func(n NodeID) int { return c.Total[n].Leaders }); d > 1 {
		t.Errorf("leaders spread %d: %v", d, c.Total)
	}
}

func TestOneNodeRF1(t *testing.T) {
	nodes := nodesIn("")
	p, moves := converged(t, Input{Nodes: nodes, Databases: []Database{{Name: "d", Partitions: 8, Replicas: 1}}})
	if len(moves) != 0 || len(p) != 8 {
		t.Fatalf("%d partitions, moves %v", len(p), moves)
	}
	for id, a := range p {
		if !slices.Equal(a.Replicas, []NodeID{"n1"}) || a.Leader != "n1" {
			t.Errorf("%s: %+v", id, a)
		}
	}
}

func TestThrottleCountsMovesInFlight(t *testing.T) {
	nodes := nodesIn("z", "z", "z", "z")
	dbs := []Database{{Name: "d", Partitions: 40, Replicas: 2}}
	cur, _ := converged(t, Input{Nodes: nodes, Databases: dbs})
	nodes = append(nodes, Node{ID: "n5", Zone: "z"})
	in := Input{Nodes: nodes, Databases: dbs, Current: cur, Options: Options{MaxMoves: 3}}
	plan, _ := Compute(in)
	if count(plan.Moves, AddReplica) != 3 || plan.Pending == 0 {
		t.Fatalf("want 3 adds and more pending, got %v, pending %d", plan.Moves, plan.Pending)
	}
	// Two adds are in flight (learners): one more may start.
	cur = clone(cur)
	for _, m := range plan.Moves[:2] {
		a := cur[m.Partition]
		a.Learners = append(a.Learners, m.To)
		cur[m.Partition] = a
	}
	in.Current, in.Previous = cur, plan.Target
	plan, _ = Compute(in)
	if count(plan.Moves, AddReplica) != 1 {
		t.Fatalf("with 2 in flight of 3, want 1 add, got %v", plan.Moves)
	}
	for _, m := range plan.Moves {
		if m.Kind == RemoveReplica {
			t.Fatalf("remove before its add completed: %v", m)
		}
	}
}

func TestPerNodeThrottleSpreadsAddsOverJoiningNodes(t *testing.T) {
	nodes := nodesIn("z", "z", "z")
	dbs := []Database{{Name: "d", Partitions: 60, Replicas: 3}}
	cur, _ := converged(t, Input{Nodes: nodes, Databases: dbs})
	nodes = append(nodes, Node{ID: "n4", Zone: "z"}, Node{ID: "n5", Zone: "z"})
	in := Input{Nodes: nodes, Databases: dbs, Current: cur, Options: Options{MaxMoves: 16, MaxMovesPerNode: 2}}
	plan, _ := Compute(in)
	to := map[NodeID]int{}
	for _, m := range plan.Moves {
		if m.Kind == AddReplica {
			to[m.To]++
		}
	}
	if to["n4"] != 2 || to["n5"] != 2 || len(to) != 2 || plan.Pending == 0 {
		t.Fatalf("want 2 adds to each new node and more pending, got %v (pending %d)", plan.Moves, plan.Pending)
	}
	// One add to n4 is in flight: one more may start there, none on n5
	// beyond its two.
	cur = clone(cur)
	for _, m := range plan.Moves {
		if m.Kind == AddReplica && m.To == "n4" {
			a := cur[m.Partition]
			a.Learners = append(a.Learners, m.To)
			cur[m.Partition] = a
			break
		}
	}
	in.Current, in.Previous = cur, plan.Target
	plan, _ = Compute(in)
	to = map[NodeID]int{}
	for _, m := range plan.Moves {
		if m.Kind == AddReplica {
			to[m.To]++
		}
	}
	if to["n4"] != 1 || to["n5"] != 2 {
		t.Fatalf("with one add in flight on n4 and a bound of 2 per node, want 1 more to n4 and 2 to n5, got %v", plan.Moves)
	}
	// The bound slows the expansion down but ends at the same even spread.
	after, moves := converged(t, in)
	// 180 replicas over 5 nodes: the new nodes take 36 each, one of them
	// already in flight.
	if adds := count(moves, AddReplica); adds != 71 {
		t.Fatalf("%d more adds, want 71 (2/5 of 180 replicas, less the one in flight)", adds)
	}
	assertEven(t, after, nodes)
}

func TestDrainingNodeIsEmptied(t *testing.T) {
	nodes := nodesIn("a", "b", "c", "a", "b", "c")
	dbs := []Database{{Name: "d", Partitions: 48, Replicas: 3}}
	cur, _ := converged(t, Input{Nodes: nodes, Databases: dbs})
	nodes[2].Draining = true
	after, _ := converged(t, Input{Nodes: nodes, Databases: dbs, Current: cur})
	if got := Count(after).Total["n3"]; got != (Load{}) {
		t.Fatalf("draining node still holds %+v", got)
	}
}

func TestShardedMySQLLayout(t *testing.T) {
	nodes := nodesIn("a", "b", "c", "a", "b", "c")
	dbs := []Database{{Name: "d", Partitions: 64, Replicas: 3}}
	in := Input{Nodes: nodes, Databases: dbs, Options: Options{Mode: ShardedMySQL}}
	p, _ := converged(t, in)
	c := Count(p)
	var leaders []NodeID
	for _, n := range nodes {
		l := c.Total[n.ID]
		switch {
		case l.Leaders == 0:
		case l.Leaders == l.Replicas:
			leaders = append(leaders, n.ID)
		default:
			t.Errorf("%s mixes leaders and followers: %+v", n.ID, l)
		}
		if l.Replicas != 32 {
			t.Errorf("%s holds %d replicas, want 32", n.ID, l.Replicas)
		}
	}
	if len(leaders) != 2 {
		t.Fatalf("want 2 leading nodes (2 groups of 3), got %v", leaders)
	}
	for id, a := range p {
		if len(zonesOf(nodes, a.Replicas)) != 3 {
			t.Errorf("%s: group %v not on 3 zones", id, a.Replicas)
		}
	}
	// The leading node dies: one follower takes over all its partitions.
	for i := range nodes {
		if nodes[i].ID == leaders[0] {
			nodes[i].State = Down
		}
	}
	in.Current, in.Options.MaxMoves = p, 100
	after, _ := converged(t, in)
	c = Count(after)
	took := 0
	for _, n := range nodes {
		if l := c.Total[n.ID]; l.Leaders != 0 && l.Leaders != l.Replicas {
			t.Errorf("%s mixes after failover: %+v", n.ID, l)
		} else if l.Leaders == 32 {
			took++
		}
	}
	if took != 2 {
		t.Errorf("want 2 nodes leading 32 each after failover, got %v", c.Total)
	}
}

// BenchmarkInitialPlacement2048x3On6 and BenchmarkNodeJoin2048x3On6 time
// one planning call; a join replans hundreds of moves in one call, which
// the controller makes each time a batch of moves completes. Results:
// docs/benchmarks/micro.md.
func BenchmarkInitialPlacement2048x3On6(b *testing.B) {
	in := Input{Nodes: nodesIn("a", "b", "c", "a", "b", "c"), Databases: []Database{{Name: "d", Partitions: 2048, Replicas: 3}}}
	for b.Loop() {
		if _, err := Compute(in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNodeJoin2048x3On6(b *testing.B) {
	nodes := nodesIn("a", "b", "c", "a", "b", "c")
	dbs := []Database{{Name: "d", Partitions: 2048, Replicas: 3}}
	plan, _ := Compute(Input{Nodes: nodes, Databases: dbs})
	in := Input{Nodes: append(nodes, Node{ID: "n7", Zone: "a"}), Databases: dbs, Current: plan.Create}
	for b.Loop() {
		if _, err := Compute(in); err != nil {
			b.Fatal(err)
		}
	}
}
