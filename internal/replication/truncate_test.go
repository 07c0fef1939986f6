package replication

import (
	"context"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/testwait"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// truncated returns node id's truncation index and applied index of p, as
// its loop sees them.
func (c *cluster) truncated(id uint64, p keys.Partition) (trunc, applied uint64) {
	c.t.Helper()
	g := c.host(id).Member(p)
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

// TestLeaderTruncatesWhatNoFollowerLacks: a leader truncates its log up to
// the oldest entry a follower lacks (so a follower that keeps up leaves
// nothing behind, and one that lags, its process paused, catches up from
// the log), but keeps no more than LogRetain entries for a follower whose
// node is down (which then gets a snapshot). The followers truncate as far
// as the leader told them, no further.
func TestLeaderTruncatesWhatNoFollowerLacks(t *testing.T) {
	const retain = 4 * truncateMin
	c := newConfiguredCluster(t, func(cfg *Config) {
		cfg.LogRetain = retain
		cfg.CompactInterval = time.Millisecond // every tick
	}, 1, 2, 3)
	p := testPartition(0)
	c.startRaftGroup(p, []uint64{1, 2, 3})
	lead := c.leader(p, 5*time.Second)
	others := othersThan(lead)

	c.writeN(lead, p, 0, 2*truncateMin, 1, 2, 3)
	_, applied := c.truncated(lead, p)
	eventually(t, "the leader truncating what every follower has", func() bool {
		trunc, _ := c.truncated(lead, p)
		return trunc+truncateMin > applied // it truncates truncateMin at a time
	})
	// The hint rides on appends and heartbeats; a group that went quiet
	// before its leader truncated tells its followers with the next write.
	leaderTrunc, _ := c.truncated(lead, p)
	c.writeN(lead, p, 2*truncateMin, 1, 1, 2, 3)
	for _, id := range others {
		eventually(t, "a follower truncating as far as its leader", func() bool {
			trunc, _ := c.truncated(id, p)
			return trunc >= leaderTrunc
		})
	}

	// A paused follower lags: the leader keeps what it lacks.
	lagging := others[1]
	_, had := c.truncated(lagging, p)
	unfreeze := c.freeze(lagging)
	c.writeN(lead, p, 2*truncateMin, 2*truncateMin, lead, others[0])
	time.Sleep(20 * c.host(lead).cfg.TickInterval)
	for _, id := range []uint64{lead, others[0]} {
		if trunc, _ := c.truncated(id, p); trunc > had {
			unfreeze()
			t.Fatalf("node %d truncated its log to %d while a live follower had only %d", id, trunc, had)
		}
	}
	unfreeze()
	c.waitApplied(p, c.host(lead).Member(p).Applied().Sequence, 10*time.Second, lagging)
	if n, _ := c.host(lead).SnapshotsSent(); n != 0 {
		t.Fatalf("the paused follower needed %d snapshot(s); the log had its entries", n)
	}

	// A follower whose node is down holds back LogRetain entries at most.
	_, had = c.truncated(lagging, p)
	c.stop(lagging)
	c.writeN(lead, p, 4*truncateMin, retain/2, lead, others[0])
	time.Sleep(20 * c.host(lead).cfg.TickInterval)
	if trunc, _ := c.truncated(lead, p); trunc > had {
		t.Fatalf("the leader truncated its log to %d, %d entries after a down follower's %d", trunc, trunc-had, had)
	}
	c.writeN(lead, p, 4*truncateMin+retain/2, retain, lead, others[0])
	_, applied = c.truncated(lead, p)
	eventually(t, "the leader truncating past a follower down for LogRetain entries", func() bool {
		trunc, _ := c.truncated(lead, p)
		return trunc > had && trunc+truncateMin > applied-retain
	})
	c.start(lagging)
	c.startRaftGroup(p, []uint64{1, 2, 3}, lagging)
	c.waitApplied(p, c.host(lead).Member(p).Applied().Sequence, 10*time.Second, lagging)
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
	c.startRaftGroup(p, []uint64{1})
	c.leader(p, 5*time.Second)
	c.writeN(1, p, 0, truncateMin, 1)
	_, applied := c.truncated(1, p)
	eventually(t, "the sole voter truncating its log", func() bool {
		trunc, _ := c.truncated(1, p)
		return trunc+truncateMin > applied && trunc > 0
	})
}

// eventually waits up to 10 s for cond, failing the test with what.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.Until(t, 10*time.Second, what, cond)
}

// TestFrameCarriesHints: the header's stamp and echo, and each message's
// hints (flags, truncation and committed indexes), come back, and a cut
// frame is refused.
func TestFrameCarriesHints(t *testing.T) {
	msg := func(i uint64) []byte {
		b, err := proto.Marshal(&raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), To: new(i), From: new(uint64(9)), Term: new(uint64(3))})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	out := []outbound{{group: "a", data: msg(1)}, {group: "b", hints: hints{quiesce: true}, data: msg(2)},
		{group: "c", hints: hints{trunc: 1 << 40}, data: msg(3)}, {group: "d", hints: hints{quiesce: true, trunc: 5, released: true}, data: msg(4)},
		{group: "e", hints: hints{released: true}, data: msg(5)},
		{group: "f", hints: hints{trunc: 7, commit: 1 << 33}, data: msg(6)}, {group: "g", hints: hints{commit: 3}, data: msg(7)}}
	head := frameHeader{from: 9, stamp: 1 << 60, echo: 1<<60 - 5}
	frame := encodeBatch(head, out)
	fh, in, err := decodeBatch(frame)
	if err != nil || fh != head || len(in) != len(out) {
		t.Fatalf("decoded %+v, %d messages, %v", fh, len(in), err)
	}
	for i, m := range in {
		if m.group != out[i].group || m.hints != out[i].hints || m.msg.GetTo() != uint64(i+1) {
			t.Fatalf("message %d came back as %+v", i, m)
		}
	}
	if _, _, err := decodeBatch(frame[:len(frame)-1]); err == nil {
		t.Fatal("a cut frame decoded")
	}
}
