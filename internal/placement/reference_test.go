package placement

import "slices"

// reference returns the knobs that swap the fast searches for the plain
// scans they replaced, the statement of what the fast ones must find: a
// target among every node, a balancing step among every pair of nodes.
func reference() knobs {
	return knobs{bestTarget: scanTarget, balanceReplicas: scanReplicas, balanceLeaders: scanLeaders}
}

// scanTarget is bestTarget by looking at every node.
func scanTarget(s *state, p *part, only int) int {
	count, _ := s.zoneCounts(p)
	best := -1
	for n := range s.ids {
		if !s.eligible[n] || p.has(n) || only >= 0 && s.zone[n] != only {
			continue
		}
		if best < 0 || s.lessLoaded(p, n, best, count) {
			best = n
		}
	}
	return best
}

// scanReplicas is balanceReplicas by sorting the nodes and trying every
// pair at each step.
func scanReplicas(s *state, count, order func(n int) int, dbs []int) {
	move := func(d, a, b int) bool {
		p := s.movable(d, a, b)
		if p == nil {
			return false
		}
		s.drop(p, a)
		s.add(p, b)
		return true
	}
	for scanStep(s, count, order, dbs, s.cnt, move) {
	}
}

// scanLeaders is balanceLeaders by sorting the nodes and trying every
// pair at each step, every partition of the database for each pair.
func scanLeaders(s *state, count, order func(n int) int, dbs []int) {
	move := func(d, a, b int) bool {
		for _, p := range s.parts {
			if p.db == d && !p.fixed && p.tleader == a && s.canLead(p, b) {
				s.setLeader(p, b)
				return true
			}
		}
		return false
	}
	for scanStep(s, count, order, dbs, s.lcnt, move) {
	}
}

// scanStep moves one unit of a count from a node to another whose count
// is lower by two or more, fullest and emptiest first by order (ties: the
// lower index first), and reports whether one moved. With more than one
// database it takes only from one where the fuller node holds more.
func scanStep(s *state, count, order func(n int) int, dbs []int, perDB [][]int, move func(d, a, b int) bool) bool {
	var ns []int
	for n := range s.ids {
		if s.eligible[n] {
			ns = append(ns, n)
		}
	}
	slices.SortStableFunc(ns, func(a, b int) int {
		if la, lb := order(a), order(b); la != lb {
			return lb - la
		}
		return a - b
	})
	for _, a := range ns {
		for i := len(ns) - 1; i >= 0; i-- {
			b := ns[i]
			if count(a)-count(b) < 2 {
				break
			}
			for _, d := range dbs {
				if len(dbs) > 1 && perDB[d][a] <= perDB[d][b] {
					continue
				}
				if move(d, a, b) {
					return true
				}
			}
		}
	}
	return false
}
