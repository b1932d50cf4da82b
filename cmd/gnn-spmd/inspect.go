package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/gnn-spmd/gnn-spmd/cmd/internal/cli"
	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/data/datafile"
	"github.com/gnn-spmd/gnn-spmd/data/h5"
	"github.com/gnn-spmd/gnn-spmd/data/ogb"
	"github.com/gnn-spmd/gnn-spmd/data/outfile"
	"github.com/gnn-spmd/gnn-spmd/data/partition"
	"github.com/gnn-spmd/gnn-spmd/data/predfile"
	"github.com/gnn-spmd/gnn-spmd/gnn/ckpt"
	"github.com/gnn-spmd/gnn-spmd/gnn/metrics"
)

func runInspect(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("inspect", "inspect [--json] [--verify] PATH   (a partition directory, a .h5 dataset, a checkpoint or a predictions file)", stderr)
	asJSON := fs.Bool("json", false, "print JSON instead of text")
	verify := fs.Bool("verify", false, "check a checkpoint or a predictions file whole: print ok, or the first problem (exit 2)")
	if err := fs.ParseFlagsOnly(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return cli.Usagef("inspect: expected one PATH (a partition directory, a .h5 dataset or a checkpoint), got %d arguments", fs.NArg())
	}
	path := fs.Arg(0)
	st, err := os.Stat(path)
	if err != nil {
		return &data.InputError{File: path, Msg: "cannot open (" + osReason(err) + "): expected a partition directory, a .h5 dataset or a checkpoint"}
	}
	if !st.IsDir() && h5.Format(path) == predfile.Format {
		return inspectPredictions(path, *asJSON, *verify, stdout)
	}
	if *verify || (!st.IsDir() && h5.Format(path) == ckpt.Format) {
		return inspectCheckpoint(path, *asJSON, *verify, stdout)
	}
	if st.IsDir() && !isOGBDir(path) {
		meta, err := partition.ReadPartitionMeta(path)
		if err != nil {
			return err
		}
		if *asJSON {
			m := *meta
			m.Parts = nil // one entry per node: not a summary
			return printJSON(stdout, m)
		}
		fmt.Fprintf(stdout, "partition %s: %d parts of dataset %s (fingerprint %016x), method %s, seed %d, split %q\n",
			path, meta.NumParts, meta.DatasetName, meta.Fingerprint, meta.Method, meta.Seed, meta.Split)
		fmt.Fprintf(stdout, "graph: %d nodes, %d edges, %d features, %d classes; train/valid/test %d/%d/%d\n",
			meta.NumNodes, meta.NumEdges, meta.NumFeatures, meta.NumClasses, meta.GlobalTrain, meta.GlobalValid, meta.GlobalTest)
		printPartitionStats(stdout, meta.Stats)
		printPeerMatrix(stdout, meta.Stats)
		return nil
	}
	ds, err := datafile.Load(path, ogb.Options{})
	if err != nil {
		return err
	}
	summary := datasetSummary(ds)
	if *asJSON {
		return printJSON(stdout, summary)
	}
	fmt.Fprintf(stdout, "dataset %s (%s): %d nodes, %d edges, %d features, %d classes\n",
		summary.Name, path, summary.Nodes, summary.Edges, summary.Features, summary.Classes)
	for _, s := range summary.Splits {
		fmt.Fprintf(stdout, "split %s: train %d, valid %d, test %d\n", s.Name, s.Train, s.Valid, s.Test)
	}
	return nil
}

// isOGBDir reports whether dir is an OGB-layout dataset directory (it has
// raw/ and no partition metadata): inspect summarises it as a dataset.
func isOGBDir(dir string) bool {
	if _, err := os.Stat(partition.MetaPath(dir)); err == nil {
		return false
	}
	st, err := os.Stat(filepath.Join(dir, "raw"))
	return err == nil && st.IsDir()
}

