package placement

import (
	"slices"
	"sort"
)

// The greedy balance moves one unit (a replica, a leadership) at a time:
// from the fullest eligible node a that can give one, to the emptiest node
// b at least two below a that can take it, ties going to the lower index
// for a and the higher for b. The searches below make exactly the moves a
// scan of every pair (a, b) would, in the same order, while looking only
// at the pairs that can move: a keeps its order as loads change instead of
// being sorted again, a zone that none of a's replicas may enter is passed
// over whole, and a leadership only goes to a voter of the partition.

// ranking orders the eligible nodes by a load, fullest first and the lower
// index first among equals, overall and within each zone. update keeps
// the order as one node's load changes.
type ranking struct {
	load  func(n int) int
	zone  []int
	all   []int
	zones [][]int
}

func (s *state) rank(load func(n int) int) *ranking {
	r := &ranking{load: load, zone: s.zone, zones: make([][]int, s.zones)}
	for n := range s.ids {
		if s.eligible[n] {
			r.all = append(r.all, n)
		}
	}
	slices.SortFunc(r.all, func(x, y int) int {
		switch {
		case x == y:
			return 0
		case r.before(x, y):
			return -1
		}
		return 1
	})
	for _, n := range r.all {
		r.zones[s.zone[n]] = append(r.zones[s.zone[n]], n)
	}
	return r
}

// before reports whether x comes before y: fuller, or as full with the
// lower index.
func (r *ranking) before(x, y int) bool {
	if lx, ly := r.load(x), r.load(y); lx != ly {
		return lx > ly
	}
	return x < y
}

// update puts a and b back in order after their loads changed (both at
// once: while either is out of place, the other cannot be placed by
// binary search).
func (r *ranking) update(a, b int) {
	r.all = r.reposition(r.all, a, b)
	if za, zb := r.zone[a], r.zone[b]; za == zb {
		r.zones[za] = r.reposition(r.zones[za], a, b)
	} else {
		r.zones[za] = r.reposition(r.zones[za], a)
		r.zones[zb] = r.reposition(r.zones[zb], b)
	}
}

func (r *ranking) reposition(ns []int, moved ...int) []int {
	ns = slices.DeleteFunc(ns, func(n int) bool { return slices.Contains(moved, n) })
	for _, n := range moved {
		j := sort.Search(len(ns), func(k int) bool { return r.before(n, ns[k]) })
		ns = slices.Insert(ns, j, n)
	}
	return ns
}

// balanceReplicas moves replicas, one greedy step at a time, until no
// eligible node holds two more by count than another that can take one of
// its replicas. order ranks the nodes (count, then a tie-breaker); dbs are
// the databases a replica may be taken from: with more than one, only one
// where the fuller node holds more than the emptier.
func (s *state) balanceReplicas(count, order func(n int) int, dbs []int) {
	if s.knobs.balanceReplicas != nil {
		s.knobs.balanceReplicas(s, count, order, dbs)
		return
	}
	r := s.rank(order)
	for {
		a, b, d := s.replicaMove(r, count, dbs)
		if a < 0 {
			return
		}
		p := s.movable(d, a, b)
		s.drop(p, a)
		s.add(p, b)
		r.update(a, b)
	}
}

// replicaMove returns the greedy step's next replica move: from a to b, of
// database d; a is -1 if no replica can move.
func (s *state) replicaMove(r *ranking, count func(n int) int, dbs []int) (a, b, d int) {
	if len(r.all) == 0 {
		return -1, -1, -1
	}
	low := count(r.all[len(r.all)-1])
	for _, a := range r.all {
		if count(a)-low < 2 {
			break // nor can any node after a
		}
		b, d := -1, -1
		// The emptiest node of each zone that can take a replica from a,
		// then the emptiest of those.
		for z, zs := range r.zones {
			if z != s.zone[a] && !s.crossesTo(dbs, a, z) {
				continue
			}
			for i := len(zs) - 1; i >= 0; i-- {
				c := zs[i]
				if count(a)-count(c) < 2 || b >= 0 && r.before(c, b) {
					break
				}
				if e := s.replicaDatabase(dbs, a, c); e >= 0 {
					b, d = c, e
					break
				}
			}
		}
		if b >= 0 {
			return a, b, d
		}
	}
	return -1, -1, -1
}

// replicaDatabase returns the first database of dbs a replica of which
// can move from a to b, or -1.
func (s *state) replicaDatabase(dbs []int, a, b int) int {
	for _, d := range dbs {
		if len(dbs) > 1 && s.cnt[d][a] <= s.cnt[d][b] {
			continue
		}
		if s.canMoveReplica(d, a, b) {
			return d
		}
	}
	return -1
}

