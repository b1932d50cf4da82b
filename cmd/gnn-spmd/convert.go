package main

import (
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/data/datafile"
	"github.com/gnn-spmd/gnn-spmd/data/ogb"
)

func runConvert(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("convert", "convert --data DIR --out FILE.h5 [--add-inverse] [--self-loops]", stderr)
	dir := fs.String("data", "", "OGB-layout dataset directory")
	out := fs.String("out", "", "output dataset file (.h5)")
	var build data.BuildOptions
	buildFlags(fs.FlagSet, &build)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *out == "" {
		return usagef("convert: --data and --out are required")
	}
	start := time.Now()
	ds, err := ogb.Load(*dir, ogb.Options{Build: build})
	if err != nil {
		return err
	}
	if err := datafile.Write(*out, ds); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %d nodes, %d edges, %d features, %d classes, splits %v (%.2fs)\n",
		*out, ds.Graph.N, ds.Graph.NumEdges(), ds.NumFeatures, ds.NumClasses, ds.SplitNames(), time.Since(start).Seconds())
	return nil
}

// buildFlags registers the edge-list options shared by convert, partition
// and train.
func buildFlags(fs *flag.FlagSet, b *data.BuildOptions) {
	fs.BoolVar(&b.AddInverse, "add-inverse", false, "OGB input: also add the reverse of every edge (ogbn-arxiv is directed)")
	fs.BoolVar(&b.AddSelfLoops, "self-loops", false, "OGB input: add a self-loop to every node that lacks one")
}
