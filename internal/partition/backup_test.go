package partition

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/objstorage"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/schema"
	"github.com/doppio-db/doppio/internal/storage"
)

// backupTo writes f's backup (incremental since *since when set) as files
// in dir and returns what it holds and the files.
func backupTo(t *testing.T, f *fixture, since *BackupPoint, dir string) (BackupInfo, []string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var info BackupInfo
	var files []string
	err := f.rep.Backup(since, func(i BackupInfo) error { info = i; return nil }, func() (objstorage.Writable, error) {
		path := filepath.Join(dir, fmt.Sprintf("%06d.sst", len(files)))
		files = append(files, path)
		return storage.FileWritable(path)
	})
	if err != nil {
		t.Fatal(err)
	}
	return info, files
}

// dataSpans lists the partition's data keys with the prefix cut off.
func dataSpans(t *testing.T, e *storage.Engine, p keys.Partition) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, span := range p.DataSpans() {
		it, err := e.NewIter(span[0], span[1])
		if err != nil {
			t.Fatal(err)
		}
		for ok := it.First(); ok; ok = it.Next() {
			out[string(it.Key()[len(p):])] = string(it.Value())
		}
		it.Close()
	}
	return out
}

func restoreInto(t *testing.T, r *Replica, session string, from keys.Partition, scn SCN, files ...string) {
	t.Helper()
	ctx := context.Background()
	if err := r.BeginRestore(ctx, session); err != nil {
		t.Fatal(err)
	}
	for _, path := range files {
		if _, err := r.LoadRestore(ctx, session, from, path); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.FinishRestore(ctx, session, scn); err != nil {
		t.Fatal(err)
	}
}

func openAs(t *testing.T, db string) (*Replica, *storage.Engine) {
	t.Helper()
	e, err := storage.Open(t.TempDir(), storage.Options{CacheBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	seq, err := NewLocal(e, keys.PartitionPrefix(db, 0))
	if err != nil {
		t.Fatal(err)
	}
	return New(e, db, 0, seq, Limits{}), e
}

func TestRestoredPartitionEqualsSourceAtEachBackup(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	for i := range 4 {
		f.exec(t, put(f.mailbox, keys.Tuple{fmt.Sprint("box", i)}, schema.Document{"unread": int64(0)}))
	}
	for i := range 16 {
		box := keys.Tuple{fmt.Sprint("box", i%4)}
		f.exec(t, inc(f.mailbox, box, "unread", 1), Operation{Kind: Insert, Table: f.messages, Key: box, Doc: schema.Document{"subject": fmt.Sprint("m", i)}})
	}
	full, fullFiles := backupTo(t, f, nil, filepath.Join(dir, "full"))
	if full.Incremental || full.SCN.Sequence != 20 {
		t.Fatalf("full backup = %+v, want a full one at sequence 20", full)
	}
	atFull := dataSpans(t, f.engine, f.rep.prefix)

	// After the full backup: updates, deletes of one document and of a
	// whole collection, new documents (counters advance).
	f.exec(t, inc(f.mailbox, keys.Tuple{"box1"}, "unread", 5))
	f.exec(t, Operation{Kind: Delete, Table: f.messages, Key: keys.Tuple{"box2", int64(1)}})
	f.exec(t, Operation{Kind: DeleteCollection, Table: f.messages, Key: keys.Tuple{"box3"}})
	f.exec(t, Operation{Kind: Insert, Table: f.messages, Key: keys.Tuple{"box0"}, Doc: schema.Document{"subject": "late"}})
	f.exec(t, Operation{Kind: Insert, Table: f.messages, Key: keys.Tuple{"box9"}, Doc: schema.Document{"subject": "new group"}})
	inc1, incFiles := backupTo(t, f, &BackupPoint{full.SCN, full.Entry}, filepath.Join(dir, "inc"))
	if !inc1.Incremental || inc1.Since.SCN != full.SCN || inc1.SCN.Sequence != 25 {
		t.Fatalf("incremental backup = %+v, want one since %s at sequence 25", inc1, full.SCN)
	}
	atInc := dataSpans(t, f.engine, f.rep.prefix)
	f.exec(t, Operation{Kind: Insert, Table: f.messages, Key: keys.Tuple{"box0"}, Doc: schema.Document{"subject": "after the last backup"}})

	// Into another database's partition: keys are rewritten to its prefix.
	r, e := openAs(t, "copy")
	restoreInto(t, r, "b1", f.rep.prefix, full.SCN, fullFiles...)
	if got := dataSpans(t, e, r.prefix); !maps.Equal(got, atFull) {
		t.Fatalf("restored full backup differs from the source at %s", full.SCN)
	}
	if r.Applied() != full.SCN {
		t.Fatalf("restored partition at %s, want %s", r.Applied(), full.SCN)
	}

	r2, e2 := openAs(t, "copy")
	ctx := context.Background()
	if err := r2.BeginRestore(ctx, "b2"); err != nil {
		t.Fatal(err)
	}
	for _, path := range append(append([]string(nil), fullFiles...), incFiles...) {
		if _, err := r2.LoadRestore(ctx, "b2", f.rep.prefix, path); err != nil {
			t.Fatal(err)
		}
	}
	if err := r2.FinishRestore(ctx, "b2", inc1.SCN); err != nil {
		t.Fatal(err)
	}
	if got := dataSpans(t, e2, r2.prefix); !maps.Equal(got, atInc) {
		t.Fatalf("restored full+incremental differs from the source at %s", inc1.SCN)
	}
	// Writes continue the timeline: the next SCN and the next auto-increment value.
	res, err := r2.Execute(ctx, Request{Ops: []Operation{{Kind: Insert, Table: f.messages, Key: keys.Tuple{"box0"}, Doc: schema.Document{"subject": "x"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.SCN.Sequence != inc1.SCN.Sequence+1 || res.Ops[0].Key[1] != int64(6) {
		t.Fatalf("first write after restore: SCN %s key %v, want sequence %d and message 6", res.SCN, res.Ops[0].Key, inc1.SCN.Sequence+1)
	}

	// A partition that holds data refuses a restore, and is left as it was.
	before := dataSpans(t, e2, r2.prefix)
	err = r2.BeginRestore(ctx, "b3")
	var pe *problem.Error
	if !errors.As(err, &pe) || pe.Kind != problem.Conflict {
		t.Fatalf("restore into a non-empty partition: %v, want a conflict", err)
	}
	if !maps.Equal(dataSpans(t, e2, r2.prefix), before) {
		t.Fatal("a refused restore changed the partition")
	}
}

func TestInterruptedRestoreStartsOverOrRefusesAnother(t *testing.T) {
	f := newFixture(t)
	for i := range 5 {
		f.exec(t, Operation{Kind: Insert, Table: f.messages, Key: keys.Tuple{"a"}, Doc: schema.Document{"subject": fmt.Sprint(i)}})
	}
	full, files := backupTo(t, f, nil, t.TempDir())
	r, e := openAs(t, "copy")
	ctx := context.Background()
	if err := r.BeginRestore(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.LoadRestore(ctx, "s1", f.rep.prefix, files[0]); err != nil {
		t.Fatal(err)
	}
	// Interrupted here. Writes are refused...
	var pe *problem.Error
	if _, err := r.Execute(ctx, Request{Ops: []Operation{{Kind: Insert, Table: f.messages, Key: keys.Tuple{"b"}, Doc: schema.Document{"subject": "x"}}}}); !errors.As(err, &pe) || pe.Kind != problem.Conflict {
		t.Fatalf("write during a restore: %v, want a conflict", err)
	}
	// ...and so is another backup's restore...
	if err := r.BeginRestore(ctx, "s2"); !errors.As(err, &pe) || pe.Kind != problem.Conflict {
		t.Fatalf("another restore over an unfinished one: %v, want a conflict", err)
	}
	if err := r.FinishRestore(ctx, "s2", full.SCN); !errors.As(err, &pe) || pe.Kind != problem.Conflict {
		t.Fatalf("finishing another session: %v, want a conflict", err)
	}
	// ...the same one, run again, converges.
	restoreInto(t, r, "s1", f.rep.prefix, full.SCN, files...)
	if !maps.Equal(dataSpans(t, e, r.prefix), dataSpans(t, f.engine, f.rep.prefix)) {
		t.Fatal("rerun restore differs from the source")
	}
}

func TestIncrementalFallsBackToFullWhenTheLogIsTrimmed(t *testing.T) {
	f := newFixture(t)
	for i := range 5 {
		f.exec(t, Operation{Kind: Insert, Table: f.messages, Key: keys.Tuple{"a"}, Doc: schema.Document{"subject": fmt.Sprint(i)}})
	}
	full, fullFiles := backupTo(t, f, nil, t.TempDir())
	for i := range 5 {
		f.exec(t, Operation{Kind: Insert, Table: f.messages, Key: keys.Tuple{"a"}, Doc: schema.Document{"subject": fmt.Sprint(i)}})
	}
	if _, err := f.rep.TrimLog(Retention{MaxEntries: 2}, time.Now()); err != nil {
		t.Fatal(err)
	}
	info, files := backupTo(t, f, &BackupPoint{full.SCN, full.Entry}, t.TempDir())
	if info.Incremental || info.FullReason != "the change log no longer holds the previous backup's SCN 1:5" {
		t.Fatalf("backup after trimming = %+v, want a full one saying why", info)
	}
	// Restored as a chain (the full copy replaces what came before it).
	r, e := openAs(t, "copy")
	restoreInto(t, r, "s", f.rep.prefix, info.SCN, append(fullFiles, files...)...)
	if !maps.Equal(dataSpans(t, e, r.prefix), dataSpans(t, f.engine, f.rep.prefix)) {
		t.Fatal("restored fallback backup differs from the source")
	}
}

func TestRestoreRefusesTablesOfAnotherPartition(t *testing.T) {
	f := newFixture(t)
	f.exec(t, Operation{Kind: Insert, Table: f.messages, Key: keys.Tuple{"a"}, Doc: schema.Document{"subject": "s"}})
	_, files := backupTo(t, f, nil, t.TempDir())
	r, e := openAs(t, "copy")
	ctx := context.Background()
	if err := r.BeginRestore(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	before := dataSpans(t, e, r.prefix)
	_, err := r.LoadRestore(ctx, "s", keys.PartitionPrefix("db", 1), files[0])
	var pe *problem.Error
	if !errors.As(err, &pe) || pe.Kind != problem.Invalid {
		t.Fatalf("loading partition 0's table as partition 1's: %v, want invalid", err)
	}
	if !maps.Equal(dataSpans(t, e, r.prefix), before) {
		t.Fatal("a refused table changed the partition")
	}
}

func TestIncrementalCarriesTheIndexOfEveryGroupItWrote(t *testing.T) {
	f := newFixture(t)
	msgs := table(t, "Indexed", []schema.KeyPart{{Name: "box", Type: "string"}, {Name: "id", Type: "long", AutoIncrement: true}},
		`{"type":"record","name":"M","fields":[
			{"name":"subject","type":"string","index":"text"},
			{"name":"at","type":"long","index":"attribute"}]}`)
	ins := func(box, subject string, at int64) Operation {
		return Operation{Kind: Insert, Table: msgs, Key: keys.Tuple{box}, Doc: schema.Document{"subject": subject, "at": at}}
	}
	for _, box := range []string{"a", "b", "c", "d"} {
		f.exec(t, ins(box, "lunch friday", 1), ins(box, "budget review", 2), ins(box, "lunch menu", 3))
	}
	full, fullFiles := backupTo(t, f, nil, t.TempDir())
	f.exec(t, Operation{Kind: Put, Table: msgs, Key: keys.Tuple{"b", int64(1)}, Doc: schema.Document{"subject": "dinner saturday", "at": int64(9)}})
	f.exec(t, Operation{Kind: Delete, Table: msgs, Key: keys.Tuple{"c", int64(2)}})
	f.exec(t, Operation{Kind: DeleteCollection, Table: msgs, Key: keys.Tuple{"d"}})
	f.exec(t, ins("e", "new box", 5))
	inc, incFiles := backupTo(t, f, &BackupPoint{full.SCN, full.Entry}, t.TempDir())
	if !inc.Incremental {
		t.Fatalf("incremental backup fell back to full: %s", inc.FullReason)
	}
	r, e := openAs(t, "copy")
	restoreInto(t, r, "s", f.rep.prefix, inc.SCN, append(fullFiles, incFiles...)...)
	if !maps.Equal(dataSpans(t, e, r.prefix), dataSpans(t, f.engine, f.rep.prefix)) {
		t.Fatal("restored index entries differ from the source's")
	}
	g := &fixture{rep: r, engine: e}
	for _, c := range []struct {
		box, q string
		want   []int64
	}{
		{"a", "subject:lunch", []int64{1, 3}},
		{"b", "subject:lunch", []int64{3}},
		{"b", "subject:dinner", []int64{1}},
		{"c", "subject:budget", nil},
		{"d", "subject:lunch", nil},
		{"e", "subject:new", []int64{1}},
	} {
		if got := queryIDs(t, g, msgs, c.box, c.q, ""); !slices.Equal(got, c.want) {
			t.Errorf("restored %s in %s = %v, want %v", c.q, c.box, got, c.want)
		}
	}
}

func TestIncrementalFallsBackToFullAfterAnIndexOnlyTransaction(t *testing.T) {
	f := newFixture(t)
	f.exec(t, Operation{Kind: Insert, Table: f.messages, Key: keys.Tuple{"a"}, Doc: schema.Document{"subject": "s"}})
	full, _ := backupTo(t, f, nil, t.TempDir())
	// What a backfill chunk replicates: index entries, no document.
	ws := &WriteSet{Mtime: 1, Index: IndexWrites{Puts: []IndexEntry{{Key: f.rep.prefix.Index("Message", []byte("x"), "subject"), Value: []byte{1}}}}}
	scn, err := f.rep.repl.Replicate(context.Background(), ws)
	if err != nil {
		t.Fatal(err)
	}
	info, files := backupTo(t, f, &BackupPoint{full.SCN, full.Entry}, t.TempDir())
	if want := fmt.Sprintf("SCN %s built or dropped an index", scn); info.Incremental || info.FullReason != want {
		t.Fatalf("backup after an index-only transaction = %+v, want a full one saying %q", info, want)
	}
	r, e := openAs(t, "copy")
	restoreInto(t, r, "s", f.rep.prefix, info.SCN, files...)
	if !maps.Equal(dataSpans(t, e, r.prefix), dataSpans(t, f.engine, f.rep.prefix)) {
		t.Fatal("restored fallback backup differs from the source")
	}
}

func TestIncrementalOfAnotherTimelineAtTheSameSCNIsFull(t *testing.T) {
	// Two databases that reach the same SCN by different transactions
	// (one dropped and created again under the same name).
	first, second := newFixture(t), newFixture(t)
	for i, f := range []*fixture{first, second} {
		f.exec(t, Operation{Kind: Insert, Table: f.messages, Key: keys.Tuple{"a"}, Doc: schema.Document{"subject": fmt.Sprint("life ", i)}})
	}
	full, _ := backupTo(t, first, nil, t.TempDir())
	second.exec(t, Operation{Kind: Insert, Table: second.messages, Key: keys.Tuple{"a"}, Doc: schema.Document{"subject": "more"}})
	info, _ := backupTo(t, second, &BackupPoint{full.SCN, full.Entry}, t.TempDir())
	if want := "the transaction at SCN 1:1 is not the previous backup's (another timeline: was the database created again?)"; info.Incremental || info.FullReason != want {
		t.Fatalf("backup of another timeline = %+v, want a full one saying %q", info, want)
	}
	if full.Entry == "" {
		t.Fatal("a backup of a partition with writes has no entry digest")
	}
}
