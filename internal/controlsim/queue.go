package controlsim

import (
	"container/heap"
	"time"

	"github.com/doppio-db/doppio/internal/lifecycle"
)

// evKind is what a queued event does when its time comes.
type evKind int

const (
	evScenario     evKind = iota // a scenario's event
	evRound                      // the controller plans
	evTimer                      // a dead-node delay expires, or a re-plan is due
	evReconcile                  // a partition's leader takes its next step
	evChangeDone                 // a membership change commits or fails
	evSnapshotDone               // a learner's snapshot completes or fails
	evElection                   // a leaderless group elects
	evLeaseExpired               // a dead node's registration goes
	evCaughtUp                   // a restarted node's voters caught up
	evSweep                      // the periodic passes the queue does not hold
)

// event is one queued event; which fields matter depends on kind.
type event struct {
	at   time.Duration
	seq  uint64 // ties at the same time go in scheduling order
	kind evKind
	g    int    // the group
	n    int    // the node
	tok  uint64 // the scheduling it belongs to: a stale one is void
	life uint64 // the life of node n it belongs to
	step lifecycle.Step
	fail bool
	sc   Event
}

type queue []*event

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *queue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return e
}

// schedule queues e after d.
func (w *world) schedule(d time.Duration, e *event) {
	e.at = w.now + d
	w.seq++
	e.seq = w.seq
	if e.kind != evScenario {
		w.busy++
	}
	heap.Push(&w.q, e)
}

// pop takes the next event and moves the clock to it.
func (w *world) pop() *event {
	e := heap.Pop(&w.q).(*event)
	if e.kind != evScenario {
		w.busy--
	}
	w.now = e.at
	return e
}
