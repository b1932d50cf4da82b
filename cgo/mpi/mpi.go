// Package mpi is a thin cgo binding to MPI: just what package comm needs.
// It builds against Open MPI by default and against MPICH with -tags mpich.
//
// Communicators cross into Go as Fortran handles (MPI_Comm_c2f/f2c): MPI_Comm
// is a pointer in Open MPI and an int in MPICH, MPI_Fint an int in both.
//
// Threads: MPI ties a process to the thread level it was initialised with.
// This package asks for whatever the caller passes to InitThread and applies
// no policy of its own. At MPI_THREAD_SERIALIZED (what package comm uses)
// any thread may call MPI, one call at a time; at FUNNELED and below only
// the thread that called InitThread may. MPI_Finalize belongs on the thread
// that called InitThread in every case.
package mpi

/*
#include <stdlib.h>
#include <mpi.h>

// SHORT_TAG marks exchange_short's messages; the ranks call it in the same
// order, and MPI keeps the order of messages with one tag between two ranks.
#define SHORT_TAG 0x6e6e

static MPI_Fint world_handle(void) { return MPI_Comm_c2f(MPI_COMM_WORLD); }

static int init_thread(int required, int *provided) {
	return MPI_Init_thread(NULL, NULL, required, provided);
}

static void error_string(int code, char *buf, int *len) {
	if (MPI_Error_string(code, buf, len) != MPI_SUCCESS) *len = 0;
}

static int comm_rank(MPI_Fint c, int *r) { return MPI_Comm_rank(MPI_Comm_f2c(c), r); }
static int comm_size(MPI_Fint c, int *n) { return MPI_Comm_size(MPI_Comm_f2c(c), n); }

static int errors_return(MPI_Fint c) {
	return MPI_Comm_set_errhandler(MPI_Comm_f2c(c), MPI_ERRORS_RETURN);
}

static int barrier(MPI_Fint c) { return MPI_Barrier(MPI_Comm_f2c(c)); }
static int abort_comm(MPI_Fint c, int code) { return MPI_Abort(MPI_Comm_f2c(c), code); }

static int bcast_bytes(void *buf, int n, int root, MPI_Fint c) {
	return MPI_Bcast(buf, n, MPI_BYTE, root, MPI_Comm_f2c(c));
}

static int alltoallv_bytes(const void *sb, const int *sc, const int *sd,
		void *rb, const int *rc, const int *rd, MPI_Fint c) {
	return MPI_Alltoallv(sb, sc, sd, MPI_BYTE, rb, rc, rd, MPI_BYTE, MPI_Comm_f2c(c));
}

// alltoallw_bytes sends sn[p] bytes at sp[p] to rank p and receives rn[p]
// bytes from rank p at rp[p]. Each buffer gets a one-block hindexed byte type
// at its absolute address relative to MPI_BOTTOM, so the buffers need not
// share a base within reach of an int displacement.
static int alltoallw_bytes(int size, void **sp, const int *sn, void **rp, const int *rn, MPI_Fint cf) {
	// Entries [0, size) describe the send side, [size, 2*size) the receive side.
	MPI_Datatype *t = malloc(2 * (size_t)size * sizeof(MPI_Datatype));
	int *cnt = calloc(2 * (size_t)size, sizeof(int));
	int *displ = calloc(2 * (size_t)size, sizeof(int));
	int rv = MPI_SUCCESS;
	if (t == NULL || cnt == NULL || displ == NULL) rv = MPI_ERR_NO_MEM;
	for (int i = 0; t != NULL && i < 2 * size; i++) t[i] = MPI_BYTE;
	for (int i = 0; rv == MPI_SUCCESS && i < 2 * size; i++) {
		void *p = i < size ? sp[i] : rp[i - size];
		int n = i < size ? sn[i] : rn[i - size];
		if (n == 0) continue;
		MPI_Aint addr;
		MPI_Datatype d;
		rv = MPI_Get_address(p, &addr);
		if (rv == MPI_SUCCESS) rv = MPI_Type_create_hindexed(1, &n, &addr, MPI_BYTE, &d);
		if (rv != MPI_SUCCESS) break;
		t[i] = d;
		cnt[i] = 1;
		rv = MPI_Type_commit(&t[i]);
	}
	if (rv == MPI_SUCCESS)
		rv = MPI_Alltoallw(MPI_BOTTOM, cnt, displ, t, MPI_BOTTOM, cnt + size, displ + size, t + size,
			MPI_Comm_f2c(cf));
	for (int i = 0; t != NULL && i < 2 * size; i++)
		if (t[i] != MPI_BYTE) MPI_Type_free(&t[i]);
	free(t);
	free(cnt);
	free(displ);
	return rv;
}

// exchange_short posts, for every rank p, a receive of at most rn[p] bytes
// into rp[p] and a send of sn[p] bytes from sp[p], waits for them all and
// sets got[p] to the bytes received from p. Point-to-point messages, unlike
// a collective's, may be shorter than their receive buffers.
static int exchange_short(int size, void **sp, const int *sn, void **rp, const int *rn, int *got, MPI_Fint cf) {
	MPI_Comm c = MPI_Comm_f2c(cf);
	MPI_Request *req = malloc(2 * (size_t)size * sizeof(MPI_Request));
	MPI_Status *st = malloc(2 * (size_t)size * sizeof(MPI_Status));
	int rv = MPI_SUCCESS;
	if (req == NULL || st == NULL) rv = MPI_ERR_NO_MEM;
	for (int i = 0; req != NULL && i < 2 * size; i++) req[i] = MPI_REQUEST_NULL;
	for (int p = 0; rv == MPI_SUCCESS && p < size; p++)
		rv = MPI_Irecv(rp[p], rn[p], MPI_BYTE, p, SHORT_TAG, c, &req[p]);
	for (int p = 0; rv == MPI_SUCCESS && p < size; p++)
		rv = MPI_Isend(sp[p], sn[p], MPI_BYTE, p, SHORT_TAG, c, &req[size + p]);
	if (rv == MPI_SUCCESS) {
		rv = MPI_Waitall(2 * size, req, st);
		for (int i = 0; rv == MPI_ERR_IN_STATUS && i < 2 * size; i++)
			if (st[i].MPI_ERROR != MPI_SUCCESS) rv = st[i].MPI_ERROR;
	}
	for (int p = 0; rv == MPI_SUCCESS && p < size; p++) rv = MPI_Get_count(&st[p], MPI_BYTE, &got[p]);
	free(req);
	free(st);
	return rv;
}

static MPI_Datatype float_type(int bits) { return bits == 32 ? MPI_FLOAT : MPI_DOUBLE; }

static int allreduce_sum(void *buf, int n, int bits, MPI_Fint cf) {
	return MPI_Allreduce(MPI_IN_PLACE, buf, n, float_type(bits), MPI_SUM, MPI_Comm_f2c(cf));
}

// reduce_sum sums buf over the communicator into root's buf, in place there
// (MPI_IN_PLACE); the other ranks' buf is left as it was.
static int reduce_sum(void *buf, int n, int bits, int root, MPI_Fint cf) {
	MPI_Comm c = MPI_Comm_f2c(cf);
	int r, rv = MPI_Comm_rank(c, &r);
	if (rv != MPI_SUCCESS) return rv;
	if (r == root) return MPI_Reduce(MPI_IN_PLACE, buf, n, float_type(bits), MPI_SUM, root, c);
	return MPI_Reduce(buf, NULL, n, float_type(bits), MPI_SUM, root, c);
}
*/
import "C"

