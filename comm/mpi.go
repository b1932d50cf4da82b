//go:build !nompi

package comm

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gnn-spmd/gnn-spmd/cgo/mpi"
)

// MPI is the Comm of one process of an MPI job (mpirun -np Q ...).
//
// Threads: MPI runs at MPI_THREAD_SERIALIZED, which lets any thread call it
// as long as no two calls overlap. A mutex serializes the methods, so they
// may be called from any goroutine, with no goroutine locked to its thread
// and no hand-off per call. Only MPI_Init_thread and MPI_Finalize, which MPI
// wants on one thread, run on a goroutine locked to its thread for the
// purpose. Concurrent calls run in arrival order; every rank must still
// issue the collectives in one order.
//
// Failures: MPI_COMM_WORLD returns errors (MPI_ERRORS_RETURN). A rank that
// gets an error from a collective should call Abort, since its peers may be
// left waiting in that collective. When a process dies, mpirun kills the rest
// of the job (Open MPI's default), so no rank hangs on a dead peer.
type MPI struct {
	world      mpi.Comm
	rank, size int
	finalize   chan chan error // to the goroutine that initialised MPI

	mu        sync.Mutex // one MPI call at a time, and the fields below
	closed    bool
	mode      AllToAllVMode
	sendStage []byte // contiguous copies of scattered buffers, kept for reuse
	recvStage []byte
	sendView  [][]byte // per-peer windows into the stages
	recvView  [][]byte

	procs *rankProcs // set once, before any other call
}

var _ Comm = (*MPI)(nil)
var _ Native = (*MPI)(nil)

// mpiLauncherEnv lists variables that MPI launchers (Open MPI's mpirun,
// MPICH's Hydra, PMIx and Slurm's srun) set in every rank's environment.
var mpiLauncherEnv = []string{"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID"}

// launchedSize is the number of processes the launcher that started this
// one says it started, and the variable that says so (0, "" if none does):
// mpirun's own, then a PMI launcher's (Hydra, srun --mpi=pmi2), then
// srun's step. Only where srun launched the task itself does the step's
// count apply: under mpirun or Hydra inside an allocation the ranks inherit
// the variables of the step that started the daemons.
func launchedSize() (int, string) {
	for _, k := range []string{"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"} {
		if v, err := strconv.Atoi(os.Getenv(k)); err == nil && v > 0 {
			return v, k
		}
	}
	return 0, ""
}

// LaunchError says that MPI's world is not the job the launcher started:
// the MPI library could not reach the launcher's process manager (srun's
// PMI plugin is not one this MPI speaks, or mpirun is another MPI's), so
// every process runs as a world of its own. Exit code 2, like other
// mistakes in how the job is run.
type LaunchError struct {
	Want int    // processes the launcher started
	From string // the variable that says so
	Got  int    // MPI_COMM_WORLD's size
}

func (e *LaunchError) Error() string {
	return fmt.Sprintf("comm: MPI: the launcher started %d processes (%s=%d) but MPI_COMM_WORLD has %d: "+
		"this MPI library did not reach the launcher's process manager; launch with this MPI's own mpirun/mpiexec, "+
		"or with srun --mpi=pmix for Open MPI, srun --mpi=pmi2 for MPICH", e.Want, e.From, e.Want, e.Got)
}

// ExitCode is 2: the job was started wrong.
func (e *LaunchError) ExitCode() int { return 2 }

var mpiStarted atomic.Bool // MPI can be initialised only once per process

// NewMPI initialises MPI and returns this process's communicator on
// MPI_COMM_WORLD. It fails with ErrNoMPILauncher when no MPI launcher started
// the process, and when called a second time in a process.
func NewMPI() (*MPI, error) {
	launched := false
	for _, v := range mpiLauncherEnv {
		if _, ok := os.LookupEnv(v); ok {
			launched = true
		}
	}
	if !launched {
		return nil, ErrNoMPILauncher
	}
	if !mpiStarted.CompareAndSwap(false, true) {
		return nil, errors.New("comm: MPI: NewMPI called twice; MPI can be initialised only once per process")
	}
	m := &MPI{finalize: make(chan chan error)}
	ready := make(chan error)
	go m.initThread(ready)
	if err := <-ready; err != nil {
		return nil, fmt.Errorf("comm: MPI: %w", err)
	}
	if want, from := launchedSize(); want > 0 && want != m.size {
		m.Close()
		return nil, &LaunchError{Want: want, From: from, Got: m.size}
	}
	// Where every rank runs, for a timeout to say which one is stopped.
	where := make([]float64, 2*m.size)
	where[m.rank], where[m.size+m.rank] = hostID(), float64(os.Getpid())
	if err := m.AllReduceFloat64(where); err != nil {
		return nil, err
	}
	m.procs = &rankProcs{host: where[:m.size], pid: make([]int, m.size)}
	for r := range m.size {
		m.procs.pid[r] = int(where[m.size+r])
	}
	return m, nil
}

