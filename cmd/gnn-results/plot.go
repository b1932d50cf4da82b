package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/gnn-spmd/gnn-spmd/cmd/internal/cli"
	"github.com/gnn-spmd/gnn-spmd/data/outfile"
	"github.com/gnn-spmd/gnn-spmd/gnn/results"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

func runPlot(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("plot", "plot [--out PREFIX] [--title T] SERIES...   (SERIES: NAME=RUN.jsonl[,RUN.jsonl...] or RUN.jsonl; the files of one series are seeds, averaged)", stderr)
	out := fs.String("out", "plot", "output prefix: writes PREFIX-acc-bytes, PREFIX-acc-epoch and PREFIX-rate-epoch, each as .png and .svg")
	title := fs.String("title", "", "text put before every figure's title")
	if err := fs.ParseFlagsOnly(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return cli.Usagef("plot: expected at least one SERIES (NAME=RUN.jsonl[,RUN.jsonl...] or RUN.jsonl)")
	}
	if *out == "" {
		return cli.Usagef("plot: --out must not be empty")
	}
	ss, err := readSeries("plot", fs.Args())
	if err != nil {
		return err
	}
	var inputs, outputs []outfile.Path
	for _, s := range ss {
		for _, r := range s.Runs {
			inputs = append(inputs, outfile.Path{Flag: "series " + s.Name, Name: r.Path})
		}
	}
	for _, kind := range []string{"acc-bytes", "acc-epoch", "rate-epoch"} {
		for _, ext := range []string{".png", ".svg"} {
			outputs = append(outputs, outfile.Path{Flag: "--out", Name: *out + "-" + kind + ext, MakeDirs: true})
		}
	}
	release, err := outfile.Claim(inputs, outputs)
	if err != nil {
		return err
	}
	defer release()
	heading := *title
	if heading != "" {
		heading += ": "
	}
	if err := writeAccBytes(*out, heading, ss); errors.Is(err, errNoHaloBytes) {
		return cli.Usagef("plot: %v", err)
	} else if err != nil {
		return err
	}
	if err := writeAccEpoch(*out, heading, ss); err != nil {
		return err
	}
	if err := writeRateEpoch(*out, heading, ss); err != nil {
		return err
	}
	for _, kind := range []string{"acc-bytes", "acc-epoch", "rate-epoch"} {
		fmt.Fprintf(stdout, "wrote %s-%s.png and .svg\n", *out, kind)
	}
	return nil
}

// readSeries parses the SERIES arguments and reads their files. Runs still
// in progress (no summary line) are plotted as far as they got.
func readSeries(cmd string, args []string) ([]results.Series, error) {
	var ss []results.Series
	for _, arg := range args {
		name, files, named := strings.Cut(arg, "=")
		if !named {
			name, files = strings.TrimSuffix(filepath.Base(arg), filepath.Ext(arg)), arg
			if st, err := os.Stat(arg); err == nil && st.IsDir() {
				return nil, cli.Usagef("%s: series %q: is a directory, expected NAME=RUN.jsonl[,RUN.jsonl...] or RUN.jsonl", cmd, arg)
			}
		}
		if name == "" || files == "" {
			return nil, cli.Usagef("%s: series %q: expected NAME=RUN.jsonl[,RUN.jsonl...] or RUN.jsonl", cmd, arg)
		}
		s := results.Series{Name: name}
		for _, path := range strings.Split(files, ",") {
			if path == "" {
				return nil, cli.Usagef("%s: series %q: empty file name", cmd, arg)
			}
			r, err := results.ReadRun(path)
			if err == nil {
				err = r.NeedEpochs()
			}
			if err != nil {
				return nil, err
			}
			s.Runs = append(s.Runs, r)
		}
		ss = append(ss, s)
	}
	return ss, nil
}

// errNoHaloBytes: a log bytes axis needs at least one positive budget.
var errNoHaloBytes = errors.New("no run sent halo bytes (every bytes_cum is 0), so accuracy cannot be drawn against bytes on a log axis")

