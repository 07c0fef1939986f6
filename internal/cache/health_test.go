package cache

import (
	"testing"
	"time"
)

// TestHealthJudgesFailuresInTheWindowAndResumesAfterProbes walks the
// judgement through its transitions: scattered failures within the
// window, slow answers counting as failures, probes that must pass in a
// row.
func TestHealthJudgesFailuresInTheWindowAndResumesAfterProbes(t *testing.T) {
	const fast, slow = time.Millisecond, time.Second
	type step struct {
		probe   bool
		err     bool
		latency time.Duration
		changed bool
		healthy bool
	}
	ok := step{latency: fast, healthy: true}
	fail := step{err: true, latency: fast, healthy: true}
	cases := []struct {
		name  string
		steps []step
	}{
		{"two failures in the window stay healthy", []step{fail, ok, fail, ok, ok}},
		{"the third failure in the window turns it unhealthy", []step{fail, ok, fail, ok, {err: true, latency: fast, changed: true}}},
		{"failures that left the window are forgotten", []step{fail, fail, ok, ok, ok, ok, fail}},
		{"slow answers count as failures", []step{{latency: slow, healthy: true}, {latency: slow, healthy: true}, {latency: slow, changed: true}}},
		{"probes must pass in a row", []step{fail, fail, {err: true, changed: true},
			{probe: true, latency: fast}, {probe: true, latency: fast}, {probe: true, err: true},
			{probe: true, latency: fast}, {probe: true, latency: slow},
			{probe: true, latency: fast}, {probe: true, latency: fast}, {probe: true, latency: fast, changed: true, healthy: true}}},
		{"answers to requests sent before the judgement are ignored", []step{fail, fail, {err: true, changed: true}, {latency: fast}, {latency: fast}, {latency: fast}}},
		{"after resuming the window starts empty", []step{fail, fail, {err: true, changed: true},
			{probe: true, latency: fast}, {probe: true, latency: fast}, {probe: true, latency: fast, changed: true, healthy: true},
			fail, fail, {err: true, latency: fast, changed: true}}},
	}
	for _, c := range cases {
		h := NewHealth(HealthConfig{Window: 5, MaxFailures: 3, Slow: 100 * time.Millisecond, Probes: 3})
		for i, s := range c.steps {
			var changed bool
			if s.probe {
				changed = h.Probe(s.err, s.latency)
			} else {
				changed = h.Request(s.err, s.latency)
			}
			if changed != s.changed || h.Healthy() != s.healthy {
				t.Fatalf("%s: step %d: changed %v healthy %v, want %v %v", c.name, i, changed, h.Healthy(), s.changed, s.healthy)
			}
		}
	}
}
