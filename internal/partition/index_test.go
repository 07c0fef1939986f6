package partition

import (
	"context"
	"slices"
	"testing"

	"github.com/doppio-db/doppio/internal/index"
	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/query"
	"github.com/doppio-db/doppio/internal/schema"
)

// query runs q over mailbox box of the indexed table and returns the message
// ids in result order.
func queryIDs(t *testing.T, f *fixture, tb *schema.Table, box, q, sort string) []int64 {
	t.Helper()
	plan, err := query.Compile(q, sort, query.SchemaOf(tb))
	if err != nil {
		t.Fatal(err)
	}
	group, _ := keys.EncodeTuple(keys.Tuple{box})
	res, err := f.rep.Query(tb.Def.Name, group, nil, plan.Op, index.Options{Sort: plan.Sort})
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, k := range res.Keys {
		tup, err := keys.DecodeTuple(k)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, tup[0].(int64))
	}
	return ids
}

func TestIndexesFollowEveryKindOfWrite(t *testing.T) {
	f := newFixture(t)
	msgs := table(t, "Indexed", []schema.KeyPart{{Name: "box", Type: "string"}, {Name: "id", Type: "long", AutoIncrement: true}},
		`{"type":"record","name":"M","fields":[
			{"name":"subject","type":"string","index":"text"},
			{"name":"inbox","type":"boolean","index":"attribute"},
			{"name":"at","type":"long","index":"attribute"}]}`)
	ins := func(subject string, inbox bool, at int64) Operation {
		return Operation{Kind: Insert, Table: msgs, Key: keys.Tuple{"b"}, Doc: schema.Document{"subject": subject, "inbox": inbox, "at": at}}
	}
	f.exec(t, ins("lunch friday", true, 30), ins("budget review", true, 10), ins("lunch menu", false, 20))
	f.exec(t, Operation{Kind: Insert, Table: msgs, Key: keys.Tuple{"other"}, Doc: schema.Document{"subject": "lunch", "inbox": true, "at": int64(1)}})
	check := func(q, sort string, want ...int64) {
		t.Helper()
		if got := queryIDs(t, f, msgs, "b", q, sort); !slices.Equal(got, want) {
			t.Fatalf("%s sort %q = %v, want %v", q, sort, got, want)
		}
	}
	check("subject:lunch", "", 1, 3)
	check("inbox:true", "-at", 1, 2)
	check(`subject:"lunch friday"`, "", 1)

	// A partial update moves the document between lists.
	f.exec(t, Operation{Kind: Patch, Table: msgs, Key: keys.Tuple{"b", int64(3)}, Patch: schema.Patch{Set: map[string]any{"inbox": true, "subject": "dinner menu"}}})
	check("inbox:true", "-at", 1, 3, 2)
	check("subject:lunch", "", 1)
	check("subject:menu", "", 3)

	// A replacement and a delete in one transaction.
	f.exec(t, put(msgs, keys.Tuple{"b", int64(1)}, schema.Document{"subject": "moved", "inbox": false, "at": int64(5)}),
		Operation{Kind: Delete, Table: msgs, Key: keys.Tuple{"b", int64(2)}})
	check("inbox:true", "", 3)
	check("subject:moved", "", 1)
	check("at:[0 TO 100]", "at", 1, 3)

	// Deleting the whole collection clears its lists, and a document created
	// again in the same transaction is indexed.
	f.exec(t, Operation{Kind: DeleteCollection, Table: msgs, Key: keys.Tuple{"b"}},
		put(msgs, keys.Tuple{"b", int64(9)}, schema.Document{"subject": "fresh lunch", "inbox": true, "at": int64(1)}))
	check("subject:lunch", "", 9)
	check("*", "", 9)
	if got := queryIDs(t, f, msgs, "other", "subject:lunch", ""); !slices.Equal(got, []int64{1}) {
		t.Fatalf("another group's index changed: %v", got)
	}

	// No index entry outlives its document: delete the last one and nothing
	// is left under the table's index prefix.
	f.exec(t, Operation{Kind: Delete, Table: msgs, Key: keys.Tuple{"b", int64(9)}},
		Operation{Kind: Insert, Table: msgs, Key: keys.Tuple{"b"}, Doc: schema.Document{"subject": "x", "inbox": false, "at": int64(0)}})
	_, err := f.rep.Execute(context.Background(), Request{Ops: []Operation{{Kind: DeleteCollection, Table: msgs, Key: keys.Tuple{"b"}}}})
	if err != nil {
		t.Fatal(err)
	}
	group, _ := keys.EncodeTuple(keys.Tuple{"b"})
	start, end := index.GroupSpan(f.rep.prefix, "Indexed", group)
	it, _ := f.engine.NewIter(start, end)
	defer it.Close()
	if it.First() {
		t.Fatalf("index entry %x left after its documents were deleted", it.Key())
	}
	// The change log holds documents only.
	log, _ := f.rep.ReadLog(SCN{Generation: 1}, 100)
	for _, e := range log {
		if !e.Index.empty() {
			t.Fatalf("change-log entry %v carries index writes", e.SCN)
		}
	}
}
