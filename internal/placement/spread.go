package placement

import "slices"

// spreadReplicas computes the target replicas of Spread mode in the four
// steps of the package doc ("Spread's steps"), each moving as little as it
// can, so a placement that meets every constraint is its own target.
func (s *state) spreadReplicas() {
	s.keepCurrent()
	// All adds before any drop, so that drops see the loads they leave.
	for _, p := range s.parts {
		for !p.fixed && len(p.members) < p.rf {
			n := s.bestTarget(p, -1)
			if n < 0 {
				n = s.fallback(p)
			}
			if n < 0 {
				break
			}
			s.add(p, n)
		}
	}
	// A partition whose move's add completed drops the replica the last
	// plan meant to replace, before balancing sees it.
	for _, p := range s.parts {
		for !p.fixed && len(p.members) > p.rf && p.previous != nil {
			n := s.bestVictim(p, -1)
			if n < 0 || slices.Contains(p.previous, n) {
				break
			}
			s.drop(p, n)
		}
	}
	for _, p := range s.parts {
		if !p.fixed && len(p.members) <= p.rf {
			s.fixZones(p)
		}
	}
	s.balance()
	// Without the last plan, drop the remaining extras only now, from the
	// nodes the balanced loads say are fullest: a replica that just moved
	// to an emptier node then stays there.
	for _, p := range s.parts {
		for !p.fixed && len(p.members) > p.rf {
			n := s.bestVictim(p, -1)
			if n < 0 {
				break
			}
			s.drop(p, n)
		}
		if !p.fixed {
			s.fixZones(p)
		}
	}
	s.balance()
}

// balance evens out each database's replicas over the eligible nodes,
// then the replica totals, moving a replica of a database in which the
// fuller node holds more than the emptier one: that swaps their counts in
// the database, so it stays balanced.
func (s *state) balance() {
	for d := range s.dbs {
		load := func(n int) int { return s.cnt[d][n]*(len(s.ids)*len(s.parts)+1) + s.tot[n] }
		s.balanceReplicas(func(n int) int { return s.cnt[d][n] }, load, []int{d})
	}
	tot := func(n int) int { return s.tot[n] }
	s.balanceReplicas(tot, tot, s.allDatabases())
}

// allDatabases returns every database's index.
func (s *state) allDatabases() []int {
	dbs := make([]int, len(s.dbs))
	for i := range dbs {
		dbs[i] = i
	}
	return dbs
}

// keepCurrent starts the target from the current replicas that may stay.
func (s *state) keepCurrent() {
	for _, p := range s.parts {
		for _, n := range p.voters {
			if p.fixed || s.status[n] != Gone && !s.draining[n] {
				s.add(p, n)
			}
		}
		// Learners are adds in flight: keep them unless their node left.
		for _, n := range p.learners {
			if p.fixed || s.status[n] == Alive && !s.draining[n] {
				s.add(p, n)
			}
		}
	}
}

// fallback returns a voter of p that the target dropped (on a draining
// node, else on a gone one), to keep it while no other node can take its
// place: the replica count never drops.
func (s *state) fallback(p *part) int {
	for _, n := range p.voters {
		if s.draining[n] && s.status[n] != Gone && !p.has(n) {
			return n
		}
	}
	for _, n := range p.voters {
		if !p.has(n) {
			return n
		}
	}
	return -1
}

// bestTarget returns the node that should receive a new replica of p: an
// eligible node not holding p, in the zone with the fewest replicas of p,
// then the least loaded (in p's database, then in total), then the one
// sharing the fewest partitions with p's replicas. It returns -1
// if there is none. Only nodes of zone only (if >= 0) are considered.
// Each zone's candidates come from its load heap (see leastLoadedIn).
func (s *state) bestTarget(p *part, only int) int {
	if s.knobs.bestTarget != nil {
		return s.knobs.bestTarget(s, p, only)
	}
	count, _ := s.zoneCountsInto(p, s.pickCount, s.pickCapacity)
	h := s.heapsOf(p.db)
	best := -1
	for z, zh := range h.zones {
		if only >= 0 && z != only {
			continue
		}
		if n := s.leastLoadedIn(zh, p); n >= 0 && (best < 0 || s.lessLoaded(p, n, best, count)) {
			best = n
		}
	}
	return best
}

