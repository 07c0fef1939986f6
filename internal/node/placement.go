package node

import (
	"slices"
	"time"

	"github.com/doppio-db/doppio/internal/membership"
	"github.com/doppio-db/doppio/internal/replication"
)

// reportEvery is how often this node re-reads the configuration of the
// groups it leads for the placement controller (only changes are written,
// in the registration's batches).
const reportEvery = time.Second

// reportLoop publishes the Raft configuration of every partition this node
// leads (membership.GroupReport): the placement controller's view of where
// replicas are, and how its moves progress. The controller itself runs in
// runController; placements of new databases are its job (Plan.Create).
func (n *Node) reportLoop() {
	defer n.wg.Done()
	t := time.NewTicker(reportEvery)
	defer t.Stop()
	// names remembers every node id seen, so that a member whose node is
	// dead and no longer placed is still reported by name.
	names := map[uint64]string{n.self: n.cfg.ID}
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		n.reportGroups(names)
	}
}

func (n *Node) reportGroups(names map[uint64]string) {
	for _, nd := range n.view.Nodes() {
		names[membership.RaftID(nd.ID)] = nd.ID
	}
	for _, rec := range n.view.Placements() {
		for _, pp := range rec.Partitions {
			for _, r := range pp.Replicas {
				names[membership.RaftID(r)] = r
			}
		}
	}
	name := func(ids []uint64) []string {
		out := make([]string, 0, len(ids))
		for _, id := range ids {
			if s, ok := names[id]; ok {
				out = append(out, s)
			} else {
				out = append(out, "raft:"+uintString(id))
			}
		}
		slices.Sort(out)
		return out
	}
	for ref, g := range n.hosted() {
		if _, leading := g.Leader(); !leading {
			n.reg.SetGroup(ref.db, ref.p, nil)
			continue
		}
		st, err := g.Status()
		if err != nil || st.Role != replication.RoleLeader {
			n.reg.SetGroup(ref.db, ref.p, nil)
			continue
		}
		n.reg.SetGroup(ref.db, ref.p, &membership.GroupReport{Term: st.Term, Voters: name(st.Voters), Learners: name(st.Learners)})
	}
}
