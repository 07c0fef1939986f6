package replication

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/partition"
)

// TestRestoreStepsReachEveryReplicaAndContinueTheBackupsTimeline restores
// a partition of three voters through Raft: one replica restarts between
// steps, a learner joins by snapshot in the middle of the restore (the
// snapshot carries the unfinished restore), and at the end all four hold
// identical data at the backup's SCN. The steps consume no SCN; the next
// write takes the backup's sequence + 1 and keeps its generation although
// this group's term is lower.
func TestRestoreStepsReachEveryReplicaAndContinueTheBackupsTimeline(t *testing.T) {
	c := newCluster(t, 1, 2, 3, 4)
	p := testPartition(5)
	voters := []uint64{1, 2, 3}
	c.startRaftGroup(p, voters)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	leader := func() *Member { return c.host(c.leader(p, 5*time.Second)).Member(p) }
	step := func(s *partition.RestoreStep) {
		t.Helper()
		for {
			err := leader().ReplicateRestore(ctx, s)
			if err == nil {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("restore step %c: %v", s.Kind, err)
			}
		}
	}

	step(&partition.RestoreStep{Kind: partition.RestoreBegin, Session: "b1"})
	var load partition.RestoreStep
	load.Kind, load.Session = partition.RestoreLoad, "b1"
	load.Ranges = []partition.KeyRange{{Start: p.DocumentPrefix(), End: keys.PrefixEnd(p.DocumentPrefix())}}
	for i := range 50 {
		load.Sets = append(load.Sets, partition.IndexEntry{Key: p.Document("t", docKey(i)), Value: fmt.Appendf(nil, "restored %d", i)})
	}
	step(&load)
	if got := leader().Applied(); got.Sequence != 0 {
		t.Fatalf("restore steps consumed SCNs: applied %s", got)
	}

	// A replica restarts; a learner joins from a snapshot of the
	// half-restored partition.
	c.stop(3)
	c.start(3)
	c.startRaftGroup(p, voters, 3)
	if err := leader().CompactLog(0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.host(4).Start(p, nil); err != nil {
		t.Fatal(err)
	}
	if err := leader().AddLearner(ctx, 4); err != nil {
		t.Fatal(err)
	}

	// The learner holds the unfinished restore (from the snapshot) before
	// the restore finishes.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if st := c.state(4, p); st[string(p.Meta("restore"))] == "b1" && hasDoc(st, p, 49) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the learner never received the half-restored partition")
		}
	}

	backupSCN := partition.SCN{Generation: 40, Sequence: 1000}
	step(&partition.RestoreStep{Kind: partition.RestoreFinish, Session: "b1", SCN: backupSCN})
	all := []uint64{1, 2, 3, 4}
	c.waitApplied(p, backupSCN.Sequence, 10*time.Second, all...)
	state := c.sameState(p, all...)
	for i := range 50 {
		if !hasDoc(state, p, i) {
			t.Fatalf("document %d missing after the restore", i)
		}
	}
	if _, ok := state[string(p.Meta("restore"))]; ok {
		t.Fatal("the restore mark outlived the restore")
	}

	scn, err := leader().Replicate(ctx, writeSet(100))
	if err != nil {
		t.Fatal(err)
	}
	if scn.Sequence != backupSCN.Sequence+1 || scn.Generation != backupSCN.Generation {
		t.Fatalf("first write after the restore at %s, want %d:%d", scn, backupSCN.Generation, backupSCN.Sequence+1)
	}
	c.waitApplied(p, scn.Sequence, 10*time.Second, all...)
	c.sameState(p, all...)
}
