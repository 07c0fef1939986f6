package datastream

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// randomCluster is a cluster shape drawn from a seed: nodes (some dead),
// databases placed with a replication factor each, and streams over them.
type randomCluster struct {
	nodes []string
	shape Shape
	tasks []TaskID
	dbs   map[string]int // partitions
}

func newRandomCluster(r *rand.Rand) randomCluster {
	c := randomCluster{shape: Shape{Live: map[string]bool{}, Partitions: map[PartitionRef]Placement{}}, dbs: map[string]int{}}
	n := 1 + r.IntN(9)
	for i := range n {
		id := fmt.Sprintf("n%d", i+1)
		c.nodes = append(c.nodes, id)
		c.shape.Live[id] = r.IntN(5) > 0 || i == 0
	}
	for d := range 1 + r.IntN(3) {
		db := fmt.Sprintf("db%d", d)
		parts := 1 + r.IntN(64)
		c.dbs[db] = parts
		rf := min(n, 1+r.IntN(3))
		for p := range parts {
			perm := r.Perm(n)[:rf]
			var reps []string
			for _, i := range perm {
				reps = append(reps, c.nodes[i])
			}
			c.shape.Partitions[PartitionRef{db, p}] = Placement{Nodes: reps, Leader: reps[r.IntN(rf)]}
		}
	}
	for s := range 1 + r.IntN(4) {
		db := fmt.Sprintf("db%d", r.IntN(len(c.dbs)))
		c.tasks = append(c.tasks, streamTasks(fmt.Sprintf("s%d", s), db, c.dbs[db])...)
	}
	return c
}

func streamTasks(stream, db string, parts int) []TaskID {
	var out []TaskID
	for p := range parts {
		out = append(out, TaskID{stream, db, p})
	}
	return out
}

func seeded(t *testing.T) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, 0))
}

// TestAssignPutsEveryTaskOnceOnALiveReplica: over many random cluster
// shapes, every task with a live replica is assigned exactly once, to a
// live node placed to hold its partition, and not to the preferred leader
// when another replica is live; a task without a live replica is not
// assigned. The answer does not depend on the order of the tasks.
func TestAssignPutsEveryTaskOnceOnALiveReplica(t *testing.T) {
	r := seeded(t)
	for round := range 500 {
		c := newRandomCluster(r)
		got := Assign(c.tasks, c.shape)
		assigned := 0
		for _, task := range c.tasks {
			reps := c.shape.Partitions[PartitionRef{task.DB, task.Partition}]
			var live []string
			for _, n := range reps.Nodes {
				if c.shape.Live[n] {
					live = append(live, n)
				}
			}
			node, ok := got[task]
			if len(live) == 0 {
				if ok {
					t.Fatalf("round %d: task %v has no live replica but went to %s", round, task, node)
				}
				continue
			}
			assigned++
			if !ok {
				t.Fatalf("round %d: task %v (live replicas %v) is not assigned", round, task, live)
			}
			if !slices.Contains(live, node) {
				t.Fatalf("round %d: task %v went to %s, not a live replica of %v", round, task, node, live)
			}
			if len(live) > 1 && node == reps.Leader {
				t.Fatalf("round %d: task %v went to its preferred leader %s while %v are live", round, task, node, live)
			}
		}
		if len(got) != assigned {
			t.Fatalf("round %d: %d assignments for %d assignable tasks", round, len(got), assigned)
		}
		shuffled := slices.Clone(c.tasks)
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		again := Assign(shuffled, c.shape)
		for task, n := range got {
			if again[task] != n {
				t.Fatalf("round %d: task %v went to %s, and to %s with the tasks in another order", round, task, n, again[task])
			}
		}
	}
}

// TestAssignSpreadsEvenly: with every node able to take any task (the
// usual spread placement), no node runs more than ceil(1.25 × mean) tasks,
// nor fewer than floor(mean / 1.25).
func TestAssignSpreadsEvenly(t *testing.T) {
	r := seeded(t)
	worst := 0.0
	for round := range 300 {
		nodes := 2 + r.IntN(8)
		shape, ids := liveNodes(nodes)
		parts := nodes * (1 + r.IntN(40))
		rf := min(nodes, 3)
		for p := range parts {
			// Spread: consecutive partitions start on consecutive nodes.
			var reps []string
			for k := range rf {
				reps = append(reps, ids[(p+k)%nodes])
			}
			shape.Partitions[PartitionRef{"db", p}] = Placement{Nodes: reps, Leader: reps[0]}
		}
		var tasks []TaskID
		for s := range 1 + r.IntN(3) {
			tasks = append(tasks, streamTasks(fmt.Sprintf("s%d", s), "db", parts)...)
		}
		got := Assign(tasks, shape)
		load := map[string]int{}
		for _, n := range got {
			load[n]++
		}
		limit := (len(tasks)*5 + 4*nodes - 1) / (4 * nodes) // ceil(1.25 × mean)
		for _, id := range ids {
			if load[id] > limit {
				t.Fatalf("round %d: %d nodes, %d tasks: node %s runs %d, above ceil(1.25 × mean) = %d (loads %v)", round, nodes, len(tasks), id, load[id], limit, load)
			}
			if floor := len(tasks) * 4 / (5 * nodes); rf > 1 && load[id] < floor {
				t.Fatalf("round %d: node %s runs %d tasks of %d, below floor(mean / 1.25) = %d (loads %v)", round, id, load[id], len(tasks), floor, load)
			}
			worst = max(worst, float64(load[id])*float64(nodes)/float64(len(tasks)))
		}
	}
	t.Logf("highest load: %.2f × the mean", worst)
}

