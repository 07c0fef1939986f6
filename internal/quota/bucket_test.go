package quota

import (
	"testing"
	"time"
)

// step is one event in a bucket's life: after advancing the clock by
// after, charge units (if any), then check Admit's answer and the balance.
type step struct {
	after   time.Duration
	charge  float64
	setRate float64 // if > 0, before the charge
	ok      bool
	retry   int
	balance float64
}

func TestBucketRefillBurstDebtAndRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rate  float64
		burst time.Duration
		steps []step
	}{
		{name: "starts full and refills at its rate up to the burst", rate: 5, burst: 2 * time.Second, steps: []step{
			{ok: true, balance: 10},
			{charge: 10, ok: true, balance: 0},               // empty, not in debt: admitted
			{after: time.Second, ok: true, balance: 5},       // refilled 5
			{after: 10 * time.Second, ok: true, balance: 10}, // capped at 2 s of capacity
			{charge: 3, after: 0, ok: true, balance: 7},
		}},
		{name: "a charge larger than the burst puts the bucket into debt", rate: 5, burst: 2 * time.Second, steps: []step{
			{charge: 22, ok: false, retry: 3, balance: -12},            // 12 units at 5/s: 2.4 s, rounded up
			{after: 2 * time.Second, ok: false, retry: 1, balance: -2}, // 0.4 s left
			{after: 400 * time.Millisecond, ok: true, balance: 0},
		}},
		{name: "debt of an exact number of seconds", rate: 4, burst: time.Second, steps: []step{
			{charge: 12, ok: false, retry: 2, balance: -8},
			{after: 2 * time.Second, ok: true, balance: 0},
		}},
		{name: "a fractional rate (a small share) still refills", rate: 0.5, burst: 10 * time.Second, steps: []step{
			{charge: 6, ok: false, retry: 2, balance: -1},
			{after: time.Second, ok: false, retry: 1, balance: -0.5},
			{after: time.Second, ok: true, balance: 0},
		}},
		{name: "a lower rate drops credit above its burst and keeps debt", rate: 10, burst: time.Second, steps: []step{
			{setRate: 2, ok: true, balance: 2},
			{charge: 6, ok: false, retry: 2, balance: -4},
			{setRate: 8, ok: false, retry: 1, balance: -4},
			{after: 500 * time.Millisecond, ok: true, balance: 0},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1000, 0)
			b := NewBucket(tc.rate, tc.burst, now)
			for i, s := range tc.steps {
				now = now.Add(s.after)
				if s.setRate > 0 {
					b.SetRate(s.setRate, now)
				}
				if s.charge > 0 {
					b.Charge(s.charge, now)
				}
				ok, retry := b.Admit(now)
				if ok != s.ok || retry != s.retry {
					t.Fatalf("step %d: Admit = %v, %d; want %v, %d", i, ok, retry, s.ok, s.retry)
				}
				if got := b.Balance(now); got != s.balance {
					t.Fatalf("step %d: balance %v, want %v", i, got, s.balance)
				}
			}
		})
	}
}

func TestUnitsRoundUpWithAMinimumOfOne(t *testing.T) {
	for _, tc := range []struct {
		bytes       int
		read, write int64
	}{
		{0, 1, 1},
		{1, 1, 1},
		{1024, 1, 1},
		{1025, 1, 2},
		{4096, 1, 4},
		{4097, 2, 5},
		{10 << 10, 3, 10},
		{1 << 20, 256, 1024},
	} {
		if got := ReadUnits(tc.bytes); got != tc.read {
			t.Errorf("ReadUnits(%d) = %d, want %d", tc.bytes, got, tc.read)
		}
		if got := WriteUnits(tc.bytes); got != tc.write {
			t.Errorf("WriteUnits(%d) = %d, want %d", tc.bytes, got, tc.write)
		}
	}
}

func TestQuotaValidate(t *testing.T) {
	for _, tc := range []struct {
		q     Quota
		field string
	}{
		{Quota{}, ""},
		{Quota{ReadUnitsPerSecond: 100, WriteUnitsPerSecond: 5}, ""},
		{Quota{ReadUnitsPerSecond: -1}, "readUnitsPerSecond"},
		{Quota{WriteUnitsPerSecond: MaxUnitsPerSecond + 1}, "writeUnitsPerSecond"},
	} {
		field, err := tc.q.Validate()
		if field != tc.field || (err != nil) != (tc.field != "") {
			t.Errorf("%+v: Validate = %q, %v; want field %q", tc.q, field, err, tc.field)
		}
	}
}

func TestDivideGivesEachNodeItsLeadersShare(t *testing.T) {
	s := Divide(map[string]int{"A": 2, "B": 0}, map[string]int{"A": 8, "B": 4, "C": 0})
	want := Shares{Databases: map[string]float64{"A": 0.25, "B": 0.25}, Users: 2.0 / 12}
	if len(s.Databases) != 2 || s.Databases["A"] != want.Databases["A"] || s.Databases["B"] != want.Databases["B"] || s.Users != want.Users {
		t.Fatalf("Divide = %+v, want %+v", s, want)
	}
	// A node leading nothing still has one partition's worth; no
	// database known: everything.
	if s := Divide(nil, map[string]int{"A": 4}); s.Databases["A"] != 0.25 || s.Users != 0.25 {
		t.Fatalf("leading nothing: %+v", s)
	}
	if s := Divide(nil, nil); s.of(Database, "X") != 1 || s.of(User, "u") != 1 {
		t.Fatalf("no databases: %+v", s)
	}
}
