package quota

import (
	"strings"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/problem"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// value reads a counter.
func value(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// series counts the series a collector has.
func series(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric, 100)
	c.Collect(ch)
	close(ch)
	return len(ch)
}

// clock is a fake clock tests advance by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newTestLimiter(burst time.Duration) (*Limiter, *clock) {
	c := &clock{t: time.Unix(1000, 0)}
	return NewLimiter(LimiterConfig{Burst: burst, Now: c.now}), c
}

// refusal checks err is a 429 problem with retryAfter and a detail that
// contains want.
func refusal(t *testing.T, err error, retryAfter int, want string) {
	t.Helper()
	pe, ok := problem.As(err)
	if !ok || pe.Kind != problem.OverQuota || pe.Kind.Status() != 429 {
		t.Fatalf("got %v, want an over-quota problem", err)
	}
	if pe.RetryAfter != retryAfter || !strings.Contains(pe.Detail, want) {
		t.Fatalf("got RetryAfter %d, detail %q; want %d and %q", pe.RetryAfter, pe.Detail, retryAfter, want)
	}
}

func TestLimiterRefusesADatabaseInDebtUntilRepaid(t *testing.T) {
	l, c := newTestLimiter(time.Second)
	l.Set(Database, "A", Quota{WriteUnitsPerSecond: 4})
	if err := l.Admit("A", "", Write); err != nil {
		t.Fatal(err)
	}
	l.Charge("A", "", Write, 10) // 4 of credit, 6 of debt
	refusal(t, l.Admit("A", "", Write), 2, "database A is over its write quota of 4 units per second")
	// Reads and other databases are not held back.
	if err := l.Admit("A", "", Read); err != nil {
		t.Fatalf("read: %v", err)
	}
	if err := l.Admit("B", "", Write); err != nil {
		t.Fatalf("database B: %v", err)
	}
	c.advance(1500 * time.Millisecond)
	if err := l.Admit("A", "", Write); err != nil {
		t.Fatalf("after the debt is repaid: %v", err)
	}
	if got := value(t, l.throttled.WithLabelValues("database", "A")); got != 1 {
		t.Fatalf("throttled: %v, want 1", got)
	}
	if got := value(t, l.consumed.WithLabelValues("database", "A", "write")); got != 10 {
		t.Fatalf("consumed: %v, want 10", got)
	}
}

func TestLimiterChargesAUserAcrossDatabases(t *testing.T) {
	l, c := newTestLimiter(time.Second)
	l.Set(User, "alice", Quota{ReadUnitsPerSecond: 10})
	l.Charge("A", "alice", Read, 8)
	l.Charge("B", "alice", Read, 5)
	refusal(t, l.Admit("C", "alice", Read), 1, "user alice is over its read quota of 10 units per second")
	if err := l.Admit("C", "bob", Read); err != nil {
		t.Fatalf("another user: %v", err)
	}
	if err := l.Admit("C", "", Read); err != nil {
		t.Fatalf("no user (insecure): %v", err)
	}
	c.advance(300 * time.Millisecond)
	if err := l.Admit("C", "alice", Read); err != nil {
		t.Fatal(err)
	}
	if got := value(t, l.consumed.WithLabelValues("user", "alice", "read")); got != 13 {
		t.Fatalf("alice consumed %v, want 13", got)
	}
	// bob has no quota: no series of his, however much he reads.
	l.Charge("C", "bob", Read, 100)
	if n := series(l.consumed); n != 7 { // read and write of A, B and C; alice's read
		t.Fatalf("%d consumed series, want 7", n)
	}
	// Removing alice's quota removes her series too.
	l.Set(User, "alice", Quota{})
	if n := series(l.consumed); n != 6 {
		t.Fatalf("%d consumed series after the quota's removal, want 6", n)
	}
}

func TestLimiterNamesBothQuotasWhenBothAreSpent(t *testing.T) {
	l, _ := newTestLimiter(time.Second)
	l.Set(Database, "A", Quota{WriteUnitsPerSecond: 1})
	l.Set(User, "alice", Quota{WriteUnitsPerSecond: 2})
	l.Charge("A", "alice", Write, 7) // A: 6 in debt (6 s); alice: 5 (3 s)
	refusal(t, l.Admit("A", "alice", Write), 6, "database A is over its write quota of 1 units per second and user alice")
	if got := value(t, l.throttled.WithLabelValues("user", "alice")); got != 1 {
		t.Fatalf("alice throttled %v, want 1", got)
	}
}

func TestLimiterEnforcesThisNodesShare(t *testing.T) {
	l, c := newTestLimiter(time.Second)
	l.Set(Database, "A", Quota{WriteUnitsPerSecond: 8})
	l.SetShares(Shares{Databases: map[string]float64{"A": 0.25}}) // 2 units/s here
	l.Charge("A", "", Write, 4)                                   // credit capped at 2: 2 in debt
	refusal(t, l.Admit("A", "", Write), 1, "database A")
	c.advance(time.Second)
	if err := l.Admit("A", "", Write); err != nil {
		t.Fatal(err)
	}
	l.Charge("A", "", Write, 6) // 6 in debt at 2/s
	refusal(t, l.Admit("A", "", Write), 3, "database A")
	// Leading everything now: the debt is repaid four times as fast.
	l.SetShares(Shares{Databases: map[string]float64{"A": 1}})
	refusal(t, l.Admit("A", "", Write), 1, "database A")
}

func TestLimiterReplaceDropsQuotasNoLongerStored(t *testing.T) {
	l, _ := newTestLimiter(time.Second)
	l.Set(Database, "A", Quota{WriteUnitsPerSecond: 1})
	l.Set(Database, "B", Quota{WriteUnitsPerSecond: 1})
	l.Replace(Database, map[string]Quota{"B": {ReadUnitsPerSecond: 3}})
	if q := l.Quota(Database, "A"); !q.Unlimited() {
		t.Fatalf("A: %+v, want none", q)
	}
	if q := l.Quota(Database, "B"); q != (Quota{ReadUnitsPerSecond: 3}) {
		t.Fatalf("B: %+v", q)
	}
	l.Charge("A", "", Write, 100)
	if err := l.Admit("A", "", Write); err != nil {
		t.Fatalf("A has no quota: %v", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(l.Collectors()...)
}
