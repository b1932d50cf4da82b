package job

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/gnn-spmd/gnn-spmd/comm"
	"github.com/gnn-spmd/gnn-spmd/comm/codec"
	"github.com/gnn-spmd/gnn-spmd/comm/halo"
	"github.com/gnn-spmd/gnn-spmd/gnn"
	"github.com/gnn-spmd/gnn-spmd/gnn/ckpt"
	"github.com/gnn-spmd/gnn-spmd/gnn/metrics"
	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// job is one run in this process.
type job struct {
	spec *Spec
	env  Env
	intr *interrupts
	dist comm.Comm // an MPI rank's communicator, for partitions by slices
}

// Run runs the job s asks for, as the ranks of this process: goroutine
// ranks (Spec.Ranks) or, under an MPI launcher, this process's rank. It
// returns nil when training finished; ExitCode maps any other outcome to
// the process's exit code. An *Exit has been reported already (on
// env.Stderr, by this rank or another); any other error is for the caller
// to report.
func Run(s Spec, env Env) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if env.Log == nil {
		env.Log = slog.New(slog.DiscardHandler)
	}
	if env.Stderr == nil {
		env.Stderr = io.Discard
	}
	if env.Observer == nil {
		env.Observer = quiet{}
	}
	j := &job{spec: &s, env: env}
	if kind, _ := s.transport(); kind == "mpi" {
		return j.runMPI()
	}
	return j.runLocal()
}

// rankLog is the log with rank=N on every record.
func (j *job) rankLog(rank int) *slog.Logger { return j.env.Log.With("rank", rank) }

// rankJob is everything one rank trains with.
type rankJob struct {
	rank    int
	comm    comm.Comm // nil for a run of one rank
	dev     rankDevice
	trainer *gnn.Trainer
	release func() // the accelerator's transport
}

// rankDevice is a rank's kernels.Device, released when the rank ends.
type rankDevice interface {
	kernels.Device
	Close()
}

// acceleratorComm is a GPU rank's halo exchange and reducer, and the
// release of its transport.
type acceleratorComm struct {
	halo    halo.Exchanger
	reduce  gnn.Reducer
	release func()
}

// residualBytes is the memory of the rank's residual state.
func (rj *rankJob) residualBytes() int64 {
	if rj.trainer.Halo == nil {
		return 0
	}
	return rj.trainer.Halo.ResidualBytes()
}

// close releases the job's transport and device.
func (rj *rankJob) close() {
	if rj.release != nil {
		rj.release()
	}
	rj.dev.Close()
}

// newRankJob builds one rank's device, model, exchange and trainer over c
// (nil for a one-rank run), on the CPU with threads threads or on the GPU
// its node-local rank gpu picks (or --gpu).
func (j *job) newRankJob(c comm.Comm, v *gnn.View, threads, gpu int, inProcess bool) (*rankJob, error) {
	s := j.spec
	var dev rankDevice = kernels.NewCPU(threads)
	if s.Device != "cpu" {
		var err error
		if dev, err = j.newAccelerator(c, gpu); err != nil {
			return nil, j.acceleratorFailed(c, inProcess, err)
		}
	}
	cfg := s.Run
	cfg.InDim, cfg.Classes = v.Input.Cols, v.NumClasses
	mc := cfg.ModelConfig()
	mc.Recompute = s.Recompute
	model, err := gnn.NewModel(mc, v, dev)
	if err != nil {
		dev.Close()
		return nil, j.acceleratorFailed(c, inProcess, specErrorf("train: %v", err))
	}
	model.Overlap = s.Overlap
	rj := &rankJob{dev: dev, comm: c}
	var x halo.Exchanger
	var reduce gnn.Reducer
	if c != nil {
		rj.rank = c.Rank()
		// Every rank takes part in every exchange (a collective), whether
		// or not it has rows to send; --no-comm leaves none to anyone.
		exchange := !s.NoComm
		switch {
		case !dev.Host():
			// Every rank builds its transport (NCCL's setup is collective).
			a, err := j.acceleratorHalo(c, dev, v, cfg.Layers, inProcess)
			if err != nil {
				dev.Close()
				return nil, err
			}
			rj.release, reduce = a.release, a.reduce
			if exchange {
				x = a.halo
			}
		default:
			reduce = gnn.HostReducer(c)
			if exchange {
				if x, err = halo.NewHost(v.Plan, c, cfg.Layers); err != nil {
					dev.Close()
					return nil, err
				}
			}
		}
	}
	if rj.trainer, err = gnn.NewTrainer(model, cfg.TrainConfig(), cfg.CompressConfig, x, reduce); err != nil {
		rj.close()
		return nil, specErrorf("train: %v", err)
	}
	rj.trainer.Stop = j.intr.requested
	rj.trainer.EvalEvery = s.EvalEvery
	return rj, nil
}

