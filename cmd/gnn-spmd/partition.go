package main

import (
	"fmt"
	"io"
	"time"

	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/data/datafile"
	"github.com/gnn-spmd/gnn-spmd/data/ogb"
	"github.com/gnn-spmd/gnn-spmd/data/partition"
	"github.com/gnn-spmd/gnn-spmd/gnn/job"
)

func runPartition(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("partition", "partition --data PATH --parts Q --method metis|random --out DIR [--split NAME] [--seed N]", stderr)
	path := fs.String("data", "", "dataset: an OGB-layout directory or a .h5 file")
	q := fs.Int("parts", 0, "number of parts (the world size of the jobs that will train on them)")
	method := fs.String("method", partition.MethodMETIS, "metis (balanced on nodes and training nodes) or random")
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
		return usagef("partition: --data and --out are required")
	case *q < 1:
		return usagef("partition: --parts: got %d, expected at least 1", *q)
	case *method != partition.MethodMETIS && *method != partition.MethodRandom:
		return usagef("partition: --method: got %q, expected metis or random", *method)
	}
	start := time.Now()
	ds, err := datafile.Load(*path, ogb.Options{Build: build})
	if err != nil {
		return err
	}
	if *normalize {
		ds.NormalizeFeatureRows()
	}
	split, err := job.PickSplit(ds, *splitName)
	if err != nil {
		return err
	}
	loaded := time.Now()
	parts, err := partition.Partition(ds, split, *q, *method, *seed)
	if err != nil {
		return err
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
