package quota

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/doppio-db/doppio/internal/problem"
	"github.com/prometheus/client_golang/prometheus"
)

// Scope is what a quota limits: a database or a user.
type Scope uint8

const (
	Database Scope = iota
	User
)

func (s Scope) String() string {
	if s == Database {
		return "database"
	}
	return "user"
}

// Shares are this node's parts of the cluster-wide quotas, each in (0, 1].
type Shares struct {
	// Databases maps a database to its share; a database absent has 1.
	Databases map[string]float64
	// Users is the share of every user's quota; 0 means 1.
	Users float64
}

// Divide computes a node's shares from the partitions it leads and each
// database's partition count: a database's share is the part of its
// partitions led here, the users' share the part of all partitions. A node
// leading none still counts one, since it serves what reaches it (a
// stale read at a follower, a request during a leadership move).
func Divide(led, partitions map[string]int) Shares {
	s := Shares{Databases: make(map[string]float64, len(partitions))}
	var ledAll, all int
	for db, n := range partitions {
		if n <= 0 {
			continue
		}
		l := min(max(led[db], 1), n)
		s.Databases[db] = float64(l) / float64(n)
		ledAll += led[db]
		all += n
	}
	s.Users = 1
	if all > 0 {
		s.Users = float64(min(max(ledAll, 1), all)) / float64(all)
	}
	return s
}

func (s Shares) of(sc Scope, name string) float64 {
	if sc == User {
		if s.Users > 0 {
			return s.Users
		}
		return 1
	}
	if v, ok := s.Databases[name]; ok && v > 0 {
		return v
	}
	return 1
}

// LimiterConfig configures a Limiter; the zero value is the defaults.
type LimiterConfig struct {
	// Burst is the unused capacity a bucket keeps (default DefaultBurst).
	Burst time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

type bucketKey struct {
	scope Scope
	name  string
	unit  Unit
}

// Limiter enforces this node's shares of the quotas: Admit before a
// request's work, Charge after it. Safe for concurrent use; a request of
// a database and a user without quotas takes a read lock and two map
// lookups.
type Limiter struct {
	burst time.Duration
	now   func() time.Time

	// version moves at every change of a quota (Version).
	version atomic.Uint64

	mu      sync.RWMutex
	quotas  [2]map[string]Quota // by Scope
	shares  Shares
	buckets map[bucketKey]*Bucket

	consumed  *prometheus.CounterVec
	throttled *prometheus.CounterVec
	// dbConsumed caches each database's consumed series: every request
	// adds to one, and WithLabelValues hashes its labels on every call.
	dbConsumed sync.Map // string -> *[2]prometheus.Counter, by Unit
}

// NewLimiter returns a limiter with no quota: it admits everything.
func NewLimiter(cfg LimiterConfig) *Limiter {
	if cfg.Burst <= 0 {
		cfg.Burst = DefaultBurst
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Limiter{
		burst: cfg.Burst, now: cfg.Now,
		quotas:  [2]map[string]Quota{{}, {}},
		buckets: map[bucketKey]*Bucket{},
		consumed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "doppio_quota_consumed_units_total",
			Help: "Capacity units charged on this node, by scope (database, or user with a quota), name and unit (read, write).",
		}, []string{"scope", "name", "unit"}),
		throttled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "doppio_quota_throttled_requests_total",
			Help: "Requests refused with 429 on this node, by the scope (database, or user with a quota) and name whose quota was spent.",
		}, []string{"scope", "name"}),
	}
}

// Collectors are the limiter's metrics, for a Prometheus registry.
func (l *Limiter) Collectors() []prometheus.Collector {
	return []prometheus.Collector{l.consumed, l.throttled}
}

// Set makes q the quota of name in scope; a zero q removes it (and, for a
// user, the user's metric series).
func (l *Limiter) Set(sc Scope, name string, q Quota) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.setLocked(sc, name, q)
}

// Replace makes the quotas of scope exactly qs (a watch's full reload).
func (l *Limiter) Replace(sc Scope, qs map[string]Quota) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for name := range l.quotas[sc] {
		if _, ok := qs[name]; !ok {
			l.setLocked(sc, name, Quota{})
		}
	}
	for name, q := range qs {
		l.setLocked(sc, name, q)
	}
}

