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
	Cfg  config
	Runs []runResult
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d.Microseconds())/1000) }

func (r *report) markdown() string {
	var b strings.Builder
	c := r.Cfg
	fmt.Fprintf(&b, "# Online cluster expansion (the Espresso paper's Figure 6)\n\n")
	b.WriteString(benchutil.ProducedBy("bench-expand", r.Command))
	fmt.Fprintf(&b, "%s\n\n", benchutil.Took(r.Started, r.Duration))
	fmt.Fprintf(&b, "- Machine: %d CPUs (%s), %s RAM, %s, %s. Everything ran on it at once: etcd (in the benchmark process), the node processes, the clients.\n",
		r.Machine.CPUs, r.Machine.CPUModel, r.Machine.RAM, r.Machine.Kernel, r.Machine.Go)
	fmt.Fprintf(&b, "- Each run: a fresh cluster of %d active `doppio start` nodes plus the new ones started with `--standby`; database of %d partitions × %d replicas (%d replicas), %d documents of %d payload bytes in %d document groups, loaded before the measurement.\n",
		initial, c.Partitions, replicas, c.Partitions*replicas, c.Docs, c.DocBytes, c.Groups)
	fmt.Fprintf(&b, "- Load: %d closed-loop clients, each a Go client (`client.WithSmartRouting`, default retries) seeded at one of the first three nodes, 50%% reads and 50%% updates (whole document) of uniformly chosen loaded documents. *Before* is the %v of load before the add (after 3 s of warm-up, once the load's compactions have finished); *during* is from the add until the controller reports no move left and every partition has 3 caught-up replicas.\n",
		c.Clients, c.Before)
	fmt.Fprintf(&b, "- Expansion: every new node added in one step (`POST /_cluster/nodes/{id}/add`, what `doppio cluster add` sends). Serial: `--max-moves 1 --max-moves-per-node 1` (one replica move at a time). Parallel: `--max-moves %d --max-moves-per-node %d`. A replica move is a learner added on the new node, a snapshot streamed as sstables and ingested, catch-up from the log, promotion, then removal of the replica it replaces; leadership moves by Raft leadership transfer.\n",
		c.Parallel, c.PerNode)
	fmt.Fprintf(&b, "- *Moved* counts the replicas the new nodes hold at the end: a minimal expansion moves exactly the new nodes' share of the capacity, replicas × added / (3 + added) (*ideal*), and nothing between old nodes. *Streamed* is the sstable bytes of every snapshot sent meanwhile (`doppio_snapshot_sent_bytes_total` summed over the nodes; compressed, so below the documents' size).\n\n")
	fmt.Fprintf(&b, "| added | schedule | moved / ideal (off) | streamed | moves | expansion time | ops/s before → during (ratio) | p99 ms before → during (ratio) | failed during | load avg |\n")
	fmt.Fprintf(&b, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, x := range r.Runs {
		fmt.Fprintf(&b, "| %d | %s | %d / %.1f (%+.1f%%) | %.0f MB | %d | %.1f s | %.0f → %.0f (%.2f) | %s → %s (%.2f) | %d of %d | %.1f → %.1f |\n",
			x.Added, x.Mode, x.Moved, x.Ideal(), 100*x.MovedOff(), x.SnapshotBytes/1e6, x.Moves, x.Took.Seconds(),
			x.Before.Throughput, x.During.Throughput, x.ThroughputRatio(), ms(x.Before.P99), ms(x.During.P99), x.P99Ratio(),
			x.During.Failed, x.During.Ops, x.LoadAvg[0], x.LoadAvg[1])
	}
	fmt.Fprintf(&b, "\n## Against the goal\n\n")
	for _, x := range r.Runs {
		var notes []string
		if off := x.MovedOff(); off < -0.05 || off > 0.05 {
			notes = append(notes, fmt.Sprintf("moved %+.1f%% off the ideal (goal: within 5%%)", 100*off))
		}
		if x.ThroughputRatio() < 0.8 {
			notes = append(notes, fmt.Sprintf("throughput during the expansion %.0f%% of before (goal: at least 80%%)", 100*x.ThroughputRatio()))
		}
		if x.During.Failed > 0 {
			notes = append(notes, fmt.Sprintf("%d failed requests (goal: none)", x.During.Failed))
		}
		verdict := "meets the goal"
		if len(notes) > 0 {
			verdict = "misses: " + strings.Join(notes, "; ")
		}
		fmt.Fprintf(&b, "- +%d, %s: %s.\n", x.Added, x.Mode, verdict)
	}
	for _, k := range c.Adds {
		var s, p *runResult
		for i := range r.Runs {
			if r.Runs[i].Added == k && r.Runs[i].Mode == "serial" {
				s = &r.Runs[i]
			}
			if r.Runs[i].Added == k && r.Runs[i].Mode == "parallel" {
				p = &r.Runs[i]
			}
		}
		if s != nil && p != nil {
			fmt.Fprintf(&b, "- +%d: parallel took %.2f× the serial expansion's time (%.1f s against %.1f s).\n", k, p.Took.Seconds()/s.Took.Seconds(), p.Took.Seconds(), s.Took.Seconds())
		}
	}
	fmt.Fprintf(&b, "\n![throughput per second around each expansion](expand.png)\n\n")
	fmt.Fprintf(&b, "On a %d-CPU machine the nodes, etcd and the clients share the CPUs: a snapshot being built, streamed and ingested takes CPU from serving, which separate machines would not.\n", r.Machine.CPUs)
	return b.String()
}

var modeDash = map[string][]vg.Length{"serial": nil, "parallel": {vg.Points(6), vg.Points(3)}}

var addColors = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
}

// writePlot draws each run's successful requests per second around the
// add (second 0), with a mark where its expansion finished.
func writePlot(r *report, path string) error {
	p := plot.New()
	p.Title.Text = "Client throughput around an online expansion (add at t = 0)"
	p.X.Label.Text = "seconds since the nodes were added"
	p.Y.Label.Text = "successful requests per second"
	hi := 0.0
	for _, x := range r.Runs {
		var pts plotter.XYs
		for i, v := range x.PerSecond {
			pts = append(pts, plotter.XY{X: float64(i) - r.Cfg.Before.Seconds(), Y: v})
			hi = max(hi, v)
		}
		if len(pts) == 0 {
			continue
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		col := addColors[(x.Added-1)%len(addColors)]
		l.Color, l.Width, l.Dashes = col, vg.Points(1.5), modeDash[x.Mode]
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("+%d %s (done at %.0f s)", x.Added, x.Mode, x.Took.Seconds()), l)
		end, err := plotter.NewScatter(plotter.XYs{{X: x.Took.Seconds(), Y: 0}})
		if err != nil {
			return err
		}
		end.Color, end.Shape, end.Radius = col, draw.TriangleGlyph{}, vg.Points(4)
		p.Add(end)
	}
	p.Y.Min, p.Y.Max = 0, hi*1.25
	p.Legend.Top, p.Legend.Left = true, true
	img := vgimg.New(vg.Points(900), vg.Points(520))
	p.Draw(draw.New(img))
	return benchutil.WritePNG(img, path)
}
