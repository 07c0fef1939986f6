package replication

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestMoveReplicaWhileWriting moves the replica on node A to a new node D
// (add learner, catch up by snapshot and log, promote, transfer leadership
// away from A if needed, remove A) while a writer keeps writing.
func TestMoveReplicaWhileWriting(t *testing.T) {
	c := newCluster(t, 1, 2, 3, 4)
	p := testPartition(3)
	c.startRaftGroup(p, []uint64{1, 2, 3})
	const from, to = uint64(1), uint64(4)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Put leadership on the node we move away from: the hardest case.
	lead := c.leader(p, 5*time.Second)
	if lead != from {
		if err := c.host(lead).Member(p).TransferLeadership(ctx, from); err != nil {
			t.Fatal(err)
		}
	}

	var (
		mu    sync.Mutex
		acked []int
		stop  = make(chan struct{})
		done  = make(chan struct{})
	)
	go func() {
		defer close(done)
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			for {
				wctx, wcancel := context.WithTimeout(ctx, time.Second)
				_, err := c.write(wctx, c.leader(p, 5*time.Second), p, i)
				wcancel()
				if err == nil {
					mu.Lock()
					acked = append(acked, i)
					mu.Unlock()
					break
				}
				if ctx.Err() != nil {
					t.Errorf("write %d: %v", i, err)
					return
				}
			}
		}
	}()
	time.Sleep(200 * time.Millisecond)

	leader := func() *Member { return c.host(c.leader(p, 5*time.Second)).Member(p) }
	if _, err := c.host(to).Start(p, nil); err != nil {
		t.Fatal(err)
	}
	if err := leader().AddLearner(ctx, to); err != nil {
		t.Fatal(err)
	}
	for {
		st, err := leader().Status()
		if err != nil {
			t.Fatal(err)
		}
		if f, ok := st.Followers[to]; ok && f.Learner && f.Lag < 5 && f.State == "StateReplicate" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("learner never caught up: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := leader().Promote(ctx, to); err != nil {
		t.Fatal(err)
	}
	if id := c.leader(p, 5*time.Second); id == from {
		if err := c.host(from).Member(p).TransferLeadership(ctx, 2); err != nil {
			t.Fatal(err)
		}
	}
	if err := leader().RemoveReplica(ctx, from); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	close(stop)
	<-done

	final := []uint64{2, 3, 4}
	// A write whose caller gave up (its context ended at stop) may still
	// commit afterwards: wait until the leader's timeline stops moving.
	applied := leader().Applied()
	for quiet := time.Now(); time.Since(quiet) < 300*time.Millisecond; time.Sleep(20 * time.Millisecond) {
		if a := leader().Applied(); a != applied {
			applied, quiet = a, time.Now()
		}
	}
	c.waitApplied(p, applied.Sequence, 5*time.Second, final...)
	state := c.sameState(p, final...)
	mu.Lock()
	defer mu.Unlock()
	for _, i := range acked {
		if !hasDoc(state, p, i) {
			t.Fatalf("acknowledged write %d missing after the move", i)
		}
	}
	st, _ := leader().Status()
	if len(st.Voters) != 3 || len(st.Learners) != 0 {
		t.Fatalf("final configuration voters %v learners %v, want 3 voters", st.Voters, st.Learners)
	}
	for _, v := range st.Voters {
		if v == from {
			t.Fatalf("node %d still a voter: %v", from, st.Voters)
		}
	}
	t.Logf("%d writes acknowledged during the move; voters now %v", len(acked), st.Voters)
	if err := c.host(from).Remove(p); err != nil {
		t.Fatal(err)
	}
	if len(c.state(from, p)) != 0 {
		t.Fatal("removed replica left data behind")
	}
}
