package controlsim

import (
	"fmt"

	"github.com/doppio-db/doppio/internal/lifecycle"
	"github.com/doppio-db/doppio/internal/replication"
)

// nodeChanges is how many membership changes a node drives at once, as
// lifecycle.Loop allows.
const nodeChanges = 4

// A follower's replication as the leader reports it to lifecycle.Next:
// caught up, or far behind.
const (
	caughtMatch = 1000
	behind      = 1 << 20
)

// leaderState is what g's leader passes to lifecycle.Next.
func (w *world) leaderState(g *group) lifecycle.State {
	l := w.nodes[g.leader]
	s := lifecycle.State{
		Self: l.raft, Local: lifecycle.Hosted, Leading: true, Changing: g.changingBy == g.leader,
		Now: at(w.now), Nodes: w.live,
	}
	s.Placed = make([]uint64, len(g.placed))
	for i, n := range g.placed {
		s.Placed[i] = w.nodes[n].raft
	}
	if g.preferred >= 0 {
		s.Preferred = w.nodes[g.preferred].raft
	}
	st := &lifecycle.Status{Role: replication.RoleLeader, Term: g.term, AppliedIndex: 1, Followers: map[uint64]lifecycle.Follower{}}
	for _, v := range g.voters {
		n := w.nodes[v]
		st.Voters = append(st.Voters, n.raft)
		if v == g.leader {
			continue
		}
		f := lifecycle.Follower{Match: caughtMatch, Active: n.alive}
		if !n.alive || w.now < n.startedAt+w.cfg.Timing.CatchUp {
			f.Lag = behind
		}
		st.Followers[n.raft] = f
	}
	for _, m := range g.learners {
		n := w.nodes[m]
		st.Learners = append(st.Learners, n.raft)
		f := lifecycle.Follower{Active: n.alive, Lag: behind}
		if n.alive && g.isCaught(m) {
			f.Match, f.Lag = caughtMatch, 0
		}
		st.Followers[n.raft] = f
	}
	s.Status = st
	return s
}

// reconcile is g's leader's pass over it: the step lifecycle.Next
// decides, started if the leader drives fewer than nodeChanges.
func (w *world) reconcile(e *event) {
	g := w.groups[e.g]
	g.reconciling = false
	if !g.exists || g.leader < 0 || !w.nodes[g.leader].alive {
		return
	}
	step := w.next(w.leaderState(g))
	switch step.Kind {
	case lifecycle.AddLearner, lifecycle.Promote, lifecycle.TransferLeadership, lifecycle.Remove:
	default:
		return
	}
	l := w.nodes[g.leader]
	if l.changing >= nodeChanges {
		if !g.waiting {
			g.waiting = true
			l.waiting = append(l.waiting, g.idx)
		}
		return
	}
	l.changing++
	w.tok++
	g.changingBy, g.changeTok = g.leader, w.tok
	t := w.cfg.Timing
	fail := w.rng.Float64() < t.ChangeFailure
	d := t.FailedChange
	if !fail {
		d = w.between(t.Change)
	}
	w.schedule(d, &event{kind: evChangeDone, g: g.idx, n: g.leader, tok: w.tok, life: l.life, step: step, fail: fail})
}

func (w *world) next(s lifecycle.State) lifecycle.Step {
	if w.cfg.Knobs.Next != nil {
		return w.cfg.Knobs.Next(s)
	}
	return lifecycle.Next(s)
}

// changeDone ends a membership change: it takes effect if it did not
// fail and its leader still leads (a change by a leader that died or
// lost leadership does not commit).
func (w *world) changeDone(e *event) {
	g, l := w.groups[e.g], w.nodes[e.n]
	if g.changingBy == e.n && g.changeTok == e.tok {
		g.changingBy = -1
	}
	if l.life != e.life {
		// Its leader died meanwhile: the change is lost with the slot.
		w.rep.Moves.FailedChanges++
		w.scheduleReconcile(g, w.cfg.Timing.Pass)
		return
	}
	l.changing--
	w.wake(l)
	if e.fail || g.leader != e.n {
		w.rep.Moves.FailedChanges++
		w.scheduleReconcile(g, w.cfg.Timing.Pass)
		return
	}
	target, ok := w.byRaft[e.step.Replica]
	if !ok {
		w.scheduleReconcile(g, w.cfg.Timing.Pass)
		return
	}
	w.applyStep(g, e.step.Kind, target)
	w.touch(g)
}

// wake lets the groups waiting for one of l's change slots try again.
func (w *world) wake(l *node) {
	for _, gi := range l.waiting {
		g := w.groups[gi]
		g.waiting = false
		w.scheduleReconcile(g, w.cfg.Timing.Pass)
	}
	l.waiting = l.waiting[:0]
}

// applyStep changes g's configuration as the committed step says, and
// checks what a move must never do.
func (w *world) applyStep(g *group, kind lifecycle.Kind, n int) {
	switch kind {
	case lifecycle.AddLearner:
		if g.isMember(n) {
			return
		}
		g.learners = insertSorted(g.learners, n)
		g.caught = remove(g.caught, n)
		w.rep.Moves.Adds++
		if w.nodes[n].alive {
			w.startSnapshot(g, n)
		}
	case lifecycle.Promote:
		if !g.isLearner(n) {
			return
		}
		before := w.liveMajority(g)
		g.learners = remove(g.learners, n)
		g.caught = remove(g.caught, n)
		delete(g.snaps, n)
		g.voters = insertSorted(g.voters, n)
		w.checkQuorum(g, before, "promote "+string(w.nodes[n].id))
	case lifecycle.Remove:
		if g.isLearner(n) {
			g.learners = remove(g.learners, n)
			g.caught = remove(g.caught, n)
			delete(g.snaps, n)
			w.rep.Moves.Removes++
			return
		}
		if !g.isVoter(n) {
			return
		}
		before, had := w.liveMajority(g), len(g.voters)
		g.voters = remove(g.voters, n)
		w.rep.Moves.Removes++
		what := "remove " + string(w.nodes[n].id)
		w.checkQuorum(g, before, what)
		if len(g.voters) < min(g.rf, had) {
			w.violate(Replication, g, "", fmt.Sprintf("%s left %d voters %v (replication factor %d)", what, len(g.voters), w.names(g.voters), g.rf))
		}
		if g.leader == n {
			g.leader = -1
			w.elect(g)
		}
	case lifecycle.TransferLeadership:
		if !g.isVoter(n) || !w.nodes[n].alive || g.leader == n {
			return
		}
		g.leader = n
		g.term++
		w.rep.Moves.Transfers++
		w.restartSnapshots(g)
	}
}

func (w *world) checkQuorum(g *group, before bool, what string) {
	if before && !w.liveMajority(g) {
		w.violate(Quorum, g, "", fmt.Sprintf("%s left voters %v without a live majority", what, w.names(g.voters)))
	}
}