import (
	"fmt"
	"math"
	"runtime"
	"unsafe"
)

// MaxCount is the largest element count of one MPI call (a C int).
const MaxCount = math.MaxInt32

// ThreadLevel is an MPI thread support level.
type ThreadLevel int

// The MPI thread support levels, in increasing order.
const (
	ThreadSingle     ThreadLevel = C.MPI_THREAD_SINGLE
	ThreadFunneled   ThreadLevel = C.MPI_THREAD_FUNNELED
	ThreadSerialized ThreadLevel = C.MPI_THREAD_SERIALIZED
	ThreadMultiple   ThreadLevel = C.MPI_THREAD_MULTIPLE
)

func (l ThreadLevel) String() string {
	switch l {
	case ThreadSingle:
		return "MPI_THREAD_SINGLE"
	case ThreadFunneled:
		return "MPI_THREAD_FUNNELED"
	case ThreadSerialized:
		return "MPI_THREAD_SERIALIZED"
	case ThreadMultiple:
		return "MPI_THREAD_MULTIPLE"
	}
	return fmt.Sprintf("ThreadLevel(%d)", int(l))
}

// Error is a failed MPI call: the function, its return code and the MPI
// library's text for it.
type Error struct {
	Func string
	Code int
	Text string
}

func (e *Error) Error() string {
	return fmt.Sprintf("mpi: %s failed: %s (error code %d)", e.Func, e.Text, e.Code)
}

