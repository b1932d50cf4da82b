// Package job is the runtime of one training job: the run spec a user asks
// for, and Run, which sets every rank up (data, device, halo exchange,
// checkpoint), agrees on the setup, trains with a watchdog over every
// collective and a signal handler that stops at an epoch boundary, writes
// the metrics file and the checkpoints, and ends every rank alike. The same
// per-rank code serves both launchers: goroutine ranks in one process and
// MPI ranks under mpirun.
package job

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/data/partition"
	"github.com/gnn-spmd/gnn-spmd/gnn"
)

// Spec is one training run as a user asks for it. Run holds what fixes its
// numbers; the rest says on which data, how the ranks run and what they
// write. Each field is the train flag of the same name.
type Spec struct {
	Run gnn.Config

	// The data: a dataset (Data, an OGB directory or .h5 file) partitioned
	// on the fly, or a partition directory (Parts) of which every rank
	// reads only its own part.
	Data          string
	Split         string // "" = the dataset's only or first split
	Build         data.BuildOptions
	Normalize     bool // row-normalise the features (--normalize-features)
	Parts         string
	Partition     string // on the fly: random or metis
	PartitionSeed uint64
	NoComm        bool // drop the edges that cross parts

	// The ranks.
	Ranks       int    // goroutine ranks of this process (without mpirun)
	Comm        string // auto (mpi under a launcher, else local), mpi or local
	Device      string // cpu or cuda
	GPU         int    // the GPU of every rank of this process; -1: node-local rank modulo the visible GPUs
	Threads     int    // CPU threads for kernels, shared by the ranks of this process (0 = all)
	Overlap     bool   // compute what needs no halo row while the exchanges are in flight
	Reorder     string // order of every rank's owned rows: gnn.OrderNone, gnn.OrderRCM or gnn.OrderMETIS
	Recompute   bool   // GAT: recompute the attention coefficients in the backward pass
	CommTimeout time.Duration
	// GPUTransport moves MPI ranks' device payloads: GPUTransportNCCL,
	// GPUTransportMPI (host-staged) or GPUTransportAuto (NCCL unless two
	// ranks share a GPU). Goroutine ranks ignore it.
	GPUTransport string
	// EvalEvery: where evaluation needs a pass of its own (compression
	// evaluated at full precision, dropout), run it every EvalEvery epochs
	// and at the last (gnn.Trainer.EvalEvery).
	EvalEvery int

	// Weights, when set, makes the job a prediction with this checkpoint's
	// model and parameters instead of training (the predict command): Run
	// is then the checkpoint's.
	Weights string
	// Predict asks for predictions after training, or with Weights.
	Predict PredictSpec

	// What the run writes.
	Metrics         string // JSON Lines, one per epoch, then the summary
	Checkpoint      string
	CheckpointEvery int
	Keep            int
	Resume          string
	CPUProfile      string
}

// DefaultSpec is the VARCO authors' setting (gnn.DefaultConfig) on one
// rank, random partitions, checkpoints every 10 epochs, a 5-minute
// communication timeout.
func DefaultSpec() Spec {
	return Spec{Run: gnn.DefaultConfig(), Partition: partition.MethodRandom, Ranks: 1, Comm: "auto", Device: DefaultDevice,
		GPU: -1, GPUTransport: GPUTransportAuto, Overlap: true, Reorder: gnn.OrderMETIS, CommTimeout: 5 * time.Minute, EvalEvery: 1, CheckpointEvery: 10, Keep: 1,
		Predict: DefaultPredictSpec()}
}

// SpecError is a spec that cannot run: a usage error.
type SpecError struct{ Msg string }

func (e *SpecError) Error() string { return e.Msg }

// ExitCode is ExitBadInput.
func (e *SpecError) ExitCode() int { return ExitBadInput }

func specErrorf(format string, args ...any) error {
	return &SpecError{Msg: fmt.Sprintf(format, args...)}
}

