package placement

import (
	"fmt"
	"slices"
)

// violations lists every constraint the converged placement p of in breaks.
// It is written apart from the algorithm, from the constraints' statement.
func violations(in Input, p Placement, unavailable []PartitionID) []string {
	var out []string
	bad := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	nodes := map[NodeID]Node{}
	for _, n := range in.Nodes {
		nodes[n.ID] = n
	}
	eligible := func(id NodeID) bool {
		n, ok := nodes[id]
		return ok && n.State == Alive && !n.Draining
	}
	var elig []NodeID
	zoneSize := map[string]int{}
	for _, n := range in.Nodes {
		if eligible(n.ID) {
			elig = append(elig, n.ID)
			zoneSize[n.Zone]++
		}
	}
	downHolds, frozen := false, false
	replicas := map[string]map[NodeID]int{}
	leaders := map[string]map[NodeID]int{}
	for _, db := range in.Databases {
		replicas[db.Name], leaders[db.Name] = map[NodeID]int{}, map[NodeID]int{}
		for i := range db.Partitions {
			id := PartitionID{db.Name, i}
			a := p[id]
			if slices.Contains(unavailable, id) {
				live := 0
				for _, r := range a.Replicas {
					if nodes[r].State == Alive && nodes[r].ID != "" {
						live++
					}
				}
				if 2*live > len(a.Replicas) {
					bad("%s reported unavailable with %d of %v live", id, live, a.Replicas)
				}
				frozen = true // its replicas stay where they are, balanced or not
				continue
			}
			if len(a.Learners) > 0 {
				bad("%s still has learners %v", id, a.Learners)
			}
			down, draining, gone := 0, 0, 0
			zc := map[string]int{}
			zcap := map[string]int{}
			for z, n := range zoneSize {
				zcap[z] = n
			}
			for _, r := range a.Replicas {
				n, ok := nodes[r]
				switch {
				case !ok || n.State == Gone:
					gone++
				case n.State == Down:
					down++
					downHolds = true
				case n.Draining:
					draining++
				}
				if ok && !eligible(r) {
					zcap[n.Zone]++
				}
				zc[nodes[r].Zone]++
				if eligible(r) {
					replicas[db.Name][r]++
				}
			}
			want := min(db.Replicas, len(elig)+down)
			// Draining and gone nodes keep replicas only while no other node
			// can take them: the replica count never drops.
			if got := len(a.Replicas) - draining - gone; got != want || draining+gone > 0 && len(a.Replicas) > db.Replicas {
				bad("%s has %d replicas (%d draining, %d gone), want %d: %v", id, len(a.Replicas), draining, gone, want, a.Replicas)
			}
			if down == 0 {
				var count, capacity []int
				for z := range zcap {
					count = append(count, zc[z])
					capacity = append(capacity, zcap[z])
				}
				if !zonesValid(count, capacity) {
					bad("%s zones not spread: %v", id, a.Replicas)
				}
			}
			switch {
			case !slices.Contains(a.Replicas, a.Leader) || nodes[a.Leader].ID == "" || nodes[a.Leader].State != Alive:
				bad("%s leader %q is not a live voter of %v", id, a.Leader, a.Replicas)
			case !eligible(a.Leader) && slices.ContainsFunc(a.Replicas, eligible):
				bad("%s led by draining %s", id, a.Leader)
			case eligible(a.Leader):
				leaders[db.Name][a.Leader]++
			}
		}
	}
	// Balance: within every zone always; across zones when zones are the
	// same size and no down node holds replicas (else it may be impossible).
	sameSize := true
	for _, n := range zoneSize {
		for _, m := range zoneSize {
			sameSize = sameSize && n == m
		}
	}
	spread := func(what string, counts map[NodeID]int) {
		if frozen {
			return
		}
		for _, n := range in.Nodes {
			for _, m := range in.Nodes {
				if !eligible(n.ID) || !eligible(m.ID) || counts[n.ID]-counts[m.ID] < 2 {
					continue
				}
				if n.Zone == m.Zone || sameSize && !downHolds {
					bad("%s: %s has %d, %s has %d", what, n.ID, counts[n.ID], m.ID, counts[m.ID])
					return
				}
			}
		}
	}
	total := map[NodeID]int{}
	for db, c := range replicas {
		spread("replicas of "+db, c)
		for n, k := range c {
			total[n] += k
		}
	}
	spread("replicas", total)
	// Leaders: no transfer to a caught-up voter may even them out further,
	// per database, then in total. (The table tests check exact counts.)
	if in.Options.Mode == ShardedMySQL {
		return out // leaders are grouped on purpose
	}
	ltotal := map[NodeID]int{}
	for db, c := range leaders {
		for n, k := range c {
			ltotal[n] += k
		}
		if !frozen {
			if v := leaderImprovement(in, p, db, c, nil); v != "" {
				bad("leaders of %s: %s", db, v)
			}
		}
	}
	if !frozen {
		for _, db := range in.Databases {
			if v := leaderImprovement(in, p, db.Name, leaders[db.Name], ltotal); v != "" {
				bad("leaders in total: %s", v)
				break
			}
		}
	}
	return out
}

// leaderImprovement names a transfer of a partition of db that would even
// out counts (per database if total is nil, else totals without unevening
// the database), or "".
func leaderImprovement(in Input, p Placement, db string, counts, total map[NodeID]int) string {
	nodes := map[NodeID]Node{}
	for _, n := range in.Nodes {
		nodes[n.ID] = n
	}
	for id, a := range p {
		if id.Database != db || a.Leader == "" {
			continue
		}
		for _, r := range a.Replicas {
			n, ok := nodes[r]
			if !ok || r == a.Leader || n.State != Alive || n.Draining {
				continue
			}
			dd := counts[a.Leader] - counts[r]
			if total == nil && dd >= 2 {
				return fmt.Sprintf("%s could move from %s (%d) to %s (%d)", id, a.Leader, counts[a.Leader], r, counts[r])
			}
			if total != nil && dd >= 1 && total[a.Leader]-total[r] >= 2 {
				return fmt.Sprintf("%s could move from %s (%d in total) to %s (%d)", id, a.Leader, total[a.Leader], r, total[r])
			}
		}
	}
	return ""
}
