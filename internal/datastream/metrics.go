package datastream

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	produced *prometheus.CounterVec
	errors   *prometheus.CounterVec
	lag      *prometheus.GaugeVec
}

func newMetrics() metrics {
	return metrics{
		produced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "doppio_datastream_events_produced_total", Help: "Change events the sink acknowledged, by datastream (tasks on this node).",
		}, []string{"datastream"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "doppio_datastream_produce_errors_total", Help: "Failed deliveries of a batch of change events, by datastream (tasks on this node).",
		}, []string{"datastream"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "doppio_datastream_lag_seconds", Help: "Age of the oldest undelivered transaction over this node's tasks of a datastream (0 when caught up).",
		}, []string{"datastream"}),
	}
}

func (m metrics) register(r prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.produced, m.errors, m.lag} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}
