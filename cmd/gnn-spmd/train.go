package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gnn-spmd/gnn-spmd/cmd/internal/cli"
	"github.com/gnn-spmd/gnn-spmd/gnn/job"
	"github.com/gnn-spmd/gnn-spmd/gnn/metrics"
)

// trainFlags is the train command's flag set and what it parses into.
type trainFlags struct {
	fs             *cli.FlagSet
	spec           job.Spec
	compress       compressFlags
	quiet, verbose *bool
	progress       *string
}

func newTrainFlags(stderr io.Writer) *trainFlags {
	tf := &trainFlags{spec: job.DefaultSpec()}
	fs := newFlags("train", "train --data PATH [--model sage|gcn|gat] [--epochs N] [--ranks Q] [--compress none|recommended|authors] [--metrics FILE] [--checkpoint FILE] ...", stderr)
	s := &tf.spec
	r := &s.Run
	// Data.
	fs.StringVar(&s.Data, "data", "", "dataset: an OGB-layout directory or a .h5 file")
	fs.StringVar(&s.Parts, "parts", "", "instead of --data, a directory written by gnn-spmd partition: each rank reads only its own part")
	fs.StringVar(&s.Split, "split", "", "split name (default: the only split, or the first in sorted order)")
	fs.BoolVar(&s.Normalize, "normalize-features", false, "scale every feature row to unit L1 norm (Kipf & Welling's preprocessing)")
	buildFlags(fs.FlagSet, &s.Build)
	// Model.
	fs.StringVar(&r.Model, "model", r.Model, "sage (GraphSAGE, mean aggregator), gcn or gat (graph attention)")
	fs.IntVar(&r.Layers, "layers", r.Layers, "message-passing layers")
	fs.IntVar(&r.Hidden, "hidden", r.Hidden, "hidden width (gat: of every head)")
	fs.Float64Var(&r.Dropout, "dropout", r.Dropout, "dropout probability on every layer's input")
	fs.IntVar(&r.Heads, "heads", r.Heads, "gat: attention heads of every hidden layer, concatenated")
	fs.IntVar(&r.OutHeads, "out-heads", r.OutHeads, "gat: attention heads of the output layer, averaged")
	fs.Float64Var(&r.AttnDropout, "attn-dropout", r.AttnDropout, "gat: dropout probability on the attention coefficients")
	fs.BoolVar(&s.Recompute, "recompute", s.Recompute, "gat: compute the attention coefficients again in the backward pass instead of keeping them (less memory, same bits)")
	// Training.
	fs.IntVar(&r.Epochs, "epochs", r.Epochs, "full-batch training epochs")
	fs.Float64Var(&r.LR, "lr", r.LR, "Adam learning rate")
	fs.Float64Var(&r.WeightDecay, "weight-decay", r.WeightDecay, "L2 weight decay on weights (not biases)")
	fs.Uint64Var(&r.Seed, "seed", r.Seed, "seed of initialisation, dropout and the codecs' draws")
	fs.IntVar(&s.EvalEvery, "eval-every", s.EvalEvery, "where evaluation takes a pass of its own (--eval exact, dropout), run it every N epochs and at the last")
	// Distribution.
	fs.IntVar(&s.Ranks, "ranks", s.Ranks, "ranks as goroutines of this process (under mpirun: one rank per process)")
	fs.StringVar(&s.Partition, "partition", s.Partition, "with --data and several ranks, partition on the fly: random, metis, or ptscotch (under mpirun, every rank reading only its slice of a .h5 file, as random does there)")
	fs.StringVar(&s.Device, "device", s.Device, "where the kernels run: cpu or cuda (the GPU build; one GPU per rank)")
	fs.Uint64Var(&s.PartitionSeed, "partition-seed", 0, "seed of the on-the-fly partitioner")
	fs.BoolVar(&s.NoComm, "no-comm", false, "a baseline without communication: drop the edges between parts")
	fs.StringVar(&s.Comm, "comm", s.Comm, "transport: auto (mpi under mpirun, else goroutine ranks), mpi or local")
	fs.IntVar(&s.GPU, "gpu", s.GPU, "with --device cuda: bind this GPU ordinal instead (-1: node-local rank modulo the visible GPUs)")
	fs.StringVar(&s.GPUTransport, "gpu-transport", s.GPUTransport, "with --device cuda under mpirun, how ranks move halo rows: nccl, mpi (through host memory), or auto (nccl unless two ranks share a GPU); goroutine ranks copy on their shared GPU whatever it says")
	fs.IntVar(&s.Threads, "threads", 0, "CPU threads for kernels, shared by the ranks of this process (0: all)")
	fs.BoolVar(&s.Overlap, "overlap", s.Overlap, "compute what needs no halo row while the exchanges are in flight (bit-identical either way)")
	fs.StringVar(&s.Reorder, "reorder", s.Reorder, "order of every rank's rows in memory: none, rcm or metis (clusters of about 32768 rows; smaller ranks keep their order); metrics equal up to float order")
	fs.DurationVar(&s.CommTimeout, "comm-timeout", s.CommTimeout, "end the job when a collective waits longer than this for its peers (0: never)")
	// Compression.
	tf.compress.register(fs.FlagSet)
	// Outputs.
	fs.StringVar(&s.Metrics, "metrics", "", "write per-epoch metrics and the summary as JSON Lines to this file")
	fs.StringVar(&s.Checkpoint, "checkpoint", "", "write an HDF5 checkpoint to this file every --checkpoint-every epochs and after the last")
	fs.StringVar(&s.Resume, "resume", "", "continue the run saved in this checkpoint (every other flag as in that run)")
	tf.quiet = fs.Bool("quiet", false, "print the header and the summary only")
	fs.IntVar(&s.CheckpointEvery, "checkpoint-every", s.CheckpointEvery, "epochs between checkpoints")
	fs.IntVar(&s.Keep, "keep", s.Keep, "checkpoints kept: FILE (newest), then FILE.1 ... FILE.<K-1>")
	fs.StringVar(&s.Predict.Out, "predict", "", "after training, write every node's predictions to this HDF5 file (docs/CLI.md, predict)")
	predictFlags(fs.FlagSet, &s.Predict, "predict-params")
	fs.StringVar(&s.CPUProfile, "cpuprofile", "", "write a Go CPU profile of the training loop to this file (under mpirun: rank 0's)")
	tf.progress = fs.String("progress", "auto", "per-epoch output: bar, lines, or auto (bar on a terminal)")
	tf.verbose = fs.Bool("verbose", false, "log setup and checkpoint details to stderr")

	fs.Section("Data", false, "data", "parts", "split")
	fs.Section("Model", false, "model", "layers", "hidden", "dropout")
	fs.Section("Training", false, "epochs", "lr", "weight-decay", "seed")
	fs.Section("Distribution", false, "ranks", "partition", "device")
	fs.Section("Compression", false, "compress")
	fs.Section("Outputs", false, "metrics", "checkpoint", "resume", "predict", "quiet")
	fs.Section("Data, more", true, "normalize-features", "add-inverse", "self-loops")
	fs.Section("Model, more", true, "heads", "out-heads", "attn-dropout", "recompute")
	fs.Section("Training, more", true, "eval-every")
	fs.Section("Distribution, more", true, "partition-seed", "no-comm", "comm", "gpu", "gpu-transport", "threads", "overlap", "reorder", "comm-timeout")
	fs.Section("Compression, more: each flag replaces one field of the --compress preset", true, compressExpert...)
	fs.Section("Outputs, more", true, "checkpoint-every", "keep", "predict-params", "probabilities", "embeddings", "cpuprofile", "progress", "verbose")
	tf.fs = fs
	return tf
}