// Absent implements Absentees from the processes on this host.
func (m *MPI) Absent(peers []int) string { return m.procs.absent(m.rank, peers) }

// initThread initialises MPI, then waits to finalize it, on one OS thread.
func (m *MPI) initThread(ready chan<- error) {
	runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
	level, err := mpi.InitThread(mpi.ThreadSerialized)
	if err == nil && level < mpi.ThreadSerialized {
		err = fmt.Errorf("MPI provides %v, below the %v it needs", level, mpi.ThreadSerialized)
	}
	m.world = mpi.World()
	if err == nil {
		err = m.world.SetErrorsReturn()
	}
	if err == nil {
		m.rank, err = m.world.Rank()
	}
	if err == nil {
		m.size, err = m.world.Size()
	}
	ready <- err
	if err == nil {
		done := <-m.finalize
		done <- mpi.Finalize()
	}
}

// call runs f, an MPI call; m.mu must be held.
func (m *MPI) call(op string, f func() error) error {
	if m.closed {
		return fmt.Errorf("comm: MPI %s on rank %d: communicator closed", op, m.rank)
	}
	if err := f(); err != nil {
		return fmt.Errorf("comm: MPI %s on rank %d: %w", op, m.rank, err)
	}
	return nil
}

// Rank returns this process's rank in MPI_COMM_WORLD.
func (m *MPI) Rank() int { return m.rank }

// Size returns the number of processes in MPI_COMM_WORLD.
func (m *MPI) Size() int { return m.size }

// SetAllToAllVMode selects the MPI call behind AllToAllV (default
// AllToAllVContiguous). Every rank must make the same choice.
func (m *MPI) SetAllToAllVMode(mode AllToAllVMode) {
	m.mu.Lock()
	m.mode = mode
	m.mu.Unlock()
}

// AllToAllV implements Comm (see AllToAllVMode for the MPI call it makes).
// Each buffer is limited to 2^31-1 bytes, MPI's count type being a C int.
// MPI does not check that sender and receiver agree on a size: a short
// receive buffer is an error (MPI_ERR_TRUNCATE), a long one is left partly
// unwritten.
func (m *MPI) AllToAllV(send, recv [][]byte) error {
	if len(send) != m.size || len(recv) != m.size {
		return fmt.Errorf("comm: MPI AllToAllV on rank %d: %d send and %d receive buffers for %d ranks", m.rank, len(send), len(recv), m.size)
	}
	for p := range send {
		if len(send[p]) > mpi.MaxCount {
			return fmt.Errorf("comm: MPI AllToAllV on rank %d: %d bytes to rank %d exceed MPI's limit of %d bytes per peer (a C int count)", m.rank, len(send[p]), p, mpi.MaxCount)
		}
		if len(recv[p]) > mpi.MaxCount {
			return fmt.Errorf("comm: MPI AllToAllV on rank %d: %d bytes from rank %d exceed MPI's limit of %d bytes per peer (a C int count)", m.rank, len(recv[p]), p, mpi.MaxCount)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mode == AllToAllVScattered {
		return m.call("AllToAllV", func() error { return m.world.AlltoallwBytes(send, recv) })
	}
	s, r := send, recv
	if mpi.Span(send) > mpi.MaxCount {
		var err error
		if m.sendStage, m.sendView, err = m.stage(m.sendStage, m.sendView, send, "send"); err != nil {
			return err
		}
		for p, b := range send {
			copy(m.sendView[p], b)
		}
		s = m.sendView
	}
	stagedRecv := mpi.Span(recv) > mpi.MaxCount
	if stagedRecv {
		var err error
		if m.recvStage, m.recvView, err = m.stage(m.recvStage, m.recvView, recv, "receive"); err != nil {
			return err
		}
		r = m.recvView
	}
	if err := m.call("AllToAllV", func() error { return m.world.AlltoallvBytes(s, r) }); err != nil {
		return err
	}
	if stagedRecv {
		for p, b := range recv {
			copy(b, m.recvView[p])
		}
	}
	return nil
}

// AllToAllVShort implements Comm with point-to-point messages
// (mpi.Comm.ExchangeShort): a collective's receive sizes must match the
// sends exactly.
func (m *MPI) AllToAllVShort(send, recv [][]byte, got []int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.call("AllToAllVShort", func() error { return m.world.ExchangeShort(send, recv, got) })
}

// stage lays bufs out back to back in buf (grown when short) and returns
// buf and the per-peer windows into it.
func (m *MPI) stage(buf []byte, view, bufs [][]byte, what string) ([]byte, [][]byte, error) {
	total := 0
	for _, b := range bufs {
		total += len(b)
	}
	if total > mpi.MaxCount {
		return buf, view, fmt.Errorf("comm: MPI AllToAllV on rank %d: the %s buffers lie more than 2 GiB apart and hold %d bytes, more than one MPI_Alltoallv addresses; "+
			"place them in one allocation, or call SetAllToAllVMode(AllToAllVScattered) on every rank", m.rank, what, total)
	}
	if cap(buf) < total {
		buf = make([]byte, total)
	}
	if cap(view) < len(bufs) {
		view = make([][]byte, len(bufs))
	}
	view = view[:len(bufs)]
	off := 0
	for p, b := range bufs {
		view[p] = buf[off : off+len(b) : off+len(b)]
		off += len(b)
	}
	return buf, view, nil
}

// mpiChunk is the most elements of size elem bytes that one MPI call moves.
func mpiChunk(elem int) int { return mpi.MaxCount / elem }

// mpiFloatBytes views a float slice as its bytes.
func mpiFloatBytes[T float32 | float64](x []T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x))), len(x)*int(unsafe.Sizeof(T(0))))
}

