package cache

import "time"

// HealthConfig sets when an endpoint is judged unhealthy and when it is
// trusted again. Zero fields take the defaults.
type HealthConfig struct {
	// Window is how many of the endpoint's last requests are judged
	// (default 20).
	Window int
	// MaxFailures is how many failed or slow requests within the window
	// make the endpoint unhealthy (default 3).
	MaxFailures int
	// Slow is the latency above which a request counts as failed
	// (default 250 ms).
	Slow time.Duration
	// ProbeEvery paces the probes of an unhealthy endpoint (default
	// 250 ms).
	ProbeEvery time.Duration
	// Probes is how many consecutive probes must pass before the
	// endpoint gets requests again (default 3).
	Probes int
}

func (c HealthConfig) withDefaults() HealthConfig {
	if c.Window <= 0 {
		c.Window = 20
	}
	if c.MaxFailures <= 0 {
		c.MaxFailures = 3
	}
	c.MaxFailures = min(c.MaxFailures, c.Window)
	if c.Slow <= 0 {
		c.Slow = 250 * time.Millisecond
	}
	if c.ProbeEvery <= 0 {
		c.ProbeEvery = 250 * time.Millisecond
	}
	if c.Probes <= 0 {
		c.Probes = 3
	}
	return c
}

// Health is the judgement of one endpoint from the outcomes of its
// requests and probes: a pure state machine, fed by the Store. The zero
// value is not usable; make one with NewHealth.
type Health struct {
	cfg     HealthConfig
	recent  []bool // ring of the last Window outcomes, true = failed
	next    int
	failed  int // failures in recent
	healthy bool
	passes  int // consecutive passed probes while unhealthy
}

// NewHealth returns a healthy judgement with no history.
func NewHealth(cfg HealthConfig) *Health {
	cfg = cfg.withDefaults()
	return &Health{cfg: cfg, recent: make([]bool, cfg.Window), healthy: true}
}

// Healthy reports whether the endpoint may get requests.
func (h *Health) Healthy() bool { return h.healthy }

// Request records a request's outcome (err is whether it failed for a
// reason of the endpoint's: unreachable, timed out) and latency; it
// reports whether the endpoint just became unhealthy.
func (h *Health) Request(err bool, latency time.Duration) bool {
	if !h.healthy {
		return false // answers of requests sent before the judgement
	}
	bad := err || latency > h.cfg.Slow
	if h.recent[h.next] {
		h.failed--
	}
	h.recent[h.next] = bad
	if bad {
		h.failed++
	}
	h.next = (h.next + 1) % len(h.recent)
	if h.failed < h.cfg.MaxFailures {
		return false
	}
	h.healthy, h.passes = false, 0
	clear(h.recent)
	h.failed = 0
	return true
}

// Probe records a probe's outcome while the endpoint is unhealthy; it
// reports whether the endpoint just became healthy again.
func (h *Health) Probe(err bool, latency time.Duration) bool {
	if h.healthy {
		return false
	}
	if err || latency > h.cfg.Slow {
		h.passes = 0
		return false
	}
	h.passes++
	if h.passes < h.cfg.Probes {
		return false
	}
	h.healthy = true
	return true
}
