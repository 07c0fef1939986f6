package replication

import (
	"context"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/keys"
)

// truncated returns node id's truncation index and applied index of p, as
// its loop sees them.
func (c *cluster) truncated(id uint64, p keys.Partition) (trunc, applied uint64) {
	c.t.Helper()
	g := c.host(id).Group(p)
	if err := c.host(id).call(func() { trunc, applied = g.st.trunc.Index, g.st.applied.Index }); err != nil {
		c.t.Fatal(err)
	}
	return trunc, applied
}

// writeN replicates write sets from, from+1, … (n of them) through the
// leader lead and waits until nodes on applied them.
func (c *cluster) writeN(lead uint64, p keys.Partition, from, n int, on ...uint64) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var scn uint64
	for i := from; i < from+n; i++ {
		s, err := c.write(ctx, lead, p, i)
		if err != nil {
			c.t.Fatal(err)
		}
		scn = s.Sequence
	}
	c.waitApplied(p, scn, 10*time.Second, on...)
}

// TestLeaderTruncatesWhatNoLiveFollowerLacks: with the retention bound out
// of reach, a leader truncates its log up to the oldest entry a follower on
// a live node lacks (so a follower that keeps up leaves nothing behind, and
// one that lags, its process paused, still catches up from the log), and
// past a follower whose node is down (which then gets a snapshot). The
// followers keep their logs: they do not know what their peers lack.
func TestLeaderTruncatesWhatNoLiveFollowerLacks(t *testing.T) {
	c := newConfiguredCluster(t, func(cfg *Config) {
		cfg.LogRetain = 1 << 30
		cfg.CompactInterval = time.Millisecond // every tick
	}, 1, 2, 3)
	p := testPartition(0)
	c.startGroup(p, []uint64{1, 2, 3})
	lead := c.leader(p, 5*time.Second)
	others := othersThan(lead)
	initial := map[uint64]uint64{}
	for _, id := range others {
		initial[id], _ = c.truncated(id, p)
	}

	c.writeN(lead, p, 0, 2*truncateMin, 1, 2, 3)
	_, applied := c.truncated(lead, p)
	waitFor(t, "the leader truncating what every follower has", func() bool {
		trunc, _ := c.truncated(lead, p)
		return trunc+truncateMin > applied // it truncates truncateMin at a time
	})
	for _, id := range others {
		if trunc, _ := c.truncated(id, p); trunc != initial[id] {
			t.Fatalf("follower %d truncated its log from %d to %d; followers keep theirs", id, initial[id], trunc)
		}
	}

	// A paused follower lags: the leader keeps what it lacks.
	lagging := others[1]
	_, had := c.truncated(lagging, p)
	unfreeze := c.freeze(lagging)
	c.writeN(lead, p, 2*truncateMin, 2*truncateMin, lead, others[0])
	time.Sleep(20 * c.host(lead).cfg.TickInterval)
	if trunc, _ := c.truncated(lead, p); trunc > had {
		unfreeze()
		t.Fatalf("the leader truncated its log to %d while a live follower had only %d", trunc, had)
	}
	unfreeze()
	c.waitApplied(p, c.host(lead).Group(p).Applied().Sequence, 10*time.Second, lagging)
	if n, _ := c.host(lead).SnapshotsSent(); n != 0 {
		t.Fatalf("the paused follower needed %d snapshot(s); the log had its entries", n)
	}

	// A follower whose node is down holds nothing back.
	_, had = c.truncated(lagging, p)
	c.stop(lagging)
	c.writeN(lead, p, 4*truncateMin, 2*truncateMin, lead, others[0])
	_, applied = c.truncated(lead, p)
	waitFor(t, "the leader truncating past a down follower", func() bool {
		trunc, _ := c.truncated(lead, p)
		return trunc > had && trunc+truncateMin > applied
	})
	c.start(lagging)
	c.startGroup(p, []uint64{1, 2, 3}, lagging)
	c.waitApplied(p, c.host(lead).Group(p).Applied().Sequence, 10*time.Second, lagging)
	if n, _ := c.host(lead).SnapshotsSent(); n != 1 {
		t.Fatalf("the restarted follower got %d snapshots, want 1", n)
	}
}

// TestSoleVoterKeepsNoLog: a single voter truncates its log to its applied
// index, nobody else needs it.
func TestSoleVoterKeepsNoLog(t *testing.T) {
	c := newConfiguredCluster(t, func(cfg *Config) {
		cfg.LogRetain = 1 << 30
		cfg.CompactInterval = time.Millisecond
	}, 1)
	p := testPartition(0)
	c.startGroup(p, []uint64{1})
	c.leader(p, 5*time.Second)
	c.writeN(1, p, 0, truncateMin, 1)
	_, applied := c.truncated(1, p)
	waitFor(t, "the sole voter truncating its log", func() bool {
		trunc, _ := c.truncated(1, p)
		return trunc+truncateMin > applied && trunc > 0
	})
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
