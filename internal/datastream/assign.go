package datastream

import (
	"math"
	"slices"
	"strconv"

	"github.com/cespare/xxhash/v2"
)

// TaskID names one task: a datastream's reading of one partition.
type TaskID struct {
	Stream    string
	DB        string
	Partition int
}

func (t TaskID) String() string { return t.Stream + "/" + strconv.Itoa(t.Partition) }

// PartitionRef names a partition of a database.
type PartitionRef struct {
	DB        string
	Partition int
}

// Placement is where a partition is placed: its replicas' node ids and
// its preferred leader.
type Placement struct {
	Nodes  []string
	Leader string
}

// Shape is what assignment depends on: the live nodes and the placement.
type Shape struct {
	Live       map[string]bool
	Partitions map[PartitionRef]Placement
}

type cand struct {
	task  TaskID
	order uint64
	nodes []string // ranked, best first
}

// loadSlack is how far above the mean a node's task count may go (25%)
// before tasks that hash to it go to their next candidate.
const loadSlack = 1.25

// Assign places each task on a node; a task left out has no live replica.
// It is a pure function of its inputs, so every node computes the same
// answer from the same view. The package doc ("Assignment") gives the
// candidates, the ranking and the load limits.
func Assign(tasks []TaskID, s Shape) map[TaskID]string {
	var cs []cand
	eligible := map[string]bool{}
	for _, t := range tasks {
		r := s.Partitions[PartitionRef{t.DB, t.Partition}]
		var live []string
		for _, n := range r.Nodes {
			if s.Live[n] && !slices.Contains(live, n) {
				live = append(live, n)
			}
		}
		if len(live) > 1 {
			if i := slices.Index(live, r.Leader); i >= 0 {
				live = slices.Delete(live, i, i+1)
			}
		}
		if len(live) == 0 {
			continue
		}
		key := t.String() + "\x00" + t.DB
		w := make(map[string]uint64, len(live))
		for _, n := range live {
			w[n] = xxhash.Sum64String(key + "\x00" + n)
			eligible[n] = true
		}
		slices.SortFunc(live, func(a, b string) int {
			switch {
			case w[a] > w[b]:
				return -1
			case w[a] < w[b]:
				return 1
			}
			return compareStrings(a, b)
		})
		cs = append(cs, cand{task: t, order: xxhash.Sum64String(key), nodes: live})
	}
	slices.SortFunc(cs, func(a, b cand) int {
		switch {
		case a.order < b.order:
			return -1
		case a.order > b.order:
			return 1
		}
		return compareStrings(a.task.String()+a.task.DB, b.task.String()+b.task.DB)
	})
	out := make(map[TaskID]string, len(cs))
	if len(cs) == 0 {
		return out
	}
	// Tight (ceil of the mean) while tasks are few, 25% slack once a
	// node has several: slack keeps tasks still when others come and go.
	mean := float64(len(cs)) / float64(len(eligible))
	limit, floor := int(loadSlack*mean), int(mean/loadSlack)
	if c := int(math.Ceil(mean)); c >= limit {
		limit, floor = c, int(mean)
	}
	load := map[string]int{}
	for _, c := range cs {
		pick := ""
		for _, n := range c.nodes {
			if load[n] < limit {
				pick = n
				break
			}
		}
		if pick == "" {
			pick = c.nodes[0]
			for _, n := range c.nodes[1:] {
				if load[n] < load[pick] {
					pick = n
				}
			}
		}
		load[pick]++
		out[c.task] = pick
	}
	// Hashing bounds loads from above only: a node can lose every draw.
	// A node below the floor takes a task it can run from a node with at
	// least two more, directly or along a shortest chain of such moves
	// (n takes a task of a, a one of b, ... from a loaded node).
	nodes := make([]string, 0, len(eligible))
	for n := range eligible {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	owners := make([]string, len(cs))
	for i, c := range cs {
		owners[i] = out[c.task]
	}
	for _, n := range nodes {
		for load[n] < floor && shiftTo(n, cs, owners, load) {
		}
	}
	for i, c := range cs {
		out[c.task] = owners[i]
	}
	return out
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// shiftTo moves one task's worth of load to node n from a node carrying
// at least two more, along the shortest chain of reassignments (each task
// moving to one of its candidates), breadth first in a deterministic
// order. It reports false when no chain exists.
func shiftTo(n string, cs []cand, owners []string, load map[string]int) bool {
	type step struct {
		task int    // the task that moves ...
		to   string // ... to this node
	}
	via := map[string]step{n: {-1, ""}}
	queue := []string{n}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		for i, c := range cs {
			o := owners[i]
			if _, seen := via[o]; seen || !slices.Contains(c.nodes, u) {
				continue
			}
			via[o] = step{i, u}
			if load[o] > load[n]+1 {
				load[o]--
				load[n]++
				for x := o; x != n; {
					st := via[x]
					owners[st.task] = st.to
					x = st.to
				}
				return true
			}
			queue = append(queue, o)
		}
	}
	return false
}
