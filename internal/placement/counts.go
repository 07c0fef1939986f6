package placement

// Load is what one node holds.
type Load struct {
	Replicas int // voters and learners
	Leaders  int
}

// Counts is the load of every node named by a placement, in total and per
// database.
type Counts struct {
	Total      map[NodeID]Load
	ByDatabase map[string]map[NodeID]Load
}

// Count returns the per-node replica and leader counts of p (for /_cluster
// and for tests). Nodes that hold nothing are absent.
func Count(p Placement) Counts {
	c := Counts{Total: map[NodeID]Load{}, ByDatabase: map[string]map[NodeID]Load{}}
	bump := func(db string, n NodeID, replicas, leaders int) {
		t := c.Total[n]
		t.Replicas += replicas
		t.Leaders += leaders
		c.Total[n] = t
		m := c.ByDatabase[db]
		if m == nil {
			m = map[NodeID]Load{}
			c.ByDatabase[db] = m
		}
		l := m[n]
		l.Replicas += replicas
		l.Leaders += leaders
		m[n] = l
	}
	for id, a := range p {
		for _, n := range a.Replicas {
			bump(id.Database, n, 1, 0)
		}
		for _, n := range a.Learners {
			bump(id.Database, n, 1, 0)
		}
		if a.Leader != "" {
			bump(id.Database, a.Leader, 0, 1)
		}
	}
	return c
}