func check(fn string, rc C.int) error {
	if rc == C.MPI_SUCCESS {
		return nil
	}
	var buf [C.MPI_MAX_ERROR_STRING + 1]C.char
	var n C.int
	C.error_string(rc, &buf[0], &n)
	return &Error{Func: fn, Code: int(rc), Text: C.GoStringN(&buf[0], n)}
}

// InitThread calls MPI_Init_thread and returns the level MPI provides, which
// may be lower than required. Open MPI and MPICH abort the process rather
// than return when initialisation fails.
func InitThread(required ThreadLevel) (ThreadLevel, error) {
	var provided C.int
	err := check("MPI_Init_thread", C.init_thread(C.int(required), &provided))
	return ThreadLevel(provided), err
}

// Finalize calls MPI_Finalize.
func Finalize() error { return check("MPI_Finalize", C.MPI_Finalize()) }

// Comm is a communicator, held as its Fortran handle.
type Comm struct{ f C.MPI_Fint }

// World returns MPI_COMM_WORLD.
func World() Comm { return Comm{C.world_handle()} }

// Fortran returns c's Fortran handle, which a C library that makes MPI
// calls of its own turns back into its communicator with MPI_Comm_f2c.
func (c Comm) Fortran() int32 { return int32(c.f) }

// Rank returns the calling process's rank in c.
func (c Comm) Rank() (int, error) {
	var r C.int
	err := check("MPI_Comm_rank", C.comm_rank(c.f, &r))
	return int(r), err
}

// Size returns the number of processes in c.
func (c Comm) Size() (int, error) {
	var n C.int
	err := check("MPI_Comm_size", C.comm_size(c.f, &n))
	return int(n), err
}

// SetErrorsReturn installs MPI_ERRORS_RETURN on c, so that failed calls on
// it return an error code (and so an *Error here) instead of aborting.
func (c Comm) SetErrorsReturn() error {
	return check("MPI_Comm_set_errhandler", C.errors_return(c.f))
}

// Barrier calls MPI_Barrier.
func (c Comm) Barrier() error { return check("MPI_Barrier", C.barrier(c.f)) }

// Abort calls MPI_Abort, which ends every process of c with the given exit
// code and does not return when it succeeds.
func (c Comm) Abort(code int) error { return check("MPI_Abort", C.abort_comm(c.f, C.int(code))) }

// Bcast copies root's buf into buf on every rank (MPI_Bcast of MPI_BYTE).
func (c Comm) Bcast(buf []byte, root int) error {
	if len(buf) > MaxCount {
		return fmt.Errorf("mpi: MPI_Bcast: %d bytes exceed the C int count limit", len(buf))
	}
	return check("MPI_Bcast", C.bcast_bytes(unsafe.Pointer(unsafe.SliceData(buf)), C.int(len(buf)), C.int(root), c.f))
}

