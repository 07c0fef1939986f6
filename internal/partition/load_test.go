package partition

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/schema"
	"github.com/doppio-db/doppio/internal/storage"
)

// loadTable is an indexed table of messages by box and id.
func loadTable(t testing.TB) *schema.Table {
	return table(t, "Msg", []schema.KeyPart{{Name: "box", Type: "string"}, {Name: "id", Type: "long"}},
		`{"type":"record","name":"M","fields":[
			{"name":"subject","type":"string","index":"text"},
			{"name":"inbox","type":"boolean","index":"attribute"},
			{"name":"at","type":"long","index":"attribute"}]}`)
}

// loadFixture is a fixture whose replica knows loadTable.
func loadFixture(t testing.TB) (*fixture, *schema.Table) {
	f := newFixture(t)
	tb := loadTable(t)
	if err := f.rep.SyncIndexes(context.Background(), []*schema.Table{tb}, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	return f, tb
}

// loadDoc is message id of box, in Avro at version 1.
func loadDoc(t testing.TB, tb *schema.Table, box string, id int64, doc schema.Document) LoadDoc {
	t.Helper()
	k, err := keys.EncodeTuple(keys.Tuple{box, id})
	if err != nil {
		t.Fatal(err)
	}
	avro, err := tb.Encode(doc)
	if err != nil {
		t.Fatal(err)
	}
	return LoadDoc{Key: k, Avro: avro}
}

func msg(subject string, inbox bool, at int64) schema.Document {
	return schema.Document{"subject": subject, "inbox": inbox, "at": at}
}

// state is every key and value under the partition's prefix.
func state(t testing.TB, e *storage.Engine, p keys.Partition) map[string]string {
	return keysIn(t, e, p, p.End())
}

// keysIn is every key in [start, end), and its value.
func keysIn(t testing.TB, e *storage.Engine, start, end []byte) map[string]string {
	t.Helper()
	it, err := e.NewIter(start, end)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	out := map[string]string{}
	for ok := it.First(); ok; ok = it.Next() {
		out[string(it.Key())] = string(it.Value())
	}
	return out
}

func TestLoadChunkIndexesEqualAScanOverChangedDocuments(t *testing.T) {
	f, tb := loadFixture(t)
	ctx := context.Background()
	// Boxes a and b hold 1..20, in the inbox, "old".
	for _, box := range []string{"a", "b"} {
		for id := int64(1); id <= 20; id++ {
			f.exec(t, put(tb, keys.Tuple{box, id}, msg(fmt.Sprintf("old note %d", id), true, id)))
		}
	}
	// The chunk rewrites 10..90 of a, b and c: indexed fields change for
	// the existing ones; box a gets more than bulkDocs documents, so its
	// text entries are folded by the chunk itself.
	var docs []LoadDoc
	for _, box := range []string{"c", "a", "b"} {
		for id := int64(10); id <= 90; id++ {
			docs = append(docs, loadDoc(t, tb, box, id, msg(fmt.Sprintf("new note %d", id), id%2 == 0, 100+id)))
		}
	}
	from := LoadMark{Load: "L1"}
	to := LoadMark{Load: "L1", Offset: 4096, Records: uint64(len(docs))}
	scn, err := f.rep.LoadChunk(ctx, "Msg", 1, from, to, docs)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := f.rep.LoadMark("L1"); err != nil || got != to {
		t.Fatalf("mark after the chunk = %+v, %v; want %+v", got, err, to)
	}

	// Every query answers what a scan of the documents does, and no index
	// entry is left of a replaced version.
	for _, box := range []string{"a", "b", "c"} {
		auditGroup(t, f, tb, box)
		group, _ := keys.EncodeTuple(keys.Tuple{box})
		entries, _, err := f.rep.Scan("Msg", group, nil, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []struct {
			query string
			match func(schema.Document) bool
		}{
			{"inbox:true", func(d schema.Document) bool { return d["inbox"] == true }},
			{"inbox:false", func(d schema.Document) bool { return d["inbox"] == false }},
			{"at:[0 TO 50]", func(d schema.Document) bool { return d["at"].(int64) <= 50 }},
			{"at:[100 TO 150]", func(d schema.Document) bool { a := d["at"].(int64); return a >= 100 && a <= 150 }},
			{"subject:old", func(d schema.Document) bool { return d["subject"].(string)[:3] == "old" }},
			{"subject:new", func(d schema.Document) bool { return d["subject"].(string)[:3] == "new" }},
			{"subject:note", func(schema.Document) bool { return true }},
		} {
			var want []int64
			for _, e := range entries {
				d, err := tb.Decode(e.Record.Avro, int(e.Record.Version), tb.Latest())
				if err != nil {
					t.Fatal(err)
				}
				if q.match(d) {
					tup, _ := keys.DecodeTuple(e.Key)
					want = append(want, tup[1].(int64))
				}
			}
			got := queryIDs(t, f, tb, box, q.query, "")
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("box %s, %s = %v; a scan finds %v", box, q.query, got, want)
			}
		}
	}

	// The change log holds the chunk as one entry with every document,
	// inserts and updates with their pre-images.
	log, err := f.rep.ReadLog(SCN{Generation: scn.Generation, Sequence: scn.Sequence - 1}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 1 || log[0].SCN != scn {
		t.Fatalf("log after the chunk: %d entries", len(log))
	}
	e := log[0]
	if len(e.Writes) != len(docs) || e.Load == nil || e.Load.To != to || !e.Index.empty() {
		t.Fatalf("chunk's log entry: %d writes (want %d), load %+v", len(e.Writes), len(docs), e.Load)
	}
	inserts, updates := 0, 0
	for _, w := range e.Writes {
		switch {
		case w.Op == OpInsert && w.Before == nil:
			inserts++
		case w.Op == OpUpdate && w.Before != nil:
			updates++
		default:
			t.Fatalf("write %x: op %s, pre-image %d bytes", w.Key, w.Op, len(w.Before))
		}
	}
	if updates != 2*11 || inserts != len(docs)-updates {
		t.Fatalf("%d inserts and %d updates; want %d and 22", inserts, updates, len(docs)-22)
	}
}

func TestLoadChunkRefusesAStaleMarkAndBadInputChangingNothing(t *testing.T) {
	f, tb := loadFixture(t)
	ctx := context.Background()
	m0 := LoadMark{Load: "L"}
	m1 := LoadMark{Load: "L", Offset: 100, Records: 1}
	m2 := LoadMark{Load: "L", Offset: 200, Records: 2, Done: true}
	if _, err := f.rep.LoadChunk(ctx, "Msg", 1, m0, m1, []LoadDoc{loadDoc(t, tb, "a", 1, msg("one", true, 1))}); err != nil {
		t.Fatal(err)
	}
	before := state(t, f.engine, f.rep.prefix)
	good := []LoadDoc{loadDoc(t, tb, "a", 2, msg("two", true, 2))}
	bad := []struct {
		name    string
		table   string
		version uint32
		from    LoadMark
		to      LoadMark
		docs    []LoadDoc
		kind    problem.Kind
		detail  string
	}{
		{"stale mark", "Msg", 1, m0, m1, good, problem.Conflict,
			`the chunk applies from load "L" at offset 0, 0 records, but the partition has recorded load "L" at offset 100, 1 records`},
		{"mark ahead", "Msg", 1, m2, m2, good, problem.Malformed, `no chunk follows a done mark (load "L" at offset 200, 2 records, done)`},
		{"marks of two loads", "Msg", 1, m1, LoadMark{Load: "M"}, good, problem.Malformed, `a chunk's marks must name one load, got "L" and "M"`},
		{"backwards", "Msg", 1, m1, m0, good, problem.Malformed, `a chunk moves forward, not from load "L" at offset 100, 1 records to load "L" at offset 0, 0 records`},
		{"unknown table", "Nope", 1, m1, m2, good, problem.NotFound, "table Nope is not known to partition 0 of db"},
		{"unknown version", "Msg", 2, m1, m2, good, problem.Conflict, "table Msg has schema versions 1 to 1, not 2"},
		{"short key", "Msg", 1, m1, m2, []LoadDoc{{Key: mustKey(t, "a"), Avro: good[0].Avro}}, problem.Malformed,
			"document 0 of the chunk: table Msg has 2 key parts, the key has 1"},
		{"key of the wrong type", "Msg", 1, m1, m2, []LoadDoc{{Key: mustKey(t, "a", "b"), Avro: good[0].Avro}}, problem.Malformed,
			`document 0 of the chunk: key part "id" has the wrong type`},
		{"not Avro", "Msg", 1, m1, m2, append(slices.Clone(good), LoadDoc{Key: mustKey(t, "a", int64(3)), Avro: []byte{0xff}}), problem.Invalid, ""},
	}
	for _, c := range bad {
		_, err := f.rep.LoadChunk(ctx, c.table, c.version, c.from, c.to, c.docs)
		pe, ok := problem.As(err)
		if !ok || pe.Kind != c.kind || (c.detail != "" && pe.Detail != c.detail) {
			t.Fatalf("%s: %v, want %v %q", c.name, err, c.kind, c.detail)
		}
		if after := state(t, f.engine, f.rep.prefix); !maps.Equal(before, after) {
			t.Fatalf("%s changed the partition", c.name)
		}
	}
	// Done, from the recorded mark.
	if _, err := f.rep.LoadChunk(ctx, "Msg", 1, m1, m2, good); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.rep.LoadMark("L"); got != m2 {
		t.Fatalf("mark %+v, want %+v", got, m2)
	}
}

// A chunk whose from-mark passed evaluation but is stale when it is
// applied changes nothing: the replicator checks again.
func TestStaleChunkIsANoOpAtApply(t *testing.T) {
	f, tb := loadFixture(t)
	m0, m1 := LoadMark{Load: "L"}, LoadMark{Load: "L", Offset: 1, Records: 1}
	doc := loadDoc(t, tb, "a", 1, msg("one", true, 1))
	ws := &WriteSet{Mtime: 1, Ingest: true, Load: &LoadStep{From: m0, To: m1},
		Writes: []Write{{Table: "Msg", Key: doc.Key, Op: OpInsert, AfterVersion: 1, After: doc.Avro}}}
	if _, err := f.rep.repl.Replicate(context.Background(), ws); err != nil {
		t.Fatal(err)
	}
	before := state(t, f.engine, f.rep.prefix)
	_, err := f.rep.repl.Replicate(context.Background(), ws)
	if pe, ok := problem.As(err); !ok || pe.Kind != problem.Conflict {
		t.Fatalf("second apply: %v, want a conflict", err)
	}
	if !maps.Equal(before, state(t, f.engine, f.rep.prefix)) {
		t.Fatal("a stale chunk changed the partition")
	}
}

func TestLoadedChunkSurvivesReopeningRightAfterItsIngestion(t *testing.T) {
	dir := t.TempDir()
	f := open(t, dir)
	tb := loadTable(t)
	ctx := context.Background()
	if err := f.rep.SyncIndexes(ctx, []*schema.Table{tb}, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	f.exec(t, put(tb, keys.Tuple{"a", int64(1)}, msg("put", true, 1)))
	to := LoadMark{Load: "L", Offset: 10, Records: 2}
	scn, err := f.rep.LoadChunk(ctx, "Msg", 1, LoadMark{Load: "L"}, to,
		[]LoadDoc{loadDoc(t, tb, "a", 1, msg("loaded", false, 2)), loadDoc(t, tb, "a", 2, msg("loaded", false, 3))})
	if err != nil {
		t.Fatal(err)
	}
	want := state(t, f.engine, f.rep.prefix)
	if err := f.engine.Close(); err != nil {
		t.Fatal(err)
	}
	f = open(t, dir)
	defer f.engine.Close()
	if got := state(t, f.engine, f.rep.prefix); !maps.Equal(got, want) {
		t.Fatal("the partition differs after reopening")
	}
	if f.rep.Applied() != scn {
		t.Fatalf("applied %v after reopening, want %v", f.rep.Applied(), scn)
	}
	res := f.exec(t, put(tb, keys.Tuple{"a", int64(3)}, msg("after", true, 4)))
	if res.SCN.Sequence != scn.Sequence+1 {
		t.Fatalf("the next write got %v after the chunk's %v", res.SCN, scn)
	}
}

func mustKey(t testing.TB, parts ...any) []byte {
	t.Helper()
	k, err := keys.EncodeTuple(keys.Tuple(parts))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestWriteSetCarriesItsLoadStep(t *testing.T) {
	ws := &WriteSet{Mtime: 7, Ingest: true, Load: &LoadStep{From: LoadMark{Load: "x", Offset: 1, Records: 2}, To: LoadMark{Load: "x", Offset: 3, Records: 4, Done: true}},
		Writes: []Write{{Table: "t", Key: []byte("k"), Op: OpInsert, AfterVersion: 1, After: []byte("v")}},
		Index:  IndexWrites{Puts: []IndexEntry{{Key: []byte("i"), Value: []byte("p")}}}}
	enc := ws.Encode()
	got, err := DecodeWriteSet(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Ingest || got.Load == nil || *got.Load != *ws.Load || len(got.Index.Puts) != 1 {
		t.Fatalf("decoded %+v", got)
	}
	log, err := DecodeWriteSet(enc[:ws.LogLen()])
	if err != nil || log.Load == nil || *log.Load != *ws.Load {
		t.Fatalf("the change-log part lost the load step: %+v, %v", log, err)
	}
}

// BenchmarkLoad loads b.N small documents into a fresh partition, by
// LoadChunk in chunks of 1000 and by one-document puts from 8 writers,
// and reports the time per document. The comparison is
// -benchtime=100000x.
func BenchmarkLoad(b *testing.B) {
	const chunk, writers = 10000, 8
	prepare := func(b *testing.B) (*fixture, *schema.Table, []LoadDoc) {
		f, tb := loadFixture(b)
		docs := make([]LoadDoc, b.N)
		for i := range docs {
			docs[i] = loadDoc(b, tb, fmt.Sprintf("box%d", i%1000), int64(i), msg(fmt.Sprintf("note %d", i), i%2 == 0, int64(i)))
		}
		return f, tb, docs
	}
	b.Run("LoadChunk", func(b *testing.B) {
		f, _, docs := prepare(b)
		b.ResetTimer()
		mark := LoadMark{Load: "bench"}
		for start := 0; start < len(docs); start += chunk {
			part := docs[start:min(start+chunk, len(docs))]
			to := LoadMark{Load: "bench", Records: mark.Records + uint64(len(part)), Offset: mark.Offset + uint64(len(part))}
			if _, err := f.rep.LoadChunk(context.Background(), "Msg", 1, mark, to, part); err != nil {
				b.Fatal(err)
			}
			mark = to
		}
	})
	b.Run("Put", func(b *testing.B) {
		f, tb, docs := prepare(b)
		b.ResetTimer()
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for i := w; i < len(docs); i += writers {
					tuple, _ := keys.DecodeTuple(docs[i].Key)
					doc, _ := tb.Decode(docs[i].Avro, 1, 1)
					if _, err := f.rep.Execute(context.Background(), Request{Ops: []Operation{{Kind: Put, Table: tb, Key: tuple, Doc: doc}}}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	})
}
