package partition

import (
	"context"
	"slices"
	"testing"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/schema"
)

// spanEmpty reports whether no key of the partition starts with prefix.
func spanEmpty(t *testing.T, f *fixture, prefix []byte) bool {
	t.Helper()
	it, err := f.engine.NewIter(prefix, keys.PrefixEnd(prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	return !it.First()
}

func TestDropRemovesTheTablesKeysAndStartsItAfresh(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	msgs := table(t, "Indexed", []schema.KeyPart{{Name: "box", Type: "string"}, {Name: "id", Type: "long", AutoIncrement: true}},
		`{"type":"record","name":"M","fields":[{"name":"subject","type":"string","index":"text"},{"name":"at","type":"long","index":"attribute"}]}`)
	ins := func(subject string, at int64) Operation {
		return Operation{Kind: Insert, Table: msgs, Key: keys.Tuple{"b"}, Doc: schema.Document{"subject": subject, "at": at}}
	}
	f.exec(t, ins("lunch friday", 1), ins("budget", 2), ins("lunch menu", 3))
	f.exec(t, put(f.mailbox, keys.Tuple{"b"}, schema.Document{"unread": int64(3)}))
	if holds, err := f.rep.HoldsDocuments(ctx, "Indexed"); err != nil || !holds {
		t.Fatalf("before the drop, HoldsDocuments = %v, %v", holds, err)
	}

	scn, err := f.rep.Drop(ctx, []string{"Indexed"}, false)
	if err != nil {
		t.Fatal(err)
	}
	p := f.rep.Prefix()
	for name, prefix := range map[string][]byte{"documents": p.Table("Indexed"), "counters": p.AutoIncrement("Indexed", nil), "index": p.IndexTable("Indexed")} {
		if !spanEmpty(t, f, prefix) {
			t.Errorf("the dropped table's %s are left", name)
		}
	}
	if _, ok := f.doc(t, f.mailbox, keys.Tuple{"b"}); !ok {
		t.Fatal("the drop of Indexed removed a Mailbox document")
	}
	if holds, err := f.rep.HoldsDocuments(ctx, "Indexed"); err != nil || holds {
		t.Fatalf("after the drop, HoldsDocuments = %v, %v", holds, err)
	}
	log, err := f.rep.ReadLog(SCN{Generation: scn.Generation, Sequence: scn.Sequence - 1}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 1 || log[0].SCN != scn || len(log[0].Writes) != 1 {
		t.Fatalf("change log after the drop: %+v", log)
	}
	if w := log[0].Writes[0]; w.Op != OpDrop || w.Table != "Indexed" || w.Key != nil || w.Before != nil || w.After != nil {
		t.Fatalf("the drop's change-log write is %+v, want op drop of Indexed without key or images", w)
	}

	// Created again, the table starts empty: keys count from 1 and no
	// index entry of the old documents answers a query.
	if got := f.exec(t, ins("lunch again", 4)).Ops[0].Key[1]; got != int64(1) {
		t.Fatalf("the first insert after the drop got key %v, want 1", got)
	}
	if got := queryIDs(t, f, msgs, "b", "subject:lunch", ""); !slices.Equal(got, []int64{1}) {
		t.Fatalf("subject:lunch after the drop = %v, want [1]", got)
	}
	if got := queryIDs(t, f, msgs, "b", "at:[1 TO 3]", ""); len(got) != 0 {
		t.Fatalf("at:[1 TO 3] after the drop = %v, want none", got)
	}

	// A database drop takes every table.
	if _, err := f.rep.Drop(ctx, []string{"Indexed", "Mailbox"}, true); err != nil {
		t.Fatal(err)
	}
	if holds, err := f.rep.HoldsDocuments(ctx, ""); err != nil || holds {
		t.Fatalf("after the database drop, HoldsDocuments = %v, %v", holds, err)
	}
	for _, prefix := range [][]byte{p.DocumentPrefix(), p.AutoIncrementPrefix(), p.IndexPrefix()} {
		if !spanEmpty(t, f, prefix) {
			t.Fatalf("keys under %q left after the database drop", prefix)
		}
	}
}

func TestDropNamesWhatItDrops(t *testing.T) {
	f := newFixture(t)
	if _, err := f.rep.Drop(context.Background(), nil, false); err == nil {
		t.Fatal("a drop of no table was accepted")
	}
	if f.rep.Applied().Sequence != 0 {
		t.Fatalf("a refused drop wrote: applied %v", f.rep.Applied())
	}
}
