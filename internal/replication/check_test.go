package replication

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/storage"
)

// corrupt writes a bogus value under document i of p straight into node
// id's engine, behind Raft's back.
func (c *cluster) corrupt(id uint64, p keys.Partition, i int) {
	c.t.Helper()
	b := c.engine(id).NewBatch()
	b.Set(p.Document("t", docKey(i)), []byte("bit rot"))
	if err := c.engine(id).Commit(b); err != nil {
		c.t.Fatal(err)
	}
}

func replicaCheck(rep CheckReport, node uint64) ReplicaCheck {
	for _, rc := range rep.Replicas {
		if rc.Node == node {
			return rc
		}
	}
	return ReplicaCheck{}
}

func TestCheckDetectsCorruptFollowerAndRebuildsIt(t *testing.T) {
	c, p, lead, ctx := threeReplicas(t)
	const n = 40
	for i := 1; i <= n; i++ {
		if _, err := c.write(ctx, lead, p, i); err != nil {
			t.Fatal(err)
		}
	}
	c.waitApplied(p, n, 5*time.Second, 1, 2, 3)
	bad := uint64(1)
	if bad == lead {
		bad = 2
	}
	c.corrupt(bad, p, 7)

	g := c.host(lead).Member(p)
	rep, err := g.Check(ctx, CheckOptions{Repair: true})
	if err != nil {
		t.Fatal(err)
	}
	rc := replicaCheck(rep, bad)
	if rc.Status != "mismatch" || !slices.Equal(rc.Ranges, []string{"documents/t"}) {
		t.Fatalf("corrupt follower %d reported %+v, want a mismatch in documents/t (report %+v)", bad, rc, rep)
	}
	if !rc.Repaired || rep.Result != "repaired" {
		t.Fatalf("follower %d not repaired: %+v", bad, rep)
	}
	if rep.SCN.Sequence != n {
		t.Fatalf("checked at %v, want sequence %d", rep.SCN, n)
	}
	for _, other := range rep.Replicas {
		if other.Node != bad && other.Node != lead && other.Status != "ok" {
			t.Fatalf("healthy follower reported %+v", other)
		}
	}
	if got := c.host(lead).CheckCounters(); got.Mismatches != 1 || got.Repairs != 1 || got.Checks != 1 {
		t.Fatalf("counters %+v, want 1 check, 1 mismatch, 1 repair", got)
	}

	// The rebuilt follower is a voter again with the leader's data.
	st, err := g.Status()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(st.Voters, bad) || slices.Contains(st.Learners, bad) {
		t.Fatalf("rebuilt node %d not a voter: voters %v learners %v", bad, st.Voters, st.Learners)
	}
	if _, err := c.write(ctx, lead, p, n+1); err != nil {
		t.Fatal(err)
	}
	c.waitApplied(p, n+1, 5*time.Second, 1, 2, 3)
	state := c.sameState(p, lead, bad)
	if state[string(p.Document("t", docKey(7)))] == "bit rot" {
		t.Fatal("the corrupt value survived the rebuild")
	}
	c.sameState(p, 1, 2, 3)

	again, err := g.Check(ctx, CheckOptions{Repair: true})
	if err != nil {
		t.Fatal(err)
	}
	if again.Result != "consistent" || len(again.Replicas) != 3 {
		t.Fatalf("check after the repair: %+v", again)
	}
}

func TestCheckUnderConcurrentWritesFindsNoMismatch(t *testing.T) {
	c, p, lead, ctx := threeReplicas(t)

	var wg sync.WaitGroup
	var next atomic.Int64
	stop := make(chan struct{})
	// 32 writers, so that entries committed just after a marker often
	// share its apply batch, cut differently on each replica: with the
	// state captured at the end of the batch instead of at the marker,
	// this test fails.
	for range 32 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := c.write(ctx, lead, p, int(next.Add(1))); err != nil {
					t.Errorf("write: %v", err)
					return
				}
			}
		})
	}
	g := c.host(lead).Member(p)
	var reports []CheckReport
	for len(reports) < 10 {
		rep, err := g.Check(ctx, CheckOptions{})
		if err != nil {
			t.Fatal(err)
		}
		reports = append(reports, rep)
	}
	close(stop)
	wg.Wait()
	for i, rep := range reports {
		if rep.Result != "consistent" {
			t.Fatalf("check %d under writes: %+v", i, rep)
		}
	}
	if last := reports[len(reports)-1]; last.SCN.Sequence == reports[0].SCN.Sequence || last.Keys == 0 {
		t.Fatalf("writes did not run between the checks: first %+v, last %+v", reports[0], last)
	}
}

