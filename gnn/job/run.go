package job

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"sync/atomic"
	"time"

	"github.com/gnn-spmd/gnn-spmd/comm"
	"github.com/gnn-spmd/gnn-spmd/comm/codec"
	"github.com/gnn-spmd/gnn-spmd/comm/halo"
	"github.com/gnn-spmd/gnn-spmd/data/outfile"
	"github.com/gnn-spmd/gnn-spmd/data/predfile"
	"github.com/gnn-spmd/gnn-spmd/gnn"
	"github.com/gnn-spmd/gnn-spmd/gnn/ckpt"
	"github.com/gnn-spmd/gnn-spmd/gnn/metrics"
	"github.com/gnn-spmd/gnn-spmd/internal/oneline"
	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// job is one run in this process.
type job struct {
	spec *Spec
	env  Env
	intr *interrupts
	// wd is an MPI rank's --comm-timeout watchdog once it runs: a signal
	// asks it what the rank is waiting in.
	wd atomic.Pointer[comm.Watchdog]
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
	var l launcher
	var q int
	if kind, _ := s.transport(); kind == "mpi" {
		mc, err := comm.NewMPI()
		if err != nil {
			return err
		}
		defer mc.Close()
		l, q = &mpiRank{j: j, mc: mc}, mc.Size()
		j.intr = catchInterrupts(j.signalWhileWaiting(onSignal(&s, j.rankLog(mc.Rank()), mc.Rank() == 0)))
	} else {
		l, q = &localRanks{j: j, q: s.Ranks}, s.Ranks
		j.intr = catchInterrupts(onSignal(&s, j.rankLog(0), true)) // the process's records carry rank 0
	}
	defer j.intr.stop()
	p := newProcess(j, l, q)
	defer p.release()
	return l.run(p, func(c comm.Comm) error { return j.rank(l, p, c) })
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
	// transport says how a GPU rank's halo payloads move, for the run
	// header ("" on the CPU and for one rank).
	transport string
}

// rankDevice is a rank's kernels.Device, released when the rank ends.
type rankDevice interface {
	kernels.Device
	Close()
}

