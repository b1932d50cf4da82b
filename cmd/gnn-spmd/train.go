package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/gnn"
	"github.com/gnn-spmd/gnn-spmd/kernels"
)

type trainFlags struct {
	data, split, model, metrics string
	layers, hidden, epochs      int
	threads, ranks              int
	device                      string
	overlap                     bool
	lr, weightDecay, dropout    float64
	seed, partitionSeed         uint64
	quiet, normalize, noComm    bool
	cpuProfile                  string
	partition, parts, commKind  string
	build                       *data.BuildOptions
	// VARCO compression
	codec, codecBwd, schedule string
	ratio, ratioMax, ratioMin float64
	kappa                     float64
	slope                     float64
	evalCompressed            bool
	// checkpoints
	checkpoint, resume    string
	checkpointEvery, keep int
	// faults and output
	commTimeout time.Duration
	verbose     bool
	progress    string
	// set up by runTrain for the run
	con  *console
	log  *slog.Logger // without the rank: see rankLogger
	intr *interrupts
}

func runTrain(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("train", "train --data PATH [--split NAME] [--model sage|gcn] [--layers N] [--hidden N] [--epochs N] [--lr F] [--weight-decay F] [--dropout F] [--seed N] [--metrics FILE] [--quiet] [--ranks Q] [--partition random|metis] [--parts DIR] [--no-comm] [--checkpoint FILE [--checkpoint-every N] [--keep K]] [--resume FILE] [--comm-timeout D] [--progress auto|bar|lines] [--verbose]", stderr)
	var f trainFlags
	def := gnn.DefaultTrainConfig()
	fs.StringVar(&f.data, "data", "", "dataset: an OGB-layout directory or a .h5 file (not needed with --parts)")
	fs.StringVar(&f.split, "split", "", "split name (default: the only split, or the first in sorted order)")
	fs.StringVar(&f.model, "model", "sage", "model: sage (GraphSAGE, mean aggregator) or gcn")
	fs.IntVar(&f.layers, "layers", 3, "number of GNN layers")
	fs.IntVar(&f.hidden, "hidden", 256, "hidden width")
	fs.IntVar(&f.epochs, "epochs", def.Epochs, "full-batch training epochs")
	fs.Float64Var(&f.lr, "lr", 0.01, "Adam learning rate")
	fs.Float64Var(&f.weightDecay, "weight-decay", 0, "L2 weight decay on weights (not biases)")
	fs.Float64Var(&f.dropout, "dropout", 0, "dropout probability on every layer's input")
	fs.Uint64Var(&f.seed, "seed", 0, "seed for initialisation and dropout")
	fs.StringVar(&f.metrics, "metrics", "", "write per-epoch metrics as JSON Lines to this file (rank 0)")
	fs.BoolVar(&f.quiet, "quiet", false, "print only the summary")
	fs.BoolVar(&f.normalize, "normalize-features", false, "scale every feature row to unit L1 norm (Kipf & Welling's preprocessing)")
	fs.IntVar(&f.threads, "threads", 0, "CPU threads for kernels, shared by the ranks of this process (0 = all)")
	fs.StringVar(&f.device, "device", defaultDevice, "where the kernels run: cpu, or cuda (the GPU build; each MPI rank binds the GPU of its node-local rank)")
	fs.BoolVar(&f.overlap, "overlap", true, "compute what needs no halo row (interior rows, self terms, owned gradient rows) while the halo exchanges are in flight (CPU device; bit-identical either way)")
	fs.IntVar(&f.ranks, "ranks", 1, "run Q ranks as goroutines in this process (without mpirun)")
	fs.StringVar(&f.partition, "partition", "random", "partition on the fly: random or metis (ignored with --parts)")
	fs.Uint64Var(&f.partitionSeed, "partition-seed", 0, "seed of the on-the-fly partitioner")
	fs.StringVar(&f.parts, "parts", "", "directory written by gnn-spmd partition: each rank loads only its own part")
	fs.BoolVar(&f.noComm, "no-comm", false, "baseline without communication: drop the edges that cross parts")
	fs.StringVar(&f.commKind, "comm", "auto", "transport: auto (mpi under mpirun/mpiexec, else local), mpi or local")
	fs.StringVar(&f.codec, "codec", "none", "halo compression of activations: none, trunc (leading columns, the VARCO authors') or quant (stochastic b-bit)")
	fs.StringVar(&f.codecBwd, "codec-bwd", "", "halo compression of the returned gradients (default: the same as --codec)")
	fs.StringVar(&f.schedule, "schedule", "fixed", "compression rate over epochs: fixed (--ratio), varco (--ratio-max down to --ratio-min) or adaptive (closed loop on the measured error and gradient norm, see docs/VARCO.md)")
	fs.Float64Var(&f.ratio, "ratio", 1, "fixed compression rate r >= 1")
	fs.Float64Var(&f.ratioMax, "ratio-max", 128, "varco and adaptive: starting rate")
	fs.Float64Var(&f.kappa, "kappa", gnn.DefaultKappa, "adaptive: relative halo error allowed at the largest gradient norm; the bound falls with the gradient")
	fs.Float64Var(&f.ratioMin, "ratio-min", 1.5, "varco: final rate")
	fs.Float64Var(&f.slope, "slope", 5, "varco: slope s of r(t) = max(rmax - s*t*(rmax-rmin)/(T-2), rmin)")
	fs.BoolVar(&f.evalCompressed, "eval-compressed", false, "evaluate under the current rate (as the VARCO authors did) instead of at full precision")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a Go CPU profile of the training loop to this file")
	fs.StringVar(&f.checkpoint, "checkpoint", "", "write an HDF5 checkpoint to this file (rank 0) every --checkpoint-every epochs and after the last")
	fs.IntVar(&f.checkpointEvery, "checkpoint-every", 10, "epochs between checkpoints")
	fs.IntVar(&f.keep, "keep", 1, "checkpoints kept: FILE (newest), then FILE.1 ... FILE.<K-1>")
	fs.StringVar(&f.resume, "resume", "", "continue the run saved in this checkpoint; every other flag must be as in that run")
	fs.DurationVar(&f.commTimeout, "comm-timeout", 5*time.Minute, "abort the job when a collective or halo exchange waits longer than this for its peers (0 = never)")
	fs.StringVar(&f.progress, "progress", "auto", "per-epoch output: bar (one line redrawn in place), lines, or auto (bar on a terminal, lines otherwise and under mpirun)")
	fs.BoolVar(&f.verbose, "verbose", false, "log setup and checkpoint details (log records go to stderr, with the rank)")
	f.build = buildFlags(fs.FlagSet)
	if err := fs.parse(args); err != nil {
		return err
	}
	if err := f.check(); err != nil {
		return err
	}
	kind, err := f.transport()
	if err != nil {
		return err
	}
	f.con = newConsole(stdout, stderr, f.progress)
	stderr = f.con.stderr()
	f.log = newLogger(stderr, f.verbose)
	defer setTestHooks()()
	if kind == "mpi" {
		return trainMPI(&f, stdout, stderr)
	}
	return trainLocal(&f, stdout)
}

