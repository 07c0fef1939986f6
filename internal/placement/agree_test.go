package placement

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// TestSearchesAgreeWithScans drives random clusters, small and wide,
// through the controller loop from a fresh or arbitrary placement, then
// through one event (nodes join, a node goes down, is gone or drains, a
// zone is lost, a database is created), and holds every plan to the one
// the plain scans (reference) make from the same input, call by call.
func TestSearchesAgreeWithScans(t *testing.T) {
	n := 120
	if testing.Short() || raceShapes > 0 {
		n = 40
	}
	for i := range n {
		s := *seed + uint64(i)
		r := rand.New(rand.NewPCG(s, 7))
		sh := randomShape(r)
		if i%2 == 1 {
			sh = wideShape(r)
		}
		event := agreeEvents[r.IntN(len(agreeEvents))]
		t.Run(fmt.Sprint("seed=", s), func(t *testing.T) {
			t.Parallel()
			defer func() {
				if t.Failed() {
					t.Logf("seed %d, event %s, %v", s, event, sh)
				}
			}()
			runAgreeing(t, r, sh, event)
		})
	}
}

var agreeEvents = []string{"join", "down", "gone", "drain", "zone-down", "zone-gone", "create", "garbage"}

// wideShape is a cluster of 10 to 40 nodes over zones of uneven sizes,
// where many nodes tie on load and many pairs of nodes cannot trade a
// replica without breaking zones.
func wideShape(r *rand.Rand) shape {
	var sh shape
	n := 10 + r.IntN(31)
	zones := 1 + r.IntN(5)
	for i := range n {
		z := i % zones
		if r.IntN(4) == 0 {
			z = r.IntN(zones)
		}
		sh.nodes = append(sh.nodes, Node{ID: NodeID(fmt.Sprintf("n%02d", i)), Zone: fmt.Sprintf("z%d", z)})
	}
	for i := range 1 + r.IntN(2) {
		sh.dbs = append(sh.dbs, Database{Name: fmt.Sprintf("db%d", i), Partitions: 1 + r.IntN(120), Replicas: 1 + r.IntN(min(5, n))})
	}
	sh.maxMoves = []int{16, 64}[r.IntN(2)]
	sh.slow = r.IntN(3) == 0
	sh.scenario = "wide"
	return sh
}

// agree computes in's plan with the fast searches and with the scans and
// fails unless they are the same.
func agree(t *testing.T, in Input) {
	t.Helper()
	fast, err := compute(in, knobs{})
	ref, refErr := compute(in, reference())
	if fmt.Sprint(err) != fmt.Sprint(refErr) {
		t.Fatalf("errors differ: %v, reference %v", err, refErr)
	}
	if !reflect.DeepEqual(fast, ref) {
		var diff []string
		for id, a := range ref.Target {
			if b := fast.Target[id]; !reflect.DeepEqual(a, b) {
				diff = append(diff, fmt.Sprintf("%s: %v, reference %v", id, b, a))
			}
		}
		slices.Sort(diff)
		t.Fatalf("plans differ:\nmoves %v\nreference %v\ntargets:\n%s", fast.Moves, ref.Moves, joinLines(diff))
	}
}

func runAgreeing(t *testing.T, r *rand.Rand, sh shape, event string) {
	nodes, dbs := slices.Clone(sh.nodes), slices.Clone(sh.dbs)
	settle := func(cur Placement) Placement {
		s := &sim{t: t, in: Input{Nodes: nodes, Databases: dbs, Current: cur, Options: Options{MaxMoves: sh.maxMoves}}, slowAdds: sh.slow}
		for range callLimit(dbs, sh.maxMoves) {
			agree(t, s.in)
			if _, changed := s.step(); !changed {
				return s.in.Current
			}
		}
		t.Fatalf("no convergence after %d calls", s.calls)
		return nil
	}
	if event == "garbage" {
		settle(garbage(r, nodes, dbs))
		return
	}
	cur := settle(nil)
	v := r.IntN(len(nodes))
	switch event {
	case "join":
		for i := range 1 + r.IntN(3) {
			nodes = append(nodes, Node{ID: NodeID(fmt.Sprintf("new%d", i)), Zone: nodes[r.IntN(len(nodes))].Zone})
		}
	case "down":
		nodes[v].State = Down
	case "gone":
		nodes[v].State = Gone
	case "drain":
		nodes[v].Draining = true
	case "zone-down", "zone-gone":
		lost := nodes[v].Zone
		for i := range nodes {
			if nodes[i].Zone == lost {
				nodes[i].State = map[string]NodeState{"zone-down": Down, "zone-gone": Gone}[event]
			}
		}
	case "create":
		dbs = append(dbs, Database{Name: "created", Partitions: 1 + r.IntN(200), Replicas: 1 + r.IntN(min(5, len(nodes)))})
	}
	settle(cur)
}
