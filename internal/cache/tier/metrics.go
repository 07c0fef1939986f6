package tier

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/doppio-db/doppio/client/wire"
	"github.com/doppio-db/doppio/internal/cache"
	"github.com/prometheus/client_golang/prometheus"
)

// The tiers and results of doppio_cache_requests_total.
const (
	tierLocal   = "local"
	tierRedis   = "redis"
	resultHit   = "hit"
	resultStale = "stale"
	resultMiss  = "miss"
)

var (
	tierNames   = [2]string{tierLocal, tierRedis}
	resultNames = [3]string{resultHit, resultStale, resultMiss}
)

func tierIndex(tier string) int {
	if tier == tierRedis {
		return 1
	}
	return 0
}

func resultIndex(result string) int {
	switch result {
	case resultHit:
		return 0
	case resultStale:
		return 1
	}
	return 2
}

type metrics struct {
	requests *prometheus.CounterVec
	bypassed *prometheus.CounterVec
	fills    *prometheus.CounterVec

	mu     sync.Mutex
	tables map[string]*tableCounters
	counts sync.Map // "tier/result" -> *atomic.Int64, of fills
}

// tableCounters are one table's counts, kept both as series (their
// labels hashed once) and as numbers for Stats.
type tableCounters struct {
	series [2][3]prometheus.Counter
	n      [2][3]atomic.Int64
	bypass prometheus.Counter
	// answered counts reads by Source, in sourceNames' order.
	answered [4]atomic.Int64
}

var sourceNames = [4]Source{Local, Redis, Miss, Bypass}

func (c *tableCounters) answer(s Source) Source {
	for i, n := range sourceNames {
		if n == s {
			c.answered[i].Add(1)
		}
	}
	return s
}

func (c *tableCounters) inc(tier, result string) {
	i, j := tierIndex(tier), resultIndex(result)
	c.series[i][j].Inc()
	c.n[i][j].Add(1)
}

func (c *tableCounters) bypassed() {
	c.bypass.Inc()
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "doppio_cache_requests_total",
			Help: "Staleness-bounded reads of one document looked up in a cache tier (local, redis), by table and result: hit (fresh enough), stale (present, too old), miss (absent).",
		}, []string{"tier", "table", "result"}),
		bypassed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "doppio_cache_bypassed_total",
			Help: "Staleness-bounded reads of one document that went to the storage nodes without asking Redis: it was unhealthy or failed.",
		}, []string{"table"}),
		fills: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "doppio_cache_fills_total",
			Help: "Entries this process wrote to a cache tier after a miss, by tier and result: written, merged (same SCN), refused (a newer SCN was there), stale_epoch (read before the Redis incarnation began), dropped (Redis unhealthy or the queue full).",
		}, []string{"tier", "result"}),
		tables: map[string]*tableCounters{},
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []**prometheus.CounterVec{&m.requests, &m.bypassed, &m.fills} {
		err := reg.Register(*c)
		var dup prometheus.AlreadyRegisteredError
		if errors.As(err, &dup) {
			if prev, ok := dup.ExistingCollector.(*prometheus.CounterVec); ok {
				*c, err = prev, nil
			}
		}
		if err != nil {
			return nil, err
		}
	}
	return m, nil
}

// table returns the counters of a table, made on its first read.
func (m *metrics) table(name string) *tableCounters {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.tables[name]
	if !ok {
		c = &tableCounters{bypass: m.bypassed.WithLabelValues(name)}
		for i, tn := range tierNames {
			for j, rn := range resultNames {
				c.series[i][j] = m.requests.WithLabelValues(tn, name, rn)
			}
		}
		m.tables[name] = c
	}
	return c
}

var outcomeNames = map[cache.Outcome]string{cache.Refused: "refused", cache.Merged: "merged", cache.Written: "written", cache.Predated: "stale_epoch"}

func (m *metrics) fill(tier string, o cache.Outcome) { m.fillN(tier, outcomeNames[o], 1) }

func (m *metrics) fillN(tier, result string, n int) {
	m.fills.WithLabelValues(tier, result).Add(float64(n))
	v, _ := m.counts.LoadOrStore(tier+"/"+result, new(atomic.Int64))
	v.(*atomic.Int64).Add(int64(n))
}

func (m *metrics) report(p *wire.CacheProcess) {
	p.Tables, p.Fills = map[string]wire.CacheReads{}, map[string]map[string]int64{}
	m.mu.Lock()
	for name, c := range m.tables {
		r := wire.CacheReads{Answered: map[string]int64{}}
		for i, s := range sourceNames {
			r.Answered[string(s)] = c.answered[i].Load()
		}
		for i, l := range []*wire.CacheLookups{&r.Local, &r.Redis} {
			l.Hit, l.Stale, l.Miss = c.n[i][0].Load(), c.n[i][1].Load(), c.n[i][2].Load()
		}
		p.Tables[name] = r
	}
	m.mu.Unlock()
	m.counts.Range(func(k, v any) bool {
		tier, result, _ := strings.Cut(k.(string), "/")
		if p.Fills[tier] == nil {
			p.Fills[tier] = map[string]int64{}
		}
		p.Fills[tier][result] = v.(*atomic.Int64).Load()
		return true
	})
}