// writeAccBytes draws each series' mean acc(B) against the budget B on the
// grid of every positive bytes_cum of the runs drawn (exact: the curves are
// steps at those values), from the first budget where every seed has a
// model. B = 0 has no place on a log axis; runs that send nothing are flat.
//
// Every figure writer takes the output prefix and a heading put before the
// figure's own title.
func writeAccBytes(prefix, heading string, ss []results.Series) error {
	var sets [][]*results.Run
	for _, s := range ss {
		sets = append(sets, s.Runs)
	}
	grid := results.BudgetGrid(sets...)
	for len(grid) > 0 && grid[0] <= 0 {
		grid = grid[1:]
	}
	if len(grid) == 0 {
		return errNoHaloBytes
	}
	p := newFigure(heading+"test accuracy at a byte budget",
		"budget: cumulative training halo bytes (log scale; 1 MB = 10^6 B)", "test accuracy (%), mean over seeds")
	p.X.Tick.Marker = logTicks{results.DecimalBytes}
	for i, s := range ss {
		var xys plotter.XYs
		for _, b := range grid {
			if m, ok := results.MeanAccAt(s.Runs, b); ok {
				xys = append(xys, plotter.XY{X: math.Log10(float64(b)), Y: 100 * m})
			}
		}
		if err := addCurve(p, s.Name, xys, i, i, true); err != nil {
			return err
		}
	}
	return savePlot(p, prefix+"-acc-bytes")
}

// writeAccEpoch draws each series' mean test_acc per epoch, up to the last
// epoch that every seed reached, at the epochs that every seed evaluated.
func writeAccEpoch(prefix, heading string, ss []results.Series) error {
	p := newFigure(heading+"test accuracy per epoch", "epoch", "test accuracy (%), mean over seeds")
	for i, s := range ss {
		var xys plotter.XYs
		for e := range commonEpochs(s.Runs) {
			xy := plotter.XY{X: float64(e)}
			for _, r := range s.Runs {
				xy.Y += 100 * r.Points[e].TestAcc / float64(len(s.Runs))
			}
			if !math.IsNaN(xy.Y) { // every seed evaluated this epoch
				xys = append(xys, xy)
			}
		}
		if err := addCurve(p, s.Name, xys, i, i, false); err != nil {
			return err
		}
	}
	return savePlot(p, prefix+"-acc-epoch")
}

// writeRateEpoch draws, per series, the mean compression rate of each layer
// whose rate is ever != 1 (colour per series, dash per layer); series that
// never compress draw nothing.
func writeRateEpoch(prefix, heading string, ss []results.Series) error {
	p := newFigure(heading+"compression rate per epoch (1 = raw)", "epoch", "compression rate, mean over seeds (log scale)")
	p.Y.Tick.Marker = logTicks{func(v float64) string { return fmt.Sprintf("%.3g", v) }}
	drawn := false
	for i, s := range ss {
		for l := range maxLayers(s.Runs) {
			xys, compressed := meanLogRate(s.Runs, l)
			if !compressed {
				continue
			}
			if err := addCurve(p, fmt.Sprintf("%s layer %d", s.Name, l), xys, i, l, false); err != nil {
				return err
			}
			drawn = true
		}
	}
	if !drawn {
		p.Title.Text += " (no series compresses)"
	}
	return savePlot(p, prefix+"-rate-epoch")
}

// meanLogRate is log10 of layer's rate averaged over the runs, per epoch
// that every run reached, and whether the rate is ever != 1. A layer that a
// line does not record counts as raw (1).
func meanLogRate(runs []*results.Run, layer int) (xys plotter.XYs, compressed bool) {
	xys = make(plotter.XYs, commonEpochs(runs))
	for e := range xys {
		sum := 0.0
		for _, r := range runs {
			v := rateAt(r.Points[e], layer)
			compressed = compressed || v != 1
			sum += v
		}
		xys[e] = plotter.XY{X: float64(e), Y: math.Log10(sum / float64(len(runs)))}
	}
	return xys, compressed
}

