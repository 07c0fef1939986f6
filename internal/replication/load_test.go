package replication

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/schema"
)

// loadReplica is the partition replica of p on node id, which knows one
// indexed table of messages.
func loadReplica(t *testing.T, c *cluster, id uint64, p keys.Partition) (*partition.Replica, *schema.Table) {
	t.Helper()
	tb, err := schema.Compile(schema.TableDef{
		Database: "db", Name: "Msg",
		Key: []schema.KeyPart{{Name: "box", Type: "string"}, {Name: "id", Type: "long"}},
		Versions: []schema.Version{{Version: 1, Created: time.Now(), Schema: json.RawMessage(`{"type":"record","name":"M","fields":[
			{"name":"subject","type":"string","index":"text"},
			{"name":"at","type":"long","index":"attribute"}]}`)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	rep := partition.New(c.engine(id), "db", 0, c.host(id).Member(p), partition.Limits{})
	if err := rep.SyncIndexes(context.Background(), []*schema.Table{tb}, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	return rep, tb
}

func loadDoc(t *testing.T, tb *schema.Table, i int, subject string) partition.LoadDoc {
	t.Helper()
	k, err := keys.EncodeTuple(keys.Tuple{fmt.Sprintf("box%d", i%7), int64(i)})
	if err != nil {
		t.Fatal(err)
	}
	avro, err := tb.Encode(schema.Document{"subject": subject, "at": int64(i)})
	if err != nil {
		t.Fatal(err)
	}
	return partition.LoadDoc{Key: k, Avro: avro}
}

func (c *cluster) checkConsistent(ctx context.Context, lead uint64, p keys.Partition) {
	c.t.Helper()
	rep, err := c.host(lead).Member(p).Check(ctx, CheckOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	if rep.Result != "consistent" {
		c.t.Fatalf("check: %+v", rep)
	}
}

func TestLoadChunksApplyIdenticallyOnEveryReplicaUnderWrites(t *testing.T) {
	c, p, lead, ctx := threeReplicas(t)
	rep, tb := loadReplica(t, c, lead, p)
	const chunks, perChunk = 4, 150
	// Existing documents, some of which the load replaces.
	for i := 0; i < perChunk; i += 3 {
		d := loadDoc(t, tb, i, "existing")
		tuple, _ := keys.DecodeTuple(d.Key)
		doc, _ := tb.Decode(d.Avro, 1, 1)
		if _, err := rep.Execute(ctx, partition.Request{Ops: []partition.Operation{{Kind: partition.Put, Table: tb, Key: tuple, Doc: doc}}}); err != nil {
			t.Fatal(err)
		}
	}
	// Writers put loaded keys while the chunks go in.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				d := loadDoc(t, tb, (n*13+w*7)%(chunks*perChunk), fmt.Sprintf("writer %d", w))
				tuple, _ := keys.DecodeTuple(d.Key)
				doc, _ := tb.Decode(d.Avro, 1, 1)
				if _, err := rep.Execute(ctx, partition.Request{Ops: []partition.Operation{{Kind: partition.Put, Table: tb, Key: tuple, Doc: doc}}}); err != nil {
					t.Errorf("write: %v", err)
					return
				}
			}
		})
	}
	mark := partition.LoadMark{Load: "L"}
	var scns []partition.SCN
	for ch := range chunks {
		var docs []partition.LoadDoc
		for i := ch * perChunk; i < (ch+1)*perChunk; i++ {
			docs = append(docs, loadDoc(t, tb, i, "loaded"))
		}
		to := partition.LoadMark{Load: "L", Offset: uint64(ch+1) * 1000, Records: uint64(ch+1) * perChunk, Done: ch == chunks-1}
		scn, err := rep.LoadChunk(ctx, "Msg", 1, mark, to, docs)
		if err != nil {
			t.Fatal(err)
		}
		scns = append(scns, scn)
		mark = to
	}
	close(stop)
	wg.Wait()

	// Every document is what the last write of it in the log says.
	last := map[string][]byte{}
	entries := 0
	loads := 0
	for from := (partition.SCN{}); ; {
		log, err := rep.ReadLog(from, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(log) == 0 {
			break
		}
		for _, e := range log {
			entries++
			if e.Load != nil {
				loads++
				if len(e.Writes) != perChunk {
					t.Fatalf("chunk at %v logged %d documents, want %d", e.SCN, len(e.Writes), perChunk)
				}
			}
			for _, w := range e.Writes {
				last[string(w.Key)] = w.After
			}
			from = e.SCN
		}
	}
	if loads != chunks {
		t.Fatalf("%d chunks in the log, want %d", loads, chunks)
	}
	for k, after := range last {
		rec, ok, err := rep.Get("Msg", []byte(k))
		if err != nil || !ok || !bytes.Equal(rec.Avro, after) {
			t.Fatalf("document %x is not the last one written in the log (found %v, %v)", k, ok, err)
		}
	}
	if got, _ := rep.LoadMark("L"); got != mark {
		t.Fatalf("mark %+v, want %+v", got, mark)
	}

	// A chunk from a stale mark, proposed without evaluation (as a deposed
	// leader's could be), is a no-op on every replica.
	g := c.host(lead).Member(p)
	applied := g.Applied()
	stale := &partition.WriteSet{Mtime: 1, Ingest: true,
		Load:   &partition.LoadStep{From: partition.LoadMark{Load: "L"}, To: partition.LoadMark{Load: "L", Offset: 1}},
		Writes: []partition.Write{{Table: "Msg", Key: []byte("x"), Op: partition.OpInsert, AfterVersion: 1, After: []byte("x")}}}
	_, err := g.Replicate(ctx, stale)
	if pe, ok := problem.As(err); !ok || pe.Kind != problem.Conflict {
		t.Fatalf("stale chunk: %v, want a conflict", err)
	}
	if g.Applied() != applied {
		t.Fatalf("a stale chunk moved the applied SCN from %v to %v", applied, g.Applied())
	}
	c.waitApplied(p, applied.Sequence, 10*time.Second, 1, 2, 3)
	c.checkConsistent(ctx, lead, p)

	// A follower restarted on its data holds the same state, and applies
	// the next chunk alike.
	follower := uint64(1)
	if follower == lead {
		follower = 2
	}
	c.stop(follower)
	c.start(follower)
	if _, err := c.host(follower).Start(p, []uint64{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	next := partition.LoadMark{Load: "M", Records: 1, Offset: 10}
	if _, err := rep.LoadChunk(ctx, "Msg", 1, partition.LoadMark{Load: "M"}, next, []partition.LoadDoc{loadDoc(t, tb, 1, "again")}); err != nil {
		t.Fatal(err)
	}
	c.waitApplied(p, g.Applied().Sequence, 10*time.Second, 1, 2, 3)
	c.checkConsistent(ctx, lead, p)
	frep := partition.New(c.engine(follower), "db", 0, c.host(follower).Member(p), partition.Limits{})
	for _, m := range []partition.LoadMark{mark, next} {
		if got, err := frep.LoadMark(m.Load); err != nil || got != m {
			t.Fatalf("follower's mark of %s: %+v, %v; want %+v", m.Load, got, err, m)
		}
	}
}
