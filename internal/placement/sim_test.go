package placement

import (
	"fmt"
	"maps"
	"slices"
	"testing"
)

// clone deep-copies a placement.
func clone(p Placement) Placement {
	out := Placement{}
	for id, a := range p {
		out[id] = Assignment{Replicas: slices.Clone(a.Replicas), Learners: slices.Clone(a.Learners), Leader: a.Leader}
	}
	return out
}

// sim drives Compute as a controller would, applying every move it returns
// as if it completed, and checks what must hold at every step.
type sim struct {
	t  testing.TB
	in Input
	// slowAdds makes adds land as learners, promoted one call later.
	slowAdds bool
	// forget, if set, says when to drop Input.Previous, as a new
	// controller taking over would.
	forget  func() bool
	calls   int
	moves   int
	history []string
}

func (s *sim) fail(format string, args ...any) {
	s.t.Helper()
	tail := s.history
	if len(tail) > 20 {
		tail = tail[len(tail)-20:]
	}
	s.t.Fatalf("%s\nlast calls:\n%s", fmt.Sprintf(format, args...), joinLines(tail))
}

func joinLines(ls []string) string {
	out := ""
	for _, l := range ls {
		out += "  " + l + "\n"
	}
	return out
}

// step calls Compute once and applies its answer; it reports whether
// anything changed.
func (s *sim) step() (Plan, bool) {
	s.t.Helper()
	cur := s.in.Current
	plan, err := Compute(s.in)
	if err != nil {
		s.fail("Compute: %v", err)
	}
	s.calls++
	s.moves += len(plan.Moves)
	s.history = append(s.history, fmt.Sprintf("call %d: %d created, moves %v, pending %d", s.calls, len(plan.Create), plan.Moves, plan.Pending))
	max := s.in.Options.MaxMoves
	if max == 0 {
		max = DefaultMaxMoves
	}
	inflight, adds := 0, 0
	for _, a := range cur {
		inflight += len(a.Learners)
	}
	for _, m := range plan.Moves {
		if m.Kind == AddReplica {
			adds++
		}
	}
	if len(plan.Moves) > max || adds > max-inflight && adds > 0 {
		s.fail("%d moves (%d adds, %d in flight), max %d", len(plan.Moves), adds, inflight, max)
	}
	next := clone(cur)
	// Learners of the previous call complete now.
	for id, a := range next {
		a.Replicas = append(a.Replicas, a.Learners...)
		a.Learners = nil
		next[id] = a
	}
	for id, a := range plan.Create {
		if old, ok := cur[id]; ok && len(old.Replicas)+len(old.Learners) > 0 {
			s.fail("create of existing partition %s", id)
		}
		if !slices.Contains(a.Replicas, a.Leader) {
			s.fail("created partition %s led by %q, not one of %v", id, a.Leader, a.Replicas)
		}
		next[id] = Assignment{Replicas: slices.Clone(a.Replicas), Leader: a.Leader}
	}
	before := map[PartitionID]int{}
	for id, a := range next {
		before[id] = len(a.Replicas)
	}
	for _, m := range plan.Moves {
		a, ok := next[m.Partition]
		if !ok {
			s.fail("move %v of unknown partition", m)
		}
		switch m.Kind {
		case AddReplica:
			if slices.Contains(a.Replicas, m.To) || slices.Contains(a.Learners, m.To) {
				s.fail("%v: node already holds the partition (%v)", m, a)
			}
			if s.slowAdds {
				a.Learners = append(a.Learners, m.To)
			} else {
				a.Replicas = append(a.Replicas, m.To)
			}
		case RemoveReplica:
			switch {
			case slices.Contains(a.Learners, m.From):
				a.Learners = slices.DeleteFunc(a.Learners, func(n NodeID) bool { return n == m.From })
			case slices.Contains(a.Replicas, m.From):
				a.Replicas = slices.DeleteFunc(a.Replicas, func(n NodeID) bool { return n == m.From })
				if a.Leader == m.From {
					s.fail("%v removes the leader", m)
				}
			default:
				s.fail("%v: node does not hold the partition (%v)", m, a)
			}
		case TransferLeader:
			if !slices.Contains(cur[m.Partition].Replicas, m.To) {
				s.fail("%v: target is not a caught-up voter (%v)", m, cur[m.Partition])
			}
			if m.From != a.Leader {
				s.fail("%v: leader is %q", m, a.Leader)
			}
			a.Leader = m.To
		}
		next[m.Partition] = a
	}
	for id, a := range next {
		rf := 0
		for _, db := range s.in.Databases {
			if db.Name == id.Database {
				rf = db.Replicas
			}
		}
		if len(a.Replicas) < min(rf, before[id]) {
			s.fail("partition %s dropped to %d voters from %d (rf %d)", id, len(a.Replicas), before[id], rf)
		}
	}
	changed := len(plan.Moves) > 0 || len(plan.Create) > 0 || !maps.EqualFunc(cur, next, func(a, b Assignment) bool {
		return slices.Equal(a.Replicas, b.Replicas) && slices.Equal(a.Learners, b.Learners) && a.Leader == b.Leader
	})
	s.in.Current = next
	s.in.Previous = plan.Target
	if s.forget != nil && s.forget() {
		s.in.Previous = nil
	}
	return plan, changed
}

// converge steps until nothing changes, within limit calls, and checks the
// result is a fixed point.
func (s *sim) converge(limit int) Plan {
	s.t.Helper()
	for {
		plan, changed := s.step()
		if !changed {
			if plan.Pending > 0 {
				s.fail("no moves but %d pending", plan.Pending)
			}
			return plan
		}
		if s.calls > limit {
			s.fail("no convergence after %d calls", s.calls)
		}
	}
}