func runTrain(args []string, stdout, stderr io.Writer) error {
	tf := newTrainFlags(stderr)
	if err := tf.fs.Parse(args); err != nil {
		return err
	}
	s := tf.spec
	var err error
	if s.Run.Compress, err = tf.compress.plan(); err != nil {
		return err
	}
	if p := *tf.progress; p != "auto" && p != "bar" && p != "lines" {
		return cli.Usagef("train: --progress: got %q, expected auto, bar or lines", p)
	}
	con := newConsole(stdout, stderr, *tf.progress)
	obs := &epochPrinter{con: con, quiet: *tf.quiet}
	if job.UnderMPI() {
		// mpirun stops reading the ranks' stdout once it is told to
		// terminate (SIGTERM): a rank blocked writing an epoch line would
		// never reach the epoch boundary where the ranks agree to stop.
		qw := newQueuedWriter(stdout)
		defer qw.close(2 * time.Second)
		con.setOut(qw)
	}
	errOut := con.stderr()
	return job.Run(s, job.Env{Observer: obs, Log: newLogger(errOut, *tf.verbose), Stderr: errOut})
}

// epochPrinter is rank 0's console: the header, a line per epoch (or the
// progress bar) and the summary.
type epochPrinter struct {
	con   *console
	quiet bool
	bar   *progress // nil: epoch lines
	ranks int
}

