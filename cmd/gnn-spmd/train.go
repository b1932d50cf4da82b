package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gnn-spmd/gnn-spmd/cmd/internal/cli"
	"github.com/gnn-spmd/gnn-spmd/gnn/job"
	"github.com/gnn-spmd/gnn-spmd/gnn/metrics"
)

func runTrain(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("train", "train --data PATH [--split NAME] [--model sage|gcn] [--layers N] [--hidden N] [--epochs N] [--lr F] [--weight-decay F] [--dropout F] [--seed N] [--metrics FILE] [--quiet] [--ranks Q] [--partition random|metis|ptscotch] [--parts DIR] [--no-comm] [--checkpoint FILE [--checkpoint-every N] [--keep K]] [--resume FILE] [--comm-timeout D] [--progress auto|bar|lines] [--verbose]", stderr)
	s := job.DefaultSpec()
	r := &s.Run
	fs.StringVar(&s.Data, "data", "", "dataset: an OGB-layout directory or a .h5 file (not needed with --parts)")
	fs.StringVar(&s.Split, "split", "", "split name (default: the only split, or the first in sorted order)")
	fs.StringVar(&r.Model, "model", r.Model, "model: sage (GraphSAGE, mean aggregator), gcn or gat (graph attention: --heads, --out-heads, --attn-dropout)")
	fs.IntVar(&r.Layers, "layers", r.Layers, "number of GNN layers")
	fs.IntVar(&r.Hidden, "hidden", r.Hidden, "hidden width")
	fs.IntVar(&r.Epochs, "epochs", r.Epochs, "full-batch training epochs")
	fs.Float64Var(&r.LR, "lr", r.LR, "Adam learning rate")
	fs.Float64Var(&r.WeightDecay, "weight-decay", r.WeightDecay, "L2 weight decay on weights (not biases)")
	fs.Float64Var(&r.Dropout, "dropout", r.Dropout, "dropout probability on every layer's input")
	fs.IntVar(&r.Heads, "heads", r.Heads, "GAT: attention heads of every hidden layer, concatenated (each --hidden wide)")
	fs.IntVar(&r.OutHeads, "out-heads", r.OutHeads, "GAT: attention heads of the output layer, averaged")
	fs.Float64Var(&r.AttnDropout, "attn-dropout", r.AttnDropout, "GAT: dropout probability on the attention coefficients")
	fs.BoolVar(&s.Recompute, "recompute", s.Recompute, "GAT: compute the attention coefficients again in the backward pass instead of keeping them (edges x heads floats per layer; same results)")
	fs.Uint64Var(&r.Seed, "seed", r.Seed, "seed for initialisation and dropout")
	fs.StringVar(&s.Metrics, "metrics", "", "write per-epoch metrics as JSON Lines to this file (rank 0)")
	quiet := fs.Bool("quiet", false, "print only the summary")
	fs.BoolVar(&s.Normalize, "normalize-features", false, "scale every feature row to unit L1 norm (Kipf & Welling's preprocessing)")
	fs.IntVar(&s.Threads, "threads", 0, "CPU threads for kernels, shared by the ranks of this process (0 = all)")
	fs.StringVar(&s.Device, "device", s.Device, "where the kernels run: cpu, or cuda (the GPU build; each MPI rank binds GPU (node-local rank) modulo (the GPUs it sees))")
	fs.IntVar(&s.GPU, "gpu", s.GPU, "with --device cuda: bind this GPU ordinal (of those CUDA_VISIBLE_DEVICES shows) instead (-1: by node-local rank)")
	fs.BoolVar(&s.Overlap, "overlap", s.Overlap, "compute what needs no halo row (interior rows, self terms, owned gradient rows) while the halo exchanges are in flight (CPU device; bit-identical either way)")
	fs.StringVar(&s.Reorder, "reorder", s.Reorder, "order of every rank's owned rows in memory, so that neighbours sit near each other and the aggregation finds more of them in cache: none, rcm (reverse Cuthill-McKee) or metis (METIS clusters of about 32768 rows, one after another; a rank with fewer rows keeps its order; the default); metrics equal up to floating-point order")
	fs.IntVar(&s.Ranks, "ranks", s.Ranks, "run Q ranks as goroutines in this process (without mpirun)")
	fs.StringVar(&s.Partition, "partition", s.Partition, "partition on the fly: random, metis, or ptscotch (under mpirun; with it, and random on a .h5 file, every rank reads only its slice) (ignored with --parts)")
	fs.Uint64Var(&s.PartitionSeed, "partition-seed", 0, "seed of the on-the-fly partitioner")
	fs.StringVar(&s.Parts, "parts", "", "directory written by gnn-spmd partition: each rank loads only its own part")
	fs.BoolVar(&s.NoComm, "no-comm", false, "baseline without communication: drop the edges that cross parts")
	fs.StringVar(&s.Comm, "comm", s.Comm, "transport: auto (mpi under mpirun/mpiexec, else local), mpi or local")
	fs.StringVar(&r.Codec, "codec", r.Codec, "halo compression of activations: none, trunc (leading columns, the VARCO authors') or quant (stochastic b-bit)")
	fs.StringVar(&r.CodecBwd, "codec-bwd", "", "halo compression of the returned gradients (default: the same as --codec)")
	fs.StringVar(&r.Schedule, "schedule", r.Schedule, "compression rate over epochs: recommended (quant: 2-bit activations with residual coding and 1-bit gradients on every layer and epoch, small gradient rows left out, narrow rows sharing headers; trunc: varco), fixed (--ratio), varco (--ratio-max down to --ratio-min) or adaptive (closed loop on the measured error and gradient norm, see docs/VARCO.md); without it, --ratio implies fixed, --ratio-min, --ratio-max or --slope varco, --kappa adaptive")
	fs.Float64Var(&r.Ratio, "ratio", r.Ratio, "fixed compression rate r >= 1")
	fs.Float64Var(&r.RatioMax, "ratio-max", r.RatioMax, "varco and adaptive: starting rate")
	fs.Float64Var(&r.Kappa, "kappa", r.Kappa, "adaptive: relative halo error allowed at the largest gradient norm; the bound falls with the gradient")
	fs.Float64Var(&r.RatioMin, "ratio-min", r.RatioMin, "varco: final rate")
	fs.Float64Var(&r.Slope, "slope", r.Slope, "varco: slope s of r(t) = max(rmax - s*t*(rmax-rmin)/(T-2), rmin)")
	fs.StringVar(&r.Eval, "eval", r.Eval, "how a compressed run measures accuracy: confirm (each epoch's from the training pass, under compression, with no extra pass or traffic; the parameters of the best validation epoch and the final ones evaluated at full precision once, after the last epoch, for the summary), exact (a full-precision pass of its own every epoch, see --eval-every) or compressed (under compression only, as the VARCO authors)")
	evalCompressed := fs.Bool("eval-compressed", false, "the same as --eval compressed")
	fs.IntVar(&s.EvalEvery, "eval-every", s.EvalEvery, "where evaluation takes a forward pass of its own (--eval exact, dropout), run it every N epochs and at the last; the epochs between report no accuracy")
	fs.StringVar(&r.Residual, "residual", r.Residual, "residual coding with error feedback: the sender codes each halo row's difference from the receiver's copy, which both ends keep: on (activations and gradients), forward (activations), off, or auto (the recommended quant setting: forward)")
	fs.Float64Var(&r.ResidualSkip, "residual-skip", r.ResidualSkip, "with residual coding: leave out a row whose residual is at most this fraction of the row's largest value (0 sends every row; default: 0.02 under the recommended quant setting, else 0)")
	fs.Float64Var(&r.GradSkip, "grad-skip", r.GradSkip, "leave out of the compressed backward exchanges (those not residual-coded) a gradient row whose squared norm is below this fraction of the mean over its message's rows (0 sends every row; default: 0.1 under the recommended quant setting, else 0)")
	fs.IntVar(&r.GroupWidth, "group-width", r.GroupWidth, "quant: the rows of a layer narrower than this many values share one header per ceil(this/width) rows (0: a header per row; default: 64 under the recommended quant setting, else 0)")
	fs.BoolVar(&r.CacheInput, "cache-input", false, "without dropout, send the first layer's input features once, raw, and cache their aggregation; by default that layer's rows cross every epoch, through its codec, as in the VARCO authors' code")
	fs.BoolVar(&r.RawLastLayer, "raw-last-layer", false, "send the last layer's halo rows raw whatever the schedule (as the VARCO authors' code does); by default every layer is compressed at its scheduled rate")
	fs.StringVar(&s.CPUProfile, "cpuprofile", "", "write a Go CPU profile of the training loop to this file (under mpirun: rank 0's)")
	fs.StringVar(&s.Checkpoint, "checkpoint", "", "write an HDF5 checkpoint to this file (rank 0) every --checkpoint-every epochs and after the last")
	fs.IntVar(&s.CheckpointEvery, "checkpoint-every", s.CheckpointEvery, "epochs between checkpoints")
	fs.IntVar(&s.Keep, "keep", s.Keep, "checkpoints kept: FILE (newest), then FILE.1 ... FILE.<K-1>")
	fs.StringVar(&s.Resume, "resume", "", "continue the run saved in this checkpoint; every other flag must be as in that run")
	fs.DurationVar(&s.CommTimeout, "comm-timeout", s.CommTimeout, "abort the job when a collective or halo exchange waits longer than this for its peers (0 = never)")
	progress := fs.String("progress", "auto", "per-epoch output: bar (one line redrawn in place), lines, or auto (bar on a terminal, lines otherwise and under mpirun)")
	verbose := fs.Bool("verbose", false, "log setup and checkpoint details (log records go to stderr, with the rank)")
	buildFlags(fs.FlagSet, &s.Build)
	if err := fs.Parse(args); err != nil {
		return err
	}
	r.Schedule = impliedSchedule(fs.FlagSet, r.Schedule)
	if *evalCompressed {
		evalSet := false
		fs.Visit(func(f *flag.Flag) { evalSet = evalSet || f.Name == "eval" })
		if evalSet && r.Eval != "compressed" {
			return cli.Usagef("train: --eval-compressed contradicts --eval %s", r.Eval)
		}
		r.Eval = "compressed"
	}
	if *progress != "auto" && *progress != "bar" && *progress != "lines" {
		return cli.Usagef("train: --progress: got %q, expected auto, bar or lines", *progress)
	}
	con := newConsole(stdout, stderr, *progress)
	obs := &epochPrinter{con: con, quiet: *quiet}
	if job.UnderMPI() {
		// mpirun stops reading the ranks' stdout once it is told to
		// terminate (SIGTERM): a rank blocked writing an epoch line would
		// never reach the epoch boundary where the ranks agree to stop.
		qw := newQueuedWriter(stdout)
		defer qw.close(2 * time.Second)
		con.setOut(qw)
	}
	errOut := con.stderr()
	return job.Run(s, job.Env{Observer: obs, Log: newLogger(errOut, *verbose), Stderr: errOut})
}

// impliedSchedule is the schedule the rate flags ask for when --schedule is
// not given: --ratio alone means fixed, --ratio-min, --ratio-max or --slope
// varco, --kappa adaptive; with none of them, the recommended setting.
func impliedSchedule(fs *flag.FlagSet, schedule string) string {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case set["schedule"]:
		return schedule
	case set["ratio"]:
		return "fixed"
	case set["ratio-min"] || set["slope"] || set["ratio-max"]:
		return "varco"
	case set["kappa"]:
		return "adaptive"
	}
	return schedule
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
