package job

import (
	"errors"
	"os"
	"strconv"
	"sync"

	"github.com/gnn-spmd/gnn-spmd/comm"
	"github.com/gnn-spmd/gnn-spmd/gnn"
)

// launcher is what differs between the two ways a job's ranks run: how they
// start, how they read their data, how their memory is counted, and how
// they end. Everything else is one per-rank routine (job.rank).
type launcher interface {
	// run starts this process's ranks, each calling rank over its
	// communicator (under the --comm-timeout watchdog), and returns the
	// job's outcome.
	run(p *process, rank func(c comm.Comm) error) error
	// loads lists the ranks whose data this process reads, of q, and
	// whether they are all of them (the process reads the data once for
	// all, and one rank of one trains on the whole graph).
	loads(q int) (ranks []int, all bool)
	// sharing is how many processes' ranks share this node's memory.
	sharing() int
	// resumeCopy is the file rank c.Rank() reads --resume from ("" for the
	// flag's own) and the function that removes it.
	resumeCopy(c comm.Comm, path string) (string, func(), error)
	// gpu is the node-local index that picks rank's GPU, and inProcess
	// whether the ranks that exchange with it are goroutines of this
	// process (their payloads move by device copies, not NCCL).
	gpu(rank int) int
	inProcess() bool
	// peakRSS is the peak resident memory, in MiB, of every process of the
	// job, from every rank's own (a collective).
	peakRSS(c comm.Comm) ([]int64, error)
	// endTogether ends a rank whose peers end at the same point (all failed
	// setup, or stopped or diverged at the same epoch) with cause, which
	// the rank that holds it reports, and code.
	endTogether(c comm.Comm, cause error, code int) error
	// abort ends the whole job from one rank that failed alone.
	abort(c comm.Comm, err error) error
}

// localRanks runs the job's ranks as goroutines of this process
// (--ranks Q). The process claims the outputs and reads the data once, for
// all of them, before it starts them: a failure there ends the run before
// any rank exists.
type localRanks struct {
	j *job
	q int
	// cause is the outcome the ranks ended together with, held by the rank
	// that reports it.
	mu    sync.Mutex
	cause error
}

func (l *localRanks) run(p *process, rank func(c comm.Comm) error) error {
	if err := p.claim(); err != nil {
		return err
	}
	if err := p.setup(0, nil, l.q, ""); err != nil {
		return err
	}
	err := comm.RunLocal(l.q, func(lc *comm.Local) error {
		c, stopWatch := l.j.watch(lc, l.j.rankLog(lc.Rank()), lc.Cancel)
		defer stopWatch()
		err := rank(c)
		var ex *Exit
		if errors.As(err, &ex) {
			return nil // ended together: the rank with the cause returns it
		}
		return err
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cause != nil {
		return l.cause
	}
	// A failure every rank shares (a diverged loss) is reported as itself,
	// not as one rank's.
	var de *gnn.DivergedError
	if errors.As(err, &de) {
		return de
	}
	return err
}

func (l *localRanks) loads(q int) ([]int, bool) {
	ranks := make([]int, q)
	for r := range ranks {
		ranks[r] = r
	}
	return ranks, true
}

func (l *localRanks) sharing() int { return 1 }

// resumeCopy: every rank reads the file itself.
func (l *localRanks) resumeCopy(comm.Comm, string) (string, func(), error) {
	return "", func() {}, nil
}

// gpu: in-process ranks share GPU 0 (NCCL refuses two ranks on one GPU).
func (l *localRanks) gpu(int) int     { return 0 }
func (l *localRanks) inProcess() bool { return true }

// peakRSS is this one process's.
func (l *localRanks) peakRSS(comm.Comm) ([]int64, error) { return []int64{PeakRSSMiB()}, nil }

func (l *localRanks) endTogether(_ comm.Comm, cause error, code int) error {
	var ex *Exit
	if errors.As(cause, &ex) {
		return cause
	}
	l.mu.Lock()
	if l.cause == nil {
		l.cause = cause
	}
	l.mu.Unlock()
	return &Exit{Code: code}
}

// abort fails the group: the other ranks' collectives return, and the
// group's error names the rank.
func (l *localRanks) abort(_ comm.Comm, err error) error {
	if re, ok := err.(*rankError); ok {
		return re.err
	}
	return err
}

// mpiRank runs this process as one rank of an MPI job.
type mpiRank struct {
	j  *job
	mc *comm.MPI
}

func (m *mpiRank) run(_ *process, rank func(c comm.Comm) error) error {
	r := m.mc.Rank()
	// A watchdog that fires prints its line, then MPI_Abort (or, with the
	// stuck call holding MPI, an exit that makes mpirun end the others).
	c, stopWatch := m.j.watch(m.mc, m.j.rankLog(r), func(err error) {
		m.j.report(err)
		// A dead link can hang mpirun's abort: a reaper ends the
		// launcher if the job has not ended after a grace period.
		startReaper()
		m.mc.Abort(ExitFailure)
	})
	defer stopWatch()
	if w, ok := c.(*comm.Watchdog); ok {
		m.j.wd.Store(w)
		defer m.j.wd.Store(nil)
	}
	return rank(c)
}

func (m *mpiRank) loads(int) ([]int, bool) { return []int{m.mc.Rank()}, false }
func (m *mpiRank) sharing() int            { return processesOnNode() }

func (m *mpiRank) resumeCopy(c comm.Comm, path string) (string, func(), error) {
	return shareResume(c, path)
}

func (m *mpiRank) gpu(rank int) int { return localRank(rank) }
func (m *mpiRank) inProcess() bool  { return false }

// peakRSS gathers every rank's: ranks share a node's memory. (Exact in
// float64.)
func (m *mpiRank) peakRSS(c comm.Comm) ([]int64, error) {
	v := make([]float64, c.Size())
	v[c.Rank()] = float64(PeakRSSMiB())
	comm.Label(c, &opMemory)
	if err := c.AllReduceFloat64(v); err != nil {
		return nil, err
	}
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out, nil
}

// endTogether: the rank with the cause reports it before anyone leaves the
// barrier (mpirun ends the job at the first non-zero exit), and every rank
// exits with code.
func (m *mpiRank) endTogether(c comm.Comm, cause error, code int) error {
	var ex *Exit
	if !errors.As(cause, &ex) && (c.Rank() == 0 || !isRankShared(cause)) {
		m.j.report(cause)
	}
	comm.Label(c, &opBarrier)
	c.Barrier()
	return &Exit{Code: code}
}

func (m *mpiRank) abort(c comm.Comm, err error) error {
	m.j.report(err)
	startReaper()
	c.Abort(ExitFailure)
	return &Exit{Code: ExitFailure}
}

// isRankShared reports whether every rank holds the same cause (and rank 0
// alone reports it).
func isRankShared(err error) bool {
	var de *gnn.DivergedError
	var ie *InterruptedError
	return errors.As(err, &de) || errors.As(err, &ie)
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