// identity is the run's identity for checkpoints: its settings with the
// widths its data decide, and the data's identity.
func (j *job) identity(src *source) ckpt.Config {
	cfg := j.spec.Run
	cfg.InDim, cfg.Classes = src.info.Features, src.info.Classes
	return ckpt.NewConfig(cfg, src.id)
}

// reporter is rank 0's side of a run: the metrics file, the checkpoints
// and the observer.
type reporter struct {
	ranks   int
	ck      *checkpointer
	metrics *metrics.Writer
	obs     Observer
}

// newReporter starts rank 0's reporting: the observer's header, and for a
// resumed run the restored epochs' metrics lines, so that the file reads
// as an uninterrupted run's.
// communication describes the halo traffic of a validated spec for the run
// header: the codecs, the schedule, and residual coding, including where
// the device left the recommended setting without it.
func communication(s *Spec) string {
	cc := s.Run.CompressConfig
	switch {
	case s.NoComm:
		return "no communication (cut edges dropped)"
	case !cc.Enabled():
		return "full communication"
	}
	epochs := s.Run.Epochs
	out := fmt.Sprintf("halo compression %s forward, %s backward, schedule %s", cc.Codec, cc.Backward(), cc.ScheduleName(epochs))
	if b := cc.BackwardBits(epochs); b > 0 {
		out += fmt.Sprintf(" (gradients at %d bit)", b)
	}
	switch {
	case cc.ResidualOn():
		out += map[string]string{"on": ", residual coding", "forward": ", residual coding of the activations"}[cc.Residual]
		if cc.ResidualSkip > 0 {
			out += fmt.Sprintf(" (rows skipped below %g of their size)", cc.ResidualSkip)
		}
	case s.Device == "cuda" && cc.Schedule == "recommended" && cc.Codec == "quant":
		out += ", no residual coding, gradient row skipping or shared row headers (the CUDA exchange does not implement them yet; on --device cpu the recommended setting uses all three)"
	}
	if cc.GroupWidth > 0 {
		out += fmt.Sprintf(", rows narrower than %d values sharing headers", cc.GroupWidth)
	}
	if cc.GradSkip > 0 {
		out += fmt.Sprintf(", gradient rows below %g of the mean squared norm left out", cc.GradSkip)
	}
	return out
}

