package placement

// canLead reports whether n may lead p: a caught-up voter that stays in the
// target, on an eligible node.
func (s *state) canLead(p *part, n int) bool {
	return s.eligible[n] && (p.isVoter(n) || p.isNew) && p.has(n)
}

// voterList returns the caught-up voters of p; a new partition's are its
// initial replicas.
func (p *part) voterList() []int {
	if p.isNew {
		return p.members
	}
	return p.voters
}

// chooseLeaders picks each partition's leader among the voters that can
// lead it: the current leader if it can, else the one with the fewest
// leaders. When no replica move remains, leaderships then move from nodes
// with two or more leaders than another to it, first per database, then in
// total. Transferring leadership is cheap but not free (in-flight requests
// are retried), so it waits until replicas have settled.
func (s *state) chooseLeaders() {
	var orphans []*part
	for _, p := range s.parts {
		switch {
		case p.fixed:
			if p.leader >= 0 && s.status[p.leader] == Alive {
				s.setLeader(p, p.leader)
			}
		case p.prefer != nil:
			s.setLeader(p, s.preferredLeader(p))
		case p.leader >= 0 && s.canLead(p, p.leader):
			s.setLeader(p, p.leader)
		default:
			orphans = append(orphans, p)
		}
	}
	for _, p := range orphans {
		s.setLeader(p, s.fewestLeaders(p))
	}
	if s.opts.Mode != Spread || !s.stable() {
		return
	}
	for d := range s.dbs {
		load := func(n int) int { return s.lcnt[d][n]*(len(s.parts)+1) + s.ltot[n] }
		s.balanceLeaders(func(n int) int { return s.lcnt[d][n] }, load, []int{d})
	}
	ltot := func(n int) int { return s.ltot[n] }
	s.balanceLeaders(ltot, ltot, s.allDatabases())
}

// fewestLeaders returns the voter of p that should lead it: one that can
// lead with the fewest leaders (in p's database, then in total); failing
// that any live voter (a draining one, or one being replaced, until the
// new replicas are in); -1 if no voter is alive.
func (s *state) fewestLeaders(p *part) int {
	best := -1
	better := func(a, b int) bool {
		if s.lcnt[p.db][a] != s.lcnt[p.db][b] {
			return s.lcnt[p.db][a] < s.lcnt[p.db][b]
		}
		if s.ltot[a] != s.ltot[b] {
			return s.ltot[a] < s.ltot[b]
		}
		return a < b
	}
	for _, n := range p.voterList() {
		if s.canLead(p, n) && (best < 0 || better(n, best)) {
			best = n
		}
	}
	if best >= 0 {
		return best
	}
	if p.leader >= 0 && s.status[p.leader] == Alive {
		return p.leader
	}
	for _, n := range p.voters {
		if s.status[n] == Alive && (best < 0 || p.has(n) && !p.has(best)) {
			best = n
		}
	}
	return best
}
