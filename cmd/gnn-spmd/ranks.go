package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/gnn-spmd/gnn-spmd/comm"
	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/gnn"
	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// rankJob is everything one rank trains with.
type rankJob struct {
	rank    int
	dev     rankDevice
	trainer *gnn.Trainer
	release func() // the accelerator's transport
}

// rankDevice is a rank's kernels.Device, released when the rank ends.
type rankDevice interface {
	kernels.Device
	Close()
}

// close releases the job's transport and device.
func (j *rankJob) close() {
	if j.release != nil {
		j.release()
	}
	j.dev.Close()
}

// newDevice makes the rank's --device: the CPU with threads threads, or
// the GPU of the given node-local ordinal.
func (f *trainFlags) newDevice(threads, ordinal int) (rankDevice, error) {
	if f.device == "cpu" {
		return kernels.NewCPU(threads), nil
	}
	return newAccelerator(f.device, ordinal)
}

// jobInfo describes the run for rank 0's header lines.
type jobInfo struct {
	name               string
	nodes, edges       int64
	features, classes  int
	split              string
	train, valid, test int
	ranks              int
	partition          string
	haloRows           int // received per layer, summed over ranks
	loadSeconds        float64
	// The run's identity for checkpoints (set by identify or fromMeta).
	partMethod               string
	partSeed                 uint64
	fingerprint, partitionID uint64
}

// loadDataset reads --data, applies --normalize-features and picks the split.
func (f *trainFlags) loadDataset() (*data.Dataset, string, error) {
	ds, err := data.Load(f.data, data.OGBOptions{Build: *f.build})
	if err != nil {
		return nil, "", err
	}
	if f.normalize {
		ds.NormalizeFeatureRows()
	}
	split, err := pickSplit(ds, f.split)
	if err != nil {
		return nil, "", err
	}
	if ds.NumFeatures == 0 {
		return nil, "", usagef("train: dataset %s has no node features: training needs them", ds.Name)
	}
	return ds, split, nil
}

// newRankJob builds one rank's model, exchange and trainer.
func (f *trainFlags) newRankJob(c comm.Comm, local *gnn.Local, sh *data.Shard, threads, gpu int, inProcess bool) (*rankJob, error) {
	dev, err := f.newDevice(threads, gpu)
	if err != nil {
		return nil, err
	}
	mcfg := gnn.ModelConfig{Model: f.model, Layers: f.layers, Hidden: f.hidden, InDim: local.Features.Cols,
		Classes: local.NumClasses, Dropout: float32(f.dropout), Seed: f.seed}
	model, err := gnn.NewModel(mcfg, local, dev)
	if err != nil {
		dev.Close()
		return nil, usagef("train: %v", err)
	}
	model.Overlap = f.overlap
	job := &rankJob{rank: 0, dev: dev}
	var halo gnn.Halo = gnn.Alone{}
	var reduce gnn.Reducer = gnn.Alone{}
	if c != nil {
		job.rank = c.Rank()
		reduce = c
		switch {
		case !dev.Host():
			// Every rank builds its transport (NCCL's setup is collective),
			// halo traffic or not.
			if halo, reduce, job.release, err = acceleratorHalo(c, dev, sh, f.layers, inProcess); err != nil {
				dev.Close()
				return nil, err
			}
			if len(sh.Halo) == 0 && !anySend(sh.Send) {
				halo = gnn.Alone{}
			}
		case len(sh.Halo) > 0 || anySend(sh.Send):
			if halo, err = comm.NewExchange(c, len(sh.Owned), sh.Send, sh.RecvStart, f.layers); err != nil {
				dev.Close()
				return nil, err
			}
		}
	}
	tcfg := gnn.DefaultTrainConfig()
	tcfg.Epochs, tcfg.LR, tcfg.WeightDecay = f.epochs, float32(f.lr), float32(f.weightDecay)
	if job.trainer, err = gnn.NewTrainer(model, tcfg, halo, reduce); err != nil {
		job.close()
		return nil, usagef("train: %v", err)
	}
	if job.trainer.Compress, err = f.compression(); err != nil {
		job.close()
		return nil, usagef("train: %v", err)
	}
	return job, nil
}

func anySend(send [][]int32) bool {
	for _, s := range send {
		if len(s) > 0 {
			return true
		}
	}
	return false
}

