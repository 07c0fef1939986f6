package partition

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/schema"
)

func idem(key string, fingerprint string, retain time.Duration) *Idempotency {
	return &Idempotency{Principal: "ann", Key: key, Fingerprint: []byte(fingerprint), Retain: retain}
}

func (f *fixture) insert(box, subject string) Operation {
	return Operation{Kind: Insert, Table: f.messages, Key: keys.Tuple{box}, Doc: schema.Document{"subject": subject}}
}

// count returns how many keys the partition holds under prefix.
func (f *fixture) count(t *testing.T, prefix []byte) int {
	t.Helper()
	it, err := f.engine.NewIter(prefix, keys.PrefixEnd(prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	return n
}

func (f *fixture) messagesOf(t *testing.T, box string) int {
	t.Helper()
	enc, _ := keys.EncodeTuple(keys.Tuple{box})
	return f.count(t, f.rep.prefix.Document("Message", enc))
}

func TestIdempotentInsertAnswersTheFirstOutcomeAgain(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	now := time.UnixMilli(1_700_000_000_000)
	id := idem("k1", "insert hello", time.Hour)
	first, err := f.rep.Execute(ctx, Request{Ops: []Operation{f.insert("m1", "hello")}, Idempotency: id, Now: now})
	if err != nil || first.Replayed || !first.Ops[0].Created {
		t.Fatalf("first attempt: %+v, %v", first, err)
	}
	applied := f.rep.Applied()

	again, err := f.rep.Execute(ctx, Request{Ops: []Operation{f.insert("m1", "hello")}, Idempotency: idem("k1", "insert hello", time.Hour), Now: now.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	want := first
	want.Replayed, want.WriteSetBytes = true, 0
	if !reflect.DeepEqual(again, want) {
		t.Fatalf("retry answered %+v, want the first outcome %+v", again, want)
	}
	if f.rep.Applied() != applied || f.messagesOf(t, "m1") != 1 {
		t.Fatalf("the retry applied again: SCN %v -> %v, %d messages", applied, f.rep.Applied(), f.messagesOf(t, "m1"))
	}

	// The same key with another request changes nothing and says why.
	_, err = f.rep.Execute(ctx, Request{Ops: []Operation{f.insert("m1", "other")}, Idempotency: idem("k1", "insert other", time.Hour), Now: now})
	if !problem.Is(err, problem.IdempotencyMismatch) || problem.IdempotencyMismatch.Status() != 422 {
		t.Fatalf("reuse with another request: %v, want idempotency-key-reused (422)", err)
	}
	if f.rep.Applied() != applied || f.messagesOf(t, "m1") != 1 {
		t.Fatal("a refused reuse of the key applied")
	}

	// Another principal's key, or another part of a batch, is another
	// scope: it runs.
	other := idem("k1", "insert hello", time.Hour)
	other.Principal = "bob"
	part := idem("k1", "insert hello", time.Hour)
	part.Part = 1
	for _, id := range []*Idempotency{other, part} {
		res, err := f.rep.Execute(ctx, Request{Ops: []Operation{f.insert("m1", "hello")}, Idempotency: id, Now: now})
		if err != nil || res.Replayed {
			t.Fatalf("scope %+v: %+v, %v: want a run of its own", id, res, err)
		}
	}
	if n := f.messagesOf(t, "m1"); n != 3 {
		t.Fatalf("%d messages, want 3", n)
	}
}

func TestIdempotentOutcomesExpireAndArePurged(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	t0 := time.UnixMilli(1_700_000_000_000)
	run := func(at time.Time) Result {
		t.Helper()
		res, err := f.rep.Execute(ctx, Request{Ops: []Operation{f.insert("m1", "hello")}, Idempotency: idem("k", "same", time.Minute), Now: at})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := run(t0)
	if r := run(t0.Add(59 * time.Second)); !r.Replayed || r.SCN != first.SCN {
		t.Fatalf("within the window: %+v, want the first outcome", r)
	}
	// At its expiry the outcome is forgotten: the request runs again.
	second := run(t0.Add(time.Minute))
	if second.Replayed || second.Ops[0].Key[1] != int64(2) {
		t.Fatalf("after the window: %+v, want a new insert", second)
	}
	outcomes := f.rep.prefix.OutcomePrefix()
	if n := f.count(t, outcomes); n != 4 {
		t.Fatalf("%d outcome keys, want 4 (two outcomes and their expiries)", n)
	}

	// A purge deletes only what expired by then, through the replicate
	// step, as an upkeep write set.
	before := f.rep.Applied()
	n, err := f.rep.ForgetOutcomes(ctx, t0.Add(90*time.Second))
	if err != nil || n != 1 {
		t.Fatalf("purge at t0+90s: %d, %v; want 1", n, err)
	}
	if f.rep.Applied().Sequence != before.Sequence+1 {
		t.Fatal("the purge was not replicated")
	}
	if r := run(t0.Add(90 * time.Second)); !r.Replayed || r.SCN != second.SCN {
		t.Fatalf("the purge lost the live outcome: %+v", r)
	}
	if n, err := f.rep.ForgetOutcomes(ctx, t0.Add(90*time.Second)); err != nil || n != 0 {
		t.Fatalf("second purge: %d, %v; want nothing", n, err)
	}
	if n, err := f.rep.ForgetOutcomes(ctx, t0.Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("purge at t0+1h: %d, %v; want 1", n, err)
	}
	if n := f.count(t, outcomes); n != 0 {
		t.Fatalf("%d outcome keys left after every outcome expired", n)
	}
	if f.messagesOf(t, "m1") != 2 {
		t.Fatal("a purge touched documents")
	}
}

// gated is a replicate step that waits for its gate before replicating,
// or answers "outcome unknown" (an InFlightError settled by settle).
type gated struct {
	Replicator
	entered chan struct{}
	gate    chan struct{}
	settle  chan struct{} // when not nil, Replicate fails in flight
}

func (g *gated) Replicate(ctx context.Context, ws *WriteSet) (SCN, error) {
	g.entered <- struct{}{}
	<-g.gate
	if g.settle != nil {
		return SCN{}, &InFlightError{Err: problem.New(problem.Indeterminate, "deadline passed"), Settled: g.settle}
	}
	return g.Replicator.Replicate(ctx, ws)
}

func TestIdempotentDuplicateInFlightIsRefused(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	g := &gated{Replicator: f.rep.repl, entered: make(chan struct{}, 1), gate: make(chan struct{})}
	rep := New(f.engine, "db", 0, g, Limits{})
	req := func() Request {
		return Request{Ops: []Operation{f.insert("m1", "hello")}, Idempotency: idem("k", "same", time.Hour)}
	}
	done := make(chan error, 1)
	go func() {
		_, err := rep.Execute(ctx, req())
		done <- err
	}()
	<-g.entered
	_, err := rep.Execute(ctx, req())
	var pe *problem.Error
	if !errors.As(err, &pe) || pe.Kind != problem.IdempotencyInFlight || pe.Kind.Status() != 409 || pe.RetryAfter != 1 {
		t.Fatalf("duplicate in flight: %v, want idempotency-key-in-use (409) with Retry-After", err)
	}
	close(g.gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	res, err := rep.Execute(ctx, req())
	if err != nil || !res.Replayed {
		t.Fatalf("after the first answered: %+v, %v; want its outcome", res, err)
	}
	if f.messagesOf(t, "m1") != 1 {
		t.Fatalf("%d messages, want 1", f.messagesOf(t, "m1"))
	}
}

func TestIdempotencyKeyStaysClaimedUntilAnUnknownOutcomeSettles(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	g := &gated{Replicator: f.rep.repl, entered: make(chan struct{}, 1), gate: make(chan struct{}), settle: make(chan struct{})}
	close(g.gate)
	rep := New(f.engine, "db", 0, g, Limits{})
	req := Request{Ops: []Operation{f.insert("m1", "hello")}, Idempotency: idem("k", "same", time.Hour)}
	if _, err := rep.Execute(ctx, req); !problem.Is(err, problem.Indeterminate) {
		t.Fatalf("first attempt: %v, want outcome unknown", err)
	}
	<-g.entered
	if _, err := rep.Execute(ctx, req); !problem.Is(err, problem.IdempotencyInFlight) {
		t.Fatalf("retry before the write settled: %v, want idempotency-key-in-use", err)
	}
	// Settled without applying (this fake never applies): the key is free
	// and, with nothing remembered, the retry runs.
	close(g.settle)
	g.settle = nil
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := rep.Execute(ctx, req)
		select {
		case <-g.entered:
		default:
		}
		if err == nil {
			break
		}
		if !problem.Is(err, problem.IdempotencyInFlight) || time.Now().After(deadline) {
			t.Fatalf("retry after the write settled: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if f.messagesOf(t, "m1") != 1 {
		t.Fatalf("%d messages, want 1", f.messagesOf(t, "m1"))
	}
}

func TestWriteSetOutcomesRoundTripOutsideTheChangeLog(t *testing.T) {
	ws := &WriteSet{Mtime: 42,
		Writes: []Write{{Table: "T", Key: []byte{1, 2}, Op: OpInsert, AfterVersion: 1, After: []byte("doc")}},
		Outcomes: OutcomeWrites{
			Put: &Outcome{Scope: []byte("scope"), Expires: 99, Fingerprint: []byte("fp"),
				Ops: []OpResult{{Key: keys.Tuple{"m1", int64(3)}, ETag: `"e"`, Version: 1, Created: true, Deleted: 0}}},
			Forget: []ExpiredOutcome{{Scope: []byte("old"), Expires: 7}},
		}}
	enc := ws.Encode()
	got, err := DecodeWriteSet(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Outcomes, ws.Outcomes) {
		t.Fatalf("outcomes decoded as %+v, want %+v", got.Outcomes, ws.Outcomes)
	}
	log, err := DecodeWriteSet(enc[:ws.LogLen()])
	if err != nil {
		t.Fatal(err)
	}
	if !log.Outcomes.empty() || len(log.Writes) != 1 {
		t.Fatalf("the change-log part carries %+v", log.Outcomes)
	}
}
