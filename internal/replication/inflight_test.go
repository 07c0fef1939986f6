package replication

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/schema"
)

// TestWriteOfUnknownOutcomeKeepsItsGroupUntilSettled: a write whose entry is
// in the leader's log when its deadline passes may still be applied, so the
// next evaluation in its document group must wait until it is (or is known
// never to be): otherwise it reads the state without it and both commit,
// the second over the first. Found by the fault suite (bank: two
// transfers conditioned on one account's ETag both committed, from the same
// pre-image, during a partition). Here: the leader is cut off from its
// followers just long enough for an increment to miss its deadline, a
// second increment follows at once, the cut heals; every increment applied
// must count.
func TestWriteOfUnknownOutcomeKeepsItsGroupUntilSettled(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	p := testPartition(0)
	c.startRaftGroup(p, []uint64{1, 2, 3})
	lead := c.leader(p, 5*time.Second)
	tb, err := schema.Compile(schema.TableDef{
		Database: "db", Name: "Counter", Key: []schema.KeyPart{{Name: "id", Type: "string"}},
		Versions: []schema.Version{{Version: 1, Schema: json.RawMessage(`{"type":"record","name":"Counter","fields":[{"name":"n","type":"long"}]}`), Created: time.Now()}},
	})
	if err != nil {
		t.Fatal(err)
	}
	rep := partition.New(c.engine(lead), "db", 0, c.host(lead).Member(p), partition.Limits{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := rep.Execute(ctx, partition.Request{Ops: []partition.Operation{{Kind: partition.Put, Table: tb, Key: keys.Tuple{"c"}, Doc: schema.Document{"n": int64(0)}}}}); err != nil {
		t.Fatal(err)
	}
	inc := partition.Request{Ops: []partition.Operation{{Kind: partition.Patch, Table: tb, Key: keys.Tuple{"c"}, Patch: schema.Patch{Inc: map[string]any{"n": json.Number("1")}}}}}

	// Shorter than the transport's dead-peer delay (5 ticks) and far
	// shorter than an election timeout: nobody else campaigns.
	c.isolate(lead)
	short, cancelShort := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = rep.Execute(short, inc)
	cancelShort()
	var inflight *partition.InFlightError
	if !errors.As(err, &inflight) {
		c.heal()
		t.Fatalf("an increment that cannot commit answered %v, want a *partition.InFlightError", err)
	}
	second := make(chan error, 1)
	go func() {
		_, err := rep.Execute(ctx, inc)
		second <- err
	}()
	time.Sleep(30 * time.Millisecond)
	select {
	case <-inflight.Settled:
		t.Fatal("the write settled while its leader was cut off from every follower")
	default:
	}
	c.heal()
	select {
	case <-inflight.Settled:
	case <-time.After(10 * time.Second):
		t.Fatal("the write never settled after the heal")
	}
	// Under load the others may have elected meanwhile: then the second
	// increment fails as not applied, and the check below still holds.
	if err := <-second; err != nil {
		t.Logf("second increment: %v", err)
	}
	// Every applied increment counts: n equals the increments in the log.
	c.waitApplied(p, rep.Applied().Sequence, 5*time.Second, 1, 2, 3)
	log, err := rep.ReadLog(partition.SCN{}, 100)
	if err != nil {
		t.Fatal(err)
	}
	incs := int64(len(log) - 1) // the first entry is the put of 0
	rec, found, err := rep.Get("Counter", mustKey(t, "c"))
	if err != nil || !found {
		t.Fatalf("read: %v %v", found, err)
	}
	doc, err := tb.Decode(rec.Avro, int(rec.Version), int(rec.Version))
	if err != nil {
		t.Fatal(err)
	}
	if doc["n"] != incs {
		t.Fatalf("%d increments applied (the first of unknown outcome), but n = %v: one was evaluated without the other", incs, doc["n"])
	}
	if incs == 0 {
		t.Fatal("no increment applied at all")
	}
}

func mustKey(t *testing.T, k string) []byte {
	t.Helper()
	b, err := keys.EncodeTuple(keys.Tuple{k})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
