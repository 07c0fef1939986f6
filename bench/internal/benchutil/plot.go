package benchutil

import (
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Bars is a bar chart of values, each named by its label under its bar.
func Bars(title, ylabel string, labels []string, values []float64) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	b, err := plotter.NewBarChart(plotter.Values(values), vg.Points(36))
	if err != nil {
		return nil, err
	}
	b.Color = plotter.DefaultLineStyle.Color
	p.Add(b)
	p.NominalX(labels...)
	p.Y.Min = 0
	return p, nil
}

// WritePlots draws plots side by side, each width by height points,
// into one PNG at path.
func WritePlots(path string, width, height vg.Length, plots ...*plot.Plot) error {
	img := vgimg.New(width*vg.Length(len(plots)), height)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Points(12)}
	grid := make([][]*plot.Plot, 1)
	grid[0] = plots
	canvases := plot.Align(grid, tiles, dc)
	for i, p := range plots {
		p.Draw(canvases[0][i])
	}
	return WritePNG(img, path)
}