func (f *trainFlags) check() error {
	switch {
	case f.data == "" && f.parts == "":
		return usagef("train: --data (or --parts) is required")
	case f.threads < 0:
		return usagef("train: --threads: got %d, expected >= 0", f.threads)
	case f.ranks < 1:
		return usagef("train: --ranks: got %d, expected >= 1", f.ranks)
	case f.device != "cpu" && f.device != "cuda":
		return usagef("train: --device: got %q, expected cpu or cuda", f.device)
	case f.device == "cuda" && defaultDevice == "cpu":
		return usagef("train: --device cuda: this binary is the CPU build (-tags cpu); build the GPU one with make cuda")
	case f.partition != "random" && f.partition != "metis":
		return usagef("train: --partition: got %q, expected random or metis", f.partition)
	case f.parts != "" && f.normalize:
		return usagef("train: --normalize-features applies when loading --data, not to a --parts directory")
	case f.checkpointEvery < 1:
		return usagef("train: --checkpoint-every: got %d, expected >= 1", f.checkpointEvery)
	case f.keep < 1:
		return usagef("train: --keep: got %d, expected >= 1", f.keep)
	case f.commTimeout < 0:
		return usagef("train: --comm-timeout: got %v, expected >= 0 (0 = never)", f.commTimeout)
	case f.progress != "auto" && f.progress != "bar" && f.progress != "lines":
		return usagef("train: --progress: got %q, expected auto, bar or lines", f.progress)
	}
	if f.codecBwd == "" {
		f.codecBwd = f.codec
	}
	if _, err := f.compression(); err != nil {
		return usagef("train: %v", err)
	}
	return nil
}

