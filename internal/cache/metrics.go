package cache

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	rejected prometheus.Counter
	predated prometheus.Counter
	epochs   prometheus.Counter
	healthy  *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		rejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "doppio_cache_writes_rejected_total",
			Help: "Writes to the cache tier the compare-by-SCN script refused: the entry held a newer SCN.",
		}),
		predated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "doppio_cache_writes_stale_epoch_total",
			Help: "Fills and bootstrap writes to the cache tier refused because their state was read before the Redis incarnation began: a change the lost Redis held may be missing from them.",
		}),
		epochs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "doppio_cache_epochs_total",
			Help: "Redis incarnations this process began: it was the first to connect to a Redis process that had no epoch of its own (restarted empty, loaded from a file, or promoted).",
		}),
		healthy: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "doppio_cache_endpoint_healthy",
			Help: "1 while this process sends requests to the Redis endpoint, 0 while it judges it unhealthy and only probes it.",
		}, []string{"endpoint"}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	if m.rejected, err = register(reg, m.rejected); err != nil {
		return nil, err
	}
	if m.predated, err = register(reg, m.predated); err != nil {
		return nil, err
	}
	if m.epochs, err = register(reg, m.epochs); err != nil {
		return nil, err
	}
	if m.healthy, err = register(reg, m.healthy); err != nil {
		return nil, err
	}
	return m, nil
}

// register registers c, or returns the collector already registered in
// its place (another Store of the process), so the Stores share it.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	var dup prometheus.AlreadyRegisteredError
	if errors.As(err, &dup) {
		if prev, ok := dup.ExistingCollector.(C); ok {
			return prev, nil
		}
	}
	return c, err
}

// UpdaterMetrics are the cache tier's write side's: the updater's lag and
// the bootstrapper's progress, by database and partition or table.
type UpdaterMetrics struct {
	// Lag is how old each partition's watermark is, as last raised here.
	Lag *prometheus.GaugeVec
	// LagTransactions is how many committed write sets of each partition
	// the updater here has not delivered yet.
	LagTransactions *prometheus.GaugeVec
	// BootstrapProgress is the share of a table's partitions on this
	// node bootstrapped within the table's period.
	BootstrapProgress *prometheus.GaugeVec
	// BootstrapDocuments counts the documents bootstraps rewrote.
	BootstrapDocuments *prometheus.CounterVec
}

// NewUpdaterMetrics makes the write side's metrics and registers them
// with reg (nil: not registered), sharing those already registered.
func NewUpdaterMetrics(reg prometheus.Registerer) (*UpdaterMetrics, error) {
	m := &UpdaterMetrics{
		Lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "doppio_cache_updater_lag_seconds",
			Help: "Age of the partition's cache watermark as this node's updater last saw it: every change committed before it is in the cache tier.",
		}, []string{"db", "partition"}),
		LagTransactions: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "doppio_cache_updater_lag_transactions",
			Help: "Committed write sets of the partition this node's updater has not delivered to the cache tier yet.",
		}, []string{"db", "partition"}),
		BootstrapProgress: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "doppio_cache_bootstrap_progress",
			Help: "Share (0 to 1) of the table's partitions updated here whose entries were all rewritten from a snapshot within the table's bootstrap period.",
		}, []string{"db", "table"}),
		BootstrapDocuments: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "doppio_cache_bootstrap_documents_total",
			Help: "Documents rewritten into the cache tier by bootstraps on this node.",
		}, []string{"db", "table"}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	if m.Lag, err = register(reg, m.Lag); err != nil {
		return nil, err
	}
	if m.LagTransactions, err = register(reg, m.LagTransactions); err != nil {
		return nil, err
	}
	if m.BootstrapProgress, err = register(reg, m.BootstrapProgress); err != nil {
		return nil, err
	}
	if m.BootstrapDocuments, err = register(reg, m.BootstrapDocuments); err != nil {
		return nil, err
	}
	return m, nil
}