func (s *state) lessLoaded(p *part, a, b int, zoneCount []int) bool {
	d := p.db
	if zoneCount[s.zone[a]] != zoneCount[s.zone[b]] {
		return zoneCount[s.zone[a]] < zoneCount[s.zone[b]]
	}
	if s.cnt[d][a] != s.cnt[d][b] {
		return s.cnt[d][a] < s.cnt[d][b]
	}
	if s.tot[a] != s.tot[b] {
		return s.tot[a] < s.tot[b]
	}
	if pa, pb := s.shared(p, a), s.shared(p, b); pa != pb {
		return pa < pb
	}
	return a < b
}

// shared counts the partitions n already shares with p's replicas.
func (s *state) shared(p *part, n int) int {
	k := 0
	for _, m := range p.members {
		k += s.pairs[m][n]
	}
	return k
}

// bestVictim returns the replica of p to give up: one the last plan did not
// keep, in the zone with the most replicas of p, on the most loaded node, preferring not to remove the
// leader or a learner in flight; -1 if none may go (down nodes keep theirs).
// Only nodes of zone only (if >= 0) are considered.
func (s *state) bestVictim(p *part, only int) int {
	count, _ := s.zoneCountsInto(p, s.pickCount, s.pickCapacity)
	best := -1
	for _, n := range p.members {
		if s.status[n] == Down || p.isLearner(n) || only >= 0 && s.zone[n] != only {
			continue
		}
		if best < 0 || s.moreLoaded(p, n, best, count) {
			best = n
		}
	}
	return best
}

func (s *state) moreLoaded(p *part, a, b int, zoneCount []int) bool {
	if s.eligible[a] != s.eligible[b] {
		return !s.eligible[a]
	}
	if pa, pb := slices.Contains(p.previous, a), slices.Contains(p.previous, b); pa != pb {
		return pb // the last plan meant a to go
	}
	if zoneCount[s.zone[a]] != zoneCount[s.zone[b]] {
		return zoneCount[s.zone[a]] > zoneCount[s.zone[b]]
	}
	if s.cnt[p.db][a] != s.cnt[p.db][b] {
		return s.cnt[p.db][a] > s.cnt[p.db][b]
	}
	if s.tot[a] != s.tot[b] {
		return s.tot[a] > s.tot[b]
	}
	if (a == p.leader) != (b == p.leader) {
		return b == p.leader
	}
	return a > b
}

// fixZones moves replicas of p from its fullest zone to its emptiest zone
// with room until its zones are valid or no replica can move.
func (s *state) fixZones(p *part) {
	for {
		count, capacity := s.zoneCountsInto(p, s.fixCount, s.fixCapacity)
		if zonesValid(count, capacity) {
			return
		}
		moved := false
		// Fullest source zone first, emptiest destination first.
		for _, x := range zoneOrder(count, true) {
			for _, y := range zoneOrder(count, false) {
				if count[x] < count[y]+2 || count[y] >= capacity[y] {
					continue
				}
				from, to := s.bestVictim(p, x), s.bestTarget(p, y)
				if from < 0 || to < 0 {
					continue
				}
				s.drop(p, from)
				s.add(p, to)
				moved = true
				break
			}
			if moved {
				break
			}
		}
		if !moved {
			return // only down nodes' replicas are misplaced: wait for them
		}
	}
}

func zoneOrder(count []int, fullestFirst bool) []int {
	zs := make([]int, len(count))
	for i := range zs {
		zs[i] = i
	}
	slices.SortStableFunc(zs, func(a, b int) int {
		if fullestFirst {
			return count[b] - count[a]
		}
		return count[a] - count[b]
	})
	return zs
}

// movable returns the partition of database d whose replica on a should
// move to b (never one the last plan just placed there, while its move is
// under way): one whose replica on a does not exist yet (free to retarget),
// else one a does not lead, else any; nil if none can move without breaking
// a constraint.
func (s *state) movable(d, a, b int) *part {
	var notLed, led *part
	for _, i := range s.on[d][a] {
		p := s.parts[i]
		if p.fixed || p.has(b) || p.isLearner(a) {
			continue
		}
		if p.moving && slices.Contains(p.previous, a) {
			continue // let the last plan's move finish rather than undo it
		}
		fresh := !p.current(a)
		if !fresh && (notLed != nil || led != nil && p.leader == a) {
			continue // cannot beat the candidate found
		}
		if !s.swapKeepsZones(p, a, b) {
			continue
		}
		switch {
		case fresh:
			return p
		case p.leader != a && notLed == nil:
			if s.fresh[d][a] == 0 {
				return p // nothing fresh on a can beat it
			}
			notLed = p
		case led == nil:
			led = p
		}
	}
	if notLed != nil {
		return notLed
	}
	return led
}
