package controlsim

import (
	"cmp"
	"slices"
	"time"

	"github.com/doppio-db/doppio/internal/controller"
	"github.com/doppio-db/doppio/internal/placement"
)

// node is one simulated node.
type node struct {
	id   placement.NodeID
	raft uint64
	zone int
	// alive: its process runs. registered: its lease is in etcd, so the
	// controller and the other nodes count it live.
	alive, registered bool
	draining          bool
	// seen: the controller has a record of it; foundDead is when a round
	// first found it unregistered (valid while dead).
	seen      bool
	found     bool
	foundDead time.Duration
	gone      bool // the last round judged it gone
	// startedAt: its voters are caught up Timing.CatchUp after it.
	startedAt time.Duration
	// life counts its deaths: an event of an earlier life is void.
	life uint64
	// changing counts the membership changes it drives as a leader;
	// waiting are the groups whose next change waits for one to end.
	changing int
	waiting  []int
	// adding counts the replicas placed on it that are not voters yet;
	// over: it was above --max-moves-per-node at the last look.
	adding int
	over   bool
}

// group is one partition's Raft group, as the replication layer would
// hold it, and its placement as written.
type group struct {
	id  placement.PartitionID
	idx int
	rf  int
	// exists: its replicas were started from the database's first
	// placement. campaigner is the first voter, which campaigns at once.
	exists     bool
	campaigner int
	voters     []int // node indices, sorted
	learners   []int
	leader     int // -1: none
	term       uint64
	// caught are the learners whose snapshot completed; snaps the
	// learners a snapshot is streaming to, with the snapshot's token.
	caught []int
	snaps  map[int]uint64
	// changingBy is the node driving a change of the group (-1: none),
	// changeTok that change.
	changingBy int
	changeTok  uint64
	placed     []int // the written placement's replicas, in its order
	preferred  int   // -1: none
	// adds are the placed replicas that are not voters: adds in flight.
	adds []int
	// report is what its leader last published (reported: ever).
	report   controller.Report
	reported bool
	// reconciling, electing, waiting: such an event is queued.
	reconciling, electing, waiting bool
	// episodeVoters are its voters at the last convergence.
	episodeVoters []int
}

func (g *group) isVoter(n int) bool   { return slices.Contains(g.voters, n) }
func (g *group) isLearner(n int) bool { return slices.Contains(g.learners, n) }
func (g *group) isMember(n int) bool  { return g.isVoter(n) || g.isLearner(n) }
func (g *group) isCaught(n int) bool  { return slices.Contains(g.caught, n) }

func insertSorted(s []int, n int) []int {
	i, found := slices.BinarySearch(s, n)
	if found {
		return s
	}
	return slices.Insert(s, i, n)
}

func remove(s []int, n int) []int {
	return slices.DeleteFunc(s, func(m int) bool { return m == n })
}

// liveMajority reports whether a majority of g's voters run.
func (w *world) liveMajority(g *group) bool {
	live := 0
	for _, v := range g.voters {
		if w.nodes[v].alive {
			live++
		}
	}
	return 2*live > len(g.voters)
}

// touch follows a change of g's configuration or leader: its leader
// publishes it, the controller plans, the leader looks at it again, and
// the adds in flight are counted again.
func (w *world) touch(g *group) {
	if g.leader >= 0 {
		g.report = controller.Report{Leader: w.nodes[g.leader].id}
		g.report.Term = g.term
		g.report.Voters = w.names(g.voters)
		g.report.Learners = w.names(g.learners)
		g.reported = true
	}
	w.recount(g)
	w.changed()
	w.scheduleReconcile(g, w.cfg.Timing.Pass)
}

func (w *world) names(ns []int) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = string(w.nodes[n].id)
	}
	return out
}

// recount counts g's adds in flight again.
func (w *world) recount(g *group) {
	for _, n := range g.adds {
		w.nodes[n].adding--
		w.addingTotal--
	}
	g.adds = g.adds[:0]
	if g.exists {
		for _, n := range g.placed {
			if !g.isVoter(n) {
				g.adds = append(g.adds, n)
				w.nodes[n].adding++
				w.addingTotal++
			}
		}
	}
	if last := len(w.rep.InFlight) - 1; last < 0 || w.rep.InFlight[last].InFlight != w.addingTotal {
		if last >= 0 && w.rep.InFlight[last].At == w.now {
			w.rep.InFlight[last].InFlight = w.addingTotal
		} else {
			w.rep.InFlight = append(w.rep.InFlight, Sample{At: w.now, InFlight: w.addingTotal})
		}
	}
}

// startSnapshot streams a snapshot to learner n of g (again, if one was
// streaming).
func (w *world) startSnapshot(g *group, n int) {
	if g.snaps == nil {
		g.snaps = map[int]uint64{}
	}
	w.tok++
	g.snaps[n] = w.tok
	t := w.cfg.Timing
	fail := w.rng.Float64() < t.SnapshotFailure
	w.schedule(w.between(t.Snapshot), &event{kind: evSnapshotDone, g: g.idx, n: n, tok: w.tok, fail: fail})
}

// restartSnapshots streams a snapshot to every live learner not caught
// up: the group has a new leader, or gained a learner's node back.
func (w *world) restartSnapshots(g *group) {
	if g.leader < 0 {
		return
	}
	for _, l := range g.learners {
		if w.nodes[l].alive && !g.isCaught(l) {
			w.startSnapshot(g, l)
		}
	}
}

func (w *world) snapshotDone(e *event) {
	g := w.groups[e.g]
	if g.snaps[e.n] != e.tok {
		return // cancelled, or superseded by a newer snapshot
	}
	if e.fail {
		w.rep.Moves.FailedSnapshots++
		w.startSnapshot(g, e.n)
		return
	}
	delete(g.snaps, e.n)
	g.caught = insertSorted(g.caught, e.n)
	w.scheduleReconcile(g, w.cfg.Timing.Pass)
}

// elect makes g elect a leader after an election timeout.
func (w *world) elect(g *group) {
	if !g.electing {
		g.electing = true
		w.schedule(w.between(w.cfg.Timing.Election), &event{kind: evElection, g: g.idx})
	}
}

// election elects the first voter of a new group, else the survivor the
// replication layer picks (a hash of the partition over the live voters
// in Raft id order), if a majority of the voters runs.
func (w *world) election(e *event) {
	g := w.groups[e.g]
	g.electing = false
	if g.leader >= 0 || !w.liveMajority(g) {
		return
	}
	var live []int
	for _, v := range g.voters {
		if w.nodes[v].alive {
			live = append(live, v)
		}
	}
	leader := -1
	if c := g.campaigner; c >= 0 && w.nodes[c].alive && g.isVoter(c) {
		leader = c
	} else {
		slices.SortFunc(live, func(a, b int) int { return cmp.Compare(w.nodes[a].raft, w.nodes[b].raft) })
		leader = live[partitionHash(g.id)%uint64(len(live))]
	}
	g.campaigner = -1
	g.leader = leader
	g.term++
	w.rep.Moves.Elections++
	w.restartSnapshots(g)
	w.touch(g)
}

// partitionHash is FNV-1a of the partition's name.
func partitionHash(p placement.PartitionID) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range []byte(p.String()) {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

func (w *world) scheduleReconcile(g *group, d time.Duration) {
	if !g.reconciling {
		g.reconciling = true
		w.schedule(d, &event{kind: evReconcile, g: g.idx})
	}
}