func (p *epochPrinter) Start(i *job.Info) {
	s := i.Spec
	p.ranks = i.Ranks
	if p.con.bar && !p.quiet {
		p.bar = &progress{total: s.Run.Epochs, multiRanks: i.Ranks > 1}
	}
	out := p.con.stdout()
	fmt.Fprintf(out, "dataset %s: %d nodes, %d edges, %d features, %d classes; split %s %d/%d/%d (ready in %.2fs)\n",
		i.Dataset, i.Nodes, i.Edges, i.Features, i.Classes, i.Split, i.Train, i.Valid, i.Test, i.LoadSeconds)
	if i.Ranks > 1 {
		fmt.Fprintf(out, "ranks %d, partition %s, %d halo rows per layer in all, %s\n", i.Ranks, i.Partition, i.HaloRows, i.Communication)
	}
	model := fmt.Sprintf("%d layers, hidden %d, dropout %g", s.Run.Layers, s.Run.Hidden, s.Run.Dropout)
	if s.Run.Model == "gat" {
		outHeads := "1 output head"
		if s.Run.OutHeads != 1 {
			outHeads = fmt.Sprintf("%d output heads", s.Run.OutHeads)
		}
		model = fmt.Sprintf("%d layers, %d heads of %d, %s, dropout %g, attention dropout %g",
			s.Run.Layers, s.Run.Heads, s.Run.Hidden, outHeads, s.Run.Dropout, s.Run.AttnDropout)
		if s.Recompute {
			model += ", coefficients recomputed"
		}
	}
	fmt.Fprintf(out, "model %s: %s; adam lr %g, weight decay %g, %d epochs; device %s\n",
		s.Run.Model, model, s.Run.LR, s.Run.WeightDecay, s.Run.Epochs, i.Device)
}

func (p *epochPrinter) Resumed(from string, epoch, total int) {
	fmt.Fprintf(p.con.stdout(), "resumed from %s after epoch %d of %d\n", from, epoch, total)
}

func (p *epochPrinter) Epoch(s *metrics.Epoch) error {
	switch {
	case p.bar != nil:
		p.con.draw(p.bar.line(s))
	case !p.quiet:
		line := fmt.Sprintf("epoch %4d  loss %.4f  train %s  val %s  test %s  %.3fs", s.Epoch, s.Loss, accText(s.TrainAcc), accText(s.ValAcc), accText(s.TestAcc), s.Seconds)
		if s.ValAUC != nil && s.TestAUC != nil {
			line += fmt.Sprintf("  auc val %.4f test %.4f", *s.ValAUC, *s.TestAUC)
		}
		if p.ranks > 1 {
			if rates := rateText(s.Rates); rates != "" {
				line += "  rate " + rates
			}
			line += fmt.Sprintf("  comm %.3fs  sent fwd %s bwd %s", s.CommSeconds, humanBytes(s.BytesFwd), humanBytes(s.BytesBwd))
		}
		fmt.Fprintln(p.con.stdout(), line)
	}
	return nil
}

