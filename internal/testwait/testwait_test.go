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

func TestForFailsWithWhatAndTheLastState(t *testing.T) {
	r := &recorder{TB: t}
	func() {
		defer func() {
			if v := recover(); v != r {
				panic(v)
			}
		}()
		n := 0
		For(r, 50*time.Millisecond, "never", func() (bool, string) { n++; return false, fmt.Sprint("state ", n) })
	}()
	if !strings.Contains(r.failed, "never") || !strings.Contains(r.failed, "last state") || !strings.Contains(r.failed, "state ") {
		t.Fatalf("failure %q, want what and the last state", r.failed)
	}
}

func TestUntilFailsWithWhat(t *testing.T) {
	r := &recorder{TB: t}
	func() {
		defer func() {
			if v := recover(); v != r {
				panic(v)
			}
		}()
		Until(r, 30*time.Millisecond, "a false condition", func() bool { return false })
	}()
	if !strings.Contains(r.failed, "a false condition") || strings.Contains(r.failed, "last state") {
		t.Fatalf("failure %q, want what and no state", r.failed)
	}
}