// compression returns the halo compression policy, nil for none.
func (f *trainFlags) compression() (*gnn.Compression, error) {
	var sched gnn.Schedule
	switch f.schedule {
	case "fixed":
		sched = gnn.Fixed{R: f.ratio}
	case "varco":
		sched = gnn.Varco{RMax: f.ratioMax, RMin: f.ratioMin, Slope: f.slope, Epochs: f.epochs}
	case "adaptive":
		sched = gnn.NewAdaptive(f.codec, f.kappa, f.ratioMax)
	default:
		return nil, fmt.Errorf("schedule: got %q, expected fixed, varco or adaptive", f.schedule)
	}
	c := &gnn.Compression{Fwd: f.codec, Bwd: f.codecBwd, Schedule: sched, EvalCompressed: f.evalCompressed, Seed: f.seed}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Fwd == "none" && c.Bwd == "none" {
		return nil, nil
	}
	return c, nil
}

// underMPI reports whether a launcher (Open MPI's mpirun or a PMI one such
// as MPICH's mpiexec) started this process.
func underMPI() bool {
	for _, v := range []string{"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"} {
		if os.Getenv(v) != "" {
			return true
		}
	}
	return false
}

func (f *trainFlags) transport() (string, error) {
	switch f.commKind {
	case "auto":
		if underMPI() {
			if f.ranks != 1 {
				return "", usagef("train: --ranks %d under mpirun: the launcher sets the ranks (use one or the other)", f.ranks)
			}
			return "mpi", nil
		}
		return "local", nil
	case "mpi", "local":
		return f.commKind, nil
	}
	return "", usagef("train: --comm: got %q, expected auto, mpi or local", f.commKind)
}

// pickSplit returns the named split, or the dataset's only/first split.
func pickSplit(ds *data.Dataset, name string) (string, error) {
	names := ds.SplitNames()
	if name == "" {
		if len(names) == 0 {
			return "", usagef("train: dataset %s has no splits", ds.Name)
		}
		return names[0], nil
	}
	if _, ok := ds.Splits[name]; !ok {
		return "", usagef("train: --split %q: dataset %s has splits %v", name, ds.Name, names)
	}
	return name, nil
}

// reporter prints rank 0's lines (or progress bar) and writes the metrics
// file.
type reporter struct {
	out      io.Writer
	con      *console  // nil: no bar
	bar      *progress // nil: epoch lines
	quiet    bool
	ranks    int
	bytesCum int64
	path     string // --metrics; created at the first record, so that a
	// run that fails during setup leaves no file behind
	f *os.File
	w *bufio.Writer
}