func (l *Limiter) setLocked(sc Scope, name string, q Quota) {
	l.version.Add(1)
	now := l.now()
	if q.Unlimited() {
		if _, ok := l.quotas[sc][name]; ok && sc == User {
			l.consumed.DeleteLabelValues(sc.String(), name, Read.String())
			l.consumed.DeleteLabelValues(sc.String(), name, Write.String())
			l.throttled.DeleteLabelValues(sc.String(), name)
		}
		delete(l.quotas[sc], name)
	} else {
		l.quotas[sc][name] = q
	}
	for _, u := range []Unit{Read, Write} {
		k := bucketKey{sc, name, u}
		limit := q.Of(u)
		b, ok := l.buckets[k]
		switch {
		case limit == 0:
			delete(l.buckets, k)
		case !ok:
			nb := NewBucket(float64(limit)*l.shares.of(sc, name), l.burst, now)
			l.buckets[k] = &nb
		default:
			b.SetRate(float64(limit)*l.shares.of(sc, name), now)
		}
	}
}

// Version moves whenever a quota is set, changed or removed, so that a
// refusal remembered elsewhere can be dropped when its quota changes.
func (l *Limiter) Version() uint64 { return l.version.Load() }

// SetShares changes this node's shares of the quotas; every bucket's rate
// follows from now on.
func (l *Limiter) SetShares(s Shares) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s.Databases = maps.Clone(s.Databases)
	l.shares = s
	now := l.now()
	for k, b := range l.buckets {
		b.SetRate(float64(l.quotas[k.scope][k.name].Of(k.unit))*s.of(k.scope, k.name), now)
	}
}

// Quota returns the quota of name in scope as this node knows it.
func (l *Limiter) Quota(sc Scope, name string) Quota {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.quotas[sc][name]
}

// Admit decides whether a request of user ("" for none) on db that
// consumes unit may start now: nil, or an OverQuota *problem.Error whose
// RetryAfter is when every bucket it needs has repaid its debt.
func (l *Limiter) Admit(db, user string, u Unit) error {
	l.mu.RLock()
	dbq, uq := l.quotas[Database][db].Of(u), int64(0)
	if user != "" {
		uq = l.quotas[User][user].Of(u)
	}
	l.mu.RUnlock()
	if dbq == 0 && uq == 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	var refused []string
	var wait time.Duration
	for _, c := range []struct {
		sc    Scope
		name  string
		limit int64
	}{{Database, db, dbq}, {User, user, uq}} {
		b := l.buckets[bucketKey{c.sc, c.name, u}]
		if c.limit == 0 || b == nil {
			continue
		}
		if ok, w := b.admit(now); !ok {
			refused = append(refused, fmt.Sprintf("%s %s is over its %s quota of %d units per second", c.sc, c.name, u, c.limit))
			wait = max(wait, w)
			l.throttled.WithLabelValues(c.sc.String(), c.name).Inc()
		}
	}
	if refused == nil {
		return nil
	}
	detail := refused[0]
	if len(refused) > 1 {
		detail += " and " + refused[1]
	}
	retry := retrySeconds(wait.Seconds())
	return &problem.Error{Kind: problem.OverQuota, Operation: -1, RetryAfter: retry, Wait: wait,
		Detail: fmt.Sprintf("%s; retry in %d s", detail, retry)}
}

// Charge records that a request of user ("" for none) on db consumed
// units of unit: the buckets of their quotas pay (into debt if need be)
// and the metrics count them.
func (l *Limiter) Charge(db, user string, u Unit, units int64) {
	if units <= 0 {
		return
	}
	l.databaseConsumed(db)[u].Add(float64(units))
	l.mu.RLock()
	dbq := l.quotas[Database][db].Of(u)
	uq, userHas := l.quotas[User][user]
	if user != "" && userHas {
		// Under the lock: removing the quota deletes the user's series.
		l.consumed.WithLabelValues(User.String(), user, u.String()).Add(float64(units))
	}
	l.mu.RUnlock()
	if dbq == 0 && (user == "" || uq.Of(u) == 0) {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if b := l.buckets[bucketKey{Database, db, u}]; b != nil {
		b.Charge(float64(units), now)
	}
	if user != "" {
		if b := l.buckets[bucketKey{User, user, u}]; b != nil {
			b.Charge(float64(units), now)
		}
	}
}

// FollowShares sets the limiter's shares from shares now and then every
// interval until ctx ends: leaderships move, and a node's share of the
// quotas moves with them.
func (l *Limiter) FollowShares(ctx context.Context, interval time.Duration, shares func() Shares) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		l.SetShares(shares())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (l *Limiter) databaseConsumed(db string) *[2]prometheus.Counter {
	if c, ok := l.dbConsumed.Load(db); ok {
		return c.(*[2]prometheus.Counter)
	}
	c := &[2]prometheus.Counter{
		Read:  l.consumed.WithLabelValues(Database.String(), db, Read.String()),
		Write: l.consumed.WithLabelValues(Database.String(), db, Write.String()),
	}
	v, _ := l.dbConsumed.LoadOrStore(db, c)
	return v.(*[2]prometheus.Counter)
}
