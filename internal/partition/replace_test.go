package partition

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/schema"
)

// ids returns the ids of box's documents of tb, and their subjects.
func ids(t *testing.T, f *fixture, tb *schema.Table, box string) ([]int64, []string) {
	t.Helper()
	group, _ := keys.EncodeTuple(keys.Tuple{box})
	entries, _, err := f.rep.Scan(tb.Def.Name, group, nil, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	var subjects []string
	for _, e := range entries {
		tup, _ := keys.DecodeTuple(e.Key)
		d, err := tb.Decode(e.Record.Avro, int(e.Record.Version), tb.Latest())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tup[1].(int64))
		subjects = append(subjects, d["subject"].(string))
	}
	return out, subjects
}

func span(from, to int64) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// A replace load's chunks change nothing a reader of the table sees; its
// swap replaces the table's documents and index entries with the staged
// ones at one SCN, written before it included, and leaves no staging
// behind; the change log has one replace write for it and none for the
// staged documents; a write after the swap applies to the loaded table.
func TestReplaceSwapsTheTableAtOneSCN(t *testing.T) {
	f, tb := loadFixture(t)
	ctx := context.Background()
	for id := int64(1); id <= 20; id++ {
		f.exec(t, put(tb, keys.Tuple{"a", id}, msg(fmt.Sprintf("old note %d", id), true, id)))
	}
	for id := int64(1); id <= 5; id++ {
		f.exec(t, put(tb, keys.Tuple{"z", id}, msg("old only", false, id)))
	}
	p := f.rep.prefix
	table := func() map[string]string {
		m := keysIn(t, f.engine, p.Table("Msg"), keys.PrefixEnd(p.Table("Msg")))
		maps.Copy(m, keysIn(t, f.engine, p.IndexTable("Msg"), keys.PrefixEnd(p.IndexTable("Msg"))))
		return m
	}

	// Two staged chunks: box a 10..30 (more than a fold's worth in the
	// first), box c 1..10.
	var docs1, docs2 []LoadDoc
	for id := int64(10); id <= 30; id++ {
		docs1 = append(docs1, loadDoc(t, tb, "a", id, msg(fmt.Sprintf("new note %d", id), id%2 == 0, 100+id)))
	}
	for id := int64(1); id <= 10; id++ {
		docs2 = append(docs2, loadDoc(t, tb, "c", id, msg("new c", true, id)))
	}
	m0 := LoadMark{Load: "R1"}
	m1 := LoadMark{Load: "R1", Offset: 1000, Records: uint64(len(docs1))}
	m2 := LoadMark{Load: "R1", Offset: 1500, Records: uint64(len(docs1) + len(docs2))}
	done := LoadMark{Load: "R1", Offset: 1510, Records: m2.Records, Done: true}
	before := table()
	if _, err := f.rep.ReplaceChunk(ctx, "Msg", 1, m0, m1, docs1); err != nil {
		t.Fatal(err)
	}
	staged, err := f.rep.ReplaceChunk(ctx, "Msg", 1, m1, m2, docs2)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(before, table()) {
		t.Fatal("a staged chunk changed the table")
	}
	if got, _ := ids(t, f, tb, "c"); len(got) != 0 {
		t.Fatalf("box c is readable before the swap: %v", got)
	}
	// A write before the swap is the table's previous contents.
	f.exec(t, put(tb, keys.Tuple{"a", int64(99)}, msg("racing", true, 99)))

	// The swap carries no documents; a swap with some changes nothing.
	bad := []LoadDoc{loadDoc(t, tb, "a", 1, msg("x", true, 1))}
	all := state(t, f.engine, p)
	if _, err := f.rep.ReplaceChunk(ctx, "Msg", 1, m2, done, bad); !problem.Is(err, problem.Malformed) {
		t.Fatalf("a swap with documents: %v, want malformed", err)
	}
	if !maps.Equal(all, state(t, f.engine, p)) {
		t.Fatal("a refused swap changed the partition")
	}
	scn, err := f.rep.ReplaceChunk(ctx, "Msg", 1, m2, done, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := f.rep.LoadMark("R1"); got != done {
		t.Fatalf("mark %+v, want %+v", got, done)
	}

	for _, c := range []struct {
		box  string
		want []int64
	}{{"a", span(10, 30)}, {"c", span(1, 10)}, {"z", nil}} {
		got, subjects := ids(t, f, tb, c.box)
		if !slices.Equal(got, c.want) {
			t.Fatalf("box %s holds %v after the swap, want %v", c.box, got, c.want)
		}
		for _, s := range subjects {
			if s == "racing" || s == "old only" || s[:3] == "old" {
				t.Fatalf("box %s kept %q", c.box, s)
			}
		}
		if len(c.want) > 0 {
			auditGroup(t, f, tb, c.box)
		}
	}
	if got := queryIDs(t, f, tb, "a", "subject:old", ""); len(got) != 0 {
		t.Fatalf("subject:old answers %v after the swap", got)
	}
	if got := queryIDs(t, f, tb, "a", "inbox:true", ""); !slices.Equal(got, []int64{10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30}) {
		t.Fatalf("inbox:true answers %v", got)
	}
	stagingTable := StagingTable("Msg", "R1")
	for _, start := range [][]byte{p.Table(stagingTable), p.IndexTable(stagingTable)} {
		if left := keysIn(t, f.engine, start, keys.PrefixEnd(start)); len(left) != 0 {
			t.Fatalf("%d staging keys left", len(left))
		}
	}

	// The log: the staged chunks write the staging table only (which
	// the change stream skips), the swap is one replace write.
	log, err := f.rep.ReadLog(SCN{Generation: staged.Generation, Sequence: staged.Sequence - 2}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 4 || log[3].SCN != scn {
		t.Fatalf("log: %d entries, want the chunks, the racing write and the swap", len(log))
	}
	for _, e := range log[:2] {
		for _, w := range e.Writes {
			if w.Table != stagingTable || !schema.IsVersionTable(w.Table) {
				t.Fatalf("a staged chunk wrote table %q", w.Table)
			}
		}
	}
	if w := log[3].Writes; len(w) != 1 || w[0].Op != OpReplace || w[0].Table != "Msg" || len(w[0].Key) != 0 || log[3].Load.To != done {
		t.Fatalf("the swap's log entry: %+v", log[3])
	}

	// After the swap, writes apply to the loaded documents.
	f.exec(t, put(tb, keys.Tuple{"a", int64(99)}, msg("after", true, 99)))
	if got, _ := ids(t, f, tb, "a"); !slices.Equal(got, append(span(10, 30), 99)) {
		t.Fatalf("box a after a later write: %v", got)
	}
}

// A replace load that ended without its swap has its staging deleted
// and its mark reset, only from the mark the partition records: the
// table is as before, a chunk of the old run is refused, and a new run
// stages from the start and swaps.
func TestDiscardStagingLeavesTheTableAndRestartsTheLoad(t *testing.T) {
	f, tb := loadFixture(t)
	ctx := context.Background()
	for id := int64(1); id <= 5; id++ {
		f.exec(t, put(tb, keys.Tuple{"a", id}, msg("old", true, id)))
	}
	p := f.rep.prefix
	staging := StagingTable("Msg", "R2")
	keysOf := func(table string) map[string]string {
		m := keysIn(t, f.engine, p.Table(table), keys.PrefixEnd(p.Table(table)))
		maps.Copy(m, keysIn(t, f.engine, p.IndexTable(table), keys.PrefixEnd(p.IndexTable(table))))
		return m
	}
	before := keysOf("Msg")
	var docs []LoadDoc
	for id := int64(10); id <= 20; id++ {
		docs = append(docs, loadDoc(t, tb, "b", id, msg("new", true, id)))
	}
	m0 := LoadMark{Load: "R2"}
	m1 := LoadMark{Load: "R2", Offset: 700, Records: 6}
	m2 := LoadMark{Load: "R2", Offset: 1200, Records: 11}
	if _, err := f.rep.ReplaceChunk(ctx, "Msg", 1, m0, m1, docs[:6]); err != nil {
		t.Fatal(err)
	}
	if _, err := f.rep.ReplaceChunk(ctx, "Msg", 1, m1, m2, docs[6:]); err != nil {
		t.Fatal(err)
	}
	if len(keysOf(staging)) == 0 {
		t.Fatal("the chunks staged nothing")
	}

	all := state(t, f.engine, p)
	for _, c := range []struct {
		from LoadMark
		kind problem.Kind
	}{{m1, problem.Conflict}, {m0, problem.Malformed}, {LoadMark{Load: "R2", Offset: 1210, Records: 11, Done: true}, problem.Malformed}} {
		if _, err := f.rep.DiscardStaging(ctx, "Msg", c.from); !problem.Is(err, c.kind) {
			t.Fatalf("discard from %s: %v, want kind %d", c.from, err, c.kind)
		}
	}
	if !maps.Equal(all, state(t, f.engine, p)) {
		t.Fatal("a refused discard changed the partition")
	}

	if _, err := f.rep.DiscardStaging(ctx, "Msg", m2); err != nil {
		t.Fatal(err)
	}
	if left := keysOf(staging); len(left) != 0 {
		t.Fatalf("%d staging keys left", len(left))
	}
	if !maps.Equal(before, keysOf("Msg")) {
		t.Fatal("the discard changed the table")
	}
	if got, _ := f.rep.LoadMark("R2"); got != m0 {
		t.Fatalf("mark %s after the discard, want %s", got, m0)
	}
	// Again: the partition records the start now, not m2.
	if _, err := f.rep.DiscardStaging(ctx, "Msg", m2); !problem.Is(err, problem.Conflict) {
		t.Fatalf("second discard: %v, want a conflict", err)
	}
	// The old run's next step is refused; a new run starts over.
	if _, err := f.rep.ReplaceChunk(ctx, "Msg", 1, m2, LoadMark{Load: "R2", Offset: 1210, Records: 11, Done: true}, nil); !problem.Is(err, problem.Conflict) {
		t.Fatalf("the old run's swap: %v, want a conflict", err)
	}
	if _, err := f.rep.ReplaceChunk(ctx, "Msg", 1, m0, m2, docs); err != nil {
		t.Fatal(err)
	}
	if _, err := f.rep.ReplaceChunk(ctx, "Msg", 1, m2, LoadMark{Load: "R2", Offset: 1210, Records: 11, Done: true}, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := ids(t, f, tb, "b"); !slices.Equal(got, span(10, 20)) {
		t.Fatalf("box b after the new run: %v", got)
	}
	if got, _ := ids(t, f, tb, "a"); len(got) != 0 {
		t.Fatalf("box a after the new run's swap: %v", got)
	}
}
