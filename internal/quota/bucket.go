package quota

import (
	"math"
	"time"
)

// DefaultBurst is how much unused capacity a bucket keeps: this long at
// its rate.
const DefaultBurst = 10 * time.Second

// Bucket is a token bucket in units: it refills at its rate up to its
// burst, admits requests while its balance is not negative, and is charged
// after the work, possibly into debt. It is a pure value: the caller
// passes the time and serializes calls.
type Bucket struct {
	rate    float64 // units per second, > 0
	burst   time.Duration
	balance float64
	at      time.Time // of the last refill
}

// NewBucket returns a full bucket of rate units per second keeping up to
// burst of unused capacity.
func NewBucket(rate float64, burst time.Duration, now time.Time) Bucket {
	b := Bucket{rate: rate, burst: burst, at: now}
	b.balance = b.capacity()
	return b
}

func (b *Bucket) capacity() float64 { return b.rate * b.burst.Seconds() }

func (b *Bucket) refill(now time.Time) {
	if d := now.Sub(b.at); d > 0 {
		b.balance = math.Min(b.capacity(), b.balance+b.rate*d.Seconds())
		b.at = now
	}
}

// Balance is the bucket's credit at now (negative: debt).
func (b *Bucket) Balance(now time.Time) float64 {
	b.refill(now)
	return b.balance
}

// Rate is the bucket's refill rate in units per second.
func (b *Bucket) Rate() float64 { return b.rate }

// Admit reports whether a request may start at now; if not, retryAfter is
// when the bucket will have repaid its debt, in whole seconds rounded up
// (at least 1), as a Retry-After header says it.
func (b *Bucket) Admit(now time.Time) (ok bool, retryAfter int) {
	ok, wait := b.admit(now)
	if ok {
		return true, 0
	}
	return false, retrySeconds(wait.Seconds())
}

// admit is Admit with the exact wait.
func (b *Bucket) admit(now time.Time) (ok bool, wait time.Duration) {
	b.refill(now)
	if b.balance >= 0 {
		return true, 0
	}
	return false, time.Duration(-b.balance / b.rate * float64(time.Second))
}

// Charge takes units from the bucket at now, into debt if need be.
func (b *Bucket) Charge(units float64, now time.Time) {
	b.refill(now)
	b.balance -= units
}

// SetRate changes the refill rate from now on: the time until now refills
// at the old rate, and credit above the new burst is dropped. Debt is
// kept.
func (b *Bucket) SetRate(rate float64, now time.Time) {
	b.refill(now)
	b.rate = rate
	b.balance = math.Min(b.balance, b.capacity())
}
