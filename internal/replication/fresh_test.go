package replication

import (
	"testing"
	"time"
)

// A follower restarted behind its leader hears the leader's heartbeats
// before it has the entries it missed. Raft caps a heartbeat's commit
// index at what the leader knows the follower holds, so the follower must
// not take one as proof it is caught up: FreshAt stays before the writes
// it missed until it has applied what the leader had committed, so a read
// tolerating a bounded staleness is not served from the old state.
func TestRestartedFollowerBehindItsLeaderIsNotFresh(t *testing.T) {
	c, p, lead, ctx := threeReplicas(t)
	follower := othersThan(lead)[0]
	if _, err := c.write(ctx, lead, p, 0); err != nil {
		t.Fatal(err)
	}
	c.stop(follower)
	stopped := time.Now()
	var last uint64
	for i := 1; i <= 20; i++ {
		scn, err := c.write(ctx, lead, p, i)
		if err != nil {
			t.Fatal(err)
		}
		last = scn.Sequence
	}
	c.start(follower).transport.starved.Store(true)
	c.startRaftGroup(p, []uint64{1, 2, 3}, follower)
	g := c.host(follower).Member(p)

	// Wait until the follower knows its leader, then watch it through many
	// heartbeat rounds while it cannot catch up.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if l, _ := g.Leader(); l == lead {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("restarted follower %d never heard of leader %d", follower, lead)
		}
		time.Sleep(5 * time.Millisecond)
	}
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if applied := g.Applied().Sequence; applied >= last {
			t.Fatalf("follower applied sequence %d though starved of entries up to %d", applied, last)
		}
		if at := g.FreshAt(); at.After(stopped) {
			t.Fatalf("follower at sequence %d of %d counts itself fresh at %v, after it stopped at %v and missed writes",
				g.Applied().Sequence, last, at, stopped)
		}
	}

	c.host(follower).transport.starved.Store(false)
	c.waitApplied(p, last, 10*time.Second, follower)
	deadline = time.Now().Add(10 * time.Second)
	for {
		if at := g.FreshAt(); time.Since(at) < time.Second {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("caught-up follower's FreshAt is %v, want within the last second", g.FreshAt())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
