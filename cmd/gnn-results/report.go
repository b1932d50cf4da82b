package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/gnn-spmd/gnn-spmd/gnn/results"
)

func runReport(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("report", "report --dir RESULTS --out FILE.md [--figures DIR] [--notes FILE.md]", stderr)
	dir := fs.String("dir", "", "results directory, laid out as "+results.Layout+", with an optional config.txt")
	out := fs.String("out", "", "Markdown file to write, e.g. docs/RESULTS.md")
	figDir := fs.String("figures", "", "directory for the figures (default: figures beside --out)")
	notesPath := fs.String("notes", "", "hand-written Markdown (the reading of the tables) put after the title")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *out == "" {
		return usagef("report: --dir and --out are required")
	}
	if *figDir == "" {
		*figDir = filepath.Join(filepath.Dir(*out), "figures")
	}
	res, err := results.ReadDir(*dir)
	if err != nil {
		return err
	}
	config, err := readConfig(*dir)
	if err != nil {
		return err
	}
	var notes []byte
	if *notesPath != "" {
		if notes, err = os.ReadFile(*notesPath); err != nil {
			return fmt.Errorf("--notes: %w", err)
		}
	}
	figs, err := writeFigures(res, *figDir)
	if err != nil {
		return err
	}
	var md bytes.Buffer
	if err := results.Render(&md, res, *dir, config, string(notes), figs, filepath.Dir(*out)); err != nil {
		return err
	}
	if err := writeAtomic(*out, func(w io.Writer) error { _, err := w.Write(md.Bytes()); return err }); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %d groups, %d figures in %s, %d runs listed as missing\n",
		*out, len(res.Groups), len(figs), *figDir, len(res.Missing))
	return nil
}

// readConfig returns RESULTS/config.txt ("" when there is none), which the
// experiment script writes with its exact commands.
func readConfig(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "config.txt"))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	return string(b), err
}

// writeFigures draws, for each core group and codec, accuracy against bytes
// of full, nocomm, every fixed rate, varco and adaptive of the codec (those
// present), and the quant methods' rates per epoch.
func writeFigures(res *results.Results, dir string) ([]results.Figure, error) {
	var figs []results.Figure
	for _, g := range res.Groups {
		if g.Grid != "core" {
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
