package replication

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/schema"
)

// TestDeposedLeaderAnswersNoConditionFromStaleState: a failed condition is
// a read of the group's state; a leader deposed without knowing it yet (its
// process paused, as SIGSTOP does) must not answer 412 from its stale
// state. Found by the fault suite: a register's compare-and-set answered
// 412 "the document does not exist" right after SIGCONT, for a document
// written (and acknowledged) at the new leader while the old one was
// paused. Here the old leader's Raft loop is frozen (and its links cut)
// while the others elect
// and overwrite the document; its replica then evaluates a write
// conditioned on the new ETag.
func TestDeposedLeaderAnswersNoConditionFromStaleState(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	p := testPartition(0)
	c.startRaftGroup(p, []uint64{1, 2, 3})
	old := c.leader(p, 5*time.Second)
	tb, err := schema.Compile(schema.TableDef{
		Database: "db", Name: "Register", Key: []schema.KeyPart{{Name: "id", Type: "string"}},
		Versions: []schema.Version{{Version: 1, Schema: json.RawMessage(`{"type":"record","name":"Register","fields":[{"name":"v","type":"long"}]}`), Created: time.Now()}},
	})
	if err != nil {
		t.Fatal(err)
	}
	put := func(v int64, ifMatch ...string) partition.Request {
		return partition.Request{Ops: []partition.Operation{{Kind: partition.Put, Table: tb, Key: keys.Tuple{"r"},
			Doc: schema.Document{"v": v}, Cond: partition.Condition{IfMatch: ifMatch}}}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stale := partition.New(c.engine(old), "db", 0, c.host(old).Member(p), partition.Limits{})
	if _, err := stale.Execute(ctx, put(0)); err != nil {
		t.Fatal(err)
	}
	c.waitApplied(p, 1, 5*time.Second, 1, 2, 3)

	// Freeze the old leader's loop: it neither ticks nor hears of the new
	// term, and still believes it leads.
	frozen, unfreeze := make(chan struct{}), make(chan struct{})
	go c.host(old).call(func() { close(frozen); <-unfreeze })
	<-frozen
	defer func() {
		select {
		case <-unfreeze:
		default:
			close(unfreeze)
		}
	}()
	// Cut off too, so the others see it gone even if its group was
	// quiesced (a frozen loop alone leaves its connections up).
	c.isolate(old)
	defer c.heal()
	rest := othersThan(old)
	var lead uint64
	for deadline := time.Now().Add(10 * time.Second); lead == 0; {
		for _, id := range rest {
			if _, ok := c.host(id).Member(p).Leader(); ok {
				lead = id
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the others elected no leader")
		}
		time.Sleep(5 * time.Millisecond)
	}
	fresh := partition.New(c.engine(lead), "db", 0, c.host(lead).Member(p), partition.Limits{})
	res, err := fresh.Execute(ctx, put(1))
	if err != nil {
		t.Fatal(err)
	}
	etag := res.Ops[0].ETag

	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = stale.Execute(short, put(2, etag))
	cancelShort()
	if problem.Is(err, problem.Precondition) {
		t.Fatalf("the deposed leader answered from its stale state: %v", err)
	}
	if err == nil {
		t.Fatal("the deposed leader applied a write while its loop was frozen")
	}
}
