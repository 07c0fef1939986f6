package derived

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/doppio-db/doppio/client/wire"
)

// metrics are the derived tables' series, as this node last read them.
type metrics struct {
	current  *prometheus.GaugeVec
	versions *prometheus.GaugeVec
	fetch    *prometheus.GaugeVec
	ready    *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		current: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "doppio_derived_current_version", Help: "The version reads of a derived table answer from (0: none).",
		}, []string{"db", "table"}),
		versions: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "doppio_derived_versions", Help: "Versions of a derived table in each state.",
		}, []string{"db", "table", "state"}),
		fetch: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "doppio_derived_fetch_bytes", Help: "Bytes of a fetching version applied by the partitions' leaders (kind=applied) and in all (kind=total).",
		}, []string{"db", "table", "version", "kind"}),
		ready: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "doppio_derived_replicas_ready", Help: "Placed replicas that hold a fetching version whole, or none of a version being deleted.",
		}, []string{"db", "table", "version"}),
	}
	if reg != nil {
		reg.MustRegister(m.current, m.versions, m.fetch, m.ready)
	}
	return m
}

var states = []string{wire.VersionFetching, wire.VersionStaged, wire.VersionCurrent, wire.VersionBackup, wire.VersionFailed, wire.VersionDeleting}

// observe sets the series from the tables' views.
func (m *metrics) observe(views []wire.DerivedTable) {
	m.fetch.Reset()
	m.ready.Reset()
	for _, t := range views {
		m.current.WithLabelValues(t.Database, t.Table).Set(float64(t.Current))
		count := map[string]int{}
		for _, v := range t.Versions {
			count[v.State]++
			ver := strconv.Itoa(v.Version)
			if v.State == wire.VersionFetching {
				m.fetch.WithLabelValues(t.Database, t.Table, ver, "applied").Set(float64(v.Bytes))
				m.fetch.WithLabelValues(t.Database, t.Table, ver, "total").Set(float64(v.TotalBytes))
			}
			ready := 0
			for _, p := range v.Partitions {
				ready += p.Ready
			}
			if len(v.Partitions) > 0 {
				m.ready.WithLabelValues(t.Database, t.Table, ver).Set(float64(ready))
			}
		}
		for _, s := range states {
			m.versions.WithLabelValues(t.Database, t.Table, s).Set(float64(count[s]))
		}
	}
}