// commonEpochs is the number of epochs every run reached: a mean over fewer
// seeds at the end would jump.
func commonEpochs(runs []*results.Run) int {
	n := len(runs[0].Points)
	for _, r := range runs {
		n = min(n, len(r.Points))
	}
	return n
}

func maxLayers(runs []*results.Run) int {
	n := 0
	for _, r := range runs {
		for _, e := range r.Points {
			n = max(n, len(e.Rates))
		}
	}
	return n
}

func rateAt(e results.Point, layer int) float64 {
	if layer < len(e.Rates) {
		return e.Rates[layer]
	}
	return 1
}

// Figure size: wide enough for a legend of a dozen series.
const figWidth, figHeight = 18 * vg.Centimeter, 11 * vg.Centimeter

func newFigure(title, xLabel, yLabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text, p.Y.Label.Text = xLabel, yLabel
	p.Add(plotter.NewGrid())
	return p
}

// addCurve adds a legend entry drawn in colour number colour and dash
// pattern number dash; step draws acc(B) as the step function it is.
func addCurve(p *plot.Plot, name string, xys plotter.XYs, colour, dash int, step bool) error {
	l, err := plotter.NewLine(xys)
	if err != nil {
		return fmt.Errorf("plot %s: %w", name, err)
	}
	l.Color = plotutil.DarkColors[colour%len(plotutil.DarkColors)]
	l.Dashes = plotutil.Dashes(dash)
	l.Width = vg.Points(1.5)
	if step {
		l.StepStyle = plotter.PostStep
	}
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}

// logTicks marks an axis that holds log10 of the values, labelling its
// ticks with the values themselves (by format): every decade, and every
// tick when fewer than two decades fall inside. Log axes are drawn this way
// rather than with gonum's LogScale, which reserves room for the axis label
// at the linear midpoint of the data and so squeezes the plot.
type logTicks struct{ format func(float64) string }

func (t logTicks) Ticks(min, max float64) []plot.Tick {
	var ts []plot.Tick
	decades := 0
	for _, tk := range (plot.LogTicks{}).Ticks(math.Pow(10, min), math.Pow(10, max)) {
		if v := math.Log10(tk.Value); v >= min-1e-9 && v <= max+1e-9 {
			ts = append(ts, plot.Tick{Value: v, Label: tk.Label})
			if tk.Label != "" {
				decades++
			}
		}
	}
	for i := range ts {
		if ts[i].Label != "" || decades < 2 {
			ts[i].Label = t.format(math.Pow(10, ts[i].Value))
		}
	}
	return ts
}

// savePlot writes base.png and base.svg.
func savePlot(p *plot.Plot, base string) error {
	for _, format := range []string{"png", "svg"} {
		wt, err := render(p, format)
		if err != nil {
			return fmt.Errorf("draw %s.%s: %w", base, format, err)
		}
		if err := writeAtomic(base+"."+format, func(w io.Writer) error {
			_, err := wt.WriteTo(w)
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

// render draws p with its legend right of the axes rather than inside
// them, where it would hide curves.
func render(p *plot.Plot, format string) (vg.CanvasWriterTo, error) {
	c, err := draw.NewFormattedCanvas(figWidth, figHeight, format)
	if err != nil {
		return nil, err
	}
	dc := draw.New(c)
	legend := p.Legend
	legend.Top = true
	width := legend.Rectangle(dc).Size().X + vg.Millimeter
	noLegend := *p
	noLegend.Legend = plot.NewLegend()
	noLegend.Draw(draw.Crop(dc, 0, -width, 0, 0))
	legend.Draw(draw.Crop(dc, figWidth-width, 0, 0, 0))
	return c, nil
}

// writeAtomic writes path atomically, creating its directory, so that no
// reader ever sees half a figure or report, and a failed run leaves the
// previous file in place.
func writeAtomic(path string, write func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return outfile.WriteStream(path, write)
}