func cints(x []int32) *C.int { return (*C.int)(unsafe.Pointer(unsafe.SliceData(x))) }

// Span returns the bytes from the lowest start to the highest end of the
// non-empty buffers: AlltoallvBytes needs it to be at most MaxCount.
func Span(bufs [][]byte) int {
	lo, hi := ^uintptr(0), uintptr(0)
	for _, b := range bufs {
		if len(b) == 0 {
			continue
		}
		p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		lo = min(lo, p)
		hi = max(hi, p+uintptr(len(b)))
	}
	if hi == 0 {
		return 0
	}
	return int(hi - lo)
}

// AlltoallvBytes is Alltoallv with each peer's buffer its own Go slice:
// sendbuf and recvbuf are the lowest-addressed buffer of their side and the
// displacements are measured from it, so each side's buffers must lie within
// a Span of MaxCount bytes.
func (c Comm) AlltoallvBytes(send, recv [][]byte) error {
	size, err := c.Size()
	if err != nil {
		return err
	}
	if len(send) != size || len(recv) != size {
		return fmt.Errorf("mpi: MPI_Alltoallv: %d send and %d receive buffers for %d ranks", len(send), len(recv), size)
	}
	var pin runtime.Pinner // C reaches every buffer through the base pointer
	defer pin.Unpin()
	a := make([]int32, 4*size)
	sbase, err := layout("send to", send, a[:size], a[size:2*size], &pin)
	if err != nil {
		return err
	}
	rbase, err := layout("receive from", recv, a[2*size:3*size], a[3*size:], &pin)
	if err != nil {
		return err
	}
	return check("MPI_Alltoallv", C.alltoallv_bytes(sbase, cints(a[:size]), cints(a[size:2*size]),
		rbase, cints(a[2*size:3*size]), cints(a[3*size:]), c.f))
}

// layout pins bufs and fills the counts and displacements of bufs relative
// to the lowest-addressed one, which it returns.
func layout(what string, bufs [][]byte, counts, displs []int32, pin *runtime.Pinner) (unsafe.Pointer, error) {
	for p, b := range bufs {
		if len(b) > MaxCount {
			return nil, fmt.Errorf("mpi: MPI_Alltoallv: %d bytes to %s rank %d exceed the C int count limit (%d)", len(b), what, p, MaxCount)
		}
	}
	if s := Span(bufs); s > MaxCount {
		return nil, fmt.Errorf("mpi: MPI_Alltoallv: the buffers to %s the ranks span %d bytes, more than an int displacement reaches (%d)", what, s, MaxCount)
	}
	var base unsafe.Pointer
	for _, b := range bufs {
		if len(b) == 0 {
			continue
		}
		ptr := unsafe.Pointer(unsafe.SliceData(b))
		pin.Pin(ptr)
		if base == nil || uintptr(ptr) < uintptr(base) {
			base = ptr
		}
	}
	for p, b := range bufs {
		counts[p] = int32(len(b))
		if len(b) > 0 {
			displs[p] = int32(uintptr(unsafe.Pointer(unsafe.SliceData(b))) - uintptr(base))
		}
	}
	return base, nil
}

