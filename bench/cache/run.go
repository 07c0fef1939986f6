package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/doppio-db/doppio/internal/cache/cachecheck"
	"github.com/doppio-db/doppio/internal/redistest"

	"github.com/doppio-db/doppio/bench/internal/benchutil"
	"github.com/doppio-db/doppio/bench/internal/localcluster"
)

// result is one configuration's measurement.
type result struct {
	Name     string
	Measured *phase
	Took     time.Duration
	// StorageCPU is the storage processes' CPU time in the measured
	// window: the three nodes', or PostgreSQL's.
	StorageCPU time.Duration
	LoadAvg    [2]float64 // at the start and the end of the window
	// Lags are the updater's, sorted; LagLost counts updates not in
	// Redis within lagLimit ((c) only).
	Lags    []time.Duration
	LagLost int
	// Divergence is the check one bootstrap period after the load ((c)
	// only).
	Divergence    *cachecheck.Report
	DivergenceErr string
}

// CPUPerRead is the storage CPU per read served.
func (r result) CPUPerRead() time.Duration {
	if r.Measured.Reads == 0 {
		return 0
	}
	return r.StorageCPU / time.Duration(r.Measured.Reads)
}

// The seeds of the key sequences: every configuration is offered the
// same operations.
const (
	warmupSeed  = 1
	measureSeed = 2
)

func run(ctx context.Context, cfg config) error {
	cfg.Progress("building doppio")
	bin, cleanup, err := localcluster.Build(ctx, cfg.WorkDir)
	if err != nil {
		return err
	}
	defer cleanup()
	work, err := os.MkdirTemp(cfg.WorkDir, "doppio-bench-cache-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	redisBin, err := redistest.Binary()
	if err != nil {
		return err
	}
	addr, err := localcluster.FreePort()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(work, "redis"), 0o755); err != nil {
		return err
	}
	rs, err := redistest.Run(redisBin, addr, filepath.Join(work, "redis"), "")
	if err != nil {
		return err
	}
	defer rs.Kill()

	rep := &report{Run: benchutil.StartRun(cfg.Command), Cfg: cfg}
	var revs revisions
	doppioConfigs := slices.DeleteFunc(slices.Clone(cfg.Configs), func(c string) bool { return c == cfgPostgres })
	if len(doppioConfigs) > 0 {
		b, err := startDoppio(ctx, cfg, bin, filepath.Join(work, "doppio"), addr)
		if err != nil {
			return err
		}
		for _, name := range doppioConfigs {
			r, err := measureDoppio(ctx, b, name, &revs)
			if err != nil {
				b.stop()
				return fmt.Errorf("%s: %w", configLabels[name], err)
			}
			rep.Results = append(rep.Results, r)
		}
		b.stop()
	}
	if slices.Contains(cfg.Configs, cfgPostgres) {
		pg, err := startPostgres(ctx, cfg, filepath.Join(work, "postgres"), addr)
		if err != nil {
			return err
		}
		r, err := measureStore(ctx, cfg, cfgPostgres, pg, pg.pg.Pids, &revs, nil)
		pg.stop()
		if err != nil {
			return fmt.Errorf("%s: %w", configLabels[cfgPostgres], err)
		}
		rep.Results = append(rep.Results, r)
	}
	rep.Finish()
	return benchutil.WriteReport(cfg.Out, "cache", rep.markdown(), func(path string) error { return writePlot(rep, path) })
}

// measureDoppio runs one configuration through its own router: warm-up,
// measurement, and for (c) the updater's lag and the divergence check.
func measureDoppio(ctx context.Context, b *doppioBench, name string, revs *revisions) (result, error) {
	cfg := b.cfg
	rt, err := b.router(name)
	if err != nil {
		return result{}, err
	}
	defer rt.Kill()
	s := &doppioStore{base: rt.Addr, staleness: cfg.Staleness.String()}
	var lag *lagTracker
	var begin func()
	if name == cfgRedis {
		cfg.Progress("creating the updater (a datastream with a Redis sink; it bootstraps every profile into Redis)")
		if err := b.startUpdater(ctx); err != nil {
			return result{}, err
		}
		if lag, err = newLagTracker(b); err != nil {
			return result{}, err
		}
		// Only the measured window's updates: the warm-up's run beside
		// the first bootstrap.
		begin = func() { s.lag = lag }
	}
	r, err := measureStore(ctx, cfg, name, s, b.nodePids, revs, begin)
	if err != nil {
		return r, err
	}
	if lag != nil {
		r.Lags, r.LagLost = lag.done()
		cfg.Progress("%s: updater lag p50 %v, p99 %v over %d updates (%d not seen within %v)", configLabels[name],
			quantile(r.Lags, 0.5), quantile(r.Lags, 0.99), len(r.Lags), r.LagLost, lagLimit)
		cfg.Progress("waiting one bootstrap period (%v), then comparing every Redis entry with the nodes", cfg.Bootstrap)
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(cfg.Bootstrap):
		}
		d, err := b.diverged(ctx)
		if err != nil {
			r.DivergenceErr = err.Error()
		} else {
			r.Divergence = &d
			cfg.Progress("divergence check: %d entries checked, %d differ from the nodes", d.Checked, len(d.Diverged))
		}
	}
	return r, nil
}

// measureStore offers the load to s for the warm-up, calls begin (when
// not nil), then measures it, with the CPU time of the processes pids
// lists (read again at the end: PostgreSQL starts backends on demand).
func measureStore(ctx context.Context, cfg config, name string, s store, pids func() ([]int, error), revs *revisions, begin func()) (result, error) {
	label := configLabels[name]
	cfg.Progress("%s: warm-up, %v at %.0f operations/s", label, cfg.Warmup, cfg.Rate)
	drive(ctx, cfg, s, cfg.Warmup, warmupSeed, revs)
	if begin != nil {
		begin()
	}
	before, err := pids()
	if err != nil {
		return result{}, err
	}
	cpu0 := cpuTimes(before)
	r := result{Name: name}
	r.LoadAvg[0] = benchutil.LoadAvg()
	cfg.Progress("%s: measuring, %v", label, cfg.Measure)
	start := time.Now()
	r.Measured = drive(ctx, cfg, s, cfg.Measure, measureSeed, revs)
	r.Took = time.Since(start)
	after, err := pids()
	if err != nil {
		return r, err
	}
	for pid, t := range cpuTimes(after) {
		r.StorageCPU += t - cpu0[pid]
	}
	r.LoadAvg[1] = benchutil.LoadAvg()
	m := r.Measured
	cfg.Progress("%s: %d reads (local %.1f%%, redis %.1f%%), %d updates, %d failed, %d dropped; read p50 %v p99 %v; storage CPU %v per read",
		label, m.Reads, 100*m.hit("local"), 100*m.hit("redis"), m.Updates, m.Failed, m.Dropped,
		quantile(m.ReadLat, 0.5), quantile(m.ReadLat, 0.99), r.CPUPerRead())
	if m.Failed > 0 {
		cfg.Progress("%s: first failure: %s", label, m.FirstErr)
	}
	return r, ctx.Err()
}

func sortDurations(d []time.Duration) { sort.Slice(d, func(i, j int) bool { return d[i] < d[j] }) }
