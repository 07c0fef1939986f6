package operator

import (
	"github.com/doppio-db/doppio/internal/membership"
	"github.com/prometheus/client_golang/prometheus"
)

// RebalanceMetrics registers the rebalance gauges with reg and returns
// the function that sets them from the progress this node's controller
// reports while it is the active one (controller.Options.OnProgress).
func RebalanceMetrics(reg prometheus.Registerer) func(membership.Rebalance) {
	g := func(name, help string) prometheus.Gauge {
		m := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
		reg.MustRegister(m)
		return m
	}
	active := g("doppio_rebalance_active", "1 while the controller on this node has replica moves to make.")
	total := g("doppio_rebalance_moves", "Moves of the current (or last) rebalance, done and remaining.")
	done := g("doppio_rebalance_moves_done", "Moves of the current (or last) rebalance completed.")
	remaining := g("doppio_rebalance_moves_remaining", "Moves of the current rebalance in flight or not started.")
	inFlight := g("doppio_rebalance_moves_in_flight", "Replicas being added (learners receiving a snapshot or catching up).")
	return func(r membership.Rebalance) {
		a := 0.0
		if r.Active {
			a = 1
		}
		active.Set(a)
		total.Set(float64(r.Total))
		done.Set(float64(r.Done))
		remaining.Set(float64(r.Remaining))
		inFlight.Set(float64(r.InFlight))
	}
}
