package placement

import "slices"

// shardedReplicas computes the target of ShardedMySQL mode. The nodes that
// are not gone or draining are ordered round-robin over zones and cut into
// groups of the largest replication factor (left-over nodes stay empty);
// partition k of all databases in order goes to group k mod groups, on its
// first RF nodes, led by the group's first live node. Down nodes stay in
// their group. The layout is rebuilt from the node list, so a node that
// joins or leaves reshuffles groups: this mode is for comparing failover,
// not for running a cluster.
func (s *state) shardedReplicas() {
	byZone := make([][]int, s.zones)
	for n := range s.ids {
		if s.status[n] != Gone && !s.draining[n] {
			byZone[s.zone[n]] = append(byZone[s.zone[n]], n)
		}
	}
	var pool []int
	for i := 0; ; i++ {
		added := false
		for _, ns := range byZone {
			if i < len(ns) {
				pool = append(pool, ns[i])
				added = true
			}
		}
		if !added {
			break
		}
	}
	size := 1
	for _, db := range s.dbs {
		size = max(size, db.Replicas)
	}
	var groups [][]int
	for i := 0; i+size <= len(pool); i += size {
		groups = append(groups, pool[i:i+size])
	}
	if len(groups) == 0 && len(pool) > 0 {
		groups = [][]int{pool}
	}
	for k, p := range s.parts {
		if p.fixed || len(groups) == 0 {
			for _, n := range p.voters {
				s.add(p, n)
			}
			for _, n := range p.learners {
				s.add(p, n)
			}
			continue
		}
		g := groups[k%len(groups)]
		g = g[:min(p.rf, len(g))]
		for _, n := range g {
			// A down node keeps its replica but does not get a new one.
			if s.status[n] == Alive || p.isVoter(n) {
				s.add(p, n)
			}
		}
		// Live nodes first, each group in its own order: the first one
		// leads every partition of the group.
		p.prefer = slices.Clone(g)
		slices.SortStableFunc(p.prefer, func(a, b int) int {
			return boolInt(s.status[a] != Alive) - boolInt(s.status[b] != Alive)
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// preferredLeader returns the first node of p.prefer that can lead p, else
// what fewestLeaders would pick.
func (s *state) preferredLeader(p *part) int {
	for _, n := range p.prefer {
		if s.canLead(p, n) {
			return n
		}
	}
	return s.fewestLeaders(p)
}
