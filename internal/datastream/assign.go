package datastream

import (
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

// loadSlack is how far above the mean a node's task count may go (25%)
// before tasks that hash to it go to their next candidate.
const loadSlack = 1.25

// Assign places each task on a node; a task left out has no live replica.
// It is a pure function of its inputs, so every node computes the same
// answer from the same view:
//
//   - a task's candidates are the live nodes placed to hold a replica of
//     its partition, without the partition's preferred leader when another
//     one is live (reading there would load the node that takes writes);
//   - candidates are ranked by a hash of (task, node) — rendezvous
//     hashing, so a change elsewhere does not reorder a task's choices —
//     and a task takes its first candidate that has fewer than
//     ceil(1.25 × tasks / nodes) tasks, visiting tasks in hash order; when
//     all its candidates are full it takes the least loaded one.
//
// Preferred leaders rather than current ones keep tasks still while
// leaderships move back and forth; the controller makes them agree.
func Assign(tasks []TaskID, s Shape) map[TaskID]string {
	type cand struct {
		task  TaskID
		order uint64
		nodes []string // ranked, best first
	}
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
	limit := int(loadSlack*float64(len(cs))/float64(len(eligible)) + 0.999999)
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
	// Fill nodes below mean/1.25 with tasks they can run, taken from the
	// most loaded of those tasks' owners.
	floor := int(float64(len(cs)) / float64(len(eligible)) / loadSlack)
	nodes := make([]string, 0, len(eligible))
	for n := range eligible {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	for _, n := range nodes {
		for load[n] < floor {
			best := -1
			for i, c := range cs {
				o := out[c.task]
				if o == n || load[o] <= load[n]+1 || !slices.Contains(c.nodes, n) {
					continue
				}
				if best < 0 || load[o] > load[out[cs[best].task]] {
					best = i
				}
			}
			if best < 0 {
				break
			}
			load[out[cs[best].task]]--
			out[cs[best].task] = n
			load[n]++
		}
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