// AllReduceFloat32 implements Comm: MPI_Reduce to rank 0, then MPI_Bcast of
// rank 0's result, so every rank holds the same bits. Open MPI picks the
// reduction tree from the world size and message size alone, so the order
// of summation is fixed for a given job shape. (The optional coll/adapt
// component, off by default, reduces in arrival order: keep it off.)
func (m *MPI) AllReduceFloat32(x []float32) error {
	return mpiAllReduce(m, "AllReduceFloat32", x, m.world.ReduceSumFloat32)
}

// AllReduceFloat64 is AllReduceFloat32 on float64.
func (m *MPI) AllReduceFloat64(x []float64) error {
	return mpiAllReduce(m, "AllReduceFloat64", x, m.world.ReduceSumFloat64)
}

func mpiAllReduce[T float32 | float64](m *MPI, op string, x []T, reduce func([]T, int) error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.call(op, func() error {
		n := mpiChunk(int(unsafe.Sizeof(T(0))))
		for lo := 0; lo < len(x); lo += n {
			c := x[lo:min(lo+n, len(x))]
			if err := reduce(c, 0); err != nil {
				return err
			}
			if err := m.world.Bcast(mpiFloatBytes(c), 0); err != nil {
				return err
			}
		}
		return nil
	})
}

// CallNative implements Native: f gets MPI_COMM_WORLD's Fortran handle
// and holds MPI alone until it returns.
func (m *MPI) CallNative(f func(fcomm int32) error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("comm: MPI native call on rank %d: communicator closed", m.rank)
	}
	return f(m.world.Fortran())
}

// Bcast implements Comm.
func (m *MPI) Bcast(buf []byte, root int) error {
	if root < 0 || root >= m.size {
		return fmt.Errorf("comm: MPI Bcast on rank %d: root %d outside [0, %d)", m.rank, root, m.size)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.call("Bcast", func() error {
		for lo := 0; lo < len(buf); lo += mpi.MaxCount {
			if err := m.world.Bcast(buf[lo:min(lo+mpi.MaxCount, len(buf))], root); err != nil {
				return err
			}
		}
		return nil
	})
}

// Barrier implements Comm.
func (m *MPI) Barrier() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.call("Barrier", m.world.Barrier)
}

// Abort ends the whole job with the given exit code and does not return:
// MPI_Abort makes mpirun kill every rank and exit with code. When another
// MPI call stays in progress for a second (a collective whose peers are
// gone or elsewhere), MPI cannot be entered alongside it, so Abort exits the
// process with code instead: mpirun then kills the other ranks and exits
// with the same code.
func (m *MPI) Abort(code int) {
	for deadline := time.Now().Add(time.Second); !m.mu.TryLock(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			os.Exit(code)
		}
	}
	if !m.closed {
		m.world.Abort(code)
	}
	os.Exit(code)
}

// Close finalizes MPI (MPI_Finalize, which waits for every rank to call
// it). Later calls on m return errors; a second Close returns nil.
func (m *MPI) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	done := make(chan error)
	m.finalize <- done
	if err := <-done; err != nil {
		return fmt.Errorf("comm: MPI Close on rank %d: %w", m.rank, err)
	}
	return nil
}
