package main

import (
	"fmt"
	"io"
	"time"

	"github.com/gnn-spmd/gnn-spmd/data/datafile"
	"github.com/gnn-spmd/gnn-spmd/data/gen"
)

func runGen(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("gen", "gen --out FILE.h5 [--nodes N] [--classes C] [--degree D] [--homophily H] [--features F] [--snr S] [--communities K --locality L] [--seed N]", stderr)
	out := fs.String("out", "", "output dataset file (.h5)")
	nodes := fs.Int("nodes", 100000, "number of nodes")
	classes := fs.Int("classes", 10, "number of classes")
	degree := fs.Float64("degree", 20, "average in-degree (directed edges per node, both directions counted)")
	homophily := fs.Float64("homophily", 0.7, "fraction of edges joining nodes of the same class")
	features := fs.Int("features", 128, "feature dimension")
	snr := fs.Float64("snr", 1, "feature signal-to-noise: class-mean separation relative to unit noise")
	train := fs.Float64("train", 0.6, "fraction of nodes in the training set of split \"random\"")
	valid := fs.Float64("valid", 0.2, "fraction of nodes in the validation set (the rest is test)")
	communities := fs.Int("communities", 0, "cut the node ids into K contiguous communities (0 = none)")
	locality := fs.Float64("locality", 0, "fraction of each node's edges drawn inside its community (needs --communities)")
	seed := fs.Uint64("seed", 0, "random seed (same seed, same graph)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return usagef("gen: --out is required")
	}
	start := time.Now()
	ds, err := gen.Generate(gen.Options{Nodes: *nodes, Classes: *classes, AvgDegree: *degree,
		Homophily: *homophily, Features: *features, SNR: *snr, TrainFrac: *train, ValidFrac: *valid,
		Communities: *communities, Locality: *locality, Seed: *seed})
	if err != nil {
		return usagef("gen: %v", err)
	}
	genSec := time.Since(start).Seconds()
	if err := datafile.Write(*out, ds); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %d nodes, %d edges, %d features, %d classes (generated in %.2fs, total %.2fs)\n",
		*out, ds.Graph.N, ds.Graph.NumEdges(), ds.NumFeatures, ds.NumClasses, genSec, time.Since(start).Seconds())
	return nil
}