func TestCheckHandsLeadershipOverToRebuildALeaderThatIsTheOddOneOut(t *testing.T) {
	c, p, lead, ctx := threeReplicas(t)
	for i := 1; i <= 5; i++ {
		if _, err := c.write(ctx, lead, p, i); err != nil {
			t.Fatal(err)
		}
	}
	c.waitApplied(p, 5, 5*time.Second, 1, 2, 3)
	c.corrupt(lead, p, 3)

	// Report only: both followers differ from the leader; nothing moves.
	rep, err := c.host(lead).Member(p).Check(ctx, CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Result != "inconsistent" || rep.HandedTo != 0 || len(rep.Mismatched()) != 2 {
		t.Fatalf("report-only check of a corrupt leader: %+v", rep)
	}

	// With repair, the leader does not rebuild the majority: it hands
	// leadership to a follower of the agreeing majority, which rebuilds it.
	rep, err = c.host(lead).Member(p).Check(ctx, CheckOptions{Repair: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Result != "repaired" || rep.HandedTo == 0 || rep.HandedTo == lead {
		t.Fatalf("repairing check of a corrupt leader: %+v, want leadership handed to a follower and the old leader rebuilt", rep)
	}
	for _, rc := range rep.Replicas {
		want := ReplicaCheck{Node: rc.Node, Status: "ok"}
		if rc.Node == lead {
			want = ReplicaCheck{Node: lead, Status: "mismatch", Ranges: []string{"documents/t"}, Repaired: true}
		}
		if !slices.Equal(rc.Ranges, want.Ranges) || rc.Status != want.Status || rc.Repaired != want.Repaired || rc.RepairError != "" {
			t.Fatalf("replica %d: %+v, want %+v (stated against the majority)", rc.Node, rc, want)
		}
	}
	if got := c.host(lead).CheckCounters(); got.Mismatches != 2+1 || got.Repairs != 1 {
		t.Fatalf("counters %+v, want 3 mismatches (2 seen by the report-only check, then 1) and 1 repair", got)
	}
	next := c.leader(p, 5*time.Second)
	if next != rep.HandedTo {
		t.Fatalf("leader %d, want %d", next, rep.HandedTo)
	}
	st, _ := c.host(next).Member(p).Status()
	if len(st.Voters) != 3 || !slices.Contains(st.Voters, lead) {
		t.Fatalf("voters %v after the rebuild of %d", st.Voters, lead)
	}
	c.sameState(p, 1, 2, 3)
	if rep, err = c.host(next).Member(p).Check(ctx, CheckOptions{Repair: true}); err != nil || rep.Result != "consistent" {
		t.Fatalf("check after the repair: %+v %v", rep, err)
	}
}

func TestRebuiltReplicaNeitherVotesNorBootstrapsUntilItsSnapshot(t *testing.T) {
	c := newCluster(t, 1)
	p := testPartition(0)
	g, err := c.host(1).StartRebuilt(p)
	if err != nil {
		t.Fatal(err)
	}
	vote := func(g *Member, term uint64) uint64 {
		var voted uint64
		err := c.host(1).call(func() {
			g.step(inbound{group: g.name(), msg: &raftpb.Message{
				Type: raftpb.MsgVote.Enum(), From: new(uint64(2)), To: new(uint64(1)), Term: new(term),
				LogTerm: new(uint64(1)), Index: new(uint64(1)),
			}}, time.Now())
			voted = g.rn.BasicStatus().HardState.GetVote()
		})
		if err != nil {
			t.Fatal(err)
		}
		return voted
	}
	if v := vote(g, 5); v != 0 {
		t.Fatalf("the rebuilt replica voted for %d", v)
	}
	// The mark survives a restart: started with the initial voters (as a
	// node that sees no leader does), it still does not bootstrap.
	c.stop(1)
	c.start(1)
	g, err = c.host(1).Start(p, []uint64{1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	st, err := g.Status()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Voters) != 0 || st.LastIndex != 0 {
		t.Fatalf("the rebuilt replica bootstrapped after a restart: %+v", st)
	}
	if v := vote(g, 6); v != 0 {
		t.Fatalf("the rebuilt replica voted for %d after a restart", v)
	}
	// An ordinary empty replica votes (the control).
	q := testPartition(1)
	h, err := c.host(1).Start(q, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v := vote(h, 5); v != 2 {
		t.Fatalf("an ordinary empty replica voted for %d, want 2", v)
	}
}

func TestCheckIsThrottledAndShowsProgress(t *testing.T) {
	const rate = 256 << 10
	c := &cluster{t: t, root: t.TempDir(), addrs: map[uint64]string{}, hosts: map[uint64]*Host{}, engines: map[uint64]*storage.Engine{},
		configure: func(cfg *Config) { cfg.CheckBytesPerSecond = rate }}
	c.start(1)
	t.Cleanup(func() { c.stop(1) })
	p := testPartition(0)
	c.startRaftGroup(p, []uint64{1})
	lead := c.leader(p, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	g := c.host(lead).Member(p)
	for i := range 64 {
		ws := writeSet(i)
		ws.Writes[0].After = make([]byte, 8<<10)
		if _, err := g.Replicate(ctx, ws); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan CheckReport, 1)
	go func() {
		rep, err := g.Check(ctx, CheckOptions{})
		if err != nil {
			t.Error(err)
		}
		done <- rep
	}()
	// Summing ~1 MiB at 256 KiB/s: progress shows part of it while the
	// throttle holds the sum back.
	var seen uint64
	for seen == 0 {
		select {
		case rep := <-done:
			t.Fatalf("check finished (%+v) before any progress showed", rep)
		case <-time.After(5 * time.Millisecond):
		}
		if summing, b := g.CheckProgress(); summing && b > 0 {
			seen = b
		}
	}
	rep := <-done
	if rep.Result != "consistent" || rep.Bytes < 512<<10 || seen >= rep.Bytes {
		t.Fatalf("report %+v; progress showed %d bytes", rep, seen)
	}
	if summing, _ := g.CheckProgress(); summing {
		t.Fatal("still summing after the check")
	}
}

func TestHostCloseStopsARunningChecksumAndReleasesTheEngine(t *testing.T) {
	c := &cluster{t: t, root: t.TempDir(), addrs: map[uint64]string{}, hosts: map[uint64]*Host{}, engines: map[uint64]*storage.Engine{},
		configure: func(cfg *Config) { cfg.CheckBytesPerSecond = 64 << 10 }}
	c.start(1)
	p := testPartition(0)
	c.startRaftGroup(p, []uint64{1})
	c.leader(p, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h, e := c.host(1), c.engine(1)
	g := h.Member(p)
	for i := range 64 {
		ws := writeSet(i)
		ws.Writes[0].After = make([]byte, 8<<10)
		if _, err := g.Replicate(ctx, ws); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := g.Check(ctx, CheckOptions{})
		done <- err
	}()
	for {
		if summing, b := g.CheckProgress(); summing && b > 0 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("check ended (%v) before it was seen summing", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	// At 64 KiB/s the sum has ~15 s to go: closing stops it.
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("engine close after the host's: %v", err)
	}
	if err := <-done; err == nil {
		t.Fatal("a check cut short by the host's close succeeded")
	}
}

func TestCheckWithAFollowerDownIsIncompleteNotAMismatch(t *testing.T) {
	c, p, lead, ctx := threeReplicas(t)
	for i := 1; i <= 5; i++ {
		if _, err := c.write(ctx, lead, p, i); err != nil {
			t.Fatal(err)
		}
	}
	down := uint64(1)
	if down == lead {
		down = 2
	}
	c.stop(down)
	rep, err := c.host(lead).Member(p).Check(ctx, CheckOptions{Repair: true})
	if err != nil {
		t.Fatal(err)
	}
	rc := replicaCheck(rep, down)
	if rep.Result != "incomplete" || rc.Status != "unavailable" || rc.Error == "" || len(rep.Mismatched()) != 0 {
		t.Fatalf("check with node %d down: %+v", down, rep)
	}
	st, _ := c.host(lead).Member(p).Status()
	if len(st.Voters) != 3 {
		t.Fatalf("voters %v: nothing may be repaired for a replica that gave no result", st.Voters)
	}
}