// TestAssignSpreadsFewTasksExactly: a stream over a database with one or
// two partitions per node (spread placement, three replicas) runs exactly
// as many tasks on every node.
func TestAssignSpreadsFewTasksExactly(t *testing.T) {
	for nodes := 3; nodes <= 7; nodes++ {
		for k := 1; k <= 2; k++ {
			shape, ids := liveNodes(nodes)
			for p := range k * nodes {
				reps := []string{ids[p%nodes], ids[(p+1)%nodes], ids[(p+2)%nodes]}
				shape.Partitions[PartitionRef{"db", p}] = Placement{Nodes: reps, Leader: reps[0]}
			}
			load := map[string]int{}
			for _, n := range Assign(streamTasks("s", "db", k*nodes), shape) {
				load[n]++
			}
			for _, id := range ids {
				if load[id] != k {
					t.Fatalf("%d nodes, %d tasks: loads %v, want %d each", nodes, k*nodes, load, k)
				}
			}
		}
	}
}

// TestAssignIsStableUnderUnrelatedChanges: adding a stream over another
// database, or a node dying, moves few tasks besides those that must move
// (the dead node's). Rendezvous ranking keeps a task's preferences fixed;
// only the load bound can push a task to its next choice.
func TestAssignIsStableUnderUnrelatedChanges(t *testing.T) {
	r := seeded(t)
	totalTasks, movedByStream, movedByDeath, mustMove := 0, 0, 0, 0
	for round := range 200 {
		nodes := 3 + r.IntN(7)
		shape, ids := liveNodes(nodes)
		place := func(db string, parts int) {
			for p := range parts {
				perm := r.Perm(nodes)[:3]
				reps := []string{ids[perm[0]], ids[perm[1]], ids[perm[2]]}
				shape.Partitions[PartitionRef{db, p}] = Placement{Nodes: reps, Leader: reps[0]}
			}
		}
		parts := 8 + r.IntN(120)
		place("a", parts)
		place("b", 8+r.IntN(120))
		tasks := streamTasks("s1", "a", parts)
		before := Assign(tasks, shape)
		totalTasks += len(tasks)

		// A stream over another database.
		withB := append(slices.Clone(tasks), streamTasks("s2", "b", 8+r.IntN(120))...)
		after := Assign(withB, shape)
		for _, task := range tasks {
			if after[task] != before[task] {
				movedByStream++
			}
		}

		// A node dies.
		dead := ids[r.IntN(nodes)]
		shape.Live[dead] = false
		after = Assign(tasks, shape)
		for _, task := range tasks {
			switch {
			case before[task] == dead:
				mustMove++
			case after[task] != before[task]:
				movedByDeath++
			}
		}
		_ = round
	}
	t.Logf("%d tasks: a new stream elsewhere moved %d (%.1f%%); node deaths moved %d besides the %d dead nodes' tasks (%.1f%%)",
		totalTasks, movedByStream, 100*float64(movedByStream)/float64(totalTasks), movedByDeath, mustMove, 100*float64(movedByDeath)/float64(totalTasks))
	if float64(movedByStream) > 0.10*float64(totalTasks) {
		t.Errorf("a stream over another database moved %d of %d tasks (> 10%%)", movedByStream, totalTasks)
	}
	if float64(movedByDeath) > 0.15*float64(totalTasks) {
		t.Errorf("node deaths moved %d tasks of live nodes out of %d (> 15%%)", movedByDeath, totalTasks)
	}
}

// liveNodes returns a shape with nodes n1..nN live and no partitions, and
// the node ids in order.
func liveNodes(nodes int) (Shape, []string) {
	shape := Shape{Live: map[string]bool{}, Partitions: map[PartitionRef]Placement{}}
	var ids []string
	for i := range nodes {
		id := fmt.Sprintf("n%d", i+1)
		ids = append(ids, id)
		shape.Live[id] = true
	}
	return shape, ids
}