// osReason is a file error without its path: "no such file or directory",
// "permission denied", "file name too long".
func osReason(err error) string {
	var pe *iofs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

type splitSummary struct {
	Name               string
	Train, Valid, Test int
}

type dataSummary struct {
	Name              string
	Nodes             int
	Edges             int64
	Features, Classes int
	Splits            []splitSummary
	Fingerprint       string
}

func datasetSummary(ds *data.Dataset) dataSummary {
	s := dataSummary{Name: ds.Name, Nodes: ds.Graph.N, Edges: ds.Graph.NumEdges(), Features: ds.NumFeatures,
		Classes: ds.NumClasses, Fingerprint: fmt.Sprintf("%016x", ds.Fingerprint())}
	for _, n := range ds.SplitNames() {
		sp := ds.Splits[n]
		s.Splits = append(s.Splits, splitSummary{n, len(sp.Train), len(sp.Valid), len(sp.Test)})
	}
	return s
}

// printPeerMatrix prints the halo rows each part receives from each other.
func printPeerMatrix(w io.Writer, st *partition.PartitionStats) {
	if st.NumParts < 2 {
		return
	}
	fmt.Fprintf(w, "halo rows received (row) from part (column):\n%6s", "")
	for o := 0; o < st.NumParts; o++ {
		fmt.Fprintf(w, " %9d", o)
	}
	fmt.Fprintln(w)
	for p, ps := range st.Parts {
		fmt.Fprintf(w, "%6d", p)
		for _, r := range ps.RecvRows {
			fmt.Fprintf(w, " %9d", r)
		}
		fmt.Fprintln(w)
	}
}

func printJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

// inspectCheckpoint summarises a checkpoint, or with verify checks it.
func inspectCheckpoint(path string, asJSON, verify bool, stdout io.Writer) error {
	c, err := ckpt.Read(path)
	if err != nil {
		return err
	}
	if verify {
		if err := c.Verify(path); err != nil {
			return err
		}
		_, err := fmt.Fprintln(stdout, "ok")
		return err
	}
	if asJSON {
		return printJSON(stdout, checkpointSummary(c))
	}
	cfg := &c.Config
	fmt.Fprintf(stdout, "checkpoint %s: epoch %d of %d, adam step %d; dataset %s (fingerprint %016x), %d ranks, partition %s (id %016x)\n",
		path, c.Epoch, cfg.Run.Epochs, c.Step, c.DatasetName, cfg.Data.Fingerprint, cfg.Data.Ranks, cfg.Data.PartitionMethod, cfg.Data.PartitionID)
	fmt.Fprintf(stdout, "config: %s\n", cfg.Text())
	for _, p := range c.Params {
		fmt.Fprintf(stdout, "param %-20s float32 [%d, %d]\n", p.Name, p.Rows, p.Cols)
	}
	for _, r := range residualSummaries(c) {
		fmt.Fprintf(stdout, "residual %-17s float32 [%d, %d] (every rank's rows sent)\n", r.Name, r.Shape[0], r.Shape[1])
	}
	for _, k := range c.Kept {
		fmt.Fprintf(stdout, "kept     best %s epoch %d: every parameter under /best/%s/\n", k.Criterion, k.Epoch, k.Criterion)
	}
	if x := c.Exact; x != nil {
		fmt.Fprintf(stdout, "recorded at full precision: best parameters val %.4f, test %.4f; final parameters val %.4f, test %.4f\n",
			x.BestVal, x.BestTest, x.FinalVal, x.FinalTest)
	}
	if n := len(c.History); n > 0 {
		s := c.History[n-1]
		fmt.Fprintf(stdout, "last epoch %d: loss %.4f, train %s, val %s, test %s, halo bytes %s in all\n",
			s.Epoch, s.Loss, strings.TrimSpace(accText(s.TrainAcc)), strings.TrimSpace(accText(s.ValAcc)), strings.TrimSpace(accText(s.TestAcc)), humanBytes(s.BytesCum))
	}
	return nil
}

type paramSummary struct {
	Name  string `json:"name"`
	DType string `json:"dtype"`
	Shape []int  `json:"shape"`
}

type ckptSummary struct {
	Format      string         `json:"format"`
	Version     int            `json:"version"`
	Epoch       int            `json:"epoch"`
	AdamStep    int            `json:"adam_step"`
	DatasetName string         `json:"dataset_name"`
	Config      map[string]any `json:"config"`
	Params      []paramSummary `json:"params"`
	Residual    []paramSummary `json:"residual,omitempty"`
	// Kept: the best epochs whose parameters the run keeps
	// (/best/<criterion>/...).
	Kept []keptSummary `json:"kept,omitempty"`
	// Recorded: the full-precision accuracies of the best and the final
	// parameters, which a finished run records.
	Recorded *ckpt.Accuracies `json:"recorded,omitempty"`
	Last     *metrics.Epoch   `json:"last_epoch,omitempty"`
}

type keptSummary struct {
	Criterion string `json:"criterion"`
	Epoch     int    `json:"epoch"`
}

// residualSummaries names and sizes the residual state's tables, as
// forward/layerL or backward/layerL.
func residualSummaries(c *ckpt.Checkpoint) []paramSummary {
	var s []paramSummary
	for _, r := range c.Residual {
		name := fmt.Sprintf("%s/layer%d", [2]string{"forward", "backward"}[r.Dir], r.Layer)
		s = append(s, paramSummary{name, "float32", []int{len(r.Data) / r.Cols, r.Cols}})
	}
	return s
}

func checkpointSummary(c *ckpt.Checkpoint) ckptSummary {
	s := ckptSummary{Format: ckpt.Format, Version: ckpt.Version, Epoch: c.Epoch, AdamStep: c.Step,
		DatasetName: c.DatasetName, Config: c.Config.Map()}
	for _, p := range c.Params {
		s.Params = append(s.Params, paramSummary{p.Name, "float32", []int{p.Rows, p.Cols}})
	}
	s.Residual = residualSummaries(c)
	for _, k := range c.Kept {
		s.Kept = append(s.Kept, keptSummary{k.Criterion, k.Epoch})
	}
	s.Recorded = c.Exact
	if n := len(c.History); n > 0 {
		s.Last = &c.History[n-1]
	}
	return s
}

func runExport(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("export", "export --checkpoint FILE.h5 [--format npz] [--params final|best] --out FILE.npz", stderr)
	in := fs.String("checkpoint", "", "checkpoint written by train --checkpoint")
	format := fs.String("format", "npz", "output format: npz (NumPy: one float32 [rows, cols] array per parameter, named after it)")
	which := fs.String("params", "final", "final (the parameters after the checkpoint's last epoch) or best (those of its best validation epoch so far, which a run under --eval confirm keeps)")
	out := fs.String("out", "", "output file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case *in == "" || *out == "":
		return cli.Usagef("export: --checkpoint and --out are required")
	case *format != "npz":
		return cli.Usagef("export: --format: got %q, expected npz", *format)
	case *which != "final" && *which != "best":
		return cli.Usagef("export: --params: got %q, expected final or best", *which)
	}
	release, err := outfile.Claim([]outfile.Path{{Flag: "--checkpoint", Name: *in}}, []outfile.Path{{Flag: "--out", Name: *out}})
	if err != nil {
		return err
	}
	defer release()
	c, err := ckpt.Read(*in)
	if err != nil {
		return err
	}
	if err := c.Verify(*in); err != nil {
		return err
	}
	params, what := c.Params, fmt.Sprintf("after epoch %d", c.Epoch)
	if *which == "best" {
		var epoch int
		if params, epoch, err = c.BestParams(*in); err != nil {
			return err
		}
		what = fmt.Sprintf("of epoch %d, the best validation accuracy", epoch)
	}
	if err := ckpt.WriteNPZ(*out, params); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %d parameters of %s (%s) to %s\n", len(params), *in, what, *out)
	return nil
}

// inspectPredictions summarises a predictions file, or with verify reads
// it whole (shapes, classes, digests).
func inspectPredictions(path string, asJSON, verify bool, stdout io.Writer) error {
	if verify {
		if _, err := predfile.Read(path); err != nil {
			return err
		}
		_, err := fmt.Fprintln(stdout, "ok")
		return err
	}
	m, err := predfile.ReadMeta(path)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(stdout, m)
	}
	fmt.Fprintf(stdout, "predictions %s: %d nodes of dataset %s (fingerprint %016x), %d classes, /scores holds %s\n",
		path, m.Nodes, m.Dataset, m.Fingerprint, m.Classes, m.Scores)
	from := "the run that trained it"
	if m.Checkpoint != "" {
		from = m.Checkpoint
	}
	fmt.Fprintf(stdout, "model %s, %s parameters (epoch %d) from %s; split %s accuracy train %.4f, val %.4f, test %.4f\n",
		m.Model, m.Params, m.ParamsEpoch, from, m.Split, m.TrainAcc, m.ValAcc, m.TestAcc)
	if m.EmbedLayer >= 0 {
		fmt.Fprintf(stdout, "embeddings: the output of layer %d, %d wide (/embeddings)\n", m.EmbedLayer, m.EmbedCols)
	}
	return nil
}
