package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/gnn-spmd/gnn-spmd/data"
)

func runInspect(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("inspect", "inspect [--json] PATH   (a partition directory or a .h5 dataset)", stderr)
	asJSON := fs.Bool("json", false, "print JSON instead of text")
	if err := fs.parseFlagsOnly(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("inspect: expected one PATH (a partition directory or a .h5 dataset), got %d arguments", fs.NArg())
	}
	path := fs.Arg(0)
	st, err := os.Stat(path)
	if err != nil {
		return &data.InputError{File: path, Msg: "cannot open: expected a partition directory or a .h5 dataset"}
	}
	if st.IsDir() {
		meta, err := data.ReadPartitionMeta(path)
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
	ds, err := data.Load(path, data.OGBOptions{})
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
func printPeerMatrix(w io.Writer, st *data.PartitionStats) {
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
