package partition

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/index"
	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/schema"
)

const foldSchema = `{"type":"record","name":"M","fields":[
	{"name":"subject","type":"string","index":"text"},
	{"name":"at","type":"long","index":"attribute"}]}`

// foldFixture is a fixture whose replica, configured by knobs, indexes
// table Msg (box, id): subject as text, at as an attribute.
func foldFixture(t *testing.T, knobs TestingKnobs) (*fixture, *schema.Table) {
	t.Helper()
	f := openWith(t, t.TempDir(), &knobs)
	t.Cleanup(func() { f.engine.Close() })
	msgs := table(t, "Msg", []schema.KeyPart{{Name: "box", Type: "string"}, {Name: "id", Type: "long"}}, foldSchema)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); f.rep.WaitIndexJobs() })
	if err := f.rep.SyncIndexes(ctx, []*schema.Table{msgs}, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	return f, msgs
}

// indexSpan returns the index entries of box, key to value.
func indexSpan(t *testing.T, f *fixture, tb *schema.Table, box string) map[string]string {
	t.Helper()
	group, _ := keys.EncodeTuple(keys.Tuple{box})
	start, end := index.GroupSpan(f.rep.prefix, tb.Def.Name, group)
	return keysIn(t, f.engine, start, end)
}

// auditGroup checks every index entry of box against its live documents
// (index.Audit): nothing a query could read is left of a version
// replaced or deleted, in any form.
func auditGroup(t *testing.T, f *fixture, tb *schema.Table, box string) {
	t.Helper()
	group, _ := keys.EncodeTuple(keys.Tuple{box})
	docs, _, err := f.rep.Scan(tb.Def.Name, group, nil, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	audit := index.NewAudit(tb.Indexes())
	for _, d := range docs {
		doc, err := tb.Decode(d.Record.Avro, int(d.Record.Version), tb.Latest())
		if err != nil {
			t.Fatal(err)
		}
		audit.Live(f.rep.prefix, tb.Def.Name, group, d.Key[len(group):], doc)
	}
	n := 0
	for _, ix := range tb.Indexes() {
		k, err := audit.List(f.engine, f.rep.prefix.Index(tb.Def.Name, group, ix.String()))
		if err != nil {
			t.Fatal(err)
		}
		n += k
	}
	if all := len(indexSpan(t, f, tb, box)); all != n {
		t.Fatalf("%d index entries in the group, %d in its fields' lists", all, n)
	}
}

// tagCount is the number of box's subject entries under an index tag
// (0x03 folded documents, 0x04 posting blocks, 0x05 dead postings).
func tagCount(t *testing.T, f *fixture, tb *schema.Table, box string, tag byte) int {
	t.Helper()
	group, _ := keys.EncodeTuple(keys.Tuple{box})
	start := append(f.rep.prefix.Index(tb.Def.Name, group, "subject"), tag)
	n := 0
	for k := range indexSpan(t, f, tb, box) {
		if strings.HasPrefix(k, string(start)) {
			n++
		}
	}
	return n
}

// pendingCount is the number of pending entries of box's subjects.
func pendingCount(t *testing.T, f *fixture, tb *schema.Table, box string) int {
	t.Helper()
	group, _ := keys.EncodeTuple(keys.Tuple{box})
	start, _ := index.PendingSpan(f.rep.prefix.Index(tb.Def.Name, group, "subject"))
	n := 0
	for k := range indexSpan(t, f, tb, box) {
		if strings.HasPrefix(k, string(start)) {
			n++
		}
	}
	return n
}

func TestFoldMovesPendingEntriesIntoASegmentWithTheSameAnswers(t *testing.T) {
	t.Parallel()
	f, msgs := foldFixture(t, TestingKnobs{FoldAfter: 4})
	subjects := []string{"lunch on friday", "budget review", "friday lunch menu", "team lunch"}
	for i, s := range subjects[:3] {
		f.exec(t, put(msgs, keys.Tuple{"a", int64(i + 1)}, schema.Document{"subject": s, "at": int64(i)}))
	}
	f.rep.WaitIndexJobs()
	if n := pendingCount(t, f, msgs, "a"); n != 3 {
		t.Fatalf("%d pending entries after 3 writes below the threshold of 4, want 3", n)
	}
	// check asserts the answers over documents 1 to docs; document i has
	// at = i-1, so by -at they come in descending order.
	check := func(when string, docs int64) {
		t.Helper()
		for _, c := range []struct {
			q    string
			want []int64
		}{
			{"subject:lunch", []int64{1, 3, 4}},
			{`subject:"friday lunch"`, []int64{3}},
			{"subject:fri*", []int64{1, 3}},
			{"subject:budget AND at:1", []int64{2}},
			{"NOT subject:lunch", []int64{2}},
			{"subject:*", []int64{1, 2, 3, 4}},
		} {
			want := slices.DeleteFunc(slices.Clone(c.want), func(id int64) bool { return id > docs })
			if got := queryIDs(t, f, msgs, "a", c.q, ""); !slices.Equal(got, want) {
				t.Errorf("%s: %s = %v, want %v", when, c.q, got, want)
			}
			slices.Reverse(want)
			if got := queryIDs(t, f, msgs, "a", c.q, "-at"); !slices.Equal(got, want) {
				t.Errorf("%s: %s sorted by -at = %v, want %v", when, c.q, got, want)
			}
		}
	}
	check("pending", 3)
	// The fourth pending entry starts a fold of the group.
	f.exec(t, put(msgs, keys.Tuple{"a", int64(4)}, schema.Document{"subject": subjects[3], "at": int64(3)}))
	f.rep.WaitIndexJobs()
	if n := pendingCount(t, f, msgs, "a"); n != 0 {
		t.Fatalf("%d pending entries after the fourth write, want 0 (folded)", n)
	}
	auditGroup(t, f, msgs, "a")
	// One segment: a folded entry per document, a posting block per
	// distinct term of the four subjects (lunch, on, friday, budget,
	// review, menu, team).
	if folded, blocks := tagCount(t, f, msgs, "a", 0x03), tagCount(t, f, msgs, "a", 0x04); folded != 4 || blocks != 7 {
		t.Fatalf("%d folded entries and %d posting blocks, want 4 and 7", folded, blocks)
	}
	if writes, docs, _ := f.rep.FoldStats(); writes != 1 || docs != 4 {
		t.Fatalf("FoldStats = %d write sets, %d documents; want 1, 4", writes, docs)
	}
	check("folded", 4)
	// A folded document updated and one deleted hide their postings
	// behind dead postings; they and a new one are pending.
	f.exec(t, put(msgs, keys.Tuple{"a", int64(1)}, schema.Document{"subject": "dinner on saturday", "at": int64(0)}))
	f.exec(t, Operation{Kind: Delete, Table: msgs, Key: keys.Tuple{"a", int64(3)}})
	f.exec(t, put(msgs, keys.Tuple{"a", int64(5)}, schema.Document{"subject": "sunday brunch", "at": int64(5)}))
	f.rep.WaitIndexJobs()
	if n := pendingCount(t, f, msgs, "a"); n != 2 {
		t.Fatalf("%d pending entries after writes to a folded group, want 2", n)
	}
	if folded, dead := tagCount(t, f, msgs, "a", 0x03), tagCount(t, f, msgs, "a", 0x05); folded != 2 || dead != 2 {
		t.Fatalf("%d folded entries and %d dead postings after an update and a delete, want 2 and 2", folded, dead)
	}
	auditGroup(t, f, msgs, "a")
	for _, c := range []struct {
		q    string
		want []int64
	}{{"subject:lunch", []int64{4}}, {"subject:saturday", []int64{1}}, {"subject:friday", nil}, {"subject:budget", []int64{2}}, {"subject:brunch", []int64{5}}} {
		if got := queryIDs(t, f, msgs, "a", c.q, ""); !slices.Equal(got, c.want) {
			t.Errorf("after an update and a delete: %s = %v, want %v", c.q, got, c.want)
		}
	}
	if writes, _, _ := f.rep.FoldStats(); writes != 1 {
		t.Fatalf("%d fold write sets after two pending writes, want still 1", writes)
	}
	// Two more fold the group again, into a second segment, beside the
	// first: the updated document's new text, the new document and the
	// two written now.
	f.exec(t, put(msgs, keys.Tuple{"a", int64(6)}, schema.Document{"subject": "lunch again", "at": int64(6)}))
	f.exec(t, put(msgs, keys.Tuple{"a", int64(7)}, schema.Document{"subject": "no words of note", "at": int64(7)}))
	f.rep.WaitIndexJobs()
	if writes, docs, _ := f.rep.FoldStats(); writes != 2 || docs != 8 {
		t.Fatalf("FoldStats = %d write sets, %d documents; want 2, 8", writes, docs)
	}
	if n, folded := pendingCount(t, f, msgs, "a"), tagCount(t, f, msgs, "a", 0x03); n != 0 || folded != 6 {
		t.Fatalf("%d pending and %d folded entries after the second fold, want 0 and 6", n, folded)
	}
	auditGroup(t, f, msgs, "a")
	for _, c := range []struct {
		q    string
		want []int64
	}{{"subject:lunch", []int64{4, 6}}, {"subject:on", []int64{1}}, {`subject:"dinner on"`, []int64{1}}, {"subject:friday", nil}, {"subject:no*", []int64{7}}} {
		if got := queryIDs(t, f, msgs, "a", c.q, ""); !slices.Equal(got, c.want) {
			t.Errorf("over two segments: %s = %v, want %v", c.q, got, c.want)
		}
		slices.Reverse(c.want)
		if got := queryIDs(t, f, msgs, "a", c.q, "-at"); !slices.Equal(got, c.want) {
			t.Errorf("over two segments: %s sorted by -at = %v, want %v", c.q, got, c.want)
		}
	}
	// A group deleted whole loses its segments with its other entries.
	f.exec(t, Operation{Kind: DeleteCollection, Table: msgs, Key: keys.Tuple{"a"}})
	f.exec(t, put(msgs, keys.Tuple{"a", int64(1)}, schema.Document{"subject": "fresh start", "at": int64(0)}))
	if n, all := pendingCount(t, f, msgs, "a"), len(indexSpan(t, f, msgs, "a")); n != 1 || all != 2 {
		t.Fatalf("%d pending of %d index entries in a group deleted and written again, want 1 of 2", n, all)
	}
}

// TestFoldsRacingWritesLeaveExactlyTheLiveEntries folds after every other
// write, and in a loop besides, while writers replace and delete the same
// documents: a fold that wrote the postings of a version a writer had
// replaced (or of a deleted document) would leave postings no dead posting
// hides, and a writer that missed a folded entry would leave its postings
// alive.
func TestFoldsRacingWritesLeaveExactlyTheLiveEntries(t *testing.T) {
	t.Parallel()
	f, msgs := foldFixture(t, TestingKnobs{FoldAfter: 2})
	words := []string{"alpha", "beta", "gamma", "delta", "epsilon"}
	group, _ := keys.EncodeTuple(keys.Tuple{"a"})
	var wg sync.WaitGroup
	done := make(chan struct{})
	folded := make(chan struct{})
	go func() {
		defer close(folded)
		for {
			select {
			case <-done:
				return
			default:
			}
			if err := f.rep.Fold(context.Background(), msgs.Def.Name, group); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for range 300 {
				key := keys.Tuple{"a", int64(r.IntN(12))}
				var op Operation
				if r.IntN(5) == 0 {
					op = Operation{Kind: Delete, Table: msgs, Key: key}
				} else {
					op = put(msgs, key, schema.Document{"subject": words[r.IntN(5)] + " " + words[r.IntN(5)], "at": int64(r.IntN(3))})
				}
				// A delete of an absent document fails; so may its
				// confirmation, when another write was applied meanwhile.
				_, err := f.rep.Execute(context.Background(), Request{Ops: []Operation{op}})
				if err != nil && !errors.Is(err, ErrStaleEvaluation) && !strings.Contains(err.Error(), "does not exist") {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(done)
	<-folded
	f.rep.WaitIndexJobs()
	// The answers, with some entries pending and some folded.
	docs, _, err := f.rep.Scan(msgs.Def.Name, group, nil, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for _, word := range words {
		var want []int64
		for _, d := range docs {
			doc, _ := msgs.Decode(d.Record.Avro, int(d.Record.Version), msgs.Latest())
			if slices.Contains(strings.Fields(doc["subject"].(string)), word) {
				tup, _ := keys.DecodeTuple(d.Key[len(group):])
				want = append(want, tup[0].(int64))
			}
		}
		if got := queryIDs(t, f, msgs, "a", "subject:"+word, ""); !slices.Equal(got, want) {
			t.Errorf("subject:%s = %v, want %v", word, got, want)
		}
	}
	if err := f.rep.Fold(context.Background(), msgs.Def.Name, group); err != nil {
		t.Fatal(err)
	}
	auditGroup(t, f, msgs, "a")
}

// TestAWriteDuringAFoldWaitsForIt replaces a document's text while a fold
// holds its old text read and not yet written: the write must wait for the
// fold, then hide the postings the fold wrote.
func TestAWriteDuringAFoldWaitsForIt(t *testing.T) {
	t.Parallel()
	var (
		f     *fixture
		msgs  *schema.Table
		first sync.Once
	)
	wrote := make(chan error, 1)
	inFold := func() {
		first.Do(func() {
			go func() {
				_, err := f.rep.Execute(context.Background(), Request{Ops: []Operation{put(msgs, keys.Tuple{"a", int64(1)}, schema.Document{"subject": "new text", "at": int64(1)})}})
				wrote <- err
			}()
			time.Sleep(100 * time.Millisecond) // long enough for an unlatched write to land
		})
	}
	f, msgs = foldFixture(t, TestingKnobs{FoldAfter: 1 << 20, BeforeFoldWrite: inFold})
	for i := range 3 {
		f.exec(t, put(msgs, keys.Tuple{"a", int64(i)}, schema.Document{"subject": "old words", "at": int64(i)}))
	}
	group, _ := keys.EncodeTuple(keys.Tuple{"a"})
	if err := f.rep.Fold(context.Background(), msgs.Def.Name, group); err != nil {
		t.Fatal(err)
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if got := queryIDs(t, f, msgs, "a", "subject:old", ""); !slices.Equal(got, []int64{0, 2}) {
		t.Fatalf("subject:old = %v, want [0 2]: document 1's old text is still indexed", got)
	}
	auditGroup(t, f, msgs, "a")
}

func TestAFoldCarriesItsFlagThroughTheLog(t *testing.T) {
	ws := &WriteSet{Mtime: 7, Upkeep: true, Index: IndexWrites{Puts: []IndexEntry{{Key: []byte("k"), Value: []byte("v")}}, Deletes: [][]byte{[]byte("p")}}}
	b := ws.Encode()
	got, err := DecodeWriteSet(b)
	if err != nil || !got.Upkeep || got.Mtime != 7 || len(got.Index.Puts) != 1 || len(got.Index.Deletes) != 1 {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	// The change-log part alone keeps the flag.
	if logged, err := DecodeWriteSet(b[:ws.LogLen()]); err != nil || !logged.Upkeep {
		t.Fatalf("change-log part decoded %+v, %v", logged, err)
	}
	// Any other write set keeps format 2, byte for byte what it was.
	plain := &WriteSet{Mtime: 7, Index: ws.Index}
	if b := plain.Encode(); b[0] != writeSetFormat {
		t.Fatalf("a write set without flags encodes in format %d", b[0])
	}
	if _, err := DecodeWriteSet(append(bytes.Clone(b[:ws.LogLen()-1]), 0x80)); err == nil {
		t.Fatal("an unknown flag decoded")
	}
}

func TestIncrementalBackupSkipsFolds(t *testing.T) {
	t.Parallel()
	f, msgs := foldFixture(t, TestingKnobs{FoldAfter: 1 << 20})
	for i := range 6 {
		f.exec(t, put(msgs, keys.Tuple{"a", int64(i)}, schema.Document{"subject": fmt.Sprint("word", i%3, " common"), "at": int64(i)}))
	}
	full, fullFiles := backupTo(t, f, nil, t.TempDir())
	group, _ := keys.EncodeTuple(keys.Tuple{"a"})
	if err := f.rep.Fold(context.Background(), msgs.Def.Name, group); err != nil {
		t.Fatal(err)
	}
	if n := pendingCount(t, f, msgs, "a"); n != 0 {
		t.Fatalf("%d pending entries after the fold", n)
	}
	inc, incFiles := backupTo(t, f, &BackupPoint{full.SCN, full.Entry}, t.TempDir())
	if !inc.Incremental {
		t.Fatalf("a backup after a fold is full: %s", inc.FullReason)
	}
	// The restored group has its entries pending, as the full backup saw
	// them; it answers as the folded source does.
	r, e := openAs(t, "copy")
	restoreInto(t, r, "s", f.rep.prefix, inc.SCN, append(fullFiles, incFiles...)...)
	g := &fixture{rep: r, engine: e}
	if n := pendingCount(t, g, msgs, "a"); n != 6 {
		t.Fatalf("restored %d pending entries, want the full backup's 6", n)
	}
	for _, q := range []string{"subject:word0", "subject:word1", "subject:common", `subject:"word2 common"`} {
		if got, want := queryIDs(t, g, msgs, "a", q, ""), queryIDs(t, f, msgs, "a", q, ""); !slices.Equal(got, want) || len(want) == 0 {
			t.Errorf("restored %s = %v, source %v", q, got, want)
		}
	}
}

func TestAWriteOfManyDocumentsWritesItsOwnSegment(t *testing.T) {
	t.Parallel()
	f, msgs := foldFixture(t, TestingKnobs{FoldAfter: 4})
	var ops []Operation
	for i := range bulkDocs {
		ops = append(ops, put(msgs, keys.Tuple{"a", int64(i)}, schema.Document{"subject": fmt.Sprint("word", i%5, " common"), "at": int64(i)}))
	}
	f.exec(t, ops...)
	f.rep.WaitIndexJobs()
	// One segment: a folded entry per document, a posting block per term
	// (word0..word4, common).
	if n, folded, blocks := pendingCount(t, f, msgs, "a"), tagCount(t, f, msgs, "a", 0x03), tagCount(t, f, msgs, "a", 0x04); n != 0 || folded != bulkDocs || blocks != 6 {
		t.Fatalf("after a write of %d documents: %d pending, %d folded, %d posting blocks; want 0, %d, 6", bulkDocs, n, folded, blocks, bulkDocs)
	}
	auditGroup(t, f, msgs, "a")
	if writes, _, _ := f.rep.FoldStats(); writes != 0 {
		t.Fatalf("%d folds after a write that folded itself, want 0", writes)
	}
	// One more write alone is pending again; written again in bulk, the
	// documents go to a new segment and hide their old postings.
	f.exec(t, put(msgs, keys.Tuple{"a", int64(1)}, schema.Document{"subject": "other words", "at": int64(1)}))
	if n := pendingCount(t, f, msgs, "a"); n != 1 {
		t.Fatalf("%d pending entries after one more write, want 1", n)
	}
	var want []int64
	for i := int64(6); i < bulkDocs; i += 5 {
		want = append(want, i) // i%5 == 1, but document 1
	}
	if got := queryIDs(t, f, msgs, "a", "subject:word1", ""); !slices.Equal(got, want) {
		t.Fatalf("subject:word1 = %v after document 1 lost the word, want %v", got, want)
	}
	ops = ops[:0]
	for i := range bulkDocs {
		ops = append(ops, put(msgs, keys.Tuple{"a", int64(i)}, schema.Document{"subject": fmt.Sprint("word", (i+1)%5), "at": int64(i)}))
	}
	f.exec(t, ops...)
	// Dead postings: document 1's when it was written alone, and the 63
	// other documents' now (document 1's text was pending).
	if n, dead := pendingCount(t, f, msgs, "a"), tagCount(t, f, msgs, "a", 0x05); n != 0 || dead != bulkDocs {
		t.Fatalf("after a second write of every document: %d pending, %d dead postings; want 0, %d", n, dead, bulkDocs)
	}
	auditGroup(t, f, msgs, "a")
	want = want[:0]
	for i := int64(0); i < bulkDocs; i += 5 {
		want = append(want, i) // (i+1)%5 == 1
	}
	if got := queryIDs(t, f, msgs, "a", "subject:word1", ""); !slices.Equal(got, want) {
		t.Fatalf("subject:word1 = %v after the second bulk write, want %v", got, want)
	}
	if got := queryIDs(t, f, msgs, "a", "subject:common", ""); len(got) != 0 {
		t.Fatalf("subject:common = %v after every document lost the word", got)
	}
}

// TestAFoldPurgesDeadPostings deletes folded documents until their dead
// postings reach purgeAfter: the next fold job rewrites the posting blocks
// without them (a block left empty goes) and deletes the dead postings,
// and the answers stay the same.
func TestAFoldPurgesDeadPostings(t *testing.T) {
	t.Parallel()
	f, msgs := foldFixture(t, TestingKnobs{FoldAfter: 8, PurgeAfter: 3})
	for i := range 8 {
		subject := fmt.Sprint("common word", i%2)
		if i == 5 {
			subject = "lonely common" // the only document with "lonely"
		}
		f.exec(t, put(msgs, keys.Tuple{"a", int64(i)}, schema.Document{"subject": subject, "at": int64(i)}))
	}
	f.rep.WaitIndexJobs()
	blocks := tagCount(t, f, msgs, "a", 0x04) // common, word0, word1, lonely
	if n := pendingCount(t, f, msgs, "a"); n != 0 || blocks != 4 {
		t.Fatalf("%d pending entries and %d posting blocks after the fold, want 0 and 4", n, blocks)
	}
	// Two deletes and an update: three dead postings, below the purge
	// until the update.
	f.exec(t, Operation{Kind: Delete, Table: msgs, Key: keys.Tuple{"a", int64(5)}})
	f.exec(t, Operation{Kind: Delete, Table: msgs, Key: keys.Tuple{"a", int64(2)}})
	if dead := tagCount(t, f, msgs, "a", 0x05); dead != 2 {
		t.Fatalf("%d dead postings after two deletes, want 2", dead)
	}
	f.exec(t, put(msgs, keys.Tuple{"a", int64(3)}, schema.Document{"subject": "changed", "at": int64(3)}))
	group, _ := keys.EncodeTuple(keys.Tuple{"a"})
	if err := f.rep.Fold(context.Background(), msgs.Def.Name, group); err != nil {
		t.Fatal(err)
	}
	if dead, blocks := tagCount(t, f, msgs, "a", 0x05), tagCount(t, f, msgs, "a", 0x04); dead != 0 || blocks != 4 {
		// lonely's block is gone with document 5; document 3's new text
		// ("changed") is a segment of its own.
		t.Fatalf("after the purge: %d dead postings and %d posting blocks, want 0 and 4", dead, blocks)
	}
	if _, _, purged := f.rep.FoldStats(); purged != 3 {
		t.Fatalf("FoldStats counts %d purged postings, want 3", purged)
	}
	auditGroup(t, f, msgs, "a")
	for _, c := range []struct {
		q    string
		want []int64
	}{{"subject:common", []int64{0, 1, 4, 6, 7}}, {"subject:word1", []int64{1, 7}}, {"subject:lonely", nil}, {"subject:changed", []int64{3}}} {
		if got := queryIDs(t, f, msgs, "a", c.q, ""); !slices.Equal(got, c.want) {
			t.Errorf("after the purge: %s = %v, want %v", c.q, got, c.want)
		}
	}
}

// TestAQueryThatReadsManyDeadPostingsStartsAPurge: a text query that
// reads purgeAfter dead postings in a list starts the group's job, which
// purges them though nothing is pending.
func TestAQueryThatReadsManyDeadPostingsStartsAPurge(t *testing.T) {
	t.Parallel()
	f, msgs := foldFixture(t, TestingKnobs{FoldAfter: 1 << 20, PurgeAfter: 3})
	var ops []Operation
	for i := range bulkDocs {
		ops = append(ops, put(msgs, keys.Tuple{"a", int64(i)}, schema.Document{"subject": fmt.Sprint("word", i%4), "at": int64(i)}))
	}
	f.exec(t, ops...) // a segment of its own
	for i := range 3 {
		f.exec(t, Operation{Kind: Delete, Table: msgs, Key: keys.Tuple{"a", int64(i)}})
	}
	if dead := tagCount(t, f, msgs, "a", 0x05); dead != 3 {
		t.Fatalf("%d dead postings after three deletes, want 3", dead)
	}
	var want []int64
	for i := int64(5); i < bulkDocs; i += 4 {
		want = append(want, i) // i%4 == 1, but document 1, deleted
	}
	if got := queryIDs(t, f, msgs, "a", "subject:word1", ""); !slices.Equal(got, want) {
		t.Fatalf("subject:word1 = %v, want %v", got, want)
	}
	f.rep.WaitIndexJobs()
	if dead := tagCount(t, f, msgs, "a", 0x05); dead != 0 {
		t.Fatalf("%d dead postings after a query read 3, want 0 (purged)", dead)
	}
	if _, _, purged := f.rep.FoldStats(); purged != 3 {
		t.Fatalf("FoldStats counts %d purged postings, want 3", purged)
	}
	if got := queryIDs(t, f, msgs, "a", "subject:word1", ""); !slices.Equal(got, want) {
		t.Fatalf("subject:word1 = %v after the purge, want %v", got, want)
	}
	auditGroup(t, f, msgs, "a")
}
