package testwait

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a testing.TB that records a failure instead of ending the
// test (Fatalf, called from the test's own goroutine here, panics out of
// For, which the caller recovers).
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	panic(r)
}

func TestForReturnsOnceTheConditionHolds(t *testing.T) {
	var calls atomic.Int32
	took := For(t, 5*time.Second, "third call", func() (bool, string) { return calls.Add(1) == 3, "" })
	if calls.Load() != 3 || took <= 0 {
		t.Fatalf("%d calls, took %v; want 3 calls", calls.Load(), took)
	}
}

// failure runs f with a recorder and returns what it failed with.
func failure(t *testing.T, f func(tb testing.TB)) string {
	r := &recorder{TB: t}
	func() {
		defer func() {
			if v := recover(); v != r {
				panic(v)
			}
		}()
		f(r)
	}()
	return r.failed
}

func TestForFailsWithWhatAndTheLastState(t *testing.T) {
	n := 0
	failed := failure(t, func(tb testing.TB) {
		For(tb, 50*time.Millisecond, "never", func() (bool, string) { n++; return false, fmt.Sprint("state ", n) })
	})
	if want := fmt.Sprint("last state:\nstate ", n); n < 2 || !strings.Contains(failed, "never") || !strings.HasSuffix(failed, want) {
		t.Fatalf("failure %q after %d polls, want what and %q", failed, n, want)
	}
}

func TestUntilFailsWithWhat(t *testing.T) {
	failed := failure(t, func(tb testing.TB) {
		Until(tb, 30*time.Millisecond, "a false condition", func() bool { return false })
	})
	if !strings.Contains(failed, "a false condition") || strings.Contains(failed, "last state") {
		t.Fatalf("failure %q, want what and no state", failed)
	}
}
