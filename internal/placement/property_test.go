package placement

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

var (
	shapes = flag.Int("placement.shapes", 2000, "random cluster shapes TestRandomShapes tries")
	seed   = flag.Uint64("placement.seed", 1, "first seed of TestRandomShapes; rerun one failure with -placement.shapes=1 -placement.seed=N")
)

// scenario names the states TestRandomShapes starts from.
var scenarios = []string{"fresh", "balanced", "joined", "down", "gone", "removed", "draining", "garbage"}

type shape struct {
	nodes    []Node
	dbs      []Database
	maxMoves int
	slow     bool
	forget   int
	scenario string
}

func (sh shape) String() string {
	return fmt.Sprintf("%s: nodes %v, dbs %v, max moves %d, slow adds %v, forget 1 in %d calls", sh.scenario, sh.nodes, sh.dbs, sh.maxMoves, sh.slow, sh.forget)
}

func randomShape(r *rand.Rand) shape {
	var sh shape
	n := 1 + r.IntN(12)
	zones := 1 + r.IntN(5)
	roundRobin := r.IntN(2) == 0
	for i := range n {
		z := r.IntN(zones)
		if roundRobin {
			z = i % zones
		}
		sh.nodes = append(sh.nodes, Node{ID: NodeID(fmt.Sprintf("n%02d", i)), Zone: fmt.Sprintf("z%d", z)})
	}
	for i := range 1 + r.IntN(4) {
		parts := 1 + r.IntN(256)
		if r.IntN(2) == 0 {
			parts = 1 + r.IntN(32)
		}
		sh.dbs = append(sh.dbs, Database{Name: fmt.Sprintf("db%d", i), Partitions: parts, Replicas: 1 + r.IntN(min(5, n))})
	}
	sh.maxMoves = []int{1, 4, 8, 16, 64}[r.IntN(5)]
	if sh.maxMoves == 1 && totalReplicas(sh.dbs) > 300 {
		sh.maxMoves = 2 // one move per call on big shapes only costs test time
	}
	sh.slow = r.IntN(3) == 0
	sh.forget = []int{0, 0, 5, 20}[r.IntN(4)]
	sh.scenario = scenarios[r.IntN(len(scenarios))]
	return sh
}

func totalReplicas(dbs []Database) int {
	t := 0
	for _, db := range dbs {
		t += db.Partitions * db.Replicas
	}
	return t
}

// callLimit bounds the calls to converge: every replica may move once (an
// add, then a remove) and every partition change leader twice.
func callLimit(dbs []Database, maxMoves int) int {
	parts := 0
	for _, db := range dbs {
		parts += db.Partitions
	}
	return 20 + 2*(2*totalReplicas(dbs)+2*parts)/maxMoves
}

func TestRandomShapes(t *testing.T) {
	n := *shapes
	if testing.Short() {
		n = min(n, 200)
	}
	if raceShapes > 0 && !flagSet("placement.shapes") {
		n = min(n, raceShapes)
	}
	for i := range n {
		s := *seed + uint64(i)
		r := rand.New(rand.NewPCG(s, 0))
		sh := randomShape(r)
		t.Run(fmt.Sprint("seed=", s), func(t *testing.T) {
			t.Parallel()
			defer func() {
				if t.Failed() {
					t.Logf("seed %d, %v", s, sh)
				}
			}()
			runShape(t, r, sh)
		})
	}
}

func runShape(t *testing.T, r *rand.Rand, sh shape) {
	opts := Options{MaxMoves: sh.maxMoves}
	limit := callLimit(sh.dbs, sh.maxMoves)
	settle := func(nodes []Node, cur Placement) Placement {
		s := &sim{t: t, in: Input{Nodes: nodes, Databases: sh.dbs, Current: cur, Options: opts}, slowAdds: sh.slow}
		if sh.forget > 0 {
			fr := rand.New(rand.NewPCG(r.Uint64(), 1))
			s.forget = func() bool { return fr.IntN(sh.forget) == 0 }
		}
		plan := s.converge(limit)
		if v := violations(s.in, s.in.Current, plan.Unavailable); len(v) > 0 {
			t.Fatalf("converged in %d calls to a placement that breaks constraints:\n%s", s.calls, joinLines(v))
		}
		// Idempotent: a converged placement is its own target.
		again, err := Compute(s.in)
		if err != nil || len(again.Moves) > 0 || len(again.Create) > 0 {
			t.Fatalf("second call on converged placement: %v, %v", again.Moves, err)
		}
		for id, a := range s.in.Current {
			if slices.Contains(again.Unavailable, id) {
				continue
			}
			if ta := again.Target[id]; !slices.Equal(sorted(a.Replicas), ta.Replicas) || a.Leader != ta.Leader {
				t.Fatalf("target of converged %s is %v, placement %v", id, ta, a)
			}
		}
		return s.in.Current
	}
	nodes := slices.Clone(sh.nodes)
	var cur Placement
	switch sh.scenario {
	case "fresh":
		settle(nodes, nil)
		return
	case "joined":
		if len(nodes) > 1 && maxRF(sh.dbs) < len(nodes) {
			cur = settle(nodes[:len(nodes)-1], nil)
		}
	case "garbage":
		cur = garbage(r, nodes, sh.dbs)
	default:
		cur = settle(nodes, nil)
	}
	victim := r.IntN(len(nodes))
	switch sh.scenario {
	case "down":
		nodes[victim].State = Down
		// Delayed rebalancing: only leaderships move.
		plan, err := Compute(Input{Nodes: nodes, Databases: sh.dbs, Current: cur, Options: opts})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range plan.Moves {
			if m.Kind != TransferLeader {
				t.Fatalf("node down: unexpected move %v", m)
			}
		}
	case "gone":
		nodes[victim].State = Gone
	case "removed":
		nodes = slices.Delete(nodes, victim, victim+1)
		if len(nodes) == 0 {
			return
		}
	case "draining":
		nodes[victim].Draining = true
	}
	settle(nodes, cur)
}

func maxRF(dbs []Database) int {
	m := 0
	for _, db := range dbs {
		m = max(m, db.Replicas)
	}
	return m
}

func sorted(ns []NodeID) []NodeID {
	ns = slices.Clone(ns)
	slices.Sort(ns)
	return ns
}

// garbage is an arbitrary current placement: some partitions missing, some
// under- or over-replicated, zones ignored, leaders anywhere or nowhere.
func garbage(r *rand.Rand, nodes []Node, dbs []Database) Placement {
	p := Placement{}
	for _, db := range dbs {
		for i := range db.Partitions {
			if r.IntN(10) == 0 {
				continue
			}
			perm := r.Perm(len(nodes))
			k := 1 + r.IntN(min(len(nodes), db.Replicas+1))
			var a Assignment
			for _, j := range perm[:k] {
				a.Replicas = append(a.Replicas, nodes[j].ID)
			}
			if r.IntN(5) > 0 {
				a.Leader = a.Replicas[r.IntN(k)]
			}
			p[PartitionID{db.Name, i}] = a
		}
	}
	return p
}

func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