func (j *job) newReporter(info *Info, ck *checkpointer) (*reporter, error) {
	info.Spec = j.spec
	info.Communication = communication(j.spec)
	info.Device = fmt.Sprintf("cpu (threads per rank: %d), gemm %s, aggregation %s, codecs %s",
		j.spec.ThreadsPerRank(j.spec.Ranks), kernels.GemmInfo(), kernels.SIMD(), codec.FastPath())
	if j.spec.Device == "cuda" {
		info.Device = "cuda (CUDA kernels, cuBLAS; one GPU per rank)"
	}
	info.Device += fmt.Sprintf("; rows in %s order", j.spec.Reorder)
	r := &reporter{ranks: info.Ranks, ck: ck, metrics: metrics.NewWriter(j.spec.Metrics), obs: j.env.Observer}
	r.obs.Start(info)
	if ck.resumed == nil {
		return r, nil
	}
	r.obs.Resumed(ck.from, ck.resumed.Epoch, ck.cfg.Run.Epochs)
	for i := range ck.resumed.History {
		if err := r.writeMetrics(&ck.resumed.History[i]); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (r *reporter) writeMetrics(e *metrics.Epoch) error {
	if err := r.metrics.Epoch(e); err != nil {
		return fmt.Errorf("--metrics: %w", err)
	}
	return nil
}

// epoch is rank 0's report of a finished epoch: its metrics line, the
// observer, then the checkpoint when one is due (with every rank's
// residual state).
func (r *reporter) epoch(t *gnn.Trainer, e *metrics.Epoch, residual []halo.ResidualTable) error {
	if err := r.writeMetrics(e); err != nil {
		return err
	}
	if err := r.obs.Epoch(e); err != nil {
		return err
	}
	return r.ck.after(t, e, residual)
}

// afterEpoch is a rank's step after each epoch: every rank takes part in
// gathering the residual state for a checkpoint, then rank 0 (rep not nil)
// reports.
func (rj *rankJob) afterEpoch(ck *checkpointer, rep *reporter) func(*metrics.Epoch) error {
	return func(e *metrics.Epoch) error {
		residual, err := ck.gather(rj.comm, rj.trainer.Halo, e)
		if err != nil || rep == nil {
			return err
		}
		return rep.epoch(rj.trainer, e, residual)
	}
}

// done writes the summary of a finished run. rankRSS holds every rank's
// peak memory in MiB, residual the bytes of every rank's residual state.
func (r *reporter) done(s metrics.Summary, rankRSS, residual []int64) error {
	s.Ranks, s.RankRSSMiB = r.ranks, rankRSS
	for _, b := range residual {
		if b > 0 {
			s.RankResidualBytes = residual
		}
	}
	for _, v := range rankRSS {
		s.MaxRSSMiB = max(s.MaxRSSMiB, v)
	}
	r.obs.Done(&s)
	if err := r.metrics.Summary(&s); err != nil {
		return fmt.Errorf("--metrics: %w", err)
	}
	return nil
}

func (r *reporter) close() { r.metrics.Close() }

// runLocal runs Spec.Ranks ranks as goroutines of this process.
func (j *job) runLocal() error {
	s, q := j.spec, j.spec.Ranks
	release, err := s.claimOutputs()
	if err != nil {
		return err
	}
	defer release()
	j.intr = catchInterrupts(onSignal(s, j.rankLog(0), true)) // the process's records carry rank 0
	defer j.intr.stop()
	start := time.Now()
	ranks := make([]int, q)
	for r := range ranks {
		ranks[r] = r
	}
	src, err := j.load(ranks, q, true)
	if err != nil {
		return err
	}
	src.info.LoadSeconds = time.Since(start).Seconds()
	if err := j.checkMemory(src, 1); err != nil {
		return err
	}
	if !s.NoComm {
		for _, sh := range src.shards {
			src.info.HaloRows += len(sh.Halo)
		}
	}
	ck, err := newCheckpointer(s, "", j.identity(src), src.info.Dataset, j.rankLog(0))
	if err != nil {
		return err
	}
	rep, err := j.newReporter(&src.info, ck)
	if err != nil {
		return err
	}
	defer rep.close()
	stopProfile, err := j.startProfile()
	if err != nil {
		return err
	}
	defer stopProfile()
	var sum metrics.Summary
	var stopped *gnn.StoppedError
	residual := make([]int64, q) // each rank writes its own
	train := func(c comm.Comm, v *gnn.View, threads int) error {
		rank := 0
		if c != nil {
			rank = c.Rank()
		}
		// In-process ranks share GPU 0: NCCL refuses two ranks on one GPU,
		// so their payloads move by device copies.
		rj, err := j.newRankJob(c, v, threads, 0, true)
		if err != nil {
			return err
		}
		defer rj.close()
		if err := ck.restore(rj.trainer); err != nil {
			return err
		}
		j.rankLog(rank).Info("rank ready", "owned_nodes", v.NumOwned, "halo_rows", v.NumHalo)
		var reports *reporter
		if rank == 0 {
			reports = rep
		}
		s, err := rj.trainer.Run(rj.afterEpoch(ck, reports))
		residual[rank] = rj.residualBytes()
		var st *gnn.StoppedError
		if errors.As(err, &st) {
			// Every rank stops after the same epoch; none waits for another.
			err = nil
		}
		if rank == 0 {
			sum, stopped = s, st
		}
		return err
	}
	if src.single != nil {
		err = train(nil, src.single, s.ThreadsPerRank(1))
	} else {
		// Every rank trains on its own goroutine; the first rank to fail
		// (or panic) fails the group, so that its peers return from their
		// collectives instead of waiting for it. A rank's watchdog that
		// gives up waiting fails the group with its timeout.
		err = comm.RunLocal(q, func(lc *comm.Local) error {
			c, stopWatch := j.watch(lc, j.rankLog(lc.Rank()), lc.Cancel)
			defer stopWatch()
			v, _, err := j.view(src, lc.Rank())
			if err != nil {
				return err
			}
			return train(c, v, s.ThreadsPerRank(q))
		})
	}
	if err != nil {
		// A failure every rank shares (a diverged loss) is reported as
		// itself, not as one rank's.
		var de *gnn.DivergedError
		if errors.As(err, &de) {
			return de
		}
		return err
	}
	if stopped != nil {
		return j.interrupted(0, stopped)
	}
	return rep.done(sum, []int64{PeakRSSMiB()}, residual)
}

// runMPI runs this process as one rank of an MPI job. Setup errors are
// agreed on before training, so that one rank reports and all exit alike;
// an error during training aborts the whole job.
func (j *job) runMPI() error {
	s := j.spec
	mc, err := comm.NewMPI()
	if err != nil {
		return err
	}
	defer mc.Close()
	rank, q := mc.Rank(), mc.Size()
	log := j.rankLog(rank)
	j.intr = catchInterrupts(onSignal(s, log, rank == 0))
	defer j.intr.stop()
	// A watchdog that fires prints its line, then MPI_Abort (or, with the
	// stuck call holding MPI, an exit that makes mpirun end the others).
	c, stopWatch := j.watch(mc, log, func(err error) {
		j.report(err)
		mc.Abort(ExitFailure)
	})
	defer stopWatch()
	var claimErr error
	if rank == 0 {
		var release func()
		if release, claimErr = s.claimOutputs(); claimErr == nil {
			defer release()
		}
	}
	if err := agreeSettings(c, s.settings(q), claimErr); err != nil {
		return j.endTogether(c, rank, err, ExitCode(err))
	}
	start := time.Now()
	rj, src, ck, setupErr := j.setupMPIRank(c)
	var info Info
	if src != nil {
		info = src.info
	}
	info.LoadSeconds = time.Since(start).Seconds()
	if setupErr == nil {
		log.Info("rank ready", "seconds", info.LoadSeconds)
	}
	if err := agree(c, setupErr); err != nil {
		return j.endTogether(c, rank, err, ExitCode(err))
	}
	defer rj.close()
	// Halo rows summed over ranks for the header.
	counts := []float64{float64(info.HaloRows)}
	comm.Label(c, &opHaloRows)
	if err := c.AllReduceFloat64(counts); err != nil {
		return err
	}
	info.HaloRows = int(counts[0])
	var rep *reporter
	if rank == 0 {
		info.Ranks = q
		if rep, err = j.newReporter(&info, ck); err != nil {
			return j.abort(c, err)
		}
		defer rep.close()
		// Rank 0 profiles its own process, as it alone writes the outputs.
		stopProfile, err := j.startProfile()
		if err != nil {
			return j.abort(c, err)
		}
		defer stopProfile()
	}
	sum, err := rj.trainer.Run(rj.afterEpoch(ck, rep))
	var stopped *gnn.StoppedError
	var diverged *gnn.DivergedError
	switch {
	case errors.As(err, &stopped):
		// Every rank ended after the same epoch, so none waits for another.
		return j.endTogether(c, rank, j.interrupted(rank, stopped), exitCodeOf(j.intr.signal()))
	case errors.As(err, &diverged):
		return j.endTogether(c, rank, diverged, ExitFailure)
	case err != nil:
		return j.abort(c, fmt.Errorf("rank %d: %w", rank, err))
	}
	// Every rank's peak memory and residual state, for the summary: ranks
	// share a node's memory. (Both are exact in float64.)
	mem := make([]float64, 2*q)
	mem[rank], mem[q+rank] = float64(PeakRSSMiB()), float64(rj.residualBytes())
	comm.Label(c, &opMemory)
	if err := c.AllReduceFloat64(mem); err != nil {
		return err
	}
	if rank != 0 {
		return nil
	}
	perRank := make([]int64, 2*q)
	for i, v := range mem {
		perRank[i] = int64(v)
	}
	return rep.done(sum, perRank[:q], perRank[q:])
}

// report prints err as the job's one line.
func (j *job) report(err error) { fmt.Fprintf(j.env.Stderr, "gnn-spmd: %v\n", err) }

// endTogether ends an MPI rank whose peers end at the same point (all
// failed setup, or stopped or diverged at the same epoch): the rank with
// the cause reports it before anyone leaves the barrier (mpirun ends the
// job at the first non-zero exit), and every rank exits with code.
func (j *job) endTogether(c comm.Comm, rank int, cause error, code int) error {
	var ex *Exit
	if !errors.As(cause, &ex) && (rank == 0 || !isRankShared(cause)) {
		j.report(cause)
	}
	comm.Label(c, &opBarrier)
	c.Barrier()
	return &Exit{Code: code}
}

// isRankShared reports whether every rank holds the same cause (and rank 0
// alone reports it).
func isRankShared(err error) bool {
	var de *gnn.DivergedError
	var ie *InterruptedError
	return errors.As(err, &de) || errors.As(err, &ie)
}

// abort ends the whole MPI job from this rank after reporting err.
func (j *job) abort(c comm.Comm, err error) error {
	j.report(err)
	c.Abort(ExitFailure)
	return &Exit{Code: ExitFailure}
}

// setupMPIRank loads this rank's shard (its part file, or the dataset
// partitioned on the fly), reads --resume and builds its job.
func (j *job) setupMPIRank(c comm.Comm) (*rankJob, *source, *checkpointer, error) {
	rank := c.Rank()
	j.dist = c
	resume, removeCopy, err := shareResume(c, j.spec.Resume)
	defer removeCopy()
	var src *source
	var v *gnn.View
	var ck *checkpointer
	if err == nil {
		src, v, ck, err = j.loadMPIRank(rank, c.Size(), resume)
	}
	// Every rank takes part, failed or not, so that all learn of a failure.
	var mine []setting
	if err == nil {
		mine = dataSettings(j.identity(src), ck)
	}
	if err := agreeSettings(c, mine, err); err != nil {
		return nil, src, nil, err
	}
	rj, err := j.newRankJob(c, v, j.spec.ThreadsPerRank(1), localRank(rank), false)
	if err != nil {
		return nil, src, nil, err
	}
	if err := ck.restore(rj.trainer); err != nil {
		rj.close()
		return nil, src, nil, err
	}
	// Loading left garbage (read buffers, the dataset when partitioning on
	// the fly) that the epochs, which allocate nothing, would never make the
	// collector return: hand it back now, as ranks share the node's memory.
	src.shards = nil
	debug.FreeOSMemory()
	return rj, src, ck, nil
}

// loadMPIRank reads an MPI rank's data and --resume (from the file at
// resume, "" for the flag's): nothing collective.
func (j *job) loadMPIRank(rank, q int, resume string) (*source, *gnn.View, *checkpointer, error) {
	src, err := j.load([]int{rank}, q, false)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := j.checkMemory(src, processesOnNode()); err != nil {
		return src, nil, nil, err
	}
	v, sh, err := j.view(src, rank)
	if err != nil {
		return src, nil, nil, err
	}
	src.info.HaloRows = len(sh.Halo)
	ck, err := newCheckpointer(j.spec, resume, j.identity(src), src.info.Dataset, j.rankLog(0))
	if err != nil {
		return src, nil, nil, err
	}
	return src, v, ck, nil
}

// localRank is the node-local rank that picks an MPI rank's GPU, from the
// launcher's environment (Open MPI, MPICH's Hydra, Slurm), else the world
// rank.
func localRank(worldRank int) int {
	for _, k := range []string{"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"} {
		if v, err := strconv.Atoi(os.Getenv(k)); err == nil && v >= 0 {
			return v
		}
	}
	return worldRank
}

// startProfile starts --cpuprofile, returning the function that stops it.
func (j *job) startProfile() (func(), error) {
	if j.spec.CPUProfile == "" {
		return func() {}, nil
	}
	pf, err := os.Create(j.spec.CPUProfile)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(pf); err != nil {
		pf.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); pf.Close() }, nil
}

// quiet is the observer of a run nobody watches.
type quiet struct{}

func (quiet) Start(*Info)                {}
func (quiet) Resumed(string, int, int)   {}
func (quiet) Epoch(*metrics.Epoch) error { return nil }
func (quiet) Done(*metrics.Summary)      {}
