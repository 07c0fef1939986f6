package controlsim

import (
	"fmt"
	"slices"
	"time"

	"github.com/doppio-db/doppio/internal/controller"
	"github.com/doppio-db/doppio/internal/membership"
	"github.com/doppio-db/doppio/internal/placement"
)

// resync is how often the controller plans without a change, as the
// real one does; a round whose plan changed nothing is not repeated.
const resync = 5 * time.Second

// changed notes a change the controller watches, and plans.
func (w *world) changed() {
	w.sinceConverged, w.sinceSweep = true, true
	w.scheduleRound()
}

// scheduleRound queues a planning round Timing.Settle from now, unless
// one is queued already (the controller's coalescing).
func (w *world) scheduleRound() {
	if !w.roundDue {
		w.roundDue = true
		w.schedule(max(w.cfg.Timing.Settle, w.roundEnd+w.cfg.Timing.Settle-w.now), &event{kind: evRound})
	}
}

// round is one planning round of the controller, its decisions made by
// the controller's and placement's own functions.
func (w *world) round() {
	w.roundDue = false
	w.roundEnd = w.now + w.cfg.Timing.Round
	w.rep.Rounds++
	now := at(w.now)
	records := make([]controller.NodeRecord, 0, len(w.nodes))
	for _, n := range w.nodes {
		if n.registered {
			n.seen, n.found = true, false
		}
		if !n.seen {
			continue
		}
		if !n.registered && !n.found {
			n.found, n.foundDead = true, w.now
		}
		records = append(records, controller.NodeRecord{ID: n.id, Zone: zoneName(n.zone), Alive: n.registered, DeadSince: at(n.foundDead), Draining: n.draining})
	}
	nodes, untilGone := controller.Judge(records, now, w.cfg.DeadNodeDelay)
	alive := make(map[placement.NodeID]bool, len(nodes))
	for _, jn := range nodes {
		alive[jn.ID] = jn.State == placement.Alive
		n := w.nodes[w.byID[jn.ID]]
		if gone := jn.State == placement.Gone; gone != n.gone {
			n.gone = gone
			if gone {
				w.record(fmt.Sprintf("%s gone (dead for --dead-node-delay)", n.id))
			}
		}
	}
	cur := controller.Current(w.dbs, w.written, w.groupReport, w.registered)
	in := placement.Input{
		Nodes: nodes, Databases: w.dbs, Current: cur, Previous: w.previous,
		Options: placement.Options{MaxMoves: w.cfg.MaxMoves, MaxMovesPerNode: w.cfg.MaxMovesPerNode},
	}
	started := time.Now()
	plan, err := w.plan(in)
	w.rep.Planning += time.Since(started)
	if err != nil {
		w.fatal = fmt.Errorf("controlsim: round at %s: %w", clock(w.now), err)
		return
	}
	w.rep.MaxUnavailable = max(w.rep.MaxUnavailable, len(plan.Unavailable))
	changed := controller.Apply(w.dbs, w.written, cur, plan, alive)
	w.write(changed)
	stable := len(changed) == 0 && samePlacement(plan.Target, w.previous)
	w.previous = plan.Target
	if len(changed) > 0 {
		w.log("round: wrote %d databases, %d created, moves %v, %d pending", len(changed), len(plan.Create), movesSummary(plan.Moves), plan.Pending)
	}

	// The controller's timer: a round when the first down node is gone,
	// and a resync while the last plan was not a fixed point.
	w.timerTok++
	if untilGone > 0 {
		w.schedule(untilGone, &event{kind: evTimer, tok: w.timerTok})
	}
	if !stable {
		w.schedule(resync, &event{kind: evTimer, tok: w.timerTok})
	}
	if len(changed) > 0 {
		w.changed() // the write comes back through the watch
	}
	if stable && len(plan.Moves) == 0 && plan.Pending == 0 && w.sinceConverged && w.settled() {
		w.converged()
	}
}

func (w *world) plan(in placement.Input) (placement.Plan, error) {
	if w.cfg.Knobs.Plan != nil {
		return w.cfg.Knobs.Plan(in)
	}
	return placement.Compute(in)
}

