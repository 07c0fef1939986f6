package replication

import (
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// Leader leases: a linearizable read at the leader without a quorum round.
//
// A ReadIndex round the leader issued at time t (its clock) and a quorum
// answered proves that no other leader had been elected before t: each
// voter of that quorum answered in the leader's term, so had not yet voted
// in a later one. The leader then holds a lease until t + lease, and while
// it holds one it serves linearizable reads from its applied state at once
// (Member.ReadIndex).
//
// What makes that safe is the other half: a new leader commits nothing
// until every lease of an earlier term has run out. Any quorum that elects
// it shares a voter with the quorum behind each earlier lease, and that
// voter answered the old round before it voted, so the old lease began
// before the new leader won. The new leader holds back its appends
// (MsgApp) for hold = lease plus a drift margin, measured on its own clock
// from after it won; without appends no follower can acknowledge an entry
// of its term, so it commits nothing. Nothing committed means no write
// acknowledged anywhere (an entry of an older term is committed only with
// one of the new term), so every read an old leader served under its
// lease saw every acknowledged write.
//
// The fast failover is kept (a survivor campaigns as soon as the leader's
// stream breaks: followers make no promise about their votes); a failover
// costs hold, a fraction of a second, before the new leader accepts writes
// and reads. Both clocks are monotonic; the
// margin covers their rates differing by up to 1/leaseDriftDivisor.
// Heartbeats are not held, so the followers learn the new leader at once
// and do not start another election meanwhile.
//
// A leadership transfer skips the hold: the leader gives its lease up
// before it sends MsgTimeoutNow, and says so once no earlier lease can be
// left (renounceLease); the transferee that wins the next term commits at
// once.
//
// Under load the lease is renewed before it runs out: a read served under
// a lease with less than half of it left asks the loop for a round (one at
// a time per Raft group), so a busy Raft group's reads never wait for one.

// leaseDriftDivisor: the new leader's hold is lease + lease/leaseDriftDivisor.
const leaseDriftDivisor = 8

// Reads counts how this node's linearizable reads were confirmed: under a
// leader lease, by a quorum round (ReadIndex), or as the sole voter.
func (h *Host) Reads() (lease, round, sole uint64) {
	return h.leaseReads.Load(), h.roundReads.Load(), h.soleReads.Load()
}

// leased reports whether inf (a published view) lets a read be served
// without a round: the ready leader, within the lease earned in its term.
// It asks for a renewal when less than half of the lease is left.
func (g *Member) leased(inf *memberInfo) bool {
	if !inf.leader || !inf.ready || inf.removed {
		return false
	}
	left := time.Until(inf.leaseUntil)
	if left <= 0 {
		return false
	}
	if left < g.host.lease/2 && g.renewing.CompareAndSwap(false, true) {
		h := g.host
		if !h.enqueue(func() {
			if g.isLeader && !g.removed {
				g.renew = true
				h.readGroups[g] = struct{}{}
				return
			}
			g.renewing.Store(false)
		}) {
			g.renewing.Store(false)
		}
	}
	return true
}

// extendLease records the quorum's answer to a round issued in rb's term.
func (g *Member) extendLease(rb *readBatch) {
	if rb.renew {
		g.renewing.Store(false)
	}
	if g.host.lease == 0 || !g.isLeader || rb.term != g.term || g.released == g.term {
		return
	}
	if until := rb.at.Add(g.host.lease); until.After(g.leaseUntil) {
		g.leaseUntil = until
	}
}

// leadership updates the lease and the hold for a Ready: a lease belongs to
// one term of leadership; a leader of a new term holds its appends.
func (g *Member) leadership(leader bool, now time.Time) {
	if !leader || g.term != g.leaseTerm {
		g.leaseUntil = time.Time{}
		g.leaseTerm = 0
		g.held, g.holding = nil, false
	}
	if leader && g.leaseTerm == 0 {
		g.leaseTerm = g.term
		if h := g.host; h.hold > 0 && !g.soleVoter() && g.term != g.skipHold {
			g.holdUntil, g.holding = now.Add(h.hold), true
			// Released as soon as it ends, by the loop.
			time.AfterFunc(time.Until(g.holdUntil), func() {
				h.enqueue(func() {
					if g.holding {
						g.releaseHeld(time.Now())
					}
				})
			})
		}
	}
}

// renounceLease ends this leader's lease for good in its term, as it hands
// leadership over (it sends MsgTimeoutNow), and reports whether no lease
// at all is left: none of its own, none of an earlier term (its hold, which
// outlasts them, is over). The transferee that wins the next term then need
// not hold its appends: nobody can hold a lease it would violate, since a
// leader of that term is the first leader after this one. A transferee that
// wins a later term holds: another leader may have come between.
func (g *Member) renounceLease(now time.Time) bool {
	g.released = g.term
	if !g.leaseUntil.IsZero() {
		g.leaseUntil = time.Time{}
		g.publish()
	}
	return g.isLeader && g.host.lease > 0 && !g.holding && !now.Before(g.holdUntil)
}

// holdBack keeps m back if it is an append of a leader still holding them.
func (g *Member) holdBack(m *raftpb.Message, now time.Time) bool {
	if !g.holding {
		return false
	}
	if !now.Before(g.holdUntil) {
		g.releaseHeld(now)
		return false
	}
	if m.GetType() != raftpb.MsgApp {
		return false
	}
	g.held = append(g.held, m)
	return true
}

// releaseHeld sends the appends held back once the hold is over.
func (g *Member) releaseHeld(now time.Time) {
	if now.Before(g.holdUntil) {
		return
	}
	held := g.held
	g.held, g.holding = nil, false
	for _, m := range held {
		g.host.transport.send(m.GetTo(), g.name(), g.hints(m), m)
	}
	if len(held) > 0 {
		g.host.dirty[g] = struct{}{}
	}
}
