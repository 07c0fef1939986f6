package main

import (
	"fmt"
	"image/color"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/doppio-db/doppio/bench/internal/benchutil"
)

// report is the whole run.
type report struct {
	benchutil.Run
	Cfg     config
	Results []result
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d.Microseconds())/1000) }

// ratio is a/b, or "–" when b is zero.
func ratio(a, b float64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// baseline is configuration (a)'s result when it ran.
func (r *report) baseline() *result {
	for i := range r.Results {
		if r.Results[i].Name == cfgNone {
			return &r.Results[i]
		}
	}
	return nil
}

func (r *report) markdown() string {
	var b strings.Builder
	c := r.Cfg
	fmt.Fprintf(&b, "# The cache tier: hit rates, latency and storage CPU (issue 31)\n\n")
	b.WriteString(benchutil.ProducedBy("bench-cache", r.Command))
	fmt.Fprintf(&b, "%s\n\n", benchutil.Took(r.Started, r.Duration))
	fmt.Fprintf(&b, "**This run is on a shared machine; the seed's goals are not claimed from it.** %d CPUs (%s), %s RAM, %s, %s, shared with other engineers' builds and tests: the load average during each measured window is in the table. The nodes, the router, Redis, PostgreSQL and the load generator all ran on it. Read the figures as ratios against the other configurations of the same run, not as absolute numbers.",
		r.Machine.CPUs, r.Machine.CPUModel, r.Machine.RAM, r.Machine.Kernel, r.Machine.Go)
	if c.Quick {
		b.WriteString(" It is the `-quick` run: a smoke run of the harness, small and short.")
	}
	b.WriteString("\n\n")
	fmt.Fprintf(&b, "- Data: %d member profiles of %d–%d bytes of JSON (uniform), with a name, a headline, skills, positions and a long summary; in Doppio one table keyed by member, `\"cache\": {\"ttl\": %q, \"bootstrapEvery\": %q}`, in a database of %d partitions × 3 replicas on three `doppio start` nodes (etcd in the harness).\n",
		c.Docs, c.MinBytes, c.MaxBytes, c.TTL.String(), c.Bootstrap.String(), c.Partitions)
	fmt.Fprintf(&b, "- Load: %.0f operations/s offered open loop (each operation has a scheduled start; latency counts from it, so falling behind is charged), %.0f%% reads with `X-Doppio-Staleness: %v` and %.0f%% whole-profile updates, keys zipfian (s = %.2f) over the profiles, from up to %d requests in flight. Every configuration gets the same sequence of operations: %v of warm-up, then %v measured.\n",
		c.Rate, 100*(1-c.Updates), c.Staleness, 100*c.Updates, c.Zipf, workers, c.Warmup, c.Measure)
	fmt.Fprintf(&b, "- Configurations, each through its own `doppio router` started for it: (a) no cache flags; (b) `--cache-local-bytes %s`; (c) `--cache-local-bytes %s --cache-redis <redis>` with the updater (a datastream with a Redis sink, created before (c)'s warm-up; its bootstrapper writes every profile into Redis); (d) the profiles in PostgreSQL (`profiles(member text primary key, doc jsonb)`, fsync on) and the same Redis in front, cache-aside by hand: GET the key, on a miss SELECT and SET it with the TTL; an update UPDATEs, then DELs the key.\n",
		c.LocalBytes, c.LocalBytes)
	b.WriteString("- Storage CPU per read: the user + system CPU time (from `/proc/<pid>/stat`) of the three node processes, or of PostgreSQL's postmaster and backends, in the measured window, divided by the reads served. It includes the work of the updates, which is the same in every configuration, and in (c) the updater's and the bootstrapper's, which rewrites every profile into Redis once per bootstrap period. Neither the router's nor Redis's CPU is in it.\n\n")

	base := r.baseline()
	fmt.Fprintf(&b, "| configuration | reads | from hot-key cache | from Redis | from storage | read p50 ms | read p99 ms | p99 / (a) | storage CPU per read | CPU / (a) | failed | behind | load avg |\n")
	fmt.Fprintf(&b, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, x := range r.Results {
		m := x.Measured
		p99, cpu := "–", "–"
		if base != nil {
			p99 = ratio(float64(quantile(m.ReadLat, 0.99)), float64(quantile(base.Measured.ReadLat, 0.99)))
			cpu = ratio(float64(x.CPUPerRead()), float64(base.CPUPerRead()))
		}
		fmt.Fprintf(&b, "| %s | %d | %.1f%% | %.1f%% | %.1f%% | %s | %s | %s | %s µs | %s | %d | %d | %.1f → %.1f |\n",
			configLabels[x.Name], m.Reads, 100*m.hit("local"), 100*m.hit("redis"), 100*max(0, 1-m.hit("local")-m.hit("redis")),
			ms(quantile(m.ReadLat, 0.5)), ms(quantile(m.ReadLat, 0.99)), p99,
			fmt.Sprintf("%.0f", float64(x.CPUPerRead().Nanoseconds())/1000), cpu, m.Failed, m.Dropped, x.LoadAvg[0], x.LoadAvg[1])
	}
	b.WriteString("\n*From storage* is every read the tier did not answer: a miss, a bypass, or without a tier the nodes' answer. *Behind* counts operations that found all workers busy at their scheduled start and were not sent. In (d) *from Redis* is a cache-aside hit.\n\n")

	for _, x := range r.Results {
		if x.Name != cfgRedis {
			continue
		}
		b.WriteString("## The updater under the write load\n\n")
		fmt.Fprintf(&b, "From each acknowledged update (its answer's `X-Doppio-SCN`) until Redis held the profile at that SCN or later, polled every %v: p50 %s ms, p99 %s ms, max %s ms over %d updates; %d not in Redis within %v.\n\n",
			lagPoll, ms(quantile(x.Lags, 0.5)), ms(quantile(x.Lags, 0.99)), ms(quantile(x.Lags, 1)), len(x.Lags), x.LagLost, lagLimit)
		b.WriteString("## Divergence after the run\n\n")
		switch {
		case x.Divergence != nil:
			fmt.Fprintf(&b, "One bootstrap period (%v) after the load stopped, `cachecheck` compared every entry of the table's cache generation in Redis with a linearizable read of the document: %d entries checked, **%d** showing another state than the nodes.\n\n",
				c.Bootstrap, x.Divergence.Checked, len(x.Divergence.Diverged))
			for i, d := range x.Divergence.Diverged {
				if i == 10 {
					fmt.Fprintf(&b, "- … and %d more\n", len(x.Divergence.Diverged)-10)
					break
				}
				fmt.Fprintf(&b, "- %s\n", d)
			}
		default:
			fmt.Fprintf(&b, "The divergence check failed: %s\n\n", x.DivergenceErr)
		}
	}

	b.WriteString("## Against the seed's goals (not claimed from this machine)\n\n")
	for _, x := range r.Results {
		if x.Name != cfgRedis || base == nil {
			continue
		}
		m := x.Measured
		hit := m.hit("local") + m.hit("redis")
		fmt.Fprintf(&b, "- Hit rate at least 99%%: (c) answered %.1f%% of reads from the tier.\n", 100*hit)
		fmt.Fprintf(&b, "- Read p99 at least 60%% lower than without the tier at the same offered load: (c)'s p99 is %s of (a)'s.\n",
			ratio(float64(quantile(m.ReadLat, 0.99)), float64(quantile(base.Measured.ReadLat, 0.99))))
		fmt.Fprintf(&b, "- Storage CPU per read lower by at least the hit rate: (c)'s is %s of (a)'s, against %.2f for a reduction by the hit rate.\n",
			ratio(float64(x.CPUPerRead()), float64(base.CPUPerRead())), 1-hit)
		if x.Divergence != nil {
			fmt.Fprintf(&b, "- No entry beyond its bound after the run: %d of %d entries differ.\n", len(x.Divergence.Diverged), x.Divergence.Checked)
		}
	}
	b.WriteString("\nA shared machine with a load average above its CPU count inflates every tail, and the storage CPU of a configuration also depends on what else the kernel was doing: only a run on a quiet machine, with the nodes and the clients on separate ones, could test the goals.\n\n")
	b.WriteString("![read latency p50 and p99 per configuration](cache.png)\n")
	return b.String()
}

var barColors = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
}

// writePlot draws read p50 and p99 per configuration as grouped bars.
func writePlot(r *report, path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Read latency at %.0f operations/s offered (95%% reads, zipfian)", r.Cfg.Rate)
	p.Y.Label.Text = "milliseconds"
	var names []string
	for _, x := range r.Results {
		names = append(names, strings.SplitN(configLabels[x.Name], " ", 2)[0])
	}
	w := vg.Points(22)
	hi := 0.0
	for i, q := range []float64{0.5, 0.99} {
		var v plotter.Values
		for _, x := range r.Results {
			v = append(v, float64(quantile(x.Measured.ReadLat, q).Microseconds())/1000)
			hi = max(hi, v[len(v)-1])
		}
		bars, err := plotter.NewBarChart(v, w)
		if err != nil {
			return err
		}
		bars.Color = barColors[i]
		bars.LineStyle.Width = 0
		bars.Offset = vg.Length(2*i-1) * w / 2
		p.Add(bars)
		p.Legend.Add(fmt.Sprintf("p%g", q*100), bars)
	}
	p.NominalX(names...)
	p.X.Label.Text = "(a) no tier · (b) hot-key cache · (c) hot-key cache + Redis · (d) PostgreSQL + Redis by hand"
	// Room above the tallest bar for the legend.
	p.Y.Min, p.Y.Max = 0, hi*1.3
	p.Legend.Top, p.Legend.Left = true, true
	img := vgimg.New(vg.Points(760), vg.Points(440))
	p.Draw(draw.New(img))
	return benchutil.WritePNG(img, path)
}
