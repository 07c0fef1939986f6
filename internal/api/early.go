package api

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/doppio-db/doppio/internal/problem"
)

// A node that forwards a request (a router, or a node not leading the
// partition) remembers the over-quota refusals leaders send back, and
// refuses the same caller's same request kind to the same leader itself
// until that leader's buckets have repaid their debt: a tenant over its
// quota then costs the leaders nothing. The leader states the exact wait
// in headerRetryAfterMs; Retry-After alone is rounded up, and refusing for
// the rounded time would refuse what the leader would admit. A change to
// any quota, seen through the quotas' watch, forgets every refusal.

// headerRetryAfterMs is the exact wait behind an over-quota Retry-After,
// in milliseconds.
const headerRetryAfterMs = "X-Doppio-Retry-After-Ms"

// maxEarly bounds the refusals remembered.
const maxEarly = 10000

// earlyKey is what a leader's refusal is known to cover: its buckets are
// per database, user and unit, and one route and method always consume
// the same unit.
type earlyKey struct{ peer, db, user, method, pattern string }

type earlyEntry struct {
	until   time.Time
	version uint64
}

type earlyRefusals struct {
	version func() uint64 // the quotas' version (quota.Limiter.Version)
	refused prometheus.Counter

	mu sync.Mutex
	m  map[earlyKey]earlyEntry
}

// RefuseEarly makes the server refuse requests it would forward to a
// leader that refused the same caller's same request as over quota, until
// the leader's stated wait ends or version (the quotas' version) moves.
func (s *Server) RefuseEarly(version func() uint64) {
	s.early.Store(&earlyRefusals{version: version, refused: s.earlyRefused, m: map[earlyKey]earlyEntry{}})
}

// refuse returns the over-quota problem for k while a refusal is
// remembered, else nil.
func (e *earlyRefusals) refuse(k earlyKey, now time.Time) error {
	if e == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	en, ok := e.m[k]
	if !ok {
		return nil
	}
	if !now.Before(en.until) || en.version != e.version() {
		delete(e.m, k)
		return nil
	}
	e.refused.Inc()
	wait := en.until.Sub(now)
	retry := int(math.Ceil(wait.Seconds()))
	return &problem.Error{Kind: problem.OverQuota, Operation: -1, RetryAfter: retry, Wait: wait,
		Detail: fmt.Sprintf("the leader of this partition of database %s refused this caller's %s requests as over quota; refused here until its quota has credit again, retry in %d s", k.db, k.method, retry)}
}

// learn remembers the leader's over-quota refusal in w, if w holds one.
func (e *earlyRefusals) learn(k earlyKey, w *statusWriter, now time.Time) {
	if e == nil || w.status() != http.StatusTooManyRequests {
		return
	}
	ms, err := strconv.ParseInt(w.Header().Get(headerRetryAfterMs), 10, 64)
	if err != nil || ms <= 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.m) >= maxEarly {
		for k, en := range e.m {
			if !now.Before(en.until) {
				delete(e.m, k)
			}
		}
		if len(e.m) >= maxEarly {
			return
		}
	}
	e.m[k] = earlyEntry{until: now.Add(time.Duration(ms) * time.Millisecond), version: e.version()}
}