func newReporter(f *trainFlags, info jobInfo, out io.Writer) *reporter {
	r := &reporter{out: out, quiet: f.quiet, ranks: info.ranks, path: f.metrics, con: f.con}
	if f.con != nil && f.con.bar && !f.quiet {
		r.bar = &progress{total: f.epochs, multiRanks: info.ranks > 1}
	}
	fmt.Fprintf(out, "dataset %s: %d nodes, %d edges, %d features, %d classes; split %s %d/%d/%d (ready in %.2fs)\n",
		info.name, info.nodes, info.edges, info.features, info.classes, info.split,
		info.train, info.valid, info.test, info.loadSeconds)
	if info.ranks > 1 {
		comm := "full communication"
		if f.noComm {
			comm = "no communication (cut edges dropped)"
		} else if c, err := f.compression(); err == nil && c != nil {
			comm = fmt.Sprintf("halo compression %s forward, %s backward, schedule %s", c.Fwd, c.Bwd, c.Schedule.Name())
		}
		fmt.Fprintf(out, "ranks %d, partition %s, %d halo rows per layer in all, %s\n", info.ranks, info.partition, info.haloRows, comm)
	}
	dev := fmt.Sprintf("cpu (threads per rank: %d), gemm %s", f.threadsPerRank(f.ranks), kernels.GemmInfo())
	if f.device == "cuda" {
		dev = "cuda (CUDA kernels, cuBLAS; one GPU per rank)"
	}
	fmt.Fprintf(out, "model %s: %d layers, hidden %d, dropout %g; adam lr %g, weight decay %g, %d epochs; device %s\n",
		f.model, f.layers, f.hidden, f.dropout, f.lr, f.weightDecay, f.epochs, dev)
	return r
}

