package main

import (
	"fmt"
	"image/color"
	"math"
	"strconv"
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

// goal is issue 32's bound on one call at 1,000 nodes and 100,000
// replicas, on one core.
func goal(event string) time.Duration {
	if event == "initial" {
		return 2 * time.Second
	}
	return 200 * time.Millisecond
}

// find returns the result of one case, if it ran.
func (r *report) find(event string, sz size, version string) (result, bool) {
	for _, x := range r.Results {
		if x.Event == event && x.Size == sz && x.Version == version {
			return x, true
		}
	}
	return result{}, false
}

func (r *report) markdown() string {
	var b strings.Builder
	c := r.Cfg
	fmt.Fprintf(&b, "# Placement at scale: one planning call\n\n")
	b.WriteString(benchutil.ProducedBy("bench-placement", r.Command))
	fmt.Fprintf(&b, "%s\n\n", benchutil.Took(r.Started, r.Duration))
	fmt.Fprintf(&b, "- Machine: %d CPUs (%s), %s RAM, %s, %s, shared with other work: the load average (1 minute) around each case is in the table. Figures from a shared machine show the curve, not a guarantee.\n",
		r.Machine.CPUs, r.Machine.CPUModel, r.Machine.RAM, r.Machine.Kernel, r.Machine.Go)
	fmt.Fprintf(&b, "- What: `BenchmarkScale` in `internal/placement/scale_test.go`, one `placement.Compute` call per iteration (`-test.benchtime=%s`, a slow case runs once), each case in its own process with `-test.cpu=1` (GOMAXPROCS=1). Three zones, nodes assigned round-robin, one database of *partitions* × 3 replicas, placed by Compute before the event.\n", c.BenchTime)
	fmt.Fprintf(&b, "- Events: *initial* places the database on the empty cluster; the others replan right after, on that placement: *join* adds a node to zone a, *down* marks a node down (its leaderships move), *gone* marks it gone (its replicas are recreated), *drain* drains it, *zone-gone* loses every node of zone c, *create* adds a database of 1,024 partitions × 3.\n")
	fmt.Fprintf(&b, "- *Before* is `internal/placement` at commit `%s`, *after* the working tree's, built from the same benchmark file and run in the same run, case after case. A case still running after %v is stopped (\"> %v\").\n", c.Before, c.Limit, c.Limit)
	fmt.Fprintf(&b, "- Goal (issue 32), at 1,000 nodes and 100,000 replicas on one core: the initial placement under 2 s, any replan under 200 ms.\n\n")
	fmt.Fprintf(&b, "| event | nodes | replicas | before | after | speed-up | load avg |\n")
	fmt.Fprintf(&b, "|---|---:|---:|---:|---:|---:|---:|\n")
	for _, ev := range c.Events {
		for _, sz := range c.Sizes {
			bf, ok1 := r.find(ev, sz, "before")
			af, ok2 := r.find(ev, sz, "after")
			if !ok1 || !ok2 {
				continue
			}
			speedup := "-"
			switch {
			case af.TimedOut:
			case bf.TimedOut:
				speedup = fmt.Sprintf("> %.0f×", float64(c.Limit)/float64(af.PerCall))
			case af.PerCall > 0:
				speedup = fmt.Sprintf("%.1f×", float64(bf.PerCall)/float64(af.PerCall))
			}
			fmt.Fprintf(&b, "| %s | %d | %d | %s | %s | %s | %.1f |\n", ev, sz.Nodes, sz.Replicas(), bf.Text(c.Limit), af.Text(c.Limit), speedup, max(bf.LoadAvg[0], bf.LoadAvg[1], af.LoadAvg[0], af.LoadAvg[1]))
		}
	}
	fmt.Fprintf(&b, "\n## Against the goal\n\n")
	largest := size{}
	for _, sz := range c.Sizes {
		if sz.Nodes*sz.Replicas() > largest.Nodes*largest.Replicas() {
			largest = sz
		}
	}
	for _, ev := range c.Events {
		af, ok := r.find(ev, largest, "after")
		if !ok {
			continue
		}
		verdict := "meets the goal"
		if af.TimedOut || af.PerCall >= goal(ev) {
			verdict = "misses the goal"
		}
		fmt.Fprintf(&b, "- %s at %d nodes, %d replicas: %s against %v: %s.\n", ev, largest.Nodes, largest.Replicas(), af.Text(c.Limit), goal(ev), verdict)
	}
	fmt.Fprintf(&b, "\n![time per placement call against cluster size](placement.png)\n")
	return b.String()
}

var eventColors = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
	color.RGBA{R: 0x17, G: 0xbe, B: 0xcf, A: 0xff},
}

// writePlot draws the time per call against the number of nodes, log on
// both axes, one color per event, before dashed and after solid; a case
// that hit the limit is drawn at the limit with a cross.
func writePlot(r *report, path string) error {
	p := plot.New()
	p.Title.Text = "One placement call (one core): before dashed, after solid"
	p.X.Label.Text = "nodes (replicas in the table)"
	p.Y.Label.Text = "time per call (ms)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	var ticks []plot.Tick
	for _, sz := range r.Cfg.Sizes {
		ticks = append(ticks, plot.Tick{Value: float64(sz.Nodes), Label: strconv.Itoa(sz.Nodes)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	limit := float64(r.Cfg.Limit) / 1e6
	for i, ev := range r.Cfg.Events {
		col := eventColors[i%len(eventColors)]
		for _, v := range []string{"before", "after"} {
			var pts, capped plotter.XYs
			for _, sz := range r.Cfg.Sizes {
				x, ok := r.find(ev, sz, v)
				if !ok {
					continue
				}
				y := float64(x.PerCall) / 1e6
				if x.TimedOut {
					y = limit
					capped = append(capped, plotter.XY{X: float64(sz.Nodes), Y: y})
				}
				pts = append(pts, plotter.XY{X: float64(sz.Nodes), Y: math.Max(y, 0.001)})
			}
			if len(pts) == 0 {
				continue
			}
			l, s, err := plotter.NewLinePoints(pts)
			if err != nil {
				return err
			}
			l.Color, l.Width = col, vg.Points(1.5)
			s.Color, s.Shape = col, draw.CircleGlyph{}
			if v == "before" {
				l.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
			} else {
				p.Legend.Add(ev, l, s)
			}
			p.Add(l, s)
			if len(capped) > 0 {
				c, err := plotter.NewScatter(capped)
				if err != nil {
					return err
				}
				c.Color, c.Shape, c.Radius = col, draw.CrossGlyph{}, vg.Points(5)
				p.Add(c)
			}
		}
	}
	for _, g := range []struct {
		ms    float64
		label string
	}{{200, "replan goal 200 ms"}, {2000, "initial goal 2 s"}} {
		l, err := plotter.NewLine(plotter.XYs{{X: float64(r.Cfg.Sizes[0].Nodes), Y: g.ms}, {X: float64(r.Cfg.Sizes[len(r.Cfg.Sizes)-1].Nodes), Y: g.ms}})
		if err != nil {
			return err
		}
		l.Color, l.Dashes = color.Gray{Y: 0x80}, []vg.Length{vg.Points(2), vg.Points(2)}
		p.Add(l)
		p.Legend.Add(g.label, l)
	}
	p.Legend.Top, p.Legend.Left = true, true
	img := vgimg.New(vg.Points(900), vg.Points(560))
	p.Draw(draw.New(img))
	return benchutil.WritePNG(img, path)
}
