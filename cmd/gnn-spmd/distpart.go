package main

// partition under mpirun: every process reads only its slice of the
// dataset file, and the processes partition it together.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gnn-spmd/gnn-spmd/cmd/internal/cli"
	"github.com/gnn-spmd/gnn-spmd/comm"
	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/data/partition"
	"github.com/gnn-spmd/gnn-spmd/gnn/job"
	"github.com/gnn-spmd/gnn-spmd/internal/oneline"
)

// distPartition is a partition command's flags.
type distPartition struct {
	path, out, method, split string
	parts                    int
	seed                     uint64
	normalize                bool
	build                    data.BuildOptions
	timeout                  time.Duration
}

// settings are what every process must have alike (paths may differ
// between hosts; the input's content is compared by Distribute).
func (d distPartition) settings() []partition.Setting {
	return []partition.Setting{
		{Name: "the build", Value: job.BuildID()},
		{Name: "--parts", Value: strconv.Itoa(d.parts)},
		{Name: "--method", Value: d.method},
		{Name: "--seed", Value: strconv.FormatUint(d.seed, 10)},
		{Name: "--split", Value: d.split},
		{Name: "--normalize-features", Value: strconv.FormatBool(d.normalize)},
	}
}

// runPartitionMPI is partition as one process of an MPI job. A failure is
// agreed on: the lowest failing rank prints it before any rank exits, and
// every rank exits with its code; a rank that dies or stops ends the job
// within --comm-timeout (the watchdog, or mpirun).
func runPartitionMPI(d distPartition, stdout, stderr io.Writer) error {
	mc, err := comm.NewMPI()
	if err != nil {
		return err
	}
	defer mc.Close()
	rank, size := mc.Rank(), mc.Size()
	var c comm.Comm = mc
	var out *partition.Output
	var made atomic.Pointer[partition.Output] // out, for the watchdog's goroutine
	if d.timeout > 0 {
		w := comm.NewWatchdog(mc, comm.WatchdogConfig{Timeout: d.timeout, OnTimeout: func(e *comm.TimeoutError) {
			fmt.Fprintf(stderr, "gnn-spmd: %s; aborting the job (--comm-timeout)\n", oneline.String(e.Error()))
			made.Load().Abort() // a leader's temporary directory
			mc.Abort(1)
		}})
		defer w.Stop()
		c = w
	}
	start := time.Now()
	switch {
	case d.parts != size:
		err = cli.Usagef("partition: --parts %d under mpirun with %d processes: a distributed partition makes one part per process; run mpirun -np %d", d.parts, size, d.parts)
	case d.method == partition.MethodMETIS:
		err = cli.Usagef("partition: --method metis partitions in one process: run it without mpirun, or use --method ptscotch under mpirun")
	case d.build.AddInverse || d.build.AddSelfLoops:
		err = cli.Usagef("partition: --add-inverse and --self-loops apply to OGB directories, which a distributed partition does not read: convert first (gnn-spmd convert)")
	default:
		if st, serr := os.Stat(d.path); serr == nil && st.IsDir() {
			err = &data.InputError{File: d.path, Msg: "is a directory: a distributed partition reads a .h5 dataset file by slices; convert it first (gnn-spmd convert --data " + d.path + " --out FILE.h5)"}
		}
	}
	err = partition.Agree(c, "checking the flags", err)
	if err == nil {
		out, err = partition.PrepareOutput(c, d.out)
		made.Store(out)
	}
	var res *partition.Distributed
	if err == nil {
		// mpirun ends the other processes with SIGTERM when one dies: the
		// leaders remove their temporary directories first.
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
		defer signal.Stop(sigs)
		go func() {
			if s, ok := <-sigs; ok {
				out.Abort()
				os.Exit(128 + int(s.(syscall.Signal)))
			}
		}()
		res, err = partition.Distribute(c, partition.DistOptions{Path: d.path, Split: d.split, Method: d.method, Seed: d.seed,
			Normalize: d.normalize, Settings: d.settings()})
		if err != nil {
			out.Abort()
		}
		if v := os.Getenv("GNN_SPMD_TEST_STOP_RANK"); err == nil && v == strconv.Itoa(rank) {
			syscall.Kill(os.Getpid(), syscall.SIGSTOP) // the tests' stand-in for a hung or dying process
		}
	}
	partitioned := time.Now()
	if err == nil {
		err = out.Write(c, res)
	}
	if err != nil {
		return endPartition(c, rank, err, stderr)
	}
	// Every rank's peak memory, for the report.
	mem := make([]float64, size)
	mem[rank] = float64(job.PeakRSSMiB())
	if err := c.AllReduceFloat64(mem); err != nil {
		return err
	}
	if rank != 0 {
		return nil
	}
	m := res.Meta
	fmt.Fprintf(stdout, "wrote %s: %d parts of %s (%s, %d processes, each read only its slice), read and partition %.2fs, write %.2fs\n",
		d.out, size, m.DatasetName, d.method, size, partitioned.Sub(start).Seconds(), time.Since(partitioned).Seconds())
	printPartitionStats(stdout, m.Stats)
	peaks := make([]string, size)
	for r, v := range mem {
		peaks[r] = strconv.Itoa(int(v))
	}
	fmt.Fprintf(stdout, "peak memory per process: %s MiB\n", strings.Join(peaks, ", "))
	return nil
}

// endPartition ends a failed rank: the one holding the cause prints it
// before every rank passes a barrier (mpirun ends the job at the first
// non-zero exit), then all exit with its code.
func endPartition(c comm.Comm, rank int, err error, stderr io.Writer) error {
	var rf *partition.RankFailed
	if !errors.As(err, &rf) {
		msg := err.Error()
		if rank != 0 && !strings.HasPrefix(msg, "rank ") {
			msg = fmt.Sprintf("rank %d: %s", rank, msg)
		}
		fmt.Fprintf(stderr, "gnn-spmd: %s\n", oneline.String(msg))
	}
	c.Barrier()
	return &job.Exit{Code: job.ExitCode(err)}
}
