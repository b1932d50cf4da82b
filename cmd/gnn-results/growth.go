package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/gnn-spmd/gnn-spmd/cmd/internal/cli"
	"github.com/gnn-spmd/gnn-spmd/data/outfile"
	"gonum.org/v1/plot/plotter"
)

// growthPoint is one measured run of a cost-growth sweep: the axis swept
// (nodes, width or ranks), its value there, and the run's epoch seconds and
// peak memory.
type growthPoint struct {
	axis                 string
	value, secs, peakMiB float64
	text                 string // value as written
}

func runGrowth(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("growth", "growth [--out PREFIX] SWEEP.tsv   (lines: AXIS VALUE EPOCH_SECONDS PEAK_MIB; AXIS: nodes, width or ranks)", stderr)
	out := fs.String("out", "growth", "output prefix: writes PREFIX.png and PREFIX.svg")
	if err := fs.ParseFlagsOnly(args); err != nil {
		return err
	}
	if fs.NArg() != 1 || *out == "" {
		return cli.Usagef("growth: expected one SWEEP.tsv and a non-empty --out")
	}
	path := fs.Arg(0)
	release, err := outfile.Claim([]outfile.Path{{Flag: "SWEEP", Name: path}},
		[]outfile.Path{{Flag: "--out", Name: *out + ".png", MakeDirs: true}, {Flag: "--out", Name: *out + ".svg", MakeDirs: true}})
	if err != nil {
		return err
	}
	defer release()
	pts, err := readGrowth(path)
	if err != nil {
		return err
	}
	if err := writeGrowth(*out, pts); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s.png and .svg\n", *out)
	return nil
}

// readGrowth reads a sweep file: one run per line, blank lines and # comments
// skipped; every axis needs two or more values, ascending.
func readGrowth(path string) ([]growthPoint, error) {
	f, err := outfile.OpenRegular(path)
	if err != nil {
		return nil, cli.Usagef("growth: %s: %v", path, unwrapPath(err))
	}
	defer f.Close()
	var pts []growthPoint
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Fields(text)
		if len(fields) != 4 {
			return nil, cli.Usagef("%s:%d: %d fields, expected AXIS VALUE EPOCH_SECONDS PEAK_MIB", path, n, len(fields))
		}
		p := growthPoint{axis: fields[0], text: fields[1]}
		if _, ok := growthAxes[p.axis]; !ok {
			return nil, cli.Usagef("%s:%d: axis %q, expected nodes, width or ranks", path, n, p.axis)
		}
		for i, dst := range []*float64{&p.value, &p.secs, &p.peakMiB} {
			v, err := strconv.ParseFloat(fields[i+1], 64)
			if err != nil || !(v > 0) || math.IsInf(v, 0) {
				return nil, cli.Usagef("%s:%d: %s %q, expected a positive number", path, n, []string{"VALUE", "EPOCH_SECONDS", "PEAK_MIB"}[i], fields[i+1])
			}
			*dst = v
		}
		if k := len(pts) - 1; k >= 0 && pts[k].axis == p.axis && p.value <= pts[k].value {
			return nil, cli.Usagef("%s:%d: %s %s after %s, expected ascending values", path, n, p.axis, fields[1], pts[k].text)
		}
		pts = append(pts, p)
	}
	if err := sc.Err(); err != nil {
		return nil, cli.Usagef("growth: %s: %v", path, err)
	}
	counts := map[string]int{}
	for _, p := range pts {
		counts[p.axis]++
	}
	for axis, c := range counts {
		if c < 2 {
			return nil, cli.Usagef("%s: axis %s has %d run, expected two or more", path, axis, c)
		}
	}
	if len(counts) == 0 {
		return nil, cli.Usagef("%s: no runs", path)
	}
	return pts, nil
}

// growthAxes orders the axes and names them in the legend.
var growthAxes = map[string]int{"nodes": 0, "width": 1, "ranks": 2}

// writeGrowth draws, on log-log axes, each axis's epoch time and peak
// memory relative to its first run against the factor its value grew by,
// with the line of linear growth: a curve above it grows faster than the
// work, one below it slower.
func writeGrowth(base string, pts []growthPoint) error {
	p := newFigure("Cost against size (relative to the smallest run)", "growth factor of nodes, width or ranks (log)", "growth factor of epoch time or peak memory (log)")
	p.X.Tick.Marker = logTicks{format: func(v float64) string { return strconv.FormatFloat(v, 'g', 3, 64) }}
	p.Y.Tick.Marker = logTicks{format: func(v float64) string { return strconv.FormatFloat(v, 'g', 3, 64) }}
	maxFactor := 1.0
	for _, axis := range []string{"nodes", "width", "ranks"} {
		var first *growthPoint
		var secs, mem plotter.XYs
		for i := range pts {
			q := &pts[i]
			if q.axis != axis {
				continue
			}
			if first == nil {
				first = q
			}
			x := math.Log10(q.value / first.value)
			maxFactor = max(maxFactor, q.value/first.value)
			secs = append(secs, plotter.XY{X: x, Y: math.Log10(q.secs / first.secs)})
			mem = append(mem, plotter.XY{X: x, Y: math.Log10(q.peakMiB / first.peakMiB)})
		}
		if first == nil {
			continue
		}
		c := growthAxes[axis]
		if err := addCurve(p, axis+": epoch time", secs, c, 0, false); err != nil {
			return err
		}
		if err := addCurve(p, axis+": peak memory", mem, c, 1, false); err != nil {
			return err
		}
	}
	linear := plotter.XYs{{X: 0, Y: 0}, {X: math.Log10(maxFactor), Y: math.Log10(maxFactor)}}
	if err := addCurve(p, "linear", linear, 5, 2, false); err != nil {
		return err
	}
	return savePlot(p, base)
}
