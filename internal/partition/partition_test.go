package partition

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/schema"
	"github.com/doppio-db/doppio/internal/storage"
)

func table(t testing.TB, name string, key []schema.KeyPart, avro string) *schema.Table {
	t.Helper()
	tb, err := schema.Compile(schema.TableDef{
		Database: "db", Name: name, Key: key,
		Versions: []schema.Version{{Version: 1, Schema: json.RawMessage(avro), Created: time.Now()}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

type fixture struct {
	dir      string
	engine   *storage.Engine
	rep      *Replica
	mailbox  *schema.Table
	messages *schema.Table
}

func open(t testing.TB, dir string) *fixture {
	t.Helper()
	return openWith(t, dir, nil)
}

// openWith is open with the replica's testing knobs (nil: production's).
func openWith(t testing.TB, dir string, knobs *TestingKnobs) *fixture {
	t.Helper()
	e, err := storage.Open(dir, storage.Options{CacheBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	seq, err := NewLocal(e, keys.PartitionPrefix("db", 0))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{
		dir: dir, engine: e, rep: New(e, "db", 0, seq, Limits{Knobs: knobs}),
		mailbox: table(t, "Mailbox", []schema.KeyPart{{Name: "id", Type: "string"}},
			`{"type":"record","name":"Mailbox","fields":[{"name":"unread","type":"long","default":0}]}`),
		messages: table(t, "Message", []schema.KeyPart{{Name: "id", Type: "string"}, {Name: "msg", Type: "long", AutoIncrement: true}},
			`{"type":"record","name":"Message","fields":[{"name":"subject","type":"string"}]}`),
	}
	return f
}

func newFixture(t testing.TB) *fixture {
	f := open(t, t.TempDir())
	t.Cleanup(func() { f.engine.Close() })
	return f
}

func (f *fixture) exec(t testing.TB, ops ...Operation) Result {
	t.Helper()
	res, err := f.rep.Execute(context.Background(), Request{Ops: ops})
	if err != nil {
		t.Fatalf("execute: %v", err)
	}
	return res
}

func (f *fixture) doc(t testing.TB, tb *schema.Table, key keys.Tuple) (schema.Document, bool) {
	t.Helper()
	enc, _ := keys.EncodeTuple(key)
	rec, ok, err := f.rep.Get(tb.Def.Name, enc)
	if err != nil || !ok {
		return nil, false
	}
	d, err := tb.Decode(rec.Avro, int(rec.Version), tb.Latest())
	if err != nil {
		t.Fatal(err)
	}
	return d, true
}

func put(tb *schema.Table, key keys.Tuple, doc schema.Document) Operation {
	return Operation{Kind: Put, Table: tb, Key: key, Doc: doc}
}

func inc(tb *schema.Table, key keys.Tuple, field string, n int) Operation {
	return Operation{Kind: Patch, Table: tb, Key: key, Patch: schema.Patch{Inc: map[string]any{field: json.Number(fmt.Sprint(n))}}}
}

func TestTxnAcrossTablesIsAtomic(t *testing.T) {
	f := newFixture(t)
	box := keys.Tuple{"m1"}
	f.exec(t, put(f.mailbox, box, schema.Document{"unread": int64(0)}))
	before := f.rep.Applied()

	// The second operation's condition fails: the first must not apply.
	_, err := f.rep.Execute(context.Background(), Request{Ops: []Operation{
		inc(f.mailbox, box, "unread", 1),
		{Kind: Put, Table: f.messages, Key: keys.Tuple{"m1", int64(7)}, Doc: schema.Document{"subject": "x"}, Cond: Condition{IfMatch: []string{`"nope"`}}},
	}})
	pe, ok := problem.As(err)
	if !ok || pe.Kind != problem.Precondition || pe.Operation != 1 {
		t.Fatalf("want precondition failure of operation 1, got %v", err)
	}
	if d, _ := f.doc(t, f.mailbox, box); d["unread"] != int64(0) {
		t.Fatalf("failed txn changed the mailbox: %v", d)
	}
	if _, ok := f.doc(t, f.messages, keys.Tuple{"m1", int64(7)}); ok {
		t.Fatal("failed txn created the message")
	}
	if f.rep.Applied() != before {
		t.Fatalf("failed txn consumed an SCN: %v -> %v", before, f.rep.Applied())
	}

	// Both succeed together at one SCN, logged as one entry.
	res := f.exec(t, inc(f.mailbox, box, "unread", 1), Operation{Kind: Insert, Table: f.messages, Key: box, Doc: schema.Document{"subject": "hello"}})
	if res.SCN.Sequence != before.Sequence+1 {
		t.Fatalf("txn SCN %v, want sequence %d", res.SCN, before.Sequence+1)
	}
	if got := res.Ops[1].Key; len(got) != 2 || got[1] != int64(1) {
		t.Fatalf("auto-increment key %v, want [m1 1]", got)
	}
	log, err := f.rep.ReadLog(before, 10)
	if err != nil || len(log) != 1 {
		t.Fatalf("log after %v: %d entries, %v", before, len(log), err)
	}
	e := log[0]
	if e.SCN != res.SCN || len(e.Writes) != 2 || e.Writes[0].Op != OpUpdate || e.Writes[1].Op != OpInsert {
		t.Fatalf("log entry %+v", e)
	}
	if e.Writes[0].Before == nil || e.Writes[0].After == nil || e.Writes[1].Before != nil {
		t.Fatal("log entry lacks pre/post images")
	}
}

func TestConcurrentIncrementsAreExact(t *testing.T) {
	f := newFixture(t)
	const groups, writers, each = 4, 8, 25
	for g := range groups {
		f.exec(t, put(f.mailbox, keys.Tuple{fmt.Sprint("g", g)}, schema.Document{"unread": int64(0)}))
	}
	start := f.rep.Applied()
	var wg sync.WaitGroup
	errs := make(chan error, groups*writers)
	for g := range groups {
		for range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range each {
					if _, err := f.rep.Execute(context.Background(), Request{Ops: []Operation{inc(f.mailbox, keys.Tuple{fmt.Sprint("g", g)}, "unread", 1)}}); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for g := range groups {
		if d, _ := f.doc(t, f.mailbox, keys.Tuple{fmt.Sprint("g", g)}); d["unread"] != int64(writers*each) {
			t.Fatalf("group %d: unread = %v, want %d", g, d["unread"], writers*each)
		}
	}
	if got, want := f.rep.Applied().Sequence-start.Sequence, uint64(groups*writers*each); got != want {
		t.Fatalf("%d SCNs consumed, want %d", got, want)
	}
	// The log holds every sequence exactly once, in order.
	log, err := f.rep.ReadLog(start, groups*writers*each+1)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range log {
		if e.SCN.Sequence != start.Sequence+uint64(i)+1 {
			t.Fatalf("log entry %d has SCN %v", i, e.SCN)
		}
	}
}

func TestAutoIncrementNeverReusesKeys(t *testing.T) {
	f := newFixture(t)
	box := keys.Tuple{"m"}
	ins := Operation{Kind: Insert, Table: f.messages, Key: box, Doc: schema.Document{"subject": "s"}}
	f.exec(t, ins)
	r2 := f.exec(t, ins)
	f.exec(t, Operation{Kind: Delete, Table: f.messages, Key: r2.Ops[0].Key})
	if got := f.exec(t, ins).Ops[0].Key[1]; got != int64(3) {
		t.Fatalf("after deleting key 2, insert got %v, want 3", got)
	}
	f.exec(t, put(f.messages, keys.Tuple{"m", int64(10)}, schema.Document{"subject": "explicit"}))
	res := f.exec(t, ins, ins)
	if a, b := res.Ops[0].Key[1], res.Ops[1].Key[1]; a != int64(11) || b != int64(12) {
		t.Fatalf("inserts after explicit key 10 got %v, %v; want 11, 12", a, b)
	}
	// Another collection counts on its own.
	if got := f.exec(t, Operation{Kind: Insert, Table: f.messages, Key: keys.Tuple{"other"}, Doc: schema.Document{"subject": "s"}}).Ops[0].Key[1]; got != int64(1) {
		t.Fatalf("first key of a new collection is %v", got)
	}
}

func TestDeleteCollectionIsOneTransaction(t *testing.T) {
	f := newFixture(t)
	for range 5 {
		f.exec(t, Operation{Kind: Insert, Table: f.messages, Key: keys.Tuple{"a"}, Doc: schema.Document{"subject": "s"}})
	}
	f.exec(t, Operation{Kind: Insert, Table: f.messages, Key: keys.Tuple{"a\x00b"}, Doc: schema.Document{"subject": "other group"}})
	before := f.rep.Applied()
	res := f.exec(t, Operation{Kind: DeleteCollection, Table: f.messages, Key: keys.Tuple{"a"}})
	if res.Ops[0].Deleted != 5 || res.SCN.Sequence != before.Sequence+1 {
		t.Fatalf("deleted %d at %v", res.Ops[0].Deleted, res.SCN)
	}
	prefix, _ := keys.EncodeTuple(keys.Tuple{"a"})
	if left, _, _ := f.rep.Scan("Message", prefix, nil, 100); len(left) != 0 {
		t.Fatalf("%d documents left", len(left))
	}
	other, _ := keys.EncodeTuple(keys.Tuple{"a\x00b"})
	if left, _, _ := f.rep.Scan("Message", other, nil, 100); len(left) != 1 {
		t.Fatalf("collection delete of %q touched %q: %d left", "a", "a\x00b", len(left))
	}
	_, err := f.rep.Execute(context.Background(), Request{Ops: []Operation{{Kind: DeleteCollection, Table: f.messages, Key: keys.Tuple{"a"}}}})
	if !problem.Is(err, problem.NotFound) {
		t.Fatalf("deleting an empty collection: %v", err)
	}
}

func TestOperationsInOneTxnSeeEachOther(t *testing.T) {
	f := newFixture(t)
	box := keys.Tuple{"m"}
	res := f.exec(t, put(f.mailbox, box, schema.Document{"unread": int64(5)}), inc(f.mailbox, box, "unread", 2),
		Operation{Kind: Delete, Table: f.mailbox, Key: box}, put(f.mailbox, box, schema.Document{"unread": int64(1)}))
	if d, _ := f.doc(t, f.mailbox, box); d["unread"] != int64(1) {
		t.Fatalf("unread = %v", d["unread"])
	}
	log, _ := f.rep.ReadLog(SCN{Generation: 1}, 10)
	if len(log) != 1 || len(log[0].Writes) != 1 || log[0].Writes[0].Op != OpInsert {
		t.Fatalf("net effect of the txn should be one insert, got %+v", log)
	}
	// Each operation sees the state its predecessors left: the put after the
	// delete creates again.
	if !res.Ops[0].Created || res.Ops[1].Created || res.Ops[2].Deleted != 1 || !res.Ops[3].Created {
		t.Fatalf("operation results %+v", res.Ops)
	}
}

func TestConditions(t *testing.T) {
	f := newFixture(t)
	box := keys.Tuple{"m"}
	r := f.exec(t, put(f.mailbox, box, schema.Document{"unread": int64(1)}))
	etag := r.Ops[0].ETag
	cases := []struct {
		name string
		cond Condition
		ok   bool
	}{
		{"if-match current", Condition{IfMatch: []string{etag}}, true},
		{"if-match list", Condition{IfMatch: []string{`"x"`, etag}}, true},
		{"if-match other", Condition{IfMatch: []string{`"x"`}}, false},
		{"if-match any", Condition{IfMatch: []string{"*"}}, true},
		{"if-none-match any", Condition{IfNoneMatch: []string{"*"}}, false},
		{"if-none-match current", Condition{IfNoneMatch: []string{etag}}, false},
		{"if-none-match other", Condition{IfNoneMatch: []string{`"x"`}}, true},
		{"unmodified since future", Condition{IfUnmodifiedSince: time.Now().Add(time.Hour)}, true},
		{"unmodified since past", Condition{IfUnmodifiedSince: time.Now().Add(-time.Hour)}, false},
	}
	for _, tc := range cases {
		op := put(f.mailbox, box, schema.Document{"unread": int64(1)})
		op.Cond = tc.cond
		res, err := f.rep.Execute(context.Background(), Request{Ops: []Operation{op}})
		if tc.ok != (err == nil) || (!tc.ok && !problem.Is(err, problem.Precondition)) {
			t.Fatalf("%s: err = %v", tc.name, err)
		}
		if err == nil && res.Ops[0].ETag != etag {
			t.Fatalf("%s: same content, ETag changed %s -> %s", tc.name, etag, res.Ops[0].ETag)
		}
	}
	op := put(f.mailbox, keys.Tuple{"absent"}, schema.Document{"unread": int64(1)})
	op.Cond = Condition{IfMatch: []string{"*"}}
	if _, err := f.rep.Execute(context.Background(), Request{Ops: []Operation{op}}); !problem.Is(err, problem.Precondition) {
		t.Fatalf("If-Match on an absent document: %v", err)
	}
}

func TestSequenceResumesAfterRestart(t *testing.T) {
	dir := t.TempDir()
	f := open(t, dir)
	for range 3 {
		f.exec(t, put(f.mailbox, keys.Tuple{"m"}, schema.Document{"unread": int64(1)}))
	}
	last := f.rep.Applied()
	f.engine.Close()
	f = open(t, dir)
	defer f.engine.Close()
	if f.rep.Applied() != last {
		t.Fatalf("reopened at %v, want %v", f.rep.Applied(), last)
	}
	if got := f.exec(t, put(f.mailbox, keys.Tuple{"m"}, schema.Document{"unread": int64(2)})).SCN; got.Sequence != last.Sequence+1 {
		t.Fatalf("next SCN %v after %v", got, last)
	}
}

func TestTrimLogKeepsNewestEntries(t *testing.T) {
	f := newFixture(t)
	for i := range 10 {
		f.exec(t, put(f.mailbox, keys.Tuple{"m"}, schema.Document{"unread": int64(i)}))
	}
	n, err := f.rep.TrimLog(Retention{MaxEntries: 4}, time.Now())
	if err != nil || n != 6 {
		t.Fatalf("trimmed %d, %v; want 6", n, err)
	}
	log, _ := f.rep.ReadLog(SCN{Generation: 1}, 100)
	if len(log) != 4 || log[0].SCN.Sequence != 7 || log[3].SCN.Sequence != 10 {
		t.Fatalf("log after trim: %d entries from %v", len(log), log[0].SCN)
	}
	n, _ = f.rep.TrimLog(Retention{MaxAge: time.Minute}, time.Now().Add(time.Hour))
	log, _ = f.rep.ReadLog(SCN{Generation: 1}, 100)
	if n != 3 || len(log) != 1 || log[0].SCN.Sequence != 10 {
		t.Fatalf("age trim removed %d, left %d; the newest entry must stay", n, len(log))
	}
}

func TestWriteSetRoundTrip(t *testing.T) {
	ws := &WriteSet{Mtime: -5, Writes: []Write{
		{Table: "T", Key: []byte{1}, Op: OpInsert, AfterVersion: 2, After: []byte{}},
		{Table: "U", Key: []byte{2, 3}, Op: OpDelete, BeforeVersion: 1, Before: []byte{9}},
	}, Counters: []Counter{{Table: "T", Collection: []byte{4}, Value: 77}}}
	got, err := DecodeWriteSet(ws.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", ws) || got.Writes[0].After == nil || got.Writes[1].After != nil {
		t.Fatalf("round trip: %+v", got)
	}
	if _, err := DecodeWriteSet(ws.Encode()[:10]); err == nil {
		t.Fatal("truncated write set decoded")
	}
}

// TestWriteSetPreImageIsStoredAsItsDifference: every pre-image comes back
// byte for byte whatever it shares with its post-image (nothing, a prefix,
// a suffix, both, all of it, or one holds the other), nil and empty stay
// apart, and an update of one field costs about that field.
func TestWriteSetPreImageIsStoredAsItsDifference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	bytesOf := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.IntN(3)) // few symbols: accidental overlaps
		}
		return b
	}
	var cases [][2][]byte
	for range 2000 {
		pre, mid1, mid2, suf := bytesOf(rng.IntN(6)), bytesOf(rng.IntN(6)), bytesOf(rng.IntN(6)), bytesOf(rng.IntN(6))
		before := slices.Concat(pre, mid1, suf)
		after := slices.Concat(pre, mid2, suf)
		cases = append(cases, [2][]byte{before, after})
	}
	cases = append(cases, [2][]byte{nil, []byte("x")}, [2][]byte{[]byte("x"), nil}, [2][]byte{{}, []byte("x")},
		[2][]byte{[]byte("abc"), []byte("abc")}, [2][]byte{[]byte("ab"), []byte("abab")}, [2][]byte{[]byte("abab"), []byte("ab")},
		[2][]byte{{}, {}}, [2][]byte{[]byte("aaa"), []byte("aa")})
	for _, c := range cases {
		ws := &WriteSet{Mtime: 3, Writes: []Write{{Table: "T", Key: []byte{1}, Op: OpUpdate, BeforeVersion: 1, Before: c[0], AfterVersion: 2, After: c[1]}}}
		got, err := DecodeWriteSet(ws.Encode())
		if err != nil {
			t.Fatalf("before %v after %v: %v", c[0], c[1], err)
		}
		w := got.Writes[0]
		if !bytes.Equal(w.Before, c[0]) || !bytes.Equal(w.After, c[1]) || (w.Before == nil) != (c[0] == nil) || (w.After == nil) != (c[1] == nil) {
			t.Fatalf("before %v after %v came back as %v, %v", c[0], c[1], w.Before, w.After)
		}
	}

	doc := bytes.Repeat([]byte("0123456789"), 110)
	updated := slices.Clone(doc)
	copy(updated[500:], bytes.Repeat([]byte("x"), 100))
	ws := &WriteSet{Mtime: 3, Writes: []Write{{Table: "T", Key: []byte{1}, Op: OpUpdate, BeforeVersion: 1, Before: doc, AfterVersion: 1, After: updated}}}
	if n := len(ws.Encode()); n > len(updated)+120 {
		t.Fatalf("a 100-byte change of a %d-byte document encodes to %d bytes", len(doc), n)
	}
}

// TestWriteSetDamagedBytesNeverPanic: every prefix of an encoding and
// thousands of single-byte corruptions of it decode to an error or to some
// write set, never a panic (a pre-image's shared prefix and suffix must fit
// in its post-image); a prefix shorter than the change-log part is refused.
func TestWriteSetDamagedBytesNeverPanic(t *testing.T) {
	ws := &WriteSet{Mtime: 7, Writes: []Write{
		{Table: "T", Key: []byte{1, 2}, Op: OpUpdate, BeforeVersion: 1, Before: []byte("abcdefgh"), AfterVersion: 1, After: []byte("abcXYZgh")},
		{Table: "U", Key: []byte{3}, Op: OpDelete, BeforeVersion: 2, Before: []byte("gone")},
	}, Counters: []Counter{{Table: "T", Collection: []byte{4}, Value: 9}},
		Index: IndexWrites{Puts: []IndexEntry{{Key: []byte("k"), Value: []byte("v")}}, Deletes: [][]byte{[]byte("d")}}}
	enc := ws.Encode()
	for n := range enc {
		if _, err := DecodeWriteSet(enc[:n]); err == nil && n < ws.LogLen() {
			t.Fatalf("a write set cut to %d of %d bytes decoded", n, len(enc))
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		b := slices.Clone(enc)
		b[rng.IntN(len(b))] = byte(rng.IntN(256))
		_, _ = DecodeWriteSet(b) // must not panic
	}
}

// TestWriteSetFormat1StillDecodes: entries written before format 2 (Raft
// logs and change logs on disk) still decode.
func TestWriteSetFormat1StillDecodes(t *testing.T) {
	var b []byte
	b = append(b, writeSetFormatV1)
	b = binary.AppendVarint(b, 42)
	b = binary.AppendUvarint(b, 1)
	b = appendBytes(b, []byte("T"))
	b = appendBytes(b, []byte{7})
	b = append(b, byte(OpUpdate))
	b = binary.AppendUvarint(b, 1)
	b = appendBytes(b, []byte("old"))
	b = binary.AppendUvarint(b, 2)
	b = appendBytes(b, []byte("new"))
	b = binary.AppendUvarint(b, 0)
	ws, err := DecodeWriteSet(b)
	if err != nil {
		t.Fatal(err)
	}
	w := ws.Writes[0]
	if ws.Mtime != 42 || w.Table != "T" || string(w.Before) != "old" || string(w.After) != "new" || w.BeforeVersion != 1 || w.AfterVersion != 2 || ws.LogLen() != len(b) {
		t.Fatalf("format 1 decoded as %+v", ws)
	}
}

func TestReadFenceWaitsForInFlightWriteOfItsGroup(t *testing.T) {
	f := newFixture(t)
	group, _ := keys.EncodeTuple(keys.Tuple{"m"})
	release, err := f.rep.latch.acquire(context.Background(), string(group))
	if err != nil {
		t.Fatal(err)
	}
	other, _ := keys.EncodeTuple(keys.Tuple{"other"})
	if err := f.rep.ReadFence(context.Background(), other); err != nil {
		t.Fatalf("a read of another group waited: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- f.rep.ReadFence(context.Background(), group) }()
	select {
	case err := <-done:
		t.Fatalf("ReadFence returned (%v) while a write of its group was in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	release, _ = f.rep.latch.acquire(context.Background(), string(group))
	defer release()
	cancel()
	if err := f.rep.ReadFence(ctx, group); !problem.Is(err, problem.Unavailable) {
		t.Fatalf("ReadFence with an ended context: %v", err)
	}
}

func TestWriteSetIndexPartStaysOutOfTheLog(t *testing.T) {
	ws := &WriteSet{Mtime: 1, Writes: []Write{{Table: "T", Key: []byte{1}, Op: OpInsert, AfterVersion: 1, After: []byte{7}}},
		Index: IndexWrites{Puts: []IndexEntry{{Key: []byte("k"), Value: []byte{}}}, Deletes: [][]byte{[]byte("d")}, Ranges: []KeyRange{{[]byte("a"), []byte("b")}}}}
	enc := ws.Encode()
	full, err := DecodeWriteSet(enc)
	if err != nil || len(full.Index.Puts) != 1 || len(full.Index.Deletes) != 1 || len(full.Index.Ranges) != 1 || full.LogLen() != ws.LogLen() {
		t.Fatalf("full decode: %+v %v", full, err)
	}
	logged, err := DecodeWriteSet(enc[:ws.LogLen()])
	if err != nil || !logged.Index.empty() || len(logged.Writes) != 1 {
		t.Fatalf("log part decode: %+v %v", logged, err)
	}
}

// TestWriteSetAppendsItsEncodingAfterAHeader: appended after other bytes
// (the replication layer's entry header), the encoding is Encode's, byte
// for byte, and LogLen counts from its own start.
func TestWriteSetAppendsItsEncodingAfterAHeader(t *testing.T) {
	ws := &WriteSet{Mtime: 1, Writes: []Write{{Table: "T", Key: []byte{1}, Op: OpInsert, AfterVersion: 1, After: []byte{7, 8}}},
		Index: IndexWrites{Puts: []IndexEntry{{Key: []byte("k"), Value: []byte{}}}}}
	enc := ws.Encode()
	logLen := ws.LogLen()
	header := []byte("seventeen bytes..")
	out := ws.AppendEncoding(header)
	if string(out[:len(header)]) != string(header) || string(out[len(header):]) != string(enc) {
		t.Fatalf("appended %x, want %x then %x", out, header, enc)
	}
	if ws.LogLen() != logLen || logLen == len(enc) {
		t.Fatalf("LogLen %d after appending, %d after Encode (of %d bytes)", ws.LogLen(), logLen, len(enc))
	}
}
