package controller

import (
	"cmp"
	"slices"
	"time"

	"github.com/doppio-db/doppio/internal/membership"
	"github.com/doppio-db/doppio/internal/placement"
)

// A planning round's decisions, apart from its I/O: the driver reads etcd
// and the clock, calls these and placement.Compute, and writes what Apply
// returns. internal/controlsim drives the same functions over simulated
// time.

// Report is a partition's Raft configuration as its leader last
// published it, with that leader.
type Report struct {
	membership.GroupReport
	Leader placement.NodeID
}

// Current is the placement a round plans from: each partition of a
// database with a written placement as its group reports it (report), its
// leader only while live says the leader's node is registered. A
// partition whose group never reported is taken from the written
// placement. Replicas the written placement holds and the group does not
// list yet are adds in flight: they count as learners.
func Current(dbs []placement.Database, written map[string]membership.Placement, report func(placement.PartitionID) (Report, bool), live func(placement.NodeID) bool) placement.Placement {
	cur := placement.Placement{}
	for _, db := range dbs {
		w, ok := written[db.Name]
		if !ok {
			continue // new: Plan.Create places it
		}
		for p := range db.Partitions {
			pid := placement.PartitionID{Database: db.Name, Index: p}
			var placed membership.PartitionPlacement
			if p < len(w.Partitions) {
				placed = w.Partitions[p]
			}
			r, ok := report(pid)
			if !ok {
				r = Report{GroupReport: membership.GroupReport{Voters: placed.Replicas}}
			}
			a := placement.Assignment{Replicas: ids(r.Voters), Learners: ids(r.Learners)}
			if live(r.Leader) && slices.Contains(r.Voters, string(r.Leader)) {
				a.Leader = r.Leader
			}
			for _, n := range placed.Replicas {
				if !r.Has(n) {
					a.Learners = append(a.Learners, placement.NodeID(n))
				}
			}
			if len(a.Replicas) > 0 || len(a.Learners) > 0 {
				cur[pid] = a
			}
		}
	}
	return cur
}

// NodeRecord is what the controller knows of a node when it judges it.
type NodeRecord struct {
	ID    placement.NodeID
	Zone  string
	Alive bool // registered
	// DeadSince is when a controller first found the node dead (it may
	// be before this controller's term).
	DeadSince time.Time
	// Draining: the operator's intent is not active (standby, draining,
	// removed), so the node gives everything away and takes nothing.
	Draining bool
}

// Judge applies the dead-node delay to every record at now: it returns
// the nodes as placement sees them, sorted by id, and how long until the
// first down node becomes gone (0 if none is down), when a round is due
// without any change.
func Judge(records []NodeRecord, now time.Time, delay time.Duration) (nodes []placement.Node, untilGone time.Duration) {
	nodes = make([]placement.Node, 0, len(records))
	for _, rec := range records {
		dead := now.Sub(rec.DeadSince)
		st := placement.StateOf(rec.Alive, dead, delay)
		if st == placement.Down && (untilGone == 0 || delay-dead < untilGone) {
			untilGone = delay - dead
		}
		nodes = append(nodes, placement.Node{ID: rec.ID, Zone: rec.Zone, State: st, Draining: rec.Draining})
	}
	slices.SortFunc(nodes, func(a, b placement.Node) int { return cmp.Compare(a.ID, b.ID) })
	return nodes, untilGone
}