// acceleratorComm is a GPU rank's halo exchange and reducer, the release
// of its transport and what the header says of it.
type acceleratorComm struct {
	halo      halo.Exchanger
	reduce    gnn.Reducer
	release   func()
	transport string
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
// (a job of one rank has no exchange and no reducer), on the CPU with
// threads threads or on the GPU its node-local rank gpu picks (or --gpu).
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
	rj := &rankJob{dev: dev, comm: c, rank: c.Rank()}
	var x halo.Exchanger
	var reduce gnn.Reducer
	if c.Size() > 1 {
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
			rj.release, reduce, rj.transport = a.release, a.reduce, a.transport
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
	if rj.trainer, err = gnn.NewTrainer(model, cfg.TrainConfig(), cfg.Compress, x, reduce); err != nil {
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
// header.
func communication(s *Spec) string {
	if s.NoComm {
		return "no communication (cut edges dropped)"
	}
	return s.Run.Compress.Describe(s.Run.Epochs)
}

func (j *job) newReporter(info *Info, ck *checkpointer, transport string) (*reporter, error) {
	info.Spec = j.spec
	info.Communication = communication(j.spec)
	info.Device = fmt.Sprintf("cpu (threads per rank: %d), gemm %s, aggregation %s, codecs %s",
		j.spec.ThreadsPerRank(j.spec.Ranks), kernels.GemmInfo(), kernels.SIMD(), codec.FastPath())
	if j.spec.Device == "cuda" {
		info.Device = "cuda (CUDA kernels, cuBLAS; one GPU per rank)"
	}
	if transport != "" {
		info.Device += "; " + transport
	}
	info.Device += "; " + orderText(j.spec.Reorder, info.Reordered, info.Ranks)
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

// orderText says in what order the ranks' rows are: the --reorder order,
// on the ranks it moved.
func orderText(order string, reordered, ranks int) string {
	switch {
	case order == gnn.OrderNone:
		return "rows as given"
	case reordered == 0:
		return fmt.Sprintf("rows as given (--reorder %s kept every rank's order: too few rows to cluster)", order)
	case reordered < ranks:
		return fmt.Sprintf("rows in %s order on %d of %d ranks (the others too small to cluster)", order, reordered, ranks)
	}
	return fmt.Sprintf("rows in %s order", order)
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

// rank is one rank's whole job, the same for goroutine ranks and MPI
// ranks (l says what differs): rank 0 claims the outputs, every rank
// compares its settings with rank 0's, reads its data, compares what the
// data decide, builds its model and trainer, and they agree on the setup
// before training; after training they end together or, where one rank
// failed alone, the job ends from there.
func (j *job) rank(l launcher, p *process, c comm.Comm) error {
	s := j.spec
	rank, q := c.Rank(), c.Size()
	var claimErr error
	if rank == 0 {
		claimErr = p.claim()
	}
	if err := agreeSettings(c, s.settings(q), claimErr); err != nil {
		return l.endTogether(c, err, ExitCode(err))
	}
	start := time.Now()
	rj, v, setupErr := j.setupRank(l, p, c)
	if setupErr == nil {
		j.rankLog(rank).Info("rank ready", "owned_nodes", v.NumOwned, "halo_rows", v.NumHalo, "seconds", time.Since(start).Seconds())
	}
	if err := agree(c, setupErr); err != nil {
		return l.endTogether(c, err, ExitCode(err))
	}
	defer rj.close()
	info, err := j.runInfo(p, c, v, time.Since(start).Seconds())
	if err != nil {
		return err
	}
	var rep *reporter
	if rank == 0 {
		if rep, err = j.newReporter(&info, p.ck, rj.transport); err != nil {
			return l.abort(c, err)
		}
		defer rep.close()
		// Rank 0 profiles its own process, as it alone writes the outputs.
		stopProfile, err := j.startProfile()
		if err != nil {
			return l.abort(c, err)
		}
		defer stopProfile()
	}
	if w := p.weights; w != nil {
		meta := predfile.Meta{Fingerprint: w.data.Fingerprint, Checkpoint: w.path, Params: s.Predict.Params, ParamsEpoch: w.epoch}
		return endPredict(l, c, j.predict(l, c, rj.trainer, meta, w.recorded, &info))
	}
	sum, err := rj.trainer.Run(rj.afterEpoch(p.ck, rep))
	var stopped *gnn.StoppedError
	var diverged *gnn.DivergedError
	switch {
	case errors.As(err, &stopped):
		// Every rank ended after the same epoch, so none waits for another.
		return l.endTogether(c, j.interrupted(rank, stopped), exitCodeOf(j.intr.signal()))
	case errors.As(err, &diverged):
		return l.endTogether(c, diverged, ExitFailure)
	case err != nil:
		return l.abort(c, &rankError{rank: rank, err: err})
	}
	if err := p.ck.final(c, rj.trainer, &sum, rank == 0); err != nil {
		return l.abort(c, &rankError{rank: rank, err: err})
	}
	if s.Predict.Out != "" {
		if err := j.predictTrained(l, c, rj.trainer, &sum, p.src, &info); err != nil {
			return endPredict(l, c, err)
		}
	}
	// Every process's peak memory and every rank's residual state, for the
	// summary. (Both are exact in float64.)
	rss, err := l.peakRSS(c)
	if err != nil {
		return err
	}
	residual := make([]float64, q)
	residual[rank] = float64(rj.residualBytes())
	comm.Label(c, &opMemory)
	if err := c.AllReduceFloat64(residual); err != nil {
		return err
	}
	if rank != 0 {
		return nil
	}
	perRank := make([]int64, q)
	for r, b := range residual {
		perRank[r] = int64(b)
	}
	return rep.done(sum, rss, perRank)
}

// setupRank reads --resume and the data of this rank (once for all the
// ranks of the process), turns them into the rank's view, compares what
// the data decide with rank 0's, and builds the rank's job.
func (j *job) setupRank(l launcher, p *process, c comm.Comm) (*rankJob, *gnn.View, error) {
	rank := c.Rank()
	resume, removeCopy, err := l.resumeCopy(c, j.spec.checkpointIn())
	defer removeCopy()
	var v *gnn.View
	if err == nil {
		err = p.setup(rank, c, c.Size(), resume)
	}
	if err == nil {
		v, err = p.view(rank)
	}
	// Every rank takes part, failed or not, so that all learn of a failure.
	var mine []setting
	if err == nil {
		mine = dataSettings(j.identity(p.src), p.ck)
	}
	if err := agreeSettings(c, mine, err); err != nil {
		return nil, nil, err
	}
	rj, err := j.newRankJob(c, v, j.spec.ThreadsPerRank(len(p.ranks)), l.gpu(rank), l.inProcess())
	if err != nil {
		return nil, nil, err
	}
	restore := p.ck.restore
	if p.weights != nil {
		restore = p.weights.load
	}
	if err := restore(rj.trainer); err != nil {
		rj.close()
		return nil, nil, err
	}
	p.loaded(rank)
	return rj, v, nil
}

// runInfo describes the run for the header: the data, and over all ranks
// the halo rows and the ranks whose rows --reorder moved.
func (j *job) runInfo(p *process, c comm.Comm, v *gnn.View, loadSeconds float64) (Info, error) {
	info := p.src.info
	info.Ranks, info.LoadSeconds = c.Size(), loadSeconds
	counts := []float64{float64(v.NumHalo), 0}
	if p.reordered(c.Rank()) {
		counts[1] = 1
	}
	comm.Label(c, &opHaloRows)
	if err := c.AllReduceFloat64(counts); err != nil {
		return info, err
	}
	info.HaloRows, info.Reordered = int(counts[0]), int(counts[1])
	return info, nil
}

// report prints err as the job's one line (a newline in a path is
// escaped).
func (j *job) report(err error) {
	fmt.Fprintf(j.env.Stderr, "gnn-spmd: %s\n", oneline.String(err.Error()))
}

// startProfile starts --cpuprofile, returning the function that stops it.
func (j *job) startProfile() (func(), error) {
	if j.spec.CPUProfile == "" {
		return func() {}, nil
	}
	// The profile goes to a temporary file renamed over the path when it
	// stops (a link there is replaced, never written through).
	path := j.spec.CPUProfile
	tmp := outfile.TempName(path, os.Getpid())
	outfile.Track(tmp)
	pf, err := os.Create(tmp)
	if err != nil {
		outfile.Untrack(tmp)
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(pf); err != nil {
		pf.Close()
		os.Remove(tmp)
		outfile.Untrack(tmp)
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		err := pf.Close()
		if err == nil {
			err = outfile.Publish(tmp, path)
		}
		if err != nil {
			os.Remove(tmp)
			j.report(fmt.Errorf("--cpuprofile %s: %w", path, err))
		}
		outfile.Untrack(tmp)
	}, nil
}

// quiet is the observer of a run nobody watches.
type quiet struct{}

func (quiet) Start(*Info)                {}
func (quiet) Resumed(string, int, int)   {}
func (quiet) Epoch(*metrics.Epoch) error { return nil }
func (quiet) Done(*metrics.Summary)      {}
func (quiet) Predicted(*PredictInfo)     {}