// AlltoallwBytes sends send[p] to rank p and receives len(recv[p]) bytes from
// rank p into recv[p], with each buffer its own Go slice anywhere in memory
// (MPI_Alltoallw from MPI_BOTTOM, one hindexed byte type per non-empty
// buffer). Each buffer is limited to MaxCount bytes, the total is not.
func (c Comm) AlltoallwBytes(send, recv [][]byte) error {
	size, err := c.Size()
	if err != nil {
		return err
	}
	if len(send) != size || len(recv) != size {
		return fmt.Errorf("mpi: MPI_Alltoallw: %d send and %d receive buffers for %d ranks", len(send), len(recv), size)
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	n := make([]C.int, 2*size)
	ptr, err := pinned("MPI_Alltoallw", send, recv, &pin, n)
	if err != nil {
		return err
	}
	return check("MPI_Alltoallw", C.alltoallw_bytes(C.int(size), &ptr[0], &n[0], &ptr[size], &n[size], c.f))
}

// pinned pins the non-empty buffers of send, then of recv, and returns
// their addresses (nil for an empty one), setting n[i] to the byte count of
// the i-th: C reads the addresses from Go memory, which cgo allows for
// pinned objects only. Each buffer is limited to MaxCount bytes.
func pinned(op string, send, recv [][]byte, pin *runtime.Pinner, n []C.int) ([]unsafe.Pointer, error) {
	size := len(send)
	ptr := make([]unsafe.Pointer, 2*size)
	for i := range ptr {
		b, what := send, "send to"
		if i >= size {
			b, what = recv, "receive from"
		}
		buf := b[i%size]
		if len(buf) > MaxCount {
			return nil, fmt.Errorf("mpi: %s: %d bytes to %s rank %d exceed the C int count limit (%d)", op, len(buf), what, i%size, MaxCount)
		}
		if len(buf) > 0 {
			ptr[i] = unsafe.Pointer(unsafe.SliceData(buf))
			pin.Pin(ptr[i])
			n[i] = C.int(len(buf))
		}
	}
	return ptr, nil
}

// ExchangeShort sends send[p] to rank p and receives at most len(recv[p])
// bytes from rank p into recv[p], for every p, by point-to-point messages,
// and sets got[p] to the bytes that came: the sender alone knows a
// message's size. A message longer than its receive buffer is an error
// (MPI_ERR_TRUNCATE). Each buffer is limited to MaxCount bytes.
func (c Comm) ExchangeShort(send, recv [][]byte, got []int) error {
	size, err := c.Size()
	if err != nil {
		return err
	}
	if len(send) != size || len(recv) != size || len(got) != size {
		return fmt.Errorf("mpi: short exchange: %d send and %d receive buffers and %d counts for %d ranks", len(send), len(recv), len(got), size)
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	n := make([]C.int, 3*size) // the sends', the receives', then the counts received
	ptr, err := pinned("short exchange", send, recv, &pin, n)
	if err != nil {
		return err
	}
	if err := check("MPI_Isend/MPI_Irecv", C.exchange_short(C.int(size), &ptr[0], &n[0], &ptr[size], &n[size], &n[2*size], c.f)); err != nil {
		return err
	}
	for p := range got {
		got[p] = int(n[2*size+p])
	}
	return nil
}

// ReduceSumFloat32 sums x element-wise over c into root's x (MPI_Reduce,
// MPI_SUM, in place at root); x is unchanged elsewhere.
func (c Comm) ReduceSumFloat32(x []float32, root int) error {
	return reduceSum("MPI_Reduce", unsafe.Pointer(unsafe.SliceData(x)), len(x), 32, root, c)
}

// ReduceSumFloat64 is ReduceSumFloat32 on float64.
func (c Comm) ReduceSumFloat64(x []float64, root int) error {
	return reduceSum("MPI_Reduce", unsafe.Pointer(unsafe.SliceData(x)), len(x), 64, root, c)
}

// AllreduceSumFloat64 replaces x by its element-wise sum over c
// (MPI_Allreduce in place). MPI does not promise the same bits on every
// rank.
func (c Comm) AllreduceSumFloat64(x []float64) error {
	return reduceSum("MPI_Allreduce", unsafe.Pointer(unsafe.SliceData(x)), len(x), 64, -1, c)
}

func reduceSum(fn string, p unsafe.Pointer, n, bits, root int, c Comm) error {
	if n > MaxCount {
		return fmt.Errorf("mpi: %s: %d elements exceed the C int count limit", fn, n)
	}
	if root < 0 {
		return check(fn, C.allreduce_sum(p, C.int(n), C.int(bits), c.f))
	}
	return check(fn, C.reduce_sum(p, C.int(n), C.int(bits), C.int(root), c.f))
}
