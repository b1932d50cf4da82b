package main

import (
	"flag"
	"io"
	"time"

	"github.com/gnn-spmd/gnn-spmd/gnn"
	"github.com/gnn-spmd/gnn-spmd/gnn/job"
)

// predictFlags registers what both train --predict and predict take;
// params names the flag of the parameter set.
func predictFlags(fs *flag.FlagSet, p *job.PredictSpec, params string) {
	fs.StringVar(&p.Params, params, p.Params, "the parameters to predict with: final (those the run ends with) or best (the best validation epoch's)")
	fs.BoolVar(&p.Probabilities, "probabilities", false, "write the classes' probabilities (softmax) instead of the logits")
	fs.IntVar(&p.Embeddings, "embeddings", p.Embeddings, "also write hidden layer L's output for every node (0 is the first layer; -1: none)")
}

func runPredict(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("predict", "predict --checkpoint FILE.h5 (--data PATH | --parts DIR) --out FILE.h5 [--params final|best] [--probabilities] [--embeddings L] [--ranks Q] ...", stderr)
	s := job.DefaultSpec()
	fs.StringVar(&s.Weights, "checkpoint", "", "the checkpoint whose model and parameters predict")
	fs.StringVar(&s.Data, "data", "", "the dataset the model was trained on: an OGB-layout directory or a .h5 file")
	fs.StringVar(&s.Parts, "parts", "", "instead of --data, a partition directory of it (any number of parts)")
	fs.StringVar(&s.Predict.Out, "out", "", "the predictions file (HDF5): a row for every node, in the dataset's order")
	predictFlags(fs.FlagSet, &s.Predict, "params")
	fs.StringVar(&s.Split, "split", "", "the split whose accuracies are reported (default: the only one, or the first)")
	buildFlags(fs.FlagSet, &s.Build)
	fs.IntVar(&s.Ranks, "ranks", s.Ranks, "ranks as goroutines of this process (under mpirun: one rank per process)")
	fs.StringVar(&s.Partition, "partition", s.Partition, "with --data and several ranks, partition on the fly: random or metis")
	fs.Uint64Var(&s.PartitionSeed, "partition-seed", 0, "seed of the on-the-fly partitioner")
	fs.StringVar(&s.Device, "device", s.Device, "where the kernels run: cpu or cuda")
	fs.IntVar(&s.GPU, "gpu", s.GPU, "with --device cuda: bind this GPU ordinal instead (-1: node-local rank modulo the visible GPUs)")
	fs.IntVar(&s.Threads, "threads", 0, "CPU threads for kernels, shared by the ranks of this process (0: all)")
	// One pass does not repay clustering the rows, as training's epochs do.
	s.Reorder = gnn.OrderNone
	fs.StringVar(&s.Reorder, "reorder", s.Reorder, "order of every rank's rows in memory: none, rcm or metis")
	fs.DurationVar(&s.CommTimeout, "comm-timeout", s.CommTimeout, "end the job when a collective waits longer than this for its peers (0: never)")
	verbose := fs.Bool("verbose", false, "log setup details to stderr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	con := newConsole(stdout, stderr, "lines")
	if job.UnderMPI() {
		qw := newQueuedWriter(stdout)
		defer qw.close(2 * time.Second)
		con.setOut(qw)
	}
	errOut := con.stderr()
	return job.Run(s, job.Env{Observer: &epochPrinter{con: con, quiet: true}, Log: newLogger(errOut, *verbose), Stderr: errOut})
}
