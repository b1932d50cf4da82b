package main

// The commands that prepare data: gen, convert and partition.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/gnn-spmd/gnn-spmd/cmd/internal/cli"
	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/data/datafile"
	"github.com/gnn-spmd/gnn-spmd/data/gen"
	"github.com/gnn-spmd/gnn-spmd/data/ogb"
	"github.com/gnn-spmd/gnn-spmd/data/outfile"
	"github.com/gnn-spmd/gnn-spmd/data/partition"
	"github.com/gnn-spmd/gnn-spmd/gnn/job"
	"github.com/gnn-spmd/gnn-spmd/internal/oneline"
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
		return cli.Usagef("gen: --out is required")
	}
	if err := outfile.Probe(outfile.Path{Flag: "--out", Name: *out}); err != nil {
		return err
	}
	opt := gen.Options{Nodes: *nodes, Classes: *classes, AvgDegree: *degree,
		Homophily: *homophily, Features: *features, SNR: *snr, TrainFrac: *train, ValidFrac: *valid,
		Communities: *communities, Locality: *locality, Seed: *seed}
	// Memory and disk first: a graph beyond the machine is refused before
	// it is drawn, not killed while drawing it.
	mem, file, err := opt.Footprint()
	if err != nil {
		return cli.Usagef("gen: %v", err)
	}
	if avail, from := job.AvailableMemory(); avail > 0 && mem > avail {
		return cli.Usagef("gen: %d nodes, degree %g, %d features need an estimated %s of memory but %s is available (%s): generate a smaller graph",
			*nodes, *degree, *features, humanBytes(int64(mem)), humanBytes(int64(avail)), from)
	}
	dir := filepath.Dir(*out)
	if free, ok := outfile.FreeBytes(dir); ok && file > float64(free) {
		return cli.Usagef("gen: --out %s: the dataset needs an estimated %s but %s has %s free", *out, humanBytes(int64(file)), dir, humanBytes(free))
	}
	start := time.Now()
	ds, err := gen.Generate(opt)
	if err != nil {
		return cli.Usagef("gen: %v", err)
	}
	genSec := time.Since(start).Seconds()
	if err := datafile.Write(*out, ds); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %d nodes, %d edges, %d features, %d classes (generated in %.2fs, total %.2fs)\n",
		*out, ds.Graph.N, ds.Graph.NumEdges(), ds.NumFeatures, ds.NumClasses, genSec, time.Since(start).Seconds())
	return nil
}

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
		return cli.Usagef("convert: --data and --out are required")
	}
	release, err := outfile.Claim([]outfile.Path{{Flag: "--data", Name: *dir}}, []outfile.Path{{Flag: "--out", Name: *out}})
	if err != nil {
		return err
	}
	defer release()
	start := time.Now()
	// The feature rows stream from the text to the file: memory is the CSR
	// and the labels and splits, not the features.
	ds, err := datafile.Convert(*dir, *out, ogb.Options{Build: build})
	if err != nil {
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

func runPartition(args []string, stdout, stderr io.Writer) (err error) {
	fs := newFlags("partition", "partition --data PATH --parts Q --method metis|random|ptscotch --out DIR [--split NAME] [--seed N]   (ptscotch, and random by slices: under mpirun -np Q)", stderr)
	path := fs.String("data", "", "dataset: an OGB-layout directory or a .h5 file (a .h5 file under mpirun)")
	q := fs.Int("parts", 0, "number of parts (the world size of the jobs that will train on them; under mpirun, the number of processes)")
	method := fs.String("method", partition.MethodMETIS, "metis (one process, balanced on nodes and training nodes), random, or ptscotch (PT-Scotch, under mpirun: every process reads only its slice of the nodes)")
	timeout := fs.Duration("comm-timeout", 5*time.Minute, "under mpirun: abort the job when a collective waits longer than this for its peers (0 = never)")
	out := fs.String("out", "", "output directory: part-<p>.h5 for every part and meta.h5")
	splitName := fs.String("split", "", "split whose training nodes METIS balances and the parts carry (default: the first)")
	seed := fs.Uint64("seed", 0, "partitioner seed")
	normalize := fs.Bool("normalize-features", false, "scale every feature row to unit L1 norm before writing the parts")
	var build data.BuildOptions
	buildFlags(fs.FlagSet, &build)
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case *path == "" || *out == "":
		return cli.Usagef("partition: --data and --out are required")
	case *q < 1:
		return cli.Usagef("partition: --parts: got %d, expected at least 1", *q)
	case *method != partition.MethodMETIS && *method != partition.MethodRandom && *method != partition.MethodPTScotch:
		return cli.Usagef("partition: --method: got %q, expected metis, random or ptscotch", *method)
	case *timeout < 0:
		return cli.Usagef("partition: --comm-timeout: got %v, expected >= 0 (0 = never)", *timeout)
	}
	if job.UnderMPI() {
		return runPartitionMPI(distPartition{path: *path, out: *out, parts: *q, method: *method, split: *splitName,
			seed: *seed, normalize: *normalize, build: build, timeout: *timeout}, stdout, stderr)
	}
	if *method == partition.MethodPTScotch {
		return cli.Usagef("partition: --method ptscotch runs under mpirun, one process per part: mpirun -np %d gnn-spmd partition ...", *q)
	}
	if st, serr := os.Stat(*path); (build.AddInverse || build.AddSelfLoops) && (serr != nil || !st.IsDir()) {
		return cli.Usagef("partition: --add-inverse and --self-loops apply to an OGB-layout directory, whose edge list they complete while loading; %s holds its final edges: convert the directory again with the flag", *path)
	}
	defer outfile.RemoveTempsOnSignal()()
	release, err := claimPartition(*path, *out, *q)
	if err != nil {
		return err
	}
	defer func() { release(err == nil) }()
	start := time.Now()
	ds, err := datafile.Load(*path, ogb.Options{Build: build})
	if err != nil {
		return err
	}
	if *normalize {
		ds.NormalizeFeatureRows()
	}
	split, err := job.PickSplit(ds, "partition", *path, *splitName)
	if err != nil {
		return err
	}
	loaded := time.Now()
	parts, err := partition.Partition(ds, split, *q, *method, *seed)
	if err != nil {
		return err
	}
	if w := partition.EmptyPartsText(parts, *q, *method); w != "" {
		fmt.Fprintf(stderr, "gnn-spmd: warning: partition: %s\n", oneline.String(w))
	}
	partitioned := time.Now()
	if err := partition.WritePartition(*out, ds, split, *method, *seed, parts, *q); err != nil {
		return err
	}
	meta, err := partition.ReadPartitionMeta(*out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %d parts of %s (%s), load %.2fs, partition %.2fs, write %.2fs\n", *out, *q, ds.Name, *method,
		loaded.Sub(start).Seconds(), partitioned.Sub(loaded).Seconds(), time.Since(partitioned).Seconds())
	printPartitionStats(stdout, meta.Stats)
	return nil
}

