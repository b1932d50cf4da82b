// Command gnn-spmd trains graph neural networks on full graphs, in one
// process or as one rank of an SPMD job, and prepares and inspects their
// data and checkpoints. The analysis of finished runs is gnn-results.
package main

import (
	"io"

	"github.com/gnn-spmd/gnn-spmd/cmd/internal/cli"
	"github.com/gnn-spmd/gnn-spmd/data/outfile"
)

var commands = []cli.Command{
	{Name: "train", Summary: "train a GNN on a dataset (OGB directory or .h5)", Run: runTrain},
	{Name: "gen", Summary: "generate a synthetic graph dataset (contextual SBM) as .h5", Run: removingTemps(runGen)},
	{Name: "partition", Summary: "partition a dataset into per-rank part files (METIS, random, or PT-Scotch by slices under mpirun)", Run: runPartition},
	{Name: "inspect", Summary: "summarise a partition directory, a .h5 dataset or a checkpoint", Run: runInspect},
	{Name: "predict", Summary: "predict every node with a checkpoint's model, in one process or across ranks (HDF5)", Run: runPredict},
	{Name: "export", Summary: "export a checkpoint's parameters for other tools (NumPy .npz)", Run: removingTemps(runExport)},
	{Name: "convert", Summary: "convert an OGB-layout directory into one .h5 dataset file", Run: removingTemps(runConvert)},
	{Name: "devices", Summary: "the GPUs and the CUDA libraries (cuBLAS, NCCL) this binary finds, and where", Run: runDevices},
}

// removingTemps runs a command that has no use for SIGINT, SIGTERM and
// SIGHUP but to stop, so that they remove the temporary files of its
// writes in progress before the process ends.
func removingTemps(run func(args []string, stdout, stderr io.Writer) error) func(args []string, stdout, stderr io.Writer) error {
	return func(args []string, stdout, stderr io.Writer) error {
		defer outfile.RemoveTempsOnSignal()()
		return run(args, stdout, stderr)
	}
}

func main() { cli.Run("gnn-spmd", commands) }

// run is main for the tests, which also run this test binary as the CLI.
func run(args []string, stdout, stderr io.Writer) int {
	return cli.Main("gnn-spmd", commands, args, stdout, stderr)
}

func newFlags(name, synopsis string, stderr io.Writer) *cli.FlagSet {
	return cli.NewFlags("gnn-spmd", name, synopsis, stderr)
}