func (r *reporter) write(v any) error {
	if r.path == "" {
		return nil
	}
	if r.w == nil {
		file, err := os.Create(r.path)
		if err != nil {
			return fmt.Errorf("--metrics: %w", err)
		}
		r.f, r.w = file, bufio.NewWriter(file)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	r.w.Write(append(b, '\n'))
	// Flush every line so that a user tailing the file sees each epoch.
	if err := r.w.Flush(); err != nil {
		return fmt.Errorf("writing metrics to %s: %w", r.f.Name(), err)
	}
	return nil
}

func (r *reporter) epoch(s gnn.EpochStats) error {
	if r.bar != nil {
		err := r.record(s)
		r.con.draw(r.bar.line(s, r.bytesCum))
		return err
	}
	if !r.quiet {
		fwd, bwd := s.TotalBytes()
		line := fmt.Sprintf("epoch %4d  loss %.4f  train %.4f  val %.4f  test %.4f  %.3fs", s.Epoch, s.Loss, s.TrainAcc, s.ValAcc, s.TestAcc, s.Seconds)
		if s.HasAUC {
			line += fmt.Sprintf("  auc val %.4f test %.4f", s.ValAUC, s.TestAUC)
		}
		if r.ranks > 1 {
			if rates := rateText(s.Rates); rates != "" {
				line += "  rate " + rates
			}
			line += fmt.Sprintf("  comm %.3fs  sent fwd %s bwd %s", s.CommSeconds, humanBytes(fwd), humanBytes(bwd))
		}
		fmt.Fprintln(r.out, line)
	}
	return r.record(s)
}

// record writes an epoch's metrics line.
func (r *reporter) record(s gnn.EpochStats) error {
	fwd, bwd := s.TotalBytes()
	r.bytesCum += fwd + bwd
	return r.write(newMetricsRow(s, r.bytesCum))
}

// metricsRow is one epoch's line of the --metrics file.
type metricsRow struct {
	Epoch          int       `json:"epoch"`
	Loss           float64   `json:"loss"`
	TrainAcc       float64   `json:"train_acc"`
	ValAcc         float64   `json:"val_acc"`
	TestAcc        float64   `json:"test_acc"`
	EpochSeconds   float64   `json:"epoch_seconds"`
	CommSeconds    float64   `json:"comm_seconds"`
	HaloSeconds    float64   `json:"halo_seconds"`
	CodecSeconds   float64   `json:"compress_seconds"`
	ComputeSeconds float64   `json:"compute_seconds"`
	BytesFwd       int64     `json:"bytes_fwd"`
	BytesBwd       int64     `json:"bytes_bwd"`
	BytesCum       int64     `json:"bytes_cum"`
	BytesFwdLayer  []int64   `json:"bytes_fwd_layer"`
	BytesBwdLayer  []int64   `json:"bytes_bwd_layer"`
	BytesEval      []int64   `json:"bytes_eval_layer"`
	Ratio          []float64 `json:"ratio"`
	Bits           []int     `json:"bits"`
	CompError      []float64 `json:"comp_error"`
	GradNorm       float64   `json:"grad_norm"`
	ValAUC         *float64  `json:"val_auc,omitempty"`
	TestAUC        *float64  `json:"test_auc,omitempty"`
}

// newMetricsRow is the metrics line of s, after bytesCum halo bytes in all.
func newMetricsRow(s gnn.EpochStats, bytesCum int64) metricsRow {
	fwd, bwd := s.TotalBytes()
	return metricsRow{s.Epoch, s.Loss, s.TrainAcc, s.ValAcc, s.TestAcc, s.Seconds, s.CommSeconds, s.HaloSeconds, s.CodecSeconds,
		s.Seconds - s.CommSeconds - s.CodecSeconds, fwd, bwd, bytesCum, s.BytesFwd, s.BytesBwd, s.BytesEval,
		s.Rates, s.Bits, s.CompError, s.GradNorm, auc(s.HasAUC, s.ValAUC), auc(s.HasAUC, s.TestAUC)}
}

// summary prints and writes the run's summary. rankRSS holds every MPI
// rank's peak memory in MiB (nil in one process, whose own peak is used).
func (r *reporter) summary(s gnn.Summary, rankRSS []float64) error {
	r.endBar()
	if rankRSS == nil {
		rankRSS = []float64{float64(maxRSSMiB())}
	}
	perRank := make([]int64, len(rankRSS))
	var peak, total int64
	for i, v := range rankRSS {
		perRank[i] = int64(v)
		peak, total = max(peak, perRank[i]), total+perRank[i]
	}
	memText := fmt.Sprintf("peak memory %d MiB", peak)
	if len(perRank) > 1 {
		memText = fmt.Sprintf("peak memory per rank %d MiB at most, %d MiB over %d ranks", peak, total, len(perRank))
	}
	aucText := ""
	if s.BestValAUC >= 0 {
		aucText = fmt.Sprintf(", test AUC at best val AUC %.4f", s.TestAtBestValAUC)
	}
	fmt.Fprintf(r.out, "done: best val %.4f at epoch %d, test at best val %.4f, final test %.4f%s, %d epochs in %.2fs, halo traffic %s, %s\n",
		s.BestValAcc, s.BestEpoch, s.TestAtBestVal, s.FinalTestAcc, aucText, s.Epochs, s.Seconds, humanBytes(s.BytesTotal), memText)
	return r.write(struct {
		Summary       bool     `json:"summary"`
		BestValAcc    float64  `json:"best_val_acc"`
		BestEpoch     int      `json:"best_epoch"`
		TestAtBestVal float64  `json:"test_at_best_val"`
		FinalTestAcc  float64  `json:"final_test_acc"`
		Epochs        int      `json:"epochs"`
		Seconds       float64  `json:"seconds"`
		BytesTotal    int64    `json:"bytes_total"`
		Ranks         int      `json:"ranks"`
		MaxRSSMiB     int64    `json:"max_rss_mb"`
		RankRSSMiB    []int64  `json:"rank_rss_mb"`
		BestValAUC    *float64 `json:"best_val_auc,omitempty"`
		TestAtBestAUC *float64 `json:"test_at_best_val_auc,omitempty"`
	}{true, s.BestValAcc, s.BestEpoch, s.TestAtBestVal, s.FinalTestAcc, s.Epochs, s.Seconds, s.BytesTotal, r.ranks, peak, perRank,
		auc(s.BestValAUC >= 0, s.BestValAUC), auc(s.BestValAUC >= 0, s.TestAtBestValAUC)})
}

// auc is v for the metrics file: absent when there is no AUC or it is
// undefined (a split without one of the classes).
func auc(has bool, v float64) *float64 {
	if !has || math.IsNaN(v) {
		return nil
	}
	return &v
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

// endBar ends the progress bar's line, if one is drawn.
func (r *reporter) endBar() {
	if r != nil && r.con != nil {
		r.con.endBar()
	}
}

func (r *reporter) close() {
	r.endBar()
	if r != nil && r.f != nil {
		r.f.Close()
	}
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

// maxRSSMiB is this process's peak resident memory.
func maxRSSMiB() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return int64(ru.Maxrss) / 1024 // kilobytes on Linux
}
