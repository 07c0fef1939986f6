package changes

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/schema"
	"github.com/doppio-db/doppio/internal/storage"
)

type fixture struct {
	rep        *partition.Replica
	items, sub *schema.Table
}

func compile(t *testing.T, name string) *schema.Table {
	t.Helper()
	tb, err := schema.Compile(schema.TableDef{
		Database: "db", Name: name, Key: []schema.KeyPart{{Name: "id", Type: "string"}},
		Versions: []schema.Version{{Version: 1, Schema: json.RawMessage(`{"type":"record","name":"` + name + `","fields":[{"name":"n","type":"long"}]}`), Created: time.Now()}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func newFixture(t *testing.T) *fixture {
	e, err := storage.Open(t.TempDir(), storage.Options{CacheBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	seq, err := partition.NewLocal(e, keys.PartitionPrefix("db", 3))
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{rep: partition.New(e, "db", 3, seq, partition.Limits{}), items: compile(t, "Item"), sub: compile(t, "Sub")}
}

func (f *fixture) exec(t *testing.T, ops ...partition.Operation) {
	t.Helper()
	if _, err := f.rep.Execute(context.Background(), partition.Request{Ops: ops}); err != nil {
		t.Fatal(err)
	}
}

func put(tb *schema.Table, id string, n int64) partition.Operation {
	return partition.Operation{Kind: partition.Put, Table: tb, Key: keys.Tuple{id}, Doc: schema.Document{"n": n}}
}

func del(tb *schema.Table, id string) partition.Operation {
	return partition.Operation{Kind: partition.Delete, Table: tb, Key: keys.Tuple{id}}
}

// render turns events into compact lines for exact comparison.
func (f *fixture) render(t *testing.T, evs []Event) []string {
	t.Helper()
	var out []string
	for _, ev := range evs {
		tb := f.items
		switch {
		case ev.Op == partition.OpDrop:
			tb = nil // a drop renders without its table, gone from the catalog
		case ev.Table == "Sub":
			tb = f.sub
		}
		b, err := ev.AppendJSON(nil, tb)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("event is not JSON: %s", b)
		}
		delete(m, "ts")
		js, _ := json.Marshal(m)
		out = append(out, string(js)+" next="+ev.Next.String())
	}
	return out
}

func readAll(t *testing.T, rd *Reader) []Event {
	t.Helper()
	var all []Event
	for {
		evs, err := rd.Next(context.Background(), time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 && rd.Position().SCN == rd.log.Applied() {
			return all
		}
		all = append(all, evs...)
	}
}

func equalLines(t *testing.T, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestCheckpointRoundTripsAndRefusesMangling(t *testing.T) {
	var c Checkpoint
	c.DB = "mail"
	c.Set(Position{Partition: 7, SCN: partition.SCN{Generation: 3, Sequence: 99}})
	c.Set(Position{Partition: 0, SCN: partition.SCN{Generation: 1, Sequence: 1}, Part: 2})
	c.Set(Position{Partition: 7, SCN: partition.SCN{Generation: 4, Sequence: 100}})
	s := c.String()
	got, err := ParseCheckpoint(s)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "{mail [0@1:1+2 7@4:100]}" {
		t.Fatalf("parsed %v", got)
	}
	for i := range s {
		b := []byte(s)
		b[i] ^= 1
		if _, err := ParseCheckpoint(string(b)); err == nil {
			t.Fatalf("a checkpoint with byte %d flipped was accepted", i)
		}
	}
	for _, bad := range []string{"", "x", "AAAA", s + "A", s[:len(s)-1]} {
		if _, err := ParseCheckpoint(bad); err == nil {
			t.Fatalf("%q was accepted", bad)
		}
	}
}

func TestReaderStreamsTransactionsWithImagesAndBoundaries(t *testing.T) {
	f := newFixture(t)
	f.exec(t, put(f.items, "a", 1))
	f.exec(t, put(f.items, "a", 2), put(f.sub, "a", 10)) // one transaction, two tables
	f.exec(t, del(f.items, "a"))
	rd, err := NewReader(f.rep, Position{Partition: 3}, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	equalLines(t, f.render(t, readAll(t, rd)), []string{
		`{"after":{"n":1},"before":null,"key":["a"],"op":"insert","partition":3,"scn":"1:1","table":"Item","txnEnd":true} next=3@1:1`,
		`{"after":{"n":2},"before":{"n":1},"key":["a"],"op":"update","partition":3,"scn":"1:2","table":"Item","txnEnd":false} next=3@1:2+1`,
		`{"after":{"n":10},"before":null,"key":["a"],"op":"insert","partition":3,"scn":"1:2","table":"Sub","txnEnd":true} next=3@1:2`,
		`{"after":null,"before":{"n":2},"key":["a"],"op":"delete","partition":3,"scn":"1:3","table":"Item","txnEnd":true} next=3@1:3`,
	})

	// Resuming inside the transaction yields exactly its rest.
	rd, err = NewReader(f.rep, Position{Partition: 3, SCN: partition.SCN{Generation: 1, Sequence: 2}, Part: 1}, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	equalLines(t, f.render(t, readAll(t, rd)), []string{
		`{"after":{"n":10},"before":null,"key":["a"],"op":"insert","partition":3,"scn":"1:2","table":"Sub","txnEnd":true} next=3@1:2`,
		`{"after":null,"before":{"n":2},"key":["a"],"op":"delete","partition":3,"scn":"1:3","table":"Item","txnEnd":true} next=3@1:3`,
	})
}

func TestDropIsOneEventPerTableWithoutKeyOrImages(t *testing.T) {
	f := newFixture(t)
	f.exec(t, put(f.items, "a", 1), put(f.sub, "a", 2))
	if _, err := f.rep.Drop(context.Background(), []string{"Item", "Sub"}, true); err != nil {
		t.Fatal(err)
	}
	rd, err := NewReader(f.rep, Position{Partition: 3, SCN: partition.SCN{Generation: 1, Sequence: 1}}, Filter{Tables: map[string]bool{"Sub": true}})
	if err != nil {
		t.Fatal(err)
	}
	equalLines(t, f.render(t, readAll(t, rd)), []string{
		`{"after":null,"before":null,"key":null,"op":"drop","partition":3,"scn":"1:2","table":"Sub","txnEnd":true} next=3@1:2`,
	})
}

func TestFilterMarksTheLastSelectedEventAsTxnEnd(t *testing.T) {
	f := newFixture(t)
	f.exec(t, put(f.items, "a", 1), put(f.sub, "a", 2))
	f.exec(t, put(f.sub, "b", 3)) // nothing selected: the position still moves
	rd, err := NewReader(f.rep, Position{Partition: 3}, Filter{Tables: map[string]bool{"Item": true}})
	if err != nil {
		t.Fatal(err)
	}
	equalLines(t, f.render(t, readAll(t, rd)), []string{
		`{"after":{"n":1},"before":null,"key":["a"],"op":"insert","partition":3,"scn":"1:1","table":"Item","txnEnd":true} next=3@1:1`,
	})
	if got := rd.Position().String(); got != "3@1:2" {
		t.Fatalf("position after a filtered-out transaction: %s", got)
	}
}

func TestReaderWakesOnCommit(t *testing.T) {
	f := newFixture(t)
	rd, err := NewReader(f.rep, Start(f.rep, 3), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		f.exec(t, put(f.items, "z", 1))
	}()
	// The idle bound is far beyond the test's timeout: only the commit
	// notification can end this wait.
	evs, err := rd.Next(context.Background(), time.Hour)
	if err != nil || len(evs) != 1 || string(evs[0].Key) != string(mustKey("z")) {
		t.Fatalf("Next = %v, %v", evs, err)
	}
}

func mustKey(id string) []byte {
	b, _ := keys.EncodeTuple(keys.Tuple{id})
	return b
}

func TestTrimmedPositionIsGone(t *testing.T) {
	f := newFixture(t)
	for i := range 5 {
		f.exec(t, put(f.items, "a", int64(i)))
	}
	if _, err := f.rep.TrimLog(partition.Retention{MaxEntries: 2}, time.Now()); err != nil {
		t.Fatal(err)
	}
	// Entries 4 and 5 remain: a reader after 3 misses nothing, after 2 it
	// would miss 3.
	if _, err := NewReader(f.rep, Position{Partition: 3, SCN: partition.SCN{Generation: 1, Sequence: 3}}, Filter{}); err != nil {
		t.Fatalf("position 3: %v", err)
	}
	for _, pos := range []Position{
		{Partition: 3, SCN: partition.SCN{Generation: 1, Sequence: 2}},
		{Partition: 3},
		{Partition: 3, SCN: partition.SCN{Generation: 1, Sequence: 3}, Part: 1},
	} {
		_, err := NewReader(f.rep, pos, Filter{})
		if !problem.Is(err, problem.Gone) {
			t.Fatalf("position %s: %v, want Gone", pos, err)
		}
	}
	// A checkpoint of another timeline (same sequence, other generation).
	_, err := NewReader(f.rep, Position{Partition: 3, SCN: partition.SCN{Generation: 9, Sequence: 4}}, Filter{})
	if !problem.Is(err, problem.Gone) || !strings.Contains(err.Error(), "another timeline") {
		t.Fatalf("other timeline: %v", err)
	}
	// A reader already open when the log is trimmed under it.
	rd, err := NewReader(f.rep, Position{Partition: 3, SCN: partition.SCN{Generation: 1, Sequence: 5}}, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		f.exec(t, put(f.items, "a", int64(10+i)))
	}
	if _, err := f.rep.TrimLog(partition.Retention{MaxEntries: 1}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := rd.Next(context.Background(), time.Millisecond); !problem.Is(err, problem.Gone) {
		t.Fatalf("Next after trim: %v, want Gone", err)
	}
}

func TestBootstrapIsTheSnapshotThenTheLogFromItsSCN(t *testing.T) {
	f := newFixture(t)
	f.exec(t, put(f.items, "a", 1))
	f.exec(t, put(f.items, "b", 2), put(f.sub, "b", 3))
	f.exec(t, del(f.items, "a"))
	snap, err := f.rep.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// Writes after the snapshot is taken are not in it, but follow it.
	f.exec(t, put(f.items, "c", 4))
	var evs []Event
	pos, err := Bootstrap(context.Background(), snap, 3, []string{"Item", "Sub"}, func(e Event) error { evs = append(evs, e); return nil })
	snap.Close()
	if err != nil {
		t.Fatal(err)
	}
	equalLines(t, f.render(t, evs), []string{
		`{"after":{"n":2},"before":null,"key":["b"],"op":"insert","partition":3,"scn":"1:3","snapshot":true,"table":"Item","txnEnd":false} next=3@1:3`,
		`{"after":{"n":3},"before":null,"key":["b"],"op":"insert","partition":3,"scn":"1:3","snapshot":true,"table":"Sub","txnEnd":true} next=3@1:3`,
	})
	rd, err := NewReader(f.rep, pos, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	equalLines(t, f.render(t, readAll(t, rd)), []string{
		`{"after":{"n":4},"before":null,"key":["c"],"op":"insert","partition":3,"scn":"1:4","table":"Item","txnEnd":true} next=3@1:4`,
	})
}