// Apply turns a round's plan into the placements to write: Plan.Create
// places a new database whole (once every partition of it is placed),
// AddReplica adds a node to a partition's replicas, RemoveReplica takes
// one out, TransferLeader sets the preferred leader. written holds every
// database's placement as etcd does, cur is the placement the plan was
// computed from (see Current) and alive names the nodes judged Alive. It
// returns only the databases whose placement changed, each with its next
// version.
func Apply(dbs []placement.Database, written map[string]membership.Placement, cur placement.Placement, plan placement.Plan, alive map[placement.NodeID]bool) map[string]membership.Placement {
	changed := map[string]membership.Placement{}
	edit := func(db string) *membership.Placement {
		p, ok := changed[db]
		if !ok {
			w := written[db]
			p = membership.Placement{Version: w.Version, Partitions: make([]membership.PartitionPlacement, len(w.Partitions))}
			for i, pp := range w.Partitions {
				p.Partitions[i] = membership.PartitionPlacement{Replicas: slices.Clone(pp.Replicas), Leader: pp.Leader}
			}
			changed[db] = p
		}
		p = changed[db]
		return &p
	}
	set := func(db string, p *membership.Placement) { changed[db] = *p }

	// New databases, whole: the nodes bootstrap their groups from the
	// first version of the key.
	for _, db := range dbs {
		if _, ok := written[db.Name]; ok {
			continue
		}
		p := membership.Placement{Version: 1, Partitions: make([]membership.PartitionPlacement, db.Partitions)}
		complete := true
		for i := range p.Partitions {
			a, ok := plan.Create[placement.PartitionID{Database: db.Name, Index: i}]
			if !ok || len(a.Replicas) == 0 {
				complete = false
				break
			}
			p.Partitions[i] = membership.PartitionPlacement{Replicas: names(a.Replicas), Leader: string(a.Leader)}
		}
		if complete {
			changed[db.Name] = p
		}
	}

	for _, m := range plan.Moves {
		w, ok := written[m.Partition.Database]
		if !ok || m.Partition.Index >= len(w.Partitions) {
			continue
		}
		p := edit(m.Partition.Database)
		pp := &p.Partitions[m.Partition.Index]
		switch m.Kind {
		case placement.AddReplica:
			if !slices.Contains(pp.Replicas, string(m.To)) {
				pp.Replicas = append(pp.Replicas, string(m.To))
			}
		case placement.RemoveReplica:
			pp.Replicas = slices.DeleteFunc(pp.Replicas, func(r string) bool { return r == string(m.From) })
			if pp.Leader == string(m.From) {
				pp.Leader = string(plan.Target[m.Partition].Leader)
			}
		case placement.TransferLeader:
			pp.Leader = string(m.To)
		}
		set(m.Partition.Database, p)
	}

	// A replica whose removal was written, that still exists and that the
	// target keeps after all (a later plan changed its mind), is placed
	// again, or its group would remove it. A preferred leader that is dead
	// gives way to the target's leader (usually the one Raft elected, so
	// nothing moves): when it comes back, leader balancing decides what it
	// leads, instead of its group handing its old leaderships back at once.
	for _, db := range dbs {
		w, ok := written[db.Name]
		if !ok {
			continue
		}
		for i := range min(db.Partitions, len(w.Partitions)) {
			pid := placement.PartitionID{Database: db.Name, Index: i}
			lead := w.Partitions[i].Leader
			if p, edited := changed[db.Name]; edited {
				lead = p.Partitions[i].Leader
			}
			if to := plan.Target[pid].Leader; !alive[placement.NodeID(lead)] && to != "" && string(to) != lead {
				p := edit(db.Name)
				p.Partitions[i].Leader = string(to)
				set(db.Name, p)
			}
			a := cur[pid]
			for _, r := range plan.Target[pid].Replicas {
				if !slices.Contains(a.Replicas, r) && !slices.Contains(a.Learners, r) {
					continue
				}
				reps := w.Partitions[i].Replicas
				if p, edited := changed[db.Name]; edited {
					reps = p.Partitions[i].Replicas
				}
				if slices.Contains(reps, string(r)) {
					continue
				}
				p := edit(db.Name)
				p.Partitions[i].Replicas = append(p.Partitions[i].Replicas, string(r))
				set(db.Name, p)
			}
		}
	}

	for db, p := range changed {
		w, ok := written[db]
		if ok && samePartitions(w.Partitions, p.Partitions) {
			delete(changed, db)
			continue
		}
		if ok {
			p.Version = w.Version + 1
			changed[db] = p
		}
	}
	return changed
}
