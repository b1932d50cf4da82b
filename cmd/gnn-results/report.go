package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/gnn-spmd/gnn-spmd/cmd/internal/cli"
	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/data/outfile"
	"github.com/gnn-spmd/gnn-spmd/gnn/results"
)

func runReport(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("report", "report --dir RESULTS --out FILE.md [--figures DIR]", stderr)
	dir := fs.String("dir", "", "results directory, laid out as "+results.Layout+", with an optional config.txt")
	out := fs.String("out", "", "Markdown file to write, e.g. docs/results/RESULTS.md")
	figDir := fs.String("figures", "", "directory for the figures (default: figures beside --out)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *out == "" {
		return cli.Usagef("report: --dir and --out are required")
	}
	if *figDir == "" {
		*figDir = filepath.Join(filepath.Dir(*out), "figures")
	}
	release, err := outfile.Claim([]outfile.Path{{Flag: "--dir", Name: *dir}},
		[]outfile.Path{{Flag: "--out", Name: *out, MakeDirs: true}, {Flag: "--figures", Name: *figDir, Dir: true, MakeDirs: true}})
	if err != nil {
		return err
	}
	defer release()
	res, err := results.ReadDir(*dir)
	if err != nil {
		return err
	}
	config, err := readConfig(*dir)
	if err != nil {
		return err
	}
	figs, err := writeFigures(res, *figDir)
	if err != nil {
		return err
	}
	var md bytes.Buffer
	if err := results.Render(&md, res, *dir, config, figs, filepath.Dir(*out)); err != nil {
		return err
	}
	if err := writeAtomic(*out, func(w io.Writer) error { _, err := w.Write(md.Bytes()); return err }); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %d groups, %d figures in %s, %d runs listed as missing\n",
		*out, len(res.Groups), len(figs), *figDir, len(res.Missing))
	return nil
}

// maxConfig caps config.txt: a few hundred command lines.
const maxConfig = 16 << 20

// unwrapPath is a file error without its path (the message names it).
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// readConfig returns RESULTS/config.txt ("" when there is none), which the
// experiment script writes with its exact commands.
func readConfig(dir string) (string, error) {
	path := filepath.Join(dir, "config.txt")
	f, err := outfile.OpenRegular(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", &data.InputError{File: path, Msg: unwrapPath(err).Error()}
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxConfig+1))
	if err == nil && len(b) > maxConfig {
		return "", &data.InputError{File: path, Msg: fmt.Sprintf("longer than %d bytes: expected the experiment script's commands", maxConfig)}
	}
	return string(b), err
}

// writeFigures draws, for each group of a core grid and codec, accuracy against bytes
// of full, nocomm, every fixed rate, varco and adaptive of the codec (those
// present), and the quant methods' rates per epoch.
func writeFigures(res *results.Results, dir string) ([]results.Figure, error) {
	var figs []results.Figure
	for _, g := range res.Groups {
		if !results.CoreGrid(g.Grid) {
			continue
		}
		for _, codec := range results.Codecs {
			ss := results.FigureSeries(g, codec)
			if ss == nil {
				continue
			}
			base := filepath.Join(dir, g.FileStem()+"-"+codec)
			heading := fmt.Sprintf("%s, %s: ", g.GroupKey, codec)
			f := results.Figure{Group: g.GroupKey, Caption: heading + "test accuracy at best validation within a byte budget", PNG: base + "-acc-bytes.png"}
			if err := writeAccBytes(base, heading, ss); errors.Is(err, errNoHaloBytes) {
				f.PNG, f.Note = "", err.Error()
			} else if err != nil {
				return nil, err
			}
			figs = append(figs, f)
			if codec == "quant" {
				if err := writeRateEpoch(base, heading, ss); err != nil {
					return nil, err
				}
				figs = append(figs, results.Figure{Group: g.GroupKey, Caption: heading + "compression rate per epoch", PNG: base + "-rate-epoch.png"})
			}
		}
	}
	return figs, nil
}