// Validate checks s.
func (s *Spec) Validate() error {
	switch {
	case s.Data == "" && s.Parts == "":
		return specErrorf("%s: --data (or --parts) is required", s.command())
	case s.Threads < 0:
		return specErrorf("%s: --threads: got %d, expected >= 0", s.command(), s.Threads)
	case s.Ranks < 1:
		return specErrorf("%s: --ranks: got %d, expected >= 1", s.command(), s.Ranks)
	case s.Device != "cpu" && s.Device != "cuda":
		return specErrorf("%s: --device: got %q, expected cpu or cuda", s.command(), s.Device)
	case s.Device == "cuda" && DefaultDevice == "cpu":
		return specErrorf("%s: --device cuda: this binary is the CPU build (-tags cpu); build the GPU one with make cuda", s.command())
	case s.GPU < -1:
		return specErrorf("%s: --gpu: got %d, expected a GPU ordinal >= 0", s.command(), s.GPU)
	case s.GPU >= 0 && s.Device != "cuda":
		return specErrorf("%s: --gpu applies to --device cuda", s.command())
	case s.GPUTransport != GPUTransportAuto && s.GPUTransport != GPUTransportNCCL && s.GPUTransport != GPUTransportMPI:
		return specErrorf("%s: --gpu-transport: got %q, expected nccl, mpi or auto", s.command(), s.GPUTransport)
	case s.GPUTransport != GPUTransportAuto && s.Device != "cuda":
		return specErrorf("%s: --gpu-transport applies to --device cuda", s.command())
	case s.Recompute && s.Run.Model != "gat":
		return specErrorf("%s: --recompute applies to --model gat", s.command())
	case s.Reorder != gnn.OrderNone && s.Reorder != gnn.OrderRCM && s.Reorder != gnn.OrderMETIS:
		return specErrorf("%s: --reorder: got %q, expected %s, %s or %s", s.command(), s.Reorder, gnn.OrderNone, gnn.OrderRCM, gnn.OrderMETIS)
	case s.Partition != partition.MethodRandom && s.Partition != partition.MethodMETIS && s.Partition != partition.MethodPTScotch:
		return specErrorf("%s: --partition: got %q, expected random, metis or ptscotch", s.command(), s.Partition)
	case s.Partition == partition.MethodPTScotch && s.Parts == "" && !UnderMPI():
		return specErrorf("%s: --partition ptscotch runs under mpirun (PT-Scotch partitions with the job's MPI ranks); in one process use metis", s.command())
	case (s.Build.AddInverse || s.Build.AddSelfLoops) && (s.Parts != "" || !isDir(s.Data)):
		return specErrorf("%s: %s applies to an OGB-layout directory, whose edge list it completes while loading; %s holds its final edges: convert the directory again with the flag (gnn-spmd convert %s)",
			s.command(), buildFlagNames(s.Build), firstNonEmpty(s.Parts, s.Data), buildFlagNames(s.Build))
	case s.Parts != "" && s.Normalize:
		return specErrorf("%s: --normalize-features applies when loading --data, not to a --parts directory", s.command())
	case s.EvalEvery < 1:
		return specErrorf("%s: --eval-every: got %d, expected >= 1", s.command(), s.EvalEvery)
	case s.CheckpointEvery < 1:
		return specErrorf("%s: --checkpoint-every: got %d, expected >= 1", s.command(), s.CheckpointEvery)
	case s.Keep < 1 || s.Keep > MaxKeep:
		return specErrorf("%s: --keep: got %d, expected 1 to %d checkpoints", s.command(), s.Keep, MaxKeep)
	case s.CommTimeout < 0:
		return specErrorf("%s: --comm-timeout: got %v, expected >= 0 (0 = never)", s.command(), s.CommTimeout)
	}
	if err := s.Run.Validate(); err != nil {
		return specErrorf("%s: %v", s.command(), err)
	}
	if s.Weights != "" && s.Predict.Out == "" {
		return specErrorf("%s: --out is required", s.command())
	}
	if err := s.Predict.validate(s.Run.Layers, s.Weights != ""); err != nil {
		return err
	}
	_, err := s.transport()
	return err
}

// UnderMPI reports whether a launcher (Open MPI's mpirun or a PMI one such
// as MPICH's mpiexec) started this process.
func UnderMPI() bool {
	for _, v := range []string{"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"} {
		if os.Getenv(v) != "" {
			return true
		}
	}
	return false
}

// transport is the launcher the ranks run under: mpi or local.
func (s *Spec) transport() (string, error) {
	switch s.Comm {
	case "auto":
		if UnderMPI() {
			if s.Ranks != 1 {
				return "", specErrorf("train: --ranks %d under mpirun: the launcher sets the ranks (use one or the other)", s.Ranks)
			}
			return "mpi", nil
		}
		return "local", nil
	case "mpi", "local":
		return s.Comm, nil
	}
	return "", specErrorf("train: --comm: got %q, expected auto, mpi or local", s.Comm)
}

// ThreadsPerRank shares Threads (or all cores) among the q ranks of one
// process.
func (s *Spec) ThreadsPerRank(q int) int {
	t := s.Threads
	if t == 0 {
		t = runtime.GOMAXPROCS(0)
	}
	return max(1, t/q)
}

// checkpointing reports whether the run needs its identity (fingerprints).
func (s *Spec) checkpointing() bool { return s.Checkpoint != "" || s.Resume != "" || s.Weights != "" }

// isDir reports whether path is a directory (an OGB-layout dataset); a
// path that cannot be read is no directory, and reading it says why.
func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

// buildFlagNames names the edge-list flags set in b.
func buildFlagNames(b data.BuildOptions) string {
	var f []string
	if b.AddInverse {
		f = append(f, "--add-inverse")
	}
	if b.AddSelfLoops {
		f = append(f, "--self-loops")
	}
	return strings.Join(f, " ")
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// MaxKeep bounds --keep: each checkpoint write rotates the versions kept,
// and a run checks every version's name before it starts.
const MaxKeep = 1000

// command is the subcommand the spec comes from, for its errors.
func (s *Spec) command() string {
	if s.Weights != "" {
		return "predict"
	}
	return "train"
}

// checkpointIn is the checkpoint the job reads: --resume, or the predict
// command's weights.
func (s *Spec) checkpointIn() string {
	if s.Weights != "" {
		return s.Weights
	}
	return s.Resume
}
