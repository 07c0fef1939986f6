package partition

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"time"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/storage"
)

// Idempotency. A request that carries an Idempotency (an Idempotency-Key
// header, in the API) and changes something has its outcome remembered:
// the write set that applies it also stores the outcome (its SCN, commit
// time and operation results) under the request's scope, in the same
// Raft entry and Pebble batch, so every replica holds it exactly when it
// holds the write. A request of the same scope evaluated later, by this
// leader or the next one, answers that outcome instead of running again,
// until the outcome expires. Outcomes are immutable and keyed by scope
// and expiry, so a purge (ForgetOutcomes, an upkeep write set proposed by
// the leader) never races a newer outcome of the same scope.
//
// A request of a scope whose outcome is being decided (evaluated, in the
// Raft log, or answered "outcome unknown" and not settled) is refused
// with problem.IdempotencyInFlight; one whose fingerprint differs from the
// remembered request's with problem.IdempotencyMismatch. A request that
// fails, or changes nothing, leaves nothing to remember: run again, it is
// evaluated afresh, which cannot apply anything twice.

// Idempotency names the scope a request's outcome is remembered under and
// what the request asked.
type Idempotency struct {
	// Principal is the caller ("" when security is off): one caller's key
	// never finds another's outcome.
	Principal string
	// Key is the client's idempotency key.
	Key string
	// Part tells the operations of one batch apart (0 otherwise).
	Part int
	// Fingerprint is a digest of the request: a reuse of the key with
	// another fingerprint is refused.
	Fingerprint []byte
	// Retain is how long the outcome is remembered.
	Retain time.Duration
}

// scope is the tuple encoding of (principal, key, part).
func (id *Idempotency) scope() []byte {
	b := keys.AppendString(nil, id.Principal)
	b = keys.AppendString(b, id.Key)
	return keys.AppendInt(b, int64(id.Part))
}

// Outcome is a request's outcome as a write set carries it to be
// remembered (its SCN is the write set's own, added by Apply).
type Outcome struct {
	Scope       []byte // tuple-encoded principal, key and part
	Expires     int64  // Unix milliseconds
	Fingerprint []byte
	Ops         []OpResult
}

// ExpiredOutcome names one remembered outcome a purge deletes.
type ExpiredOutcome struct {
	Scope   []byte
	Expires int64
}

// OutcomeWrites are the outcomes a write set remembers and forgets. They
// are replicated but not part of the change log.
type OutcomeWrites struct {
	Put    *Outcome
	Forget []ExpiredOutcome
}

func (o OutcomeWrites) empty() bool { return o.Put == nil && len(o.Forget) == 0 }

func (o OutcomeWrites) size() int {
	n := 0
	if o.Put != nil {
		n += len(o.Put.Scope) + len(o.Put.Fingerprint) + 16
		for _, r := range o.Put.Ops {
			n += len(r.ETag) + 32
		}
	}
	for _, f := range o.Forget {
		n += len(f.Scope) + 10
	}
	return n
}

// applyOutcomes writes the outcome puts and deletes of ws at scn into b.
func applyOutcomes(b *storage.Batch, p keys.Partition, o OutcomeWrites, mtime int64, scn SCN) {
	if o.Put != nil {
		b.Set(p.Outcome(o.Put.Scope, o.Put.Expires), encodeStored(o.Put, mtime, scn))
		b.Set(p.OutcomeExpiry(o.Put.Expires, o.Put.Scope), nil)
	}
	for _, f := range o.Forget {
		b.Delete(p.Outcome(f.Scope, f.Expires))
		b.Delete(p.OutcomeExpiry(f.Expires, f.Scope))
	}
}

// storedFormat is the first byte of a remembered outcome's value.
const storedFormat = 1

func encodeStored(o *Outcome, mtime int64, scn SCN) []byte {
	b := append([]byte{storedFormat}, encodeSCN(scn)...)
	b = binary.AppendVarint(b, mtime)
	return appendOutcomeBody(b, o)
}

// appendOutcomeBody writes what a write set and a stored outcome share:
// the fingerprint and the operation results.
func appendOutcomeBody(b []byte, o *Outcome) []byte {
	b = appendBytes(b, o.Fingerprint)
	b = binary.AppendUvarint(b, uint64(len(o.Ops)))
	for _, r := range o.Ops {
		enc, err := keys.EncodeTuple(r.Key)
		if err != nil {
			enc = nil // evaluation encoded it already: unreachable
		}
		b = appendBytes(b, enc)
		b = appendBytes(b, []byte(r.ETag))
		b = binary.AppendUvarint(b, uint64(r.Version))
		created := byte(0)
		if r.Created {
			created = 1
		}
		b = append(b, created)
		b = binary.AppendUvarint(b, uint64(r.Deleted))
	}
	return b
}

func (d *decoder) outcomeBody(o *Outcome) {
	o.Fingerprint = d.bytes()
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail()
		return
	}
	o.Ops = make([]OpResult, n)
	for i := range o.Ops {
		r := &o.Ops[i]
		if enc := d.bytes(); enc != nil {
			k, err := keys.DecodeTuple(enc)
			if err != nil {
				d.fail()
				return
			}
			r.Key = k
		}
		r.ETag = string(d.bytes())
		r.Version = uint32(d.uvarint())
		r.Created = d.byte() == 1
		r.Deleted = int(d.uvarint())
	}
}

// appendOutcomes writes o after a write set's index part.
func appendOutcomes(b []byte, o OutcomeWrites) []byte {
	if o.Put == nil {
		b = append(b, 0)
	} else {
		b = append(b, 1)
		b = appendBytes(b, o.Put.Scope)
		b = binary.AppendVarint(b, o.Put.Expires)
		b = appendOutcomeBody(b, o.Put)
	}
	b = binary.AppendUvarint(b, uint64(len(o.Forget)))
	for _, f := range o.Forget {
		b = appendBytes(b, f.Scope)
		b = binary.AppendVarint(b, f.Expires)
	}
	return b
}

