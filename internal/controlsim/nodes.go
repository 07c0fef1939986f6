package controlsim

import (
	"slices"

	"github.com/doppio-db/doppio/internal/lifecycle"
	"github.com/doppio-db/doppio/internal/membership"
	"github.com/doppio-db/doppio/internal/placement"
)

// addNode starts a new node in zone z: it registers at once.
func (w *world) addNode(z int) *node {
	i := len(w.nodes)
	n := &node{id: nodeName(i), zone: z, startedAt: w.now - w.cfg.Timing.CatchUp}
	n.raft = membership.RaftID(string(n.id))
	w.nodes = append(w.nodes, n)
	w.byID[n.id] = i
	w.byRaft[n.raft] = i
	w.register(i)
	return n
}

// register starts node i's registration: the controller and the
// lifecycle loops count it live.
func (w *world) register(i int) {
	n := w.nodes[i]
	n.alive, n.registered = true, true
	w.live[n.raft] = lifecycle.Node{}
	w.changed()
}

// kill stops node i's process: its leaderships end at once (the groups
// elect after their timeout), its snapshots and changes fail, and its
// registration goes when its lease expires.
func (w *world) kill(i int) {
	n := w.nodes[i]
	if !n.alive {
		return
	}
	n.alive = false
	n.life++
	n.changing = 0
	for _, gi := range n.waiting {
		w.groups[gi].waiting = false
	}
	n.waiting = n.waiting[:0]
	w.schedule(w.cfg.Timing.LeaseTTL, &event{kind: evLeaseExpired, n: i, life: n.life})
	for _, g := range w.groups {
		if g.changingBy == i {
			g.changingBy = -1
		}
		if g.isLearner(i) {
			delete(g.snaps, i)
			g.caught = remove(g.caught, i)
		}
		if g.leader == i {
			g.leader = -1
			w.elect(g)
		}
	}
}

// leaseExpired removes node i's registration if it is still dead in the
// life that lease belonged to.
func (w *world) leaseExpired(e *event) {
	n := w.nodes[e.n]
	if n.alive || n.life != e.life || !n.registered {
		return
	}
	n.registered = false
	delete(w.live, n.raft)
	w.changed()
	// The leaders' lifecycle loops see the node go.
	for _, g := range w.groups {
		if g.isMember(e.n) || slices.Contains(g.placed, e.n) {
			w.scheduleReconcile(g, w.cfg.Timing.Pass)
		}
	}
}

// restart starts node i again with its data: it registers, its groups
// without a leader may elect again, its learners get snapshots, and its
// voters catch up from the log within Timing.CatchUp.
func (w *world) restart(i int) {
	n := w.nodes[i]
	if n.alive {
		return
	}
	n.startedAt = w.now
	w.register(i)
	for _, g := range w.groups {
		if !g.exists {
			continue
		}
		if g.isVoter(i) && g.leader < 0 {
			w.elect(g)
		}
		if g.isLearner(i) && g.leader >= 0 {
			w.startSnapshot(g, i)
		}
	}
	w.schedule(w.cfg.Timing.CatchUp, &event{kind: evCaughtUp, n: i, life: n.life})
}

// caughtUp: node i's voters are caught up; the leaders of its groups
// look again (a leadership may go back to it).
func (w *world) caughtUp(e *event) {
	if n := w.nodes[e.n]; !n.alive || n.life != e.life {
		return
	}
	for _, g := range w.groups {
		if g.isMember(e.n) || slices.Contains(g.placed, e.n) {
			w.scheduleReconcile(g, w.cfg.Timing.Pass)
		}
	}
}

// scenarioEvent applies one event of the scenario.
func (w *world) scenarioEvent(e Event) {
	switch e.Kind {
	case Join:
		w.addNode(e.Zone)
	case Kill:
		w.kill(e.Node)
	case Restart:
		if z := w.nodes[e.Node].zone; w.zoneDown[z] {
			w.zoneBack[z] = append(w.zoneBack[z], e.Node)
			return
		}
		w.restart(e.Node)
	case Drain:
		w.nodes[e.Node].draining = true
		w.changed()
	case ZoneDown:
		w.zoneDown[e.Zone] = true
		for i, n := range w.nodes {
			if n.zone == e.Zone && n.alive {
				w.kill(i)
				w.zoneBack[e.Zone] = append(w.zoneBack[e.Zone], i)
			}
		}
	case ZoneUp:
		w.zoneDown[e.Zone] = false
		for _, i := range w.zoneBack[e.Zone] {
			w.restart(i)
		}
		w.zoneBack[e.Zone] = nil
	case Create:
		w.createDatabase(e.Database)
	}
}

// createDatabase adds db to the catalog; the controller places it.
func (w *world) createDatabase(db placement.Database) {
	w.dbs = append(w.dbs, db)
	for p := range db.Partitions {
		g := &group{id: placement.PartitionID{Database: db.Name, Index: p}, idx: len(w.groups), rf: db.Replicas, leader: -1, campaigner: -1, changingBy: -1, preferred: -1}
		w.byPart[g.id] = g.idx
		w.groups = append(w.groups, g)
	}
	w.changed()
}
