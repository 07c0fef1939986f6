package replication

import (
	"context"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/keys"
)

// freeze stops node id's loop until the returned function is called: the
// node neither ticks nor steps a message, as if its process were paused.
func (c *cluster) freeze(id uint64) (unfreeze func()) {
	frozen, release := make(chan struct{}), make(chan struct{})
	go c.host(id).call(func() { close(frozen); <-release })
	<-frozen
	done := false
	return func() {
		if !done {
			done = true
			close(release)
		}
	}
}

// othersThan returns the nodes 1–3 other than id.
func othersThan(id uint64) []uint64 {
	var out []uint64
	for _, o := range []uint64{1, 2, 3} {
		if o != id {
			out = append(out, o)
		}
	}
	return out
}

// leasedLeader starts p on nodes 1–3 and returns its leader once a read
// there has earned it a lease.
func leasedLeader(t *testing.T, c *cluster, p keys.Partition) uint64 {
	t.Helper()
	c.startRaftGroup(p, []uint64{1, 2, 3})
	lead := c.leader(p, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := c.host(lead).Member(p).ReadIndex(ctx); err != nil {
		t.Fatal(err)
	}
	// The round was issued after start, and the view a read is answered
	// with already holds the lease it earned.
	if until := c.host(lead).Member(p).info.Load().leaseUntil; until.Before(start.Add(c.host(lead).lease)) {
		t.Fatalf("a quorum round earned the leader no lease: it runs to %v, the read began at %v", until, start)
	}
	return lead
}

// TestLeaderUnderLeaseReadsWithoutARound: within its lease the leader
// confirms a read without its loop (frozen here, so a round could not
// run); once the lease has run out, a read needs the loop again.
// (A lease of a second, so that the first read falls within it even on a
// loaded machine.)
func TestLeaderUnderLeaseReadsWithoutARound(t *testing.T) {
	c := newConfiguredCluster(t, func(cfg *Config) { cfg.LeaseTicks = 20 }, 1, 2, 3)
	p := testPartition(0)
	lead := leasedLeader(t, c, p)
	h := c.host(lead)
	g := h.Member(p)
	unfreeze := c.freeze(lead)
	defer unfreeze()

	leaseBefore, roundBefore, _ := h.Reads()
	until := g.info.Load().leaseUntil
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	err := g.ReadIndex(ctx)
	cancel()
	if err != nil {
		t.Fatalf("read within the lease (%v left), loop frozen: %v", time.Until(until), err)
	}
	if lease, _, _ := h.Reads(); lease != leaseBefore+1 {
		t.Fatalf("lease reads %d -> %d, want one more", leaseBefore, lease)
	}

	time.Sleep(time.Until(until))
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	err = g.ReadIndex(ctx)
	cancel()
	if err == nil {
		t.Fatal("a read after the lease ran out was confirmed without the loop")
	}
	if _, round, _ := h.Reads(); round != roundBefore+1 {
		t.Fatalf("quorum-round reads %d -> %d, want one more", roundBefore, round)
	}
}

// TestNewLeaderAcknowledgesNothingWithinAnOldLease: the leader holding a
// lease is paused and cut off; the others elect at once (as they do when
// its stream breaks) and take a write. That write must not be
// acknowledged before the old lease has run out, or the paused leader,
// resumed a moment later, could serve a read that misses it.
func TestNewLeaderAcknowledgesNothingWithinAnOldLease(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	p := testPartition(0)
	old := leasedLeader(t, c, p)
	unfreeze := c.freeze(old)
	defer unfreeze()
	oldLease := c.host(old).Member(p).info.Load().leaseUntil
	c.isolate(old)
	defer c.heal()
	rest := othersThan(old)
	for _, id := range rest {
		c.host(id).peerDown(old)
	}
	lead := c.electedAmong(p, rest, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.write(ctx, lead, p, 1); err != nil {
		t.Fatal(err)
	}
	acked := time.Now()
	if !acked.After(oldLease) {
		t.Fatalf("the new leader acknowledged a write %v before the old leader's lease ran out", oldLease.Sub(acked))
	}
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	if err := c.host(old).Member(p).ReadIndex(short); err == nil {
		t.Fatal("the deposed leader confirmed a read after a write it has not seen was acknowledged")
	}
}

// TestLeaseRenewsUnderSteadyReads: a group read continuously keeps its
// lease: after the first round, reads are confirmed by renewals issued in
// the background, never by waiting for a round of their own. (A lease of
// a second, so that a renewal has half a second to come back even on a
// loaded machine.)
func TestLeaseRenewsUnderSteadyReads(t *testing.T) {
	c := newConfiguredCluster(t, func(cfg *Config) { cfg.LeaseTicks = 20 }, 1, 2, 3)
	p := testPartition(0)
	lead := leasedLeader(t, c, p)
	h := c.host(lead)
	g := h.Member(p)
	_, roundBefore, _ := h.Reads()
	leaseBefore, _, _ := h.Reads()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	end := time.Now().Add(3 * h.lease)
	n := 0
	for time.Now().Before(end) {
		if err := g.ReadIndex(ctx); err != nil {
			t.Fatal(err)
		}
		n++
		time.Sleep(2 * time.Millisecond)
	}
	lease, round, _ := h.Reads()
	if round != roundBefore {
		t.Fatalf("%d of %d reads waited for a quorum round; the lease was not renewed ahead", round-roundBefore, n)
	}
	if lease-leaseBefore != uint64(n) {
		t.Fatalf("lease reads %d, want %d", lease-leaseBefore, n)
	}
}

// TestTransferHandsOverWithoutAHold: a leader that hands leadership over
// gives up its lease first and tells the transferee, which then leads the
// next term without holding its appends: nobody holds a lease it could
// violate.
func TestTransferHandsOverWithoutAHold(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	p := testPartition(0)
	old := leasedLeader(t, c, p)
	to := othersThan(old)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.host(old).Member(p).TransferLeadership(ctx, to); err != nil {
		t.Fatal(err)
	}
	g := c.host(to).Member(p)
	var term, skip uint64
	var holdUntil time.Time
	if err := c.host(to).call(func() { term, skip, holdUntil = g.term, g.skipHold, g.holdUntil }); err != nil {
		t.Fatal(err)
	}
	if skip != term || !holdUntil.IsZero() {
		t.Fatalf("the transferee leads term %d (may skip the hold in term %d) and held its appends until %v", term, skip, holdUntil)
	}
	if _, err := c.write(ctx, to, p, 1); err != nil {
		t.Fatal(err)
	}
}

// TestTransferringLeaderServesNoLeaseReads: once a leader has sent
// MsgTimeoutNow, its reads take quorum rounds, even while it still leads
// because the transferee does not answer, and no round earns it a lease
// again in that term: the transferee may lead at once.
func TestTransferringLeaderServesNoLeaseReads(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	p := testPartition(0)
	old := leasedLeader(t, c, p)
	to := othersThan(old)[0]
	unfreeze := c.freeze(to) // caught up, so raft sends it MsgTimeoutNow at once
	defer unfreeze()
	h := c.host(old)
	g := h.Member(p)
	if err := h.call(func() {
		g.rn.TransferLeader(to)
		h.dirty[g] = struct{}{}
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the leader to give up its lease", func() bool {
		var released, term uint64
		_ = h.call(func() { released, term = g.released, g.term })
		return released == term && term != 0
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	leaseBefore, roundBefore, _ := h.Reads()
	for range 5 {
		if err := g.ReadIndex(ctx); err != nil {
			t.Fatal(err)
		}
	}
	lease, round, _ := h.Reads()
	if lease != leaseBefore || round-roundBefore != 5 {
		t.Fatalf("after giving up its lease the leader confirmed %d reads by lease, %d by a round; want 0 and 5", lease-leaseBefore, round-roundBefore)
	}
}
