package replication

import (
	"sync/atomic"
	"testing"
	"time"
)

// waitHealth polls node id's Health until ok accepts it.
func (c *cluster) waitHealth(id uint64, within time.Duration, ok func(Health) bool) Health {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		h, err := c.host(id).Health()
		if err != nil {
			c.t.Fatal(err)
		}
		if ok(h) {
			return h
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("node %d: health %+v not reached within %v", id, h, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestHealthCountsLeadersLiveVotersLagAndLeaderChanges(t *testing.T) {
	var applies atomic.Int64
	c := newConfiguredCluster(t, func(cfg *Config) {
		cfg.OnApply = func(d time.Duration) {
			if d < 0 {
				t.Errorf("negative apply duration %v", d)
			}
			applies.Add(1)
		}
	}, 1, 2, 3)
	p := testPartition(0)
	c.startRaftGroup(p, []uint64{1, 2, 3})
	lead := c.leader(p, 5*time.Second)
	ctx := t.Context()
	scn, err := c.write(ctx, lead, p, 0)
	if err != nil {
		t.Fatal(err)
	}
	c.waitApplied(p, scn.Sequence, 5*time.Second, 1, 2, 3)
	if applies.Load() == 0 {
		t.Fatal("OnApply was never called for an applied write")
	}

	h := c.waitHealth(lead, 5*time.Second, func(h Health) bool { return h.MaxFollowerLag == 0 })
	if h.Replicas != 1 || h.Leaders != 1 || h.Leaderless != 0 || len(h.Led) != 1 {
		t.Fatalf("leader's health = %+v, want one replica, leading", h)
	}
	if g := h.Led[0]; string(g.Partition) != string(p) || g.Voters != 3 || g.LiveVoters != 3 {
		t.Fatalf("led group = %+v, want %x with 3 voters, all alive", g, []byte(p))
	}
	var follower uint64
	for _, id := range c.ids() {
		if id == lead {
			continue
		}
		follower = id
		f, err := c.host(id).Health()
		if err != nil {
			t.Fatal(err)
		}
		if f.Replicas != 1 || f.Leaders != 0 || f.Leaderless != 0 || len(f.Led) != 0 || f.LeaderChanges < 1 {
			t.Fatalf("follower %d's health = %+v, want one replica knowing its leader", id, f)
		}
	}

	// A follower stops: its voter is no longer alive, and it misses
	// exactly the writes made without it.
	c.stop(follower)
	for i := 1; i <= 5; i++ {
		if _, err := c.write(ctx, lead, p, i); err != nil {
			t.Fatal(err)
		}
	}
	h = c.waitHealth(lead, 5*time.Second, func(h Health) bool { return len(h.Led) == 1 && h.Led[0].LiveVoters == 2 })
	if h.MaxFollowerLag != 5 {
		t.Fatalf("max follower lag = %d entries, want 5 (the writes the stopped follower missed)", h.MaxFollowerLag)
	}

	// The leader stops too: the last node knows no leader, and counts the
	// next leader it learns of.
	var last uint64
	for _, id := range c.ids() {
		if id != lead {
			last = id
		}
	}
	before, err := c.host(last).Health()
	if err != nil {
		t.Fatal(err)
	}
	c.stop(lead)
	c.waitHealth(last, 10*time.Second, func(h Health) bool { return h.Leaderless == 1 && h.Leaders == 0 })
	c.start(lead)
	c.startRaftGroup(p, []uint64{1, 2, 3}, lead)
	c.waitHealth(last, 10*time.Second, func(h Health) bool {
		return h.Leaderless == 0 && h.LeaderChanges > before.LeaderChanges
	})
}
