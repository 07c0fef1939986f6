package placement

// loadHeaps holds, for one database, each zone's eligible nodes in a
// binary min-heap by the node's replicas of the database, then its total,
// then its index: bestTarget visits the least loaded nodes of each zone,
// not every node, and add and drop keep the heaps in order.
type loadHeaps struct {
	d     int
	zones [][]int
	pos   []int // pos[n]: n's index in its zone's heap
}

// heapsOf returns database d's heaps, building them on first use.
func (s *state) heapsOf(d int) *loadHeaps {
	if h := s.heaps[d]; h != nil {
		return h
	}
	h := &loadHeaps{d: d, zones: make([][]int, s.zones), pos: make([]int, len(s.ids))}
	for n := range s.ids {
		if s.eligible[n] {
			z := s.zone[n]
			h.pos[n] = len(h.zones[z])
			h.zones[z] = append(h.zones[z], n)
		}
	}
	for z, ns := range h.zones {
		for i := len(ns)/2 - 1; i >= 0; i-- {
			h.down(s, z, i)
		}
	}
	s.heaps[d] = h
	s.built = append(s.built, d)
	return h
}

// lighter reports whether x comes before y in database d's heaps.
func (s *state) lighter(d, x, y int) bool {
	if s.cnt[d][x] != s.cnt[d][y] {
		return s.cnt[d][x] < s.cnt[d][y]
	}
	if s.tot[x] != s.tot[y] {
		return s.tot[x] < s.tot[y]
	}
	return x < y
}

// heavier reports whether x holds more than y in database d, or as many
// and more in total: nothing at or below x in a heap can then beat y.
func (s *state) heavier(d, x, y int) bool {
	if s.cnt[d][x] != s.cnt[d][y] {
		return s.cnt[d][x] > s.cnt[d][y]
	}
	return s.tot[x] > s.tot[y]
}

// fixHeaps restores the heaps' order after n's counts changed: its total
// orders it in every database's heaps.
func (s *state) fixHeaps(n int) {
	if !s.eligible[n] {
		return
	}
	for _, d := range s.built {
		h := s.heaps[d]
		if i := h.pos[n]; !h.up(s, s.zone[n], i) {
			h.down(s, s.zone[n], i)
		}
	}
}

// up moves the node at i of zone z's heap towards the root while it is
// lighter than its parent, and reports whether it moved.
func (h *loadHeaps) up(s *state, z, i int) bool {
	ns, moved := h.zones[z], false
	for i > 0 {
		parent := (i - 1) / 2
		if !s.lighter(h.d, ns[i], ns[parent]) {
			break
		}
		h.swap(ns, i, parent)
		i, moved = parent, true
	}
	return moved
}

// down moves the node at i of zone z's heap towards the leaves while a
// child is lighter.
func (h *loadHeaps) down(s *state, z, i int) {
	ns := h.zones[z]
	for {
		m := 2*i + 1
		if m >= len(ns) {
			return
		}
		if r := m + 1; r < len(ns) && s.lighter(h.d, ns[r], ns[m]) {
			m = r
		}
		if !s.lighter(h.d, ns[m], ns[i]) {
			return
		}
		h.swap(ns, i, m)
		i = m
	}
}

func (h *loadHeaps) swap(ns []int, i, j int) {
	ns[i], ns[j] = ns[j], ns[i]
	h.pos[ns[i]], h.pos[ns[j]] = i, j
}

// leastLoadedIn returns the node of heap ns (one zone's) that bestTarget
// prefers for p, or -1 if every one holds p. The nodes with the fewest
// replicas (in p's database, then in total) are the heap's top; among them
// the one sharing the fewest partitions with p's replicas, then the lowest
// index wins. A subtree heavier than the best so far is not visited.
func (s *state) leastLoadedIn(ns []int, p *part) int {
	best, bestShared := -1, 0
	stack := s.stack[:0]
	if len(ns) > 0 {
		stack = append(stack, 0)
	}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		n := ns[i]
		if best >= 0 && s.heavier(p.db, n, best) {
			continue
		}
		for c := 2*i + 1; c <= 2*i+2 && c < len(ns); c++ {
			stack = append(stack, c)
		}
		if p.has(n) {
			continue
		}
		if best < 0 || s.heavier(p.db, best, n) {
			best, bestShared = n, s.shared(p, n)
		} else if k := s.shared(p, n); k < bestShared || k == bestShared && n < best {
			best, bestShared = n, k
		}
	}
	s.stack = stack
	return best
}
