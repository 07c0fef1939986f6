package bulkload

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are a node's bulk-load series: what its drivers applied, and
// each unfinished load's cluster-wide progress as this node last read it.
type metrics struct {
	bytes, records *prometheus.CounterVec
	done, parts    *prometheus.GaugeVec
	total          *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "doppio_bulk_load_applied_bytes_total", Help: "Bytes of partition files this node applied, per load.",
		}, []string{"load"}),
		records: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "doppio_bulk_load_applied_records_total", Help: "Documents this node applied, per load.",
		}, []string{"load"}),
		done: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "doppio_bulk_load_partitions_done", Help: "Partitions of a running load that are fully loaded, cluster-wide.",
		}, []string{"load"}),
		parts: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "doppio_bulk_load_partitions", Help: "Partitions of a running load.",
		}, []string{"load"}),
		total: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "doppio_bulk_load_progress_bytes", Help: "Bytes of a running load's files applied cluster-wide (kind=applied) and in all (kind=total).",
		}, []string{"load", "kind"}),
	}
	if reg != nil {
		reg.MustRegister(m.bytes, m.records, m.done, m.parts, m.total)
	}
	return m
}

// applied counts a chunk this node applied.
func (m *metrics) applied(load string, bytes, records uint64) {
	m.bytes.WithLabelValues(load).Add(float64(bytes))
	m.records.WithLabelValues(load).Add(float64(records))
}

// observe sets the gauges of the loads that have not ended and drops
// those of ended loads.
func (m *metrics) observe(loads []loaded) {
	for _, l := range loads {
		if l.rec.ended() {
			m.done.DeleteLabelValues(l.rec.ID)
			m.parts.DeleteLabelValues(l.rec.ID)
			m.total.DeleteLabelValues(l.rec.ID, "applied")
			m.total.DeleteLabelValues(l.rec.ID, "total")
			continue
		}
		v := view(l.rec, l.progress, false)
		m.done.WithLabelValues(v.ID).Set(float64(v.PartitionsDone))
		m.parts.WithLabelValues(v.ID).Set(float64(len(l.rec.Files)))
		m.total.WithLabelValues(v.ID, "applied").Set(float64(v.Bytes))
		m.total.WithLabelValues(v.ID, "total").Set(float64(v.TotalBytes))
	}
}