// canMoveReplica reports whether movable(d, a, b) finds a partition,
// remembering a no until a's epoch moves.
func (s *state) canMoveReplica(d, a, b int) bool {
	if s.zone[a] != s.zone[b] && !s.crossZone(d, a, s.zone[b]) {
		return false
	}
	key := [3]int{d, a, b}
	if e, ok := s.stuck[key]; ok && e == s.epoch[a] {
		return false
	}
	if s.movable(d, a, b) == nil {
		s.stuck[key] = s.epoch[a]
		return false
	}
	return true
}

// crossing is crossZone's answer for one node and database: to[z] for each
// zone z, valid while the node's epoch is epoch.
type crossing struct {
	epoch uint64
	valid bool
	to    []bool
}

// crossesTo reports whether a replica of some database of dbs on a could
// move to zone z.
func (s *state) crossesTo(dbs []int, a, z int) bool {
	for _, d := range dbs {
		if s.crossZone(d, a, z) {
			return true
		}
	}
	return false
}

// crossZone reports whether some replica of database d on a could move to
// an eligible node of zone z, another zone than a's, without breaking its
// partition's zones (swapToZone), the other conditions of movable but the
// target's holding the partition aside. When it is false, no node of z
// can take a replica of d from a. The answer depends only on the
// partitions on a, so it stands until a's epoch moves.
func (s *state) crossZone(d, a, z int) bool {
	if s.cross[d] == nil {
		s.cross[d] = make([]crossing, len(s.ids))
	}
	c := &s.cross[d][a]
	if !c.valid || c.epoch != s.epoch[a] {
		c.valid, c.epoch = true, s.epoch[a]
		if c.to == nil {
			c.to = make([]bool, s.zones)
		}
		clear(c.to)
		for _, i := range s.on[d][a] {
			p := s.parts[i]
			if p.fixed || p.isLearner(a) || p.moving && slices.Contains(p.previous, a) {
				continue
			}
			for y := range c.to {
				if !c.to[y] && y != s.zone[a] && s.zoneEligible[y] > 0 && s.swapToZone(p, a, y) {
					c.to[y] = true
				}
			}
		}
	}
	return c.to[z]
}

// balanceLeaders moves leaderships, one greedy step at a time, until no
// eligible node leads two more by count than another that can lead one of
// its partitions; order and dbs are as for balanceReplicas.
func (s *state) balanceLeaders(count, order func(n int) int, dbs []int) {
	if s.knobs.balanceLeaders != nil {
		s.knobs.balanceLeaders(s, count, order, dbs)
		return
	}
	r := s.rank(order)
	for {
		a, b, d := s.leaderMove(r, count, dbs)
		if a < 0 {
			return
		}
		// The first of d's partitions a leads that b can lead.
		for _, i := range s.ledBy[d][a] {
			if p := s.parts[i]; !p.fixed && s.canLead(p, b) {
				s.setLeader(p, b)
				break
			}
		}
		r.update(a, b)
	}
}

// leaderMove returns the greedy step's next leadership move: from a to b,
// of a partition of database d; a is -1 if no leadership can move. The
// nodes that could lead one of a's partitions are its other voters.
func (s *state) leaderMove(r *ranking, count func(n int) int, dbs []int) (a, b, d int) {
	if len(r.all) == 0 {
		return -1, -1, -1
	}
	low := count(r.all[len(r.all)-1])
	// takes reports whether c may take a leadership of database d from a.
	takes := func(d, a, c int) bool {
		return count(a)-count(c) >= 2 && (len(dbs) == 1 || s.lcnt[d][a] > s.lcnt[d][c])
	}
	for _, a := range r.all {
		if count(a)-low < 2 {
			break
		}
		b := -1 // the emptiest, last in the ranking
		for _, d := range dbs {
			for _, i := range s.ledBy[d][a] {
				p := s.parts[i]
				if p.fixed {
					continue
				}
				for _, c := range p.members {
					if c != a && s.canLead(p, c) && takes(d, a, c) && (b < 0 || r.before(b, c)) {
						b = c
					}
				}
			}
		}
		if b < 0 {
			continue
		}
		for _, d := range dbs {
			if !takes(d, a, b) {
				continue
			}
			for _, i := range s.ledBy[d][a] {
				if p := s.parts[i]; !p.fixed && s.canLead(p, b) {
					return a, b, d
				}
			}
		}
	}
	return -1, -1, -1
}
