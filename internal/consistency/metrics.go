package consistency

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/doppio-db/doppio/internal/replication"
)

// collector exports the consistency-check counters.
type collector struct {
	counters                           func() (replication.CheckCounters, bool)
	checks, mismatches, repairs, bytes *prometheus.Desc
}

// NewCollector exports the counters counters returns (none while it
// returns false: the node is not open yet).
func NewCollector(counters func() (replication.CheckCounters, bool)) prometheus.Collector {
	return &collector{
		counters:   counters,
		checks:     prometheus.NewDesc("doppio_consistency_checks_total", "Consistency checks this node ran as a partition's leader.", nil, nil),
		mismatches: prometheus.NewDesc("doppio_consistency_mismatches_total", "Replicas consistency checks found to differ from their leader (or from the majority, when the leader was the odd one out).", nil, nil),
		repairs:    prometheus.NewDesc("doppio_consistency_repairs_total", "Replicas rebuilt from a snapshot after a consistency check found them differing.", nil, nil),
		bytes:      prometheus.NewDesc("doppio_consistency_checked_bytes_total", "Key and value bytes this node summed for consistency checks.", nil, nil),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.checks
	ch <- c.mismatches
	ch <- c.repairs
	ch <- c.bytes
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	cc, ok := c.counters()
	if !ok {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.checks, prometheus.CounterValue, float64(cc.Checks))
	ch <- prometheus.MustNewConstMetric(c.mismatches, prometheus.CounterValue, float64(cc.Mismatches))
	ch <- prometheus.MustNewConstMetric(c.repairs, prometheus.CounterValue, float64(cc.Repairs))
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.CounterValue, float64(cc.Bytes))
}