func (p *epochPrinter) Done(s *metrics.Summary) {
	p.con.endBar()
	var total int64
	for _, v := range s.RankRSSMiB {
		total += v
	}
	memText := fmt.Sprintf("peak memory %d MiB", s.MaxRSSMiB)
	if len(s.RankRSSMiB) > 1 {
		memText = fmt.Sprintf("peak memory per rank %d MiB at most, %d MiB over %d ranks", s.MaxRSSMiB, total, len(s.RankRSSMiB))
	}
	var residual int64
	for _, b := range s.RankResidualBytes {
		residual = max(residual, b)
	}
	if residual > 0 {
		memText += fmt.Sprintf(" (residual state %s per rank at most)", humanBytes(residual))
	}
	aucText := ""
	if s.TestAtBestValAUC != nil {
		aucText = fmt.Sprintf(", test AUC at best val AUC %.4f", *s.TestAtBestValAUC)
	}
	confirmed := ""
	if s.Confirmed {
		// The epochs' accuracies were under compression; these are exact.
		confirmed = fmt.Sprintf(" (chosen at %.4f under compression; accuracies at full precision, %s to confirm them)",
			s.SelectedValAcc, humanBytes(s.ConfirmBytes))
	}
	fmt.Fprintf(p.con.stdout(), "done: best val %.4f at epoch %d, test at best val %.4f, final test %.4f%s%s, %d epochs in %.2fs, halo traffic %s, %s\n",
		s.BestValAcc, s.BestEpoch, s.TestAtBestVal, s.FinalTestAcc, aucText, confirmed, s.Epochs, s.Seconds, humanBytes(s.BytesTotal), memText)
}

func (p *epochPrinter) Predicted(i *job.PredictInfo) {
	m := i.Meta
	what := m.Scores
	if m.EmbedLayer >= 0 {
		what += fmt.Sprintf(" and layer %d's embeddings (%d wide)", m.EmbedLayer, m.EmbedCols)
	}
	var peak int64
	for _, v := range i.RankRSSMiB {
		peak = max(peak, v)
	}
	line := fmt.Sprintf("predictions: %d nodes, %s, with the %s parameters (epoch %d), written to %s in %.2fs (forward pass %.2fs), peak memory %d MiB per process at most; accuracy train %.4f, val %.4f, test %.4f",
		m.Nodes, what, m.Params, m.ParamsEpoch, i.Out, i.Seconds, i.ForwardSeconds, peak, m.TrainAcc, m.ValAcc, m.TestAcc)
	switch r := i.Recorded; {
	case r == nil:
	case r.Val == m.ValAcc && r.Test == m.TestAcc:
		line += ", as recorded for these parameters"
	default:
		line += fmt.Sprintf(", where val %.4f and test %.4f were recorded for these parameters", r.Val, r.Test)
	}
	fmt.Fprintln(p.con.stdout(), line)
}

// rateText formats per-layer rates for the epoch line, "" when all are 1.
func rateText(rates []float64) string {
	var b strings.Builder
	lossy := false
	for l, r := range rates {
		if l > 0 {
			b.WriteByte('/')
		}
		fmt.Fprintf(&b, "%.3g", r)
		lossy = lossy || r != 1
	}
	if !lossy {
		return ""
	}
	return b.String()
}

// humanBytes formats a byte count with a binary unit.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f%ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// runDevices prints the GPUs and the CUDA libraries this binary finds
// (without a GPU, the GPU build's cudaprobe prints it before main).
func runDevices(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("devices", "devices", stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	return job.Devices(stdout)
}