// runCompare prints, for metrics files of runs (an unfinished one, without
// its summary line, is marked so in the seconds column), the accuracy each
// reached, the halo bytes it sent, its median epoch and its time to
// accuracy, the first series being the reference (the quickstart compares
// VARCO against full communication this way).
func runCompare(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("compare", "compare SERIES...   (SERIES: NAME=RUN.jsonl[,RUN.jsonl...] or RUN.jsonl; the first is the reference)", stderr)
	margin := fs.Float64("margin", 0.5, "time to accuracy: the target is the reference's mean test accuracy at best validation minus this many points")
	if err := fs.ParseFlagsOnly(args); err != nil {
		return err
	}
	if !(*margin >= 0 && *margin <= 100) {
		return cli.Usagef("compare: --margin: got %v, expected points in [0, 100]", *margin)
	}
	if fs.NArg() == 0 {
		return cli.Usagef("compare: expected at least one SERIES (NAME=RUN.jsonl[,RUN.jsonl...] or RUN.jsonl)")
	}
	ss, err := readSeries("compare", fs.Args())
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	// Time to accuracy: training seconds until the test accuracy at the
	// best validation epoch so far reaches the reference's final mean
	// minus the margin.
	var refAcc []float64
	for _, r := range ss[0].Runs {
		refAcc = append(refAcc, r.TestAtBestVal())
	}
	target, _ := results.MeanStd(refAcc)
	target -= *margin / 100
	fmt.Fprintf(tw, "run\truns\ttest acc at best val\thalo bytes sent\tof %s\tseconds\ts/epoch\tof %s\tseconds to %.2f%%\t\n", ss[0].Name, ss[0].Name, 100*target)
	var ref, refEpoch float64
	for i, s := range ss {
		var acc, bytes, secs, epochs, reach []float64
		unfinished := 0
		for _, r := range s.Runs {
			acc = append(acc, r.TestAtBestVal())
			bytes = append(bytes, float64(r.TotalBytes()))
			if r.Complete {
				secs = append(secs, r.Seconds)
			} else {
				unfinished++ // no summary line: still running, or killed
			}
			epochs = append(epochs, r.MedianEpoch())
			if t, ok := r.TimeTo(target); ok {
				reach = append(reach, t)
			}
		}
		a, sd := results.MeanStd(acc)
		b, _ := results.MeanStd(bytes)
		t, _ := results.MeanStd(secs)
		// The median over runs of each run's median epoch: runs that take
		// turns with the reference's share its quiet and busy spells.
		epoch := results.Median(epochs)
		if i == 0 {
			ref, refEpoch = b, epoch
		}
		reachText := "not reached"
		if len(reach) == len(s.Runs) {
			m, _ := results.MeanStd(reach)
			reachText = fmt.Sprintf("%.1f", m)
		} else if len(reach) > 0 {
			m, _ := results.MeanStd(reach)
			reachText = fmt.Sprintf("%.1f (%d of %d runs)", m, len(reach), len(s.Runs))
		}
		share := "-"
		if ref > 0 {
			share = fmt.Sprintf("%.1f%%", 100*b/ref)
		}
		accText := fmt.Sprintf("%.2f%%", 100*a)
		if len(acc) > 1 {
			accText += fmt.Sprintf(" ± %.2f", 100*sd)
		}
		epochShare := "-"
		if refEpoch > 0 {
			epochShare = fmt.Sprintf("%.2fx", epoch/refEpoch)
		}
		secsText := fmt.Sprintf("%.1f", t)
		switch {
		case unfinished == len(s.Runs) && unfinished == 1:
			secsText = "unfinished"
		case unfinished == len(s.Runs):
			secsText = "unfinished (all)"
		case unfinished > 0:
			secsText += fmt.Sprintf(" (%d of %d runs unfinished)", unfinished, len(s.Runs))
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%.4f\t%s\t%s\t\n", s.Name, len(s.Runs), accText, results.DecimalBytes(b), share, secsText, epoch, epochShare, reachText)
	}
	return tw.Flush()
}