func (d *decoder) outcomes(limit int) OutcomeWrites {
	var o OutcomeWrites
	if d.byte() == 1 {
		o.Put = &Outcome{Scope: d.bytes(), Expires: d.varint()}
		d.outcomeBody(o.Put)
	}
	n := d.uvarint()
	if n > uint64(limit) {
		d.fail()
		return o
	}
	if n > 0 {
		o.Forget = make([]ExpiredOutcome, n)
	}
	for i := range o.Forget {
		o.Forget[i] = ExpiredOutcome{Scope: d.bytes(), Expires: d.varint()}
	}
	return o
}

// remembered is an outcome read back from the store.
type remembered struct {
	fingerprint []byte
	result      Result
}

// remembered returns the outcome of scope that has not expired at now
// (Unix milliseconds), if any.
func (r *Replica) remembered(scope []byte, now int64) (*remembered, error) {
	lower := r.prefix.Outcomes(scope)
	it, err := r.engine.NewIter(lower, keys.PrefixEnd(lower))
	if err != nil {
		return nil, err
	}
	defer it.Close()
	if !it.Last() {
		return nil, it.Error()
	}
	k := it.Key()
	if len(k) != len(lower)+8 || int64(binary.BigEndian.Uint64(k[len(lower):])) <= now {
		return nil, it.Error()
	}
	d := decoder{b: bytes.Clone(it.Value())}
	if d.byte() != storedFormat || len(d.b) < 16 {
		return nil, errCorrupt
	}
	scn, _ := decodeSCN(d.b[:16])
	d.b = d.b[16:]
	mtime := d.varint()
	var o Outcome
	d.outcomeBody(&o)
	if d.err != nil || len(d.b) != 0 {
		return nil, errCorrupt
	}
	return &remembered{fingerprint: o.Fingerprint,
		result: Result{SCN: scn, Mtime: mtime, Ops: o.Ops, Changed: true, Replayed: true}}, nil
}

// recall answers a request of id from its remembered outcome: found
// reports whether there was one (not expired at now) for the same
// request; another request's is a problem.IdempotencyMismatch.
func (r *Replica) recall(id *Idempotency, scope []byte, now int64) (Result, bool, error) {
	rem, err := r.remembered(scope, now)
	if err != nil || rem == nil {
		return Result{}, false, err
	}
	if !bytes.Equal(rem.fingerprint, id.Fingerprint) {
		return Result{}, false, problem.New(problem.IdempotencyMismatch,
			"Idempotency-Key %q was used by another request (at SCN %s); a retry must repeat the same request, a new request needs a new key", id.Key, rem.result.SCN)
	}
	return rem.result, true, nil
}

// claims are the scopes whose outcome is being decided on this replica.
type claims struct {
	mu sync.Mutex
	m  map[string]struct{}
}

// claim takes scope, or fails with problem.IdempotencyInFlight if a
// request of it is under way; drop gives it back.
func (c *claims) claim(id *Idempotency, scope []byte) (drop func(), err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, busy := c.m[string(scope)]; busy {
		return nil, &problem.Error{Kind: problem.IdempotencyInFlight, Operation: -1, RetryAfter: 1,
			Detail: "a request with Idempotency-Key " + quote(id.Key) + " is still in flight; retry once it is answered"}
	}
	if c.m == nil {
		c.m = map[string]struct{}{}
	}
	c.m[string(scope)] = struct{}{}
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			delete(c.m, string(scope))
			c.mu.Unlock()
		})
	}, nil
}

func quote(s string) string { return `"` + s + `"` }

// forgetBatch bounds the outcomes one purge write set deletes.
const forgetBatch = 1024

// ForgetOutcomes deletes, as the partition's leader, the remembered
// outcomes expired at now, in write sets of up to forgetBatch, and
// returns how many it deleted. Lookups already ignore expired outcomes:
// this only reclaims their space. A follower returns a NotAppliedError.
func (r *Replica) ForgetOutcomes(ctx context.Context, now time.Time) (int, error) {
	if err := r.repl.Lead(ctx); err != nil {
		return 0, err
	}
	if err := r.refuseWhileRestoring(); err != nil {
		return 0, err
	}
	total := 0
	for {
		expired, err := r.expiredOutcomes(now.UnixMilli(), forgetBatch)
		if err != nil || len(expired) == 0 {
			return total, err
		}
		ws := &WriteSet{Mtime: now.UnixMilli(), Upkeep: true, Outcomes: OutcomeWrites{Forget: expired}}
		if _, err := r.repl.Replicate(ctx, ws); err != nil {
			var inflight *InFlightError
			if errors.As(err, &inflight) {
				<-inflight.Settled
			}
			return total, err
		}
		total += len(expired)
		if len(expired) < forgetBatch {
			return total, nil
		}
	}
}

// expiredOutcomes lists up to limit outcomes that expire at or before now.
func (r *Replica) expiredOutcomes(now int64, limit int) ([]ExpiredOutcome, error) {
	lower := r.prefix.OutcomeExpiryPrefix()
	it, err := r.engine.NewIter(lower, r.prefix.OutcomeExpiry(now+1, nil))
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []ExpiredOutcome
	for ok := it.First(); ok && len(out) < limit; ok = it.Next() {
		k := it.Key()[len(lower):]
		if len(k) < 8 {
			return nil, errCorrupt
		}
		out = append(out, ExpiredOutcome{Expires: int64(binary.BigEndian.Uint64(k)), Scope: bytes.Clone(k[8:])})
	}
	return out, it.Error()
}
