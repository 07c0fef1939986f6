// Package testwait is the polling the tests share: wait for a condition
// that other goroutines or processes make true, and fail the test with
// what was awaited, and how things last stood, if it does not come.
package testwait

import (
	"testing"
	"time"
)

// For polls cond until it holds, then returns how long that took; after d
// it fails t with what and the state cond last described. Polls start 10
// ms apart and back off to 100 ms, so a condition that checks over HTTP
// does not load what it waits for.
func For(t testing.TB, d time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	pause := 10 * time.Millisecond
	for {
		ok, state := cond()
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > d {
			if state != "" {
				state = "; last state:\n" + state
			}
			t.Fatalf("%s: not within %v%s", what, d, state)
		}
		time.Sleep(pause)
		pause = min(2*pause, 100*time.Millisecond)
	}
}

// Until is For for a condition with no state to describe.
func Until(t testing.TB, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	return For(t, d, what, func() (bool, string) { return cond(), "" })
}
