package replication

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/problem"
)

func TestReplicasApplyIdenticalStateWithGaplessSCNs(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	p := testPartition(0)
	c.startRaftGroup(p, []uint64{1, 2, 3})
	lead := c.leader(p, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	st, err := c.host(lead).Member(p).Status()
	if err != nil {
		t.Fatal(err)
	}
	const n = 60
	scns := make([]uint64, n+1)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w + 1; i <= n; i += 4 {
				scn, err := c.write(ctx, lead, p, i)
				if err != nil {
					t.Errorf("write %d: %v", i, err)
					return
				}
				if scn.Generation != st.Term {
					t.Errorf("write %d: generation %d, want term %d", i, scn.Generation, st.Term)
				}
				mu.Lock()
				scns[i] = scn.Sequence
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	seen := map[uint64]bool{}
	for i := 1; i <= n; i++ {
		if scns[i] < 1 || scns[i] > n || seen[scns[i]] {
			t.Fatalf("write %d got sequence %d; sequences must be 1..%d without repeats", i, scns[i], n)
		}
		seen[scns[i]] = true
	}
	c.waitApplied(p, n, 5*time.Second, 1, 2, 3)
	state := c.sameState(p, 1, 2, 3)
	for i := 1; i <= n; i++ {
		if !hasDoc(state, p, i) {
			t.Fatalf("document %d missing", i)
		}
	}
	// The change log holds exactly the n entries at (term, 1..n).
	for s := uint64(1); s <= n; s++ {
		if _, ok := state[string(p.Log(st.Term, s))]; !ok {
			t.Fatalf("change-log entry %d:%d missing", st.Term, s)
		}
	}

	// A follower refuses writes with a NotLeader error that the API maps to 503.
	follower := uint64(1)
	if follower == lead {
		follower = 2
	}
	err = c.host(follower).Member(p).Lead(ctx)
	var nl *partition.NotAppliedError
	if !errors.As(err, &nl) || nl.Leader != lead {
		t.Fatalf("follower Lead: %v, want NotLeader error naming %d", err, lead)
	}
	if pe, ok := problem.As(err); !ok || pe.Kind != problem.Unavailable || pe.RetryAfter == 0 {
		t.Fatalf("follower error %v is not a problem.Unavailable with Retry-After", err)
	}

	// Linearizable reads on the leader and on a follower.
	for _, id := range []uint64{lead, follower} {
		if err := c.host(id).Member(p).ReadIndex(ctx); err != nil {
			t.Fatalf("ReadIndex on %d: %v", id, err)
		}
		if got := c.host(id).Member(p).Applied().Sequence; got != n {
			t.Fatalf("after ReadIndex node %d applied %d, want %d", id, got, n)
		}
	}
	ls, _ := c.host(lead).Member(p).Status()
	if len(ls.Followers) != 2 {
		t.Fatalf("leader status lists %d followers: %+v", len(ls.Followers), ls)
	}
}

func TestFailoverKeepsAcknowledgedWritesAndRejoins(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	p := testPartition(0)
	voters := []uint64{1, 2, 3}
	c.startRaftGroup(p, voters)
	old := c.leader(p, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// A writer keeps writing to whichever node leads, recording what was
	// acknowledged.
	var (
		mu    sync.Mutex
		acked []int
		next  = 1
		stopW = make(chan struct{})
		wdone = make(chan struct{})
		// first success after the kill
		killedAt  time.Time
		recovered time.Time
	)
	go func() {
		defer close(wdone)
		for {
			select {
			case <-stopW:
				return
			default:
			}
			mu.Lock()
			i := next
			next++
			mu.Unlock()
			for {
				ok, by := false, uint64(0)
				for _, id := range voters {
					wctx, wcancel := context.WithTimeout(ctx, 300*time.Millisecond)
					_, err := c.write(wctx, id, p, i)
					wcancel()
					if err == nil {
						ok, by = true, id
						break
					}
				}
				if ok {
					mu.Lock()
					acked = append(acked, i)
					if !killedAt.IsZero() && recovered.IsZero() && by != old {
						recovered = time.Now()
					}
					mu.Unlock()
					break
				}
				select {
				case <-stopW:
					return
				case <-time.After(2 * time.Millisecond):
				}
			}
		}
	}()
	time.Sleep(300 * time.Millisecond)

	mu.Lock()
	killedAt = time.Now()
	mu.Unlock()
	c.stop(old)
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		r := recovered
		mu.Unlock()
		if !r.IsZero() {
			t.Logf("failover: first write acknowledged %v after the leader's host closed", r.Sub(killedAt))
			if r.Sub(killedAt) > time.Second {
				t.Errorf("failover took %v, want under 1s", r.Sub(killedAt))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no write succeeded within 5s of the leader's death")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	close(stopW)
	<-wdone

	survivors := []uint64{}
	for _, id := range voters {
		if id != old {
			survivors = append(survivors, id)
		}
	}
	newLead := c.leader(p, 2*time.Second)
	// A write whose attempt timed out may still be in the log and commit
	// after the writer stopped: compare once the leader's applied SCN holds
	// still and every survivor has it.
	var applied partition.SCN
	for settle := time.Now().Add(5 * time.Second); ; {
		applied = c.host(newLead).Member(p).Applied()
		c.waitApplied(p, applied.Sequence, 5*time.Second, survivors...)
		time.Sleep(50 * time.Millisecond)
		same := c.host(newLead).Member(p).Applied() == applied
		for _, id := range survivors {
			same = same && c.host(id).Member(p).Applied() == applied
		}
		if same || time.Now().After(settle) {
			break
		}
	}
	state := c.sameState(p, survivors...)
	mu.Lock()
	for _, i := range acked {
		if !hasDoc(state, p, i) {
			t.Fatalf("acknowledged write %d lost in failover", i)
		}
	}
	t.Logf("%d writes acknowledged across the failover; new generation %d", len(acked), applied.Generation)
	mu.Unlock()

	// The old leader restarts on its data and catches up from the log.
	c.start(old)
	if _, err := c.host(old).Start(p, voters); err != nil {
		t.Fatal(err)
	}
	scn, err := c.write(ctx, newLead, p, 100000)
	if err != nil {
		t.Fatal(err)
	}
	c.waitApplied(p, scn.Sequence, 5*time.Second, voters...)
	c.sameState(p, voters...)

	// A follower falls behind while every log is truncated: it catches up
	// from a snapshot.
	lagging := survivors[0]
	if lagging == newLead {
		lagging = survivors[1]
	}
	c.stop(lagging)
	for i := 0; i < 20; i++ {
		if scn, err = c.write(ctx, newLead, p, 200000+i); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range voters {
		if id != lagging {
			if err := c.host(id).Member(p).CompactLog(0); err != nil {
				t.Fatal(err)
			}
		}
	}
	st, _ := c.host(newLead).Member(p).Status()
	c.start(lagging)
	if _, err := c.host(lagging).Start(p, voters); err != nil {
		t.Fatal(err)
	}
	c.waitApplied(p, scn.Sequence, 5*time.Second, voters...)
	state = c.sameState(p, voters...)
	if !hasDoc(state, p, 200019) {
		t.Fatal("last write missing after snapshot catch-up")
	}
	ls, _ := c.host(lagging).Member(p).Status()
	if ls.FirstIndex <= 2 || ls.FirstIndex > st.FirstIndex+5 {
		t.Fatalf("lagging replica's log starts at %d; it should start after a snapshot near %d", ls.FirstIndex, st.FirstIndex)
	}
	// It keeps replicating after the snapshot.
	if scn, err = c.write(ctx, newLead, p, 300000); err != nil {
		t.Fatal(err)
	}
	c.waitApplied(p, scn.Sequence, 5*time.Second, voters...)
	c.sameState(p, voters...)
}
