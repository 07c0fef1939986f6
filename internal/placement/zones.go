package placement

// Zone rule: a partition's replicas are spread over zones as evenly as the
// zones allow. A zone's capacity for a partition is the number of nodes in
// it that can hold one of its replicas (eligible nodes, and the down nodes
// already holding one). The spread is valid when no replica could move from
// a zone x to a zone y with spare capacity and two fewer replicas: with at
// least as many zones as replicas that means all zones distinct, with fewer
// it means zone counts differ by at most one (except where a zone is full).

// zoneCounts returns the replicas of p per zone and each zone's capacity
// for p.
func (s *state) zoneCounts(p *part) (count, capacity []int) {
	return s.zoneCountsInto(p, make([]int, s.zones), make([]int, s.zones))
}

// zoneCountsInto is zoneCounts written into count and capacity (each
// s.zones long), so that the searches run per candidate allocate nothing.
func (s *state) zoneCountsInto(p *part, count, capacity []int) ([]int, []int) {
	clear(count)
	copy(capacity, s.zoneEligible)
	for _, m := range p.members {
		count[s.zone[m]]++
		if !s.eligible[m] {
			capacity[s.zone[m]]++
		}
	}
	return count, capacity
}

// zonesValid reports whether count is as even as capacity allows.
func zonesValid(count, capacity []int) bool {
	lo, hi := -1, -1 // the emptiest zone with room, the fullest zone
	for z := range count {
		if count[z] < capacity[z] && (lo < 0 || count[z] < count[lo]) {
			lo = z
		}
		if hi < 0 || count[z] > count[hi] {
			hi = z
		}
	}
	return lo < 0 || count[hi] < count[lo]+2
}

// swapKeepsZones reports whether replacing p's replica on a with one on b
// (both eligible, b not holding p) leaves p's zones valid.
func (s *state) swapKeepsZones(p *part, a, b int) bool {
	return s.swapToZone(p, a, s.zone[b])
}

// swapToZone reports whether replacing p's replica on a with one on any
// eligible node of zone zb not holding p leaves p's zones valid: the
// answer is the same for every such node.
func (s *state) swapToZone(p *part, a, zb int) bool {
	za := s.zone[a]
	if za == zb {
		return true
	}
	ca, cb := 0, 0
	for _, m := range p.members {
		switch s.zone[m] {
		case za:
			ca++
		case zb:
			cb++
		}
	}
	if cb >= ca {
		// zb would hold two more than za, which a leaves with room.
		return false
	}
	count, capacity := s.zoneCountsInto(p, s.swapCount, s.swapCapacity)
	count[za]--
	count[zb]++
	return zonesValid(count, capacity)
}

// zonesValidAmong reports whether replicas on nodes ns would be spread over
// zones as evenly as the zones allow.
func (s *state) zonesValidAmong(ns []int) bool {
	count := make([]int, s.zones)
	capacity := make([]int, s.zones)
	copy(capacity, s.zoneEligible)
	for _, m := range ns {
		count[s.zone[m]]++
		if !s.eligible[m] {
			capacity[s.zone[m]]++
		}
	}
	return zonesValid(count, capacity)
}
