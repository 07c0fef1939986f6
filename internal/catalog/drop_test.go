package catalog

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/schema"
)

func TestTableDropHoldsTheNameUntilItEnds(t *testing.T) {
	_, cli, c := setup(t)
	other := open(t, cli)
	if _, _, err := c.PutDatabase(ctx(t), schema.Database{Name: "mail", Partitions: 4}); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := c.PutTable(ctx(t), "mail", "Message", msgKey, json.RawMessage(msgV1), TableOptions{}); err != nil {
		t.Fatal(err)
	}
	wantKind(t, c.BeginTableDrop(ctx(t), "mail", "Nope"), problem.NotFound, "")

	if err := c.BeginTableDrop(ctx(t), "mail", "Message"); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Table("mail", "Message"); ok {
		t.Fatal("the dropping catalog still serves the table")
	}
	eventually(t, "another catalog forgets the dropped table", func() bool {
		_, ok := other.Table("mail", "Message")
		return !ok
	})
	_, _, _, err := c.PutTable(ctx(t), "mail", "Message", msgKey, json.RawMessage(msgV1), TableOptions{})
	wantKind(t, err, problem.Conflict, "")
	// Asked again, the drop is still under way: the caller finishes it.
	if err := c.BeginTableDrop(ctx(t), "mail", "Message"); err != nil {
		t.Fatalf("a drop begun again: %v", err)
	}
	if err := c.EndTableDrop(ctx(t), "mail", "Message"); err != nil {
		t.Fatal(err)
	}
	wantKind(t, c.BeginTableDrop(ctx(t), "mail", "Message"), problem.NotFound, "")

	// Created again: version 1 of the new schema, none of the old history.
	tb, created, _, err := c.PutTable(ctx(t), "mail", "Message", msgKey, json.RawMessage(msgV2), TableOptions{})
	if err != nil || !created || tb.Latest() != 1 {
		t.Fatalf("created again: created=%v latest=%v err=%v", created, tb, err)
	}
}

func TestDatabaseDropKeepsItsPartitionsForTheName(t *testing.T) {
	_, _, c := setup(t)
	if _, _, err := c.PutDatabase(ctx(t), schema.Database{Name: "mail", Partitions: 4}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"Message", "Box"} {
		if _, _, _, err := c.PutTable(ctx(t), "mail", name, msgKey, json.RawMessage(msgV1), TableOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rec, err := c.BeginDatabaseDrop(ctx(t), "mail")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Database.Partitions != 4 || !slices.Equal(rec.Tables, []string{"Box", "Message"}) || rec.Done {
		t.Fatalf("drop record %+v", rec)
	}
	if _, ok := c.Database("mail"); ok || len(c.Tables("mail")) != 0 {
		t.Fatal("the catalog still serves the dropped database or its tables")
	}
	_, _, err = c.PutDatabase(ctx(t), schema.Database{Name: "mail", Partitions: 4})
	wantKind(t, err, problem.Conflict, "")
	again, err := c.BeginDatabaseDrop(ctx(t), "mail")
	if err != nil || !slices.Equal(again.Tables, rec.Tables) {
		t.Fatalf("a drop begun again: %+v, %v", again, err)
	}
	if err := c.EndDatabaseDrop(ctx(t), rec); err != nil {
		t.Fatal(err)
	}
	_, err = c.BeginDatabaseDrop(ctx(t), "mail")
	wantKind(t, err, problem.NotFound, "")

	_, _, err = c.PutDatabase(ctx(t), schema.Database{Name: "mail", Partitions: 8})
	wantKind(t, err, problem.Conflict, "partitions")
	d, created, err := c.PutDatabase(ctx(t), schema.Database{Name: "mail"})
	if err != nil || !created || d.Partitions != 4 {
		t.Fatalf("created again: %+v created=%v err=%v", d, created, err)
	}
	if len(c.Tables("mail")) != 0 {
		t.Fatalf("the database created again has tables: %v", c.Tables("mail"))
	}
}