// localView turns a shard into the rank's model view, dropping the cut
// edges first for --no-comm.
func (f *trainFlags) localView(sh *data.Shard) (*data.Shard, *gnn.Local, error) {
	if f.noComm {
		sh = sh.NoComm()
	}
	local, err := gnn.FromShard(sh, f.model)
	if err != nil {
		return nil, nil, usagef("train: %v", err)
	}
	return sh, local, nil
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

// threadsPerRank shares --threads (or all cores) among q ranks.
func (f *trainFlags) threadsPerRank(q int) int {
	t := f.threads
	if t == 0 {
		t = runtime.GOMAXPROCS(0)
	}
	return max(1, t/q)
}

// trainLocal runs --ranks Q ranks as goroutines of this process.
func trainLocal(f *trainFlags, stdout io.Writer) error {
	q := f.ranks
	log0 := rankLogger(f.log, 0) // the process's records carry rank 0
	f.intr = catchInterrupts(f.onSignal(log0, true))
	defer f.intr.stop()
	start := time.Now()
	info := jobInfo{ranks: q, partition: f.partition}
	var shards []*data.Shard
	var single *gnn.Local
	if f.parts != "" {
		for r := 0; r < q; r++ {
			sh, meta, err := data.ReadShard(f.parts, r, q)
			if err != nil {
				return err
			}
			shards = append(shards, sh)
			info.fromMeta(meta)
		}
	} else {
		ds, split, err := f.loadDataset()
		if err != nil {
			return err
		}
		info.fromDataset(ds, split)
		var parts []int32
		if q == 1 && !f.noComm {
			// One rank, whole graph: no shard copies.
			if single, err = gnn.SingleProcess(ds, split, f.model); err != nil {
				return usagef("train: %v", err)
			}
		} else {
			if parts, err = data.Partition(ds, split, q, f.partition, f.partitionSeed); err != nil {
				return err
			}
			if shards, err = data.BuildShards(ds, split, parts, q); err != nil {
				return err
			}
		}
		if f.checkpointing() {
			info.identify(f, ds, split, parts)
		}
	}
	info.loadSeconds = time.Since(start).Seconds()
	if !f.noComm {
		for _, sh := range shards {
			info.haloRows += len(sh.Halo)
		}
	}

	ck, err := f.newCheckpointer(&info)
	if err != nil {
		return err
	}
	rep := newReporter(f, info, stdout)
	defer rep.close()
	if err := rep.replay(ck); err != nil {
		return err
	}
	stop, err := f.startProfile()
	if err != nil {
		return err
	}
	defer stop()
	if single != nil {
		job, err := f.newRankJob(nil, single, nil, f.threadsPerRank(1), 0, true)
		if err != nil {
			return err
		}
		defer job.close()
		if err := ck.restore(job.trainer); err != nil {
			return err
		}
		job.trainer.Stop = f.stopFunc(0, nil)
		sum, err := job.trainer.Run(ck.report(rep, job.trainer))
		var stopped *gnn.StoppedError
		if errors.As(err, &stopped) {
			return f.interrupted(0, stopped)
		}
		if err != nil {
			return err
		}
		return rep.summary(sum, nil)
	}
	// Every rank builds its job and trains on its own goroutine; the first
	// rank to fail (or panic) fails the group, so that its peers return from
	// their collectives instead of waiting for it. A rank's watchdog that
	// gives up waiting fails the group with its *TimeoutError.
	var sum gnn.Summary
	var stopped *gnn.StoppedError
	err = comm.RunLocal(q, func(lc *comm.Local) error {
		r := lc.Rank()
		log := rankLogger(f.log, r)
		c, stopWatch := f.watch(lc, log, lc.Cancel)
		defer stopWatch()
		sh, local, err := f.localView(shards[r])
		if err != nil {
			return err
		}
		// In-process ranks share GPU 0: NCCL refuses two ranks on one GPU,
		// so their payloads move by device copies.
		job, err := f.newRankJob(c, local, sh, f.threadsPerRank(q), 0, true)
		if err != nil {
			return err
		}
		defer job.close()
		if err := ck.restore(job.trainer); err != nil {
			return err
		}
		log.Info("rank ready", "owned_nodes", len(sh.Owned), "halo_rows", len(sh.Halo))
		report := func(gnn.EpochStats) error { return nil }
		if r == 0 {
			report = ck.report(rep, job.trainer)
		}
		job.trainer.Stop = f.stopFunc(r, c)
		s, err := job.trainer.Run(report)
		var st *gnn.StoppedError
		if errors.As(err, &st) {
			// Every rank stops after the same epoch; none waits for another.
			err = nil
		}
		if r == 0 {
			sum, stopped = s, st
		}
		return err
	})
	if err != nil {
		return rankFailure(err)
	}
	if stopped != nil {
		return f.interrupted(0, stopped)
	}
	return rep.summary(sum, nil)
}

// trainMPI runs this process as one rank of an mpirun job. Setup errors are
// agreed on before training, so that one rank reports and all exit alike;
// an error during training aborts the whole job.
func trainMPI(f *trainFlags, stdout, stderr io.Writer) error {
	mc, err := comm.NewMPI()
	if err != nil {
		return err
	}
	defer mc.Close()
	rank, q := mc.Rank(), mc.Size()
	log := rankLogger(f.log, rank)
	f.intr = catchInterrupts(f.onSignal(log, rank == 0))
	defer f.intr.stop()
	c, stopWatch := f.watch(mc, log, mpiTimeout(mc, stderr))
	defer stopWatch()
	start := time.Now()
	info := jobInfo{ranks: q, partition: f.partition}
	job, ck, setupErr := f.setupMPIRank(c, &info)
	info.loadSeconds = time.Since(start).Seconds()
	if setupErr == nil {
		log.Info("rank ready", "seconds", info.loadSeconds)
	}
	if err := agree(c, setupErr); err != nil {
		// mpirun ends the job at the first non-zero exit, so the reporting
		// rank prints before anyone leaves the barrier.
		var se *silentExit
		if !errors.As(err, &se) {
			fmt.Fprintf(stderr, "gnn-spmd: %v\n", err)
			se = &silentExit{code: exitFailure}
			if isBadInput(err) {
				se.code = exitBadInput
			}
		}
		comm.Label(c, &opBarrier)
		c.Barrier()
		return se
	}
	defer job.close()
	// Halo rows summed over ranks for the header.
	counts := []float64{float64(info.haloRows)}
	comm.Label(c, &opHaloRows)
	if err := c.AllReduceFloat64(counts); err != nil {
		return err
	}
	info.haloRows = int(counts[0])
	out := io.Writer(io.Discard)
	if rank == 0 {
		qw := newQueuedWriter(stdout)
		defer qw.close(2 * time.Second)
		out = qw
		f.con.setOut(qw)
	}
	report := func(gnn.EpochStats) error { return nil }
	var rep *reporter
	if rank == 0 {
		rep = newReporter(f, info, out)
		defer rep.close()
		if err := rep.replay(ck); err != nil {
			fmt.Fprintf(stderr, "gnn-spmd: %v\n", err)
			c.Abort(exitFailure)
			return &silentExit{code: exitFailure}
		}
		report = ck.report(rep, job.trainer)
	}
	job.trainer.Stop = f.stopFunc(rank, c)
	sum, err := job.trainer.Run(report)
	var stopped *gnn.StoppedError
	var diverged *gnn.DivergedError
	switch {
	case errors.As(err, &stopped) || errors.As(err, &diverged):
		// Every rank ended after (or in) the same epoch, so none waits for
		// another: all exit alike, rank 0 reporting before anyone leaves
		// the barrier (mpirun ends the job at the first non-zero exit).
		var cause error = diverged
		code := exitFailure
		if stopped != nil {
			cause = f.interrupted(rank, stopped)
			code = exitCode(f.intr.signal())
		}
		if rank == 0 {
			rep.endBar()
			fmt.Fprintf(stderr, "gnn-spmd: %v\n", cause)
		}
		comm.Label(c, &opBarrier)
		c.Barrier()
		return &silentExit{code: code}
	case err != nil:
		fmt.Fprintf(stderr, "gnn-spmd: rank %d: %v\n", rank, err)
		c.Abort(exitFailure)
		return &silentExit{code: exitFailure}
	}
	// Every rank's peak memory, for the summary: ranks share a node's.
	rss := make([]float64, c.Size())
	rss[rank] = float64(maxRSSMiB())
	comm.Label(c, &opMemory)
	if err := c.AllReduceFloat64(rss); err != nil {
		return err
	}
	if rank == 0 {
		return rep.summary(sum, rss)
	}
	return nil
}

// setupMPIRank loads this rank's shard (its part file, or the dataset
// partitioned on the fly), reads --resume and builds its job.
func (f *trainFlags) setupMPIRank(c comm.Comm, info *jobInfo) (*rankJob, *checkpointer, error) {
	rank, q := c.Rank(), c.Size()
	var sh *data.Shard
	if f.parts != "" {
		s, meta, err := data.ReadShard(f.parts, rank, q)
		if err != nil {
			return nil, nil, err
		}
		sh = s
		info.fromMeta(meta)
	} else {
		ds, split, err := f.loadDataset()
		if err != nil {
			return nil, nil, err
		}
		info.fromDataset(ds, split)
		parts, err := data.Partition(ds, split, q, f.partition, f.partitionSeed)
		if err != nil {
			return nil, nil, err
		}
		if sh, err = data.BuildShard(ds, split, parts, q, rank); err != nil {
			return nil, nil, err
		}
		if f.checkpointing() {
			info.identify(f, ds, split, parts)
		}
	}
	sh, local, err := f.localView(sh)
	if err != nil {
		return nil, nil, err
	}
	info.haloRows = len(sh.Halo)
	ck, err := f.newCheckpointer(info)
	if err != nil {
		return nil, nil, err
	}
	job, err := f.newRankJob(c, local, sh, f.threadsPerRank(1), localRank(rank), false)
	if err != nil {
		return nil, nil, err
	}
	if err := ck.restore(job.trainer); err != nil {
		job.close()
		return nil, nil, err
	}
	// Loading left garbage (read buffers, the dataset when partitioning on
	// the fly) that the epochs, which allocate nothing, would never make the
	// collector return: hand it back now, as ranks share the node's memory.
	debug.FreeOSMemory()
	return job, ck, nil
}

// agree makes every rank learn whether any rank failed its setup. The lowest
// failed rank returns its own error (trainMPI prints it); the others exit
// with the same class of exit code, silently.
func agree(c comm.Comm, err error) error {
	q := c.Size()
	failed := make([]float64, q)
	if err != nil {
		failed[c.Rank()] = float64(exitFailure)
		if isBadInput(err) {
			failed[c.Rank()] = float64(exitBadInput)
		}
	}
	comm.Label(c, &opAgree)
	if rerr := c.AllReduceFloat64(failed); rerr != nil {
		if err != nil {
			return err
		}
		return rerr
	}
	for r, code := range failed {
		if code != 0 {
			if r == c.Rank() {
				return err
			}
			return &silentExit{code: int(code)}
		}
	}
	return nil
}

// silentExit ends a rank with a code after another rank reported the cause.
type silentExit struct{ code int }

func (e *silentExit) Error() string { return fmt.Sprintf("exit %d (reported by another rank)", e.code) }

func isBadInput(err error) bool {
	var ie *data.InputError
	var ue *usageError
	return errors.As(err, &ie) || errors.As(err, &ue)
}

// startProfile starts --cpuprofile, returning the function that stops it.
func (f *trainFlags) startProfile() (func(), error) {
	if f.cpuProfile == "" {
		return func() {}, nil
	}
	pf, err := os.Create(f.cpuProfile)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(pf); err != nil {
		pf.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); pf.Close() }, nil
}

func (i *jobInfo) fromDataset(ds *data.Dataset, split string) {
	sp := ds.Splits[split]
	i.name, i.nodes, i.edges = ds.Name, int64(ds.Graph.N), ds.Graph.NumEdges()
	i.features, i.classes, i.split = ds.NumFeatures, ds.NumClasses, split
	i.train, i.valid, i.test = len(sp.Train), len(sp.Valid), len(sp.Test)
}

func (i *jobInfo) fromMeta(m *data.PartitionMeta) {
	i.name, i.nodes, i.edges = m.DatasetName, int64(m.NumNodes), m.NumEdges
	i.features, i.classes, i.split = m.NumFeatures, m.NumClasses, m.Split
	i.train, i.valid, i.test = m.GlobalTrain, m.GlobalValid, m.GlobalTest
	i.partition = m.Method + " (from file)"
	i.partMethod, i.partSeed = m.Method, m.Seed
	i.fingerprint, i.partitionID = m.Fingerprint, m.PartitionID
}