func (w *world) timer(e *event) {
	if e.tok == w.timerTok {
		w.scheduleRound()
	}
}

// groupReport is what the controller reads of a partition's group: its
// leader's last report.
func (w *world) groupReport(p placement.PartitionID) (controller.Report, bool) {
	g := w.groups[w.byPart[p]]
	return g.report, g.reported
}

func (w *world) registered(id placement.NodeID) bool {
	i, ok := w.byID[id]
	return ok && w.nodes[i].registered
}

// write stores a round's placements, as etcd would, and the nodes act on
// them: a database's first placement starts its groups (the preferred
// leader campaigns at once), a changed one tells the partitions' leaders.
func (w *world) write(changed map[string]membership.Placement) {
	if len(changed) == 0 {
		return
	}
	w.rep.Writes++
	dbs := make([]string, 0, len(changed))
	for db := range changed {
		dbs = append(dbs, db)
	}
	slices.Sort(dbs)
	for _, db := range dbs {
		p := changed[db]
		old, existed := w.written[db]
		w.written[db] = p
		for i, pp := range p.Partitions {
			if existed && i < len(old.Partitions) && old.Partitions[i].Leader == pp.Leader && slices.Equal(old.Partitions[i].Replicas, pp.Replicas) {
				continue
			}
			g := w.groups[w.byPart[placement.PartitionID{Database: db, Index: i}]]
			placed := make([]int, 0, len(pp.Replicas))
			for _, r := range pp.Replicas {
				placed = append(placed, w.byID[placement.NodeID(r)])
			}
			preferred := -1
			if n, ok := w.byID[placement.NodeID(pp.Leader)]; ok && pp.Leader != "" {
				preferred = n
			}
			if !existed {
				g.exists = true
				g.voters = slices.Sorted(slices.Values(placed))
				g.campaigner = preferred
				if preferred < 0 && len(placed) > 0 {
					g.campaigner = placed[0]
				}
				if !g.electing {
					g.electing = true
					w.schedule(w.between(w.cfg.Timing.Change), &event{kind: evElection, g: g.idx})
				}
			} else {
				w.scheduleReconcile(g, w.cfg.Timing.Pass)
			}
			g.placed, g.preferred = placed, preferred
			w.recount(g)
		}
	}
	w.checkThrottle()
}

// checkThrottle reports the adds in flight past --max-moves, in total or
// to one node (--max-moves-per-node), once per crossing.
func (w *world) checkThrottle() {
	w.rep.MaxInFlight = max(w.rep.MaxInFlight, w.addingTotal)
	over := w.addingTotal > w.cfg.MaxMoves
	if over && !w.overTotal {
		w.violate(Throttle, nil, "", fmt.Sprintf("%d adds in flight, --max-moves %d", w.addingTotal, w.cfg.MaxMoves))
	}
	w.overTotal = over
	for _, n := range w.nodes {
		w.rep.MaxInFlightPerNode = max(w.rep.MaxInFlightPerNode, n.adding)
		over := n.adding > w.cfg.MaxMovesPerNode
		if over && !n.over {
			w.violate(Throttle, nil, n.id, fmt.Sprintf("%d adds in flight to %s, --max-moves-per-node %d", n.adding, n.id, w.cfg.MaxMovesPerNode))
		}
		n.over = over
	}
}

func samePlacement(a, b placement.Placement) bool {
	if len(a) != len(b) {
		return false
	}
	for id, x := range a {
		y, ok := b[id]
		if !ok || x.Leader != y.Leader || !slices.Equal(x.Replicas, y.Replicas) || !slices.Equal(x.Learners, y.Learners) {
			return false
		}
	}
	return true
}

// movesSummary counts a plan's moves by kind.
func movesSummary(ms []placement.Move) string {
	var c [3]int
	for _, m := range ms {
		c[m.Kind]++
	}
	return fmt.Sprintf("%d add, %d remove, %d transfer", c[placement.AddReplica], c[placement.RemoveReplica], c[placement.TransferLeader])
}
