//go:build !cpu

// Package nccl is a thin binding to the NCCL calls this project uses, and
// the setup of a communicator that no failing rank can hang (Join). NCCL
// is loaded at run time with dlopen: Debian has no NCCL package, so the GPU
// build links without its headers and finds libnccl.so.2 where it runs
// (cgo/cudaprobe/cudalib: LD_LIBRARY_PATH, the CUDA toolkit, the system, a
// Python environment's NVIDIA wheels).
package nccl

/*
#cgo LDFLAGS: -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

// Our own declarations, after nccl.h (not installed).
typedef int ncclResult_t;
typedef void *ncclComm_t;
typedef struct { char internal[128]; } ncclUniqueId;
typedef void *cudaStream_t;
_Static_assert(sizeof(ncclUniqueId) == 128, "ncclUniqueId must be 128 bytes");

static const char *(*p_error_string)(ncclResult_t);
static ncclResult_t (*p_get_version)(int *);
static ncclResult_t (*p_get_unique_id)(ncclUniqueId *);
static ncclResult_t (*p_init_rank)(ncclComm_t *, int, ncclUniqueId, int);
static ncclResult_t (*p_destroy)(ncclComm_t);
static ncclResult_t (*p_abort)(ncclComm_t);
static ncclResult_t (*p_async_error)(ncclComm_t, ncclResult_t *);
static ncclResult_t (*p_group_start)(void);
static ncclResult_t (*p_group_end)(void);
static ncclResult_t (*p_send)(const void *, size_t, int, int, ncclComm_t, cudaStream_t);
static ncclResult_t (*p_recv)(void *, size_t, int, int, ncclComm_t, cudaStream_t);
static ncclResult_t (*p_all_reduce)(const void *, void *, size_t, int, int, ncclComm_t, cudaStream_t);

// open_lib returns the library, or NULL and dlerror's message in *err;
// dlerror is per-thread, so it is read in the same C call as dlopen.
static void *open_lib(const char *name, const char **err) {
	void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	*err = lib ? NULL : dlerror();
	return lib;
}

#define SYM(p, s) if (!(p = dlsym(lib, s))) return s
// load_syms returns the name of the first missing symbol.
static const char *load_syms(void *lib) {
	SYM(p_error_string, "ncclGetErrorString");
	SYM(p_get_version, "ncclGetVersion");
	SYM(p_get_unique_id, "ncclGetUniqueId");
	SYM(p_init_rank, "ncclCommInitRank");
	SYM(p_destroy, "ncclCommDestroy");
	SYM(p_abort, "ncclCommAbort");
	SYM(p_async_error, "ncclCommGetAsyncError");
	SYM(p_group_start, "ncclGroupStart");
	SYM(p_group_end, "ncclGroupEnd");
	SYM(p_send, "ncclSend");
	SYM(p_recv, "ncclRecv");
	SYM(p_all_reduce, "ncclAllReduce");
	return NULL;
}

// loaded_file is the file the loader mapped for the loaded symbols.
static const char *loaded_file(void) {
	Dl_info info;
	return dladdr((void *)p_get_version, &info) && info.dli_fname ? info.dli_fname : "";
}

static const char *error_string(int rc) { return p_error_string(rc); }
static int get_version(int *v) { return p_get_version(v); }
static int get_unique_id(ncclUniqueId *id) { return p_get_unique_id(id); }
static int init_rank(ncclComm_t *c, int n, ncclUniqueId *id, int r) { return p_init_rank(c, n, *id, r); }
static int destroy(ncclComm_t c) { return p_destroy(c); }
static int abort_comm(ncclComm_t c) { return p_abort(c); }
static int async_error(ncclComm_t c, int *e) { return p_async_error(c, e); }
static int group_start(void) { return p_group_start(); }
static int group_end(void) { return p_group_end(); }

// Buffers arrive as integers (device addresses), so no Go pointer crosses.
static int send_bytes(uintptr_t b, size_t n, int peer, ncclComm_t c, cudaStream_t s) {
	return p_send((const void *)b, n, 1, peer, c, s); // ncclUint8
}
static int recv_bytes(uintptr_t b, size_t n, int peer, ncclComm_t c, cudaStream_t s) {
	return p_recv((void *)b, n, 1, peer, c, s);
}
static int all_reduce_sum(uintptr_t sb, uintptr_t rb, size_t n, int dtype, ncclComm_t c, cudaStream_t s) {
	return p_all_reduce((const void *)sb, (void *)rb, n, dtype, 0, c, s); // ncclSum
}
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"unsafe"

	"github.com/gnn-spmd/gnn-spmd/cgo/cudaprobe/cudalib"
)

// ncclDataType_t values (nccl.h).
const (
	ncclFloat32 = 7
	ncclFloat64 = 8
)

// ncclResult_t values the callers tell apart (nccl.h).
const (
	ncclRemoteError = 6 // a peer exited or the network failed
)

var (
	loadOnce sync.Once
	loadErr  error
	attempts []cudalib.Attempt
)

func load() {
	attempts, loadErr = loadFirst(cudalib.NCCL.Find(cudalib.Default().Dirs()))
}

// loadFirst loads the first candidate that dlopen accepts and that has
// NCCL's symbols, and says what each candidate tried gave.
func loadFirst(cands []cudalib.Candidate) ([]cudalib.Attempt, error) {
	var tried []cudalib.Attempt
	for _, c := range cands {
		a := cudalib.Attempt{Candidate: c}
		cs := C.CString(c.Name())
		var msg *C.char
		lib := C.open_lib(cs, &msg)
		C.free(unsafe.Pointer(cs))
		switch {
		case lib == nil:
			a.Result = C.GoString(msg)
		default:
			if sym := C.load_syms(lib); sym != nil {
				a.Result = fmt.Sprintf("%s has no symbol %s", c.Name(), C.GoString(sym))
				break
			}
			a.File, a.OK, a.Result = C.GoString(C.loaded_file()), true, "loaded"
			var v C.int
			if C.get_version(&v) == 0 {
				a.Result = "NCCL " + versionText(int(v))
			}
			return append(tried, a), nil
		}
		tried = append(tried, a)
	}
	last := ""
	if len(tried) > 0 {
		last = tried[len(tried)-1].Result
	}
	return tried, fmt.Errorf("nccl: cannot load NCCL (tried %s): %s; install NCCL or put it on LD_LIBRARY_PATH",
		strings.Join(cudalib.NCCL.Sonames, ", "), last)
}

// versionText spells a version code: 22105 is 2.21.5 (2.8 and before:
// 2803 is 2.8.3).
func versionText(v int) string {
	if v < 10000 {
		return fmt.Sprintf("%d.%d.%d", v/1000, v/100%10, v%100)
	}
	return fmt.Sprintf("%d.%d.%d", v/10000, v/100%100, v%100)
}

func loaded() error {
	loadOnce.Do(load)
	return loadErr
}

// Attempts loads NCCL (once per process) and says what each candidate
// gave.
func Attempts() []cudalib.Attempt {
	_ = loaded()
	return append([]cudalib.Attempt(nil), attempts...)
}

// Error is a failed NCCL call: the function, its ncclResult_t and NCCL's
// text for it.
type Error struct {
	Fn   string
	Code int
	Msg  string
}

func (e *Error) Error() string { return "nccl: " + e.Fn + ": " + e.Msg }

func check(fn string, rc C.int) error {
	if rc == 0 {
		return nil
	}
	return &Error{Fn: fn, Code: int(rc), Msg: C.GoString(C.error_string(rc))}
}

// Version returns NCCL's version code, e.g. 22105 for 2.21.5.
func Version() (int, error) {
	if err := loaded(); err != nil {
		return 0, err
	}
	var v C.int
	if err := check("ncclGetVersion", C.get_version(&v)); err != nil {
		return 0, err
	}
	return int(v), nil
}

// UniqueID is ncclUniqueId: made by one rank, handed to all by other means.
type UniqueID [128]byte

// GetUniqueID makes a new communicator id (ncclGetUniqueId).
func GetUniqueID() (UniqueID, error) {
	var id UniqueID
	if err := loaded(); err != nil {
		return id, err
	}
	// UniqueID has ncclUniqueId's size and holds no Go pointers: C may fill it.
	if err := check("ncclGetUniqueId", C.get_unique_id((*C.ncclUniqueId)(unsafe.Pointer(&id)))); err != nil {
		return UniqueID{}, err
	}
	return id, nil
}

// Comm is one rank's handle on an NCCL communicator (ncclComm_t).
type Comm struct {
	c C.ncclComm_t
}

var errClosed = errors.New("nccl: communicator is destroyed")

// InitRank joins communicator id as rank of nranks (ncclCommInitRank). It
// blocks until all ranks have joined and uses the calling thread's current
// CUDA device.
func InitRank(nranks int, id UniqueID, rank int) (*Comm, error) {
	if err := loaded(); err != nil {
		return nil, err
	}
	if nranks < 1 || nranks > math.MaxInt32 || rank < 0 || rank >= nranks {
		return nil, fmt.Errorf("nccl: InitRank: rank %d of %d ranks is out of range", rank, nranks)
	}
	var c C.ncclComm_t
	cid := (*C.ncclUniqueId)(unsafe.Pointer(&id))
	if err := check("ncclCommInitRank", C.init_rank(&c, C.int(nranks), cid, C.int(rank))); err != nil {
		return nil, err
	}
	return &Comm{c: c}, nil
}

// Destroy frees the communicator after its pending work is done
// (ncclCommDestroy). Destroying or aborting twice is a no-op.
func (c *Comm) Destroy() error {
	if c.c == nil {
		return nil
	}
	err := check("ncclCommDestroy", C.destroy(c.c))
	c.c = nil
	return err
}

// Abort frees the communicator without waiting for pending work
// (ncclCommAbort): used when a peer died, so that no rank hangs.
func (c *Comm) Abort() error {
	if c.c == nil {
		return nil
	}
	err := check("ncclCommAbort", C.abort_comm(c.c))
	c.c = nil
	return err
}

// AsyncError reports an error NCCL hit in the background, such as a lost
// peer (ncclCommGetAsyncError); nil while the communicator is healthy.
func (c *Comm) AsyncError() error {
	if c.c == nil {
		return errClosed
	}
	var e C.int
	if err := check("ncclCommGetAsyncError", C.async_error(c.c, &e)); err != nil {
		return err
	}
	if e != 0 {
		return &Error{Fn: "communicator async error", Code: int(e), Msg: C.GoString(C.error_string(e))}
	}
	return nil
}

// GroupStart opens a group of calls that NCCL launches together at GroupEnd,
// which is needed for a rank's Sends and Recvs not to deadlock each other.
func GroupStart() error {
	if err := loaded(); err != nil {
		return err
	}
	return check("ncclGroupStart", C.group_start())
}

// GroupEnd closes the group opened by GroupStart.
func GroupEnd() error {
	if err := loaded(); err != nil {
		return err
	}
	return check("ncclGroupEnd", C.group_end())
}

// Send sends bytes bytes at device address buf to peer on stream (ncclSend).
func (c *Comm) Send(buf uintptr, bytes int, peer int, stream unsafe.Pointer) error {
	if err := c.args("ncclSend", bytes, peer); err != nil {
		return err
	}
	return check("ncclSend", C.send_bytes(C.uintptr_t(buf), C.size_t(bytes), C.int(peer), c.c, C.cudaStream_t(stream)))
}

// Recv receives bytes bytes from peer into device address buf on stream (ncclRecv).
func (c *Comm) Recv(buf uintptr, bytes int, peer int, stream unsafe.Pointer) error {
	if err := c.args("ncclRecv", bytes, peer); err != nil {
		return err
	}
	return check("ncclRecv", C.recv_bytes(C.uintptr_t(buf), C.size_t(bytes), C.int(peer), c.c, C.cudaStream_t(stream)))
}

// AllReduceFloat32 sums count float32s over all ranks (ncclAllReduce);
// send and recv are device addresses and may be equal (in place).
func (c *Comm) AllReduceFloat32(send, recv uintptr, count int, stream unsafe.Pointer) error {
	return c.allReduce(send, recv, count, ncclFloat32, stream)
}

// AllReduceFloat64 is AllReduceFloat32 for float64s.
func (c *Comm) AllReduceFloat64(send, recv uintptr, count int, stream unsafe.Pointer) error {
	return c.allReduce(send, recv, count, ncclFloat64, stream)
}

func (c *Comm) allReduce(send, recv uintptr, count int, dtype C.int, stream unsafe.Pointer) error {
	if err := c.args("ncclAllReduce", count, 0); err != nil {
		return err
	}
	return check("ncclAllReduce", C.all_reduce_sum(C.uintptr_t(send), C.uintptr_t(recv), C.size_t(count),
		dtype, c.c, C.cudaStream_t(stream)))
}

// args rejects a destroyed communicator and counts or peers C cannot hold.
func (c *Comm) args(fn string, count, peer int) error {
	if c.c == nil {
		return errClosed
	}
	if count < 0 || peer < 0 || peer > math.MaxInt32 {
		return fmt.Errorf("nccl: %s: count %d or peer %d is out of range", fn, count, peer)
	}
	return nil
}