// printPartitionStats prints per-part sizes and halo traffic, then totals.
func printPartitionStats(w io.Writer, st *partition.PartitionStats) {
	fmt.Fprintf(w, "%5s %10s %12s %8s %12s %12s\n", "part", "nodes", "edges", "train", "halo in", "rows out")
	for p, ps := range st.Parts {
		out := 0
		for _, r := range ps.SendRows {
			out += r
		}
		fmt.Fprintf(w, "%5d %10d %12d %8d %12d %12d\n", p, ps.Nodes, ps.Edges, ps.TrainNodes, ps.HaloRows(), out)
	}
	fmt.Fprintf(w, "edge cut %d, halo rows per layer and direction %d, node balance %.3f, train balance %.3f\n",
		st.EdgeCut, st.CommRows, st.NodeBalance, st.TrainBalance)
}

// claimPartition checks and locks the output directory of a q-part
// partition of the dataset at path before anything is read: the files the
// partition writes (and the part files of an earlier one that it removes)
// must not be the dataset, and the directory must take them. It creates
// the directory; release(false), after a failure, removes it again if it
// made it and it is still empty. Temporary files of a killed partition
// into dir are removed.
func claimPartition(path, dir string, q int) (release func(ok bool), err error) {
	if err := outfile.Probe(outfile.Path{Flag: "--out", Name: dir, Dir: true}); err != nil {
		return nil, err
	}
	_, statErr := os.Stat(dir)
	created := errors.Is(statErr, os.ErrNotExist)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	undo := func() {
		if created {
			os.Remove(dir) // only if still empty
		}
	}
	// The part files there now (an earlier partition's, which this one
	// replaces or removes) are what could be an input; a name not there
	// yet cannot be one, so the q new names need no check of their own
	// (which made a refusal of --parts 5000000 take seconds).
	outs := []outfile.Path{{Flag: "--out", Name: partition.MetaPath(dir), Lock: true}}
	old, _ := filepath.Glob(filepath.Join(dir, "part-*.h5"))
	for _, name := range old {
		outs = append(outs, outfile.Path{Flag: "--out", Name: name})
	}
	unlock, err := outfile.Claim([]outfile.Path{{Flag: "--data", Name: path}}, outs)
	if err != nil {
		undo()
		return nil, err
	}
	outfile.RemoveStaleIn(dir)
	return func(ok bool) {
		unlock()
		if !ok {
			undo()
		}
	}, nil
}
