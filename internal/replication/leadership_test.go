package replication

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/partition"
)

// routedWrite writes set i the way the API does: at the node believed to
// lead, following a NotLeader error to the leader it names and trying again
// (a NotLeader error promises nothing was applied). Any other error ends it.
// It counts the NotLeader errors Replicate itself returned, and how many of
// those named this very node (a proposal dropped by a transfer).
func (c *cluster) routedWrite(ctx context.Context, at uint64, p keys.Partition, i int, dropped *atomic.Int64) (partition.SCN, error) {
	for {
		g := c.host(at).Member(p)
		err := g.Lead(ctx)
		if err == nil {
			var scn partition.SCN
			scn, err = g.Replicate(ctx, writeSet(i))
			if err == nil {
				return scn, nil
			}
			var nl *partition.NotAppliedError
			if errors.As(err, &nl) && (nl.Leader == at || nl.Leader == 0) {
				dropped.Add(1)
			}
		}
		var nl *partition.NotAppliedError
		if !errors.As(err, &nl) || ctx.Err() != nil {
			return partition.SCN{}, err
		}
		if nl.Leader != 0 && nl.Leader != at && c.host(nl.Leader) != nil {
			at = nl.Leader
			continue
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestWritesMeetingLeadershipTransfersAreNeverLeftUnknown moves the
// leadership of a partition around its three replicas over and over while
// eight writers write. Lead waits out a transfer in progress; a proposal
// appended before the leader stepped down waits for the entry applied at
// its index instead of failing with an unknown outcome. So every write
// either succeeds or fails with a NotLeader error (not applied: safe to run
// again at the leader), every write ends up applied exactly once, and the
// SCN sequences stay gapless.
func TestWritesMeetingLeadershipTransfersAreNeverLeftUnknown(t *testing.T) {
	c, p, lead, ctx := threeReplicas(t)

	const writers, perWriter = 8, 40
	var wg sync.WaitGroup
	var dropped atomic.Int64
	seqs := make([]uint64, writers*perWriter+1)
	stop := make(chan struct{})
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range perWriter {
				i := 1 + w*perWriter + j
				scn, err := c.routedWrite(ctx, uint64(1+w%3), p, i, &dropped)
				if err != nil {
					t.Errorf("write %d: %v (only NotLeader error may end a write meeting a transfer)", i, err)
					return
				}
				seqs[i] = scn.Sequence
			}
		}()
	}
	transfers := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			// Leadership may also move by an election (a loaded machine
			// delays heartbeats): transfer from whoever leads now.
			for id := uint64(1); id <= 3; id++ {
				if _, ok := c.host(id).Member(p).Leader(); ok {
					lead = id
				}
			}
			to := lead%3 + 1
			err := c.host(lead).Member(p).TransferLeadership(ctx, to)
			var nl *partition.NotAppliedError
			switch {
			case err == nil:
				transfers++
			case !errors.As(err, &nl):
				t.Errorf("transfer %d -> %d: %v", lead, to, err)
				return
			}
			time.Sleep(30 * time.Millisecond)
		}
	}()
	wg.Wait()
	close(stop)
	<-done
	if t.Failed() {
		return
	}
	n := uint64(writers * perWriter)
	seen := map[uint64]bool{}
	for i := 1; i <= int(n); i++ {
		if seqs[i] < 1 || seqs[i] > n || seen[seqs[i]] {
			t.Fatalf("write %d got sequence %d; want 1..%d without repeats (a write applied twice?)", i, seqs[i], n)
		}
		seen[seqs[i]] = true
	}
	c.waitApplied(p, n, 10*time.Second, 1, 2, 3)
	state := c.sameState(p, 1, 2, 3)
	for i := 1; i <= int(n); i++ {
		if !hasDoc(state, p, i) {
			t.Fatalf("document %d missing", i)
		}
	}
	if got := c.host(1).Member(p).Applied().Sequence; got != n {
		t.Fatalf("applied sequence %d, want exactly %d: a write was applied twice or lost", got, n)
	}
	t.Logf("%d writes across %d leadership transfers; %d proposals met a transfer and were run again", n, transfers, dropped.Load())
	if transfers < 3 {
		t.Fatalf("only %d transfers happened during the writes", transfers)
	}
	// A writer can meet a transfer's start between Lead and Replicate at
	// most about once per transfer; Lead then waits the transfer out. (When
	// proposals were simply dropped during a transfer, spinning writers met
	// it ~100 times per transfer.)
	if d := dropped.Load(); d > int64(2*writers*transfers) {
		t.Fatalf("%d proposals dropped over %d transfers: writes are not waiting for transfers to finish", d, transfers)
	}
}
