//go:build !cpu

// Package cublas is a thin binding to cuBLAS's single-precision GEMM. The
// library is loaded at run time with dlopen, so the GPU build links without
// the cuBLAS headers or libraries and the same binary works with cuBLAS 11,
// 12 or 13, wherever cgo/cudaprobe/cudalib finds it (the CUDA toolkit,
// LD_LIBRARY_PATH, the system, a Python environment's NVIDIA wheels).
package cublas

/*
#cgo LDFLAGS: -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

// Our own declarations (cublas_api.h is not installed): handles and streams
// are opaque pointers, enums are ints.
typedef void *cublasHandle_t;
typedef int cublasStatus_t;

static cublasStatus_t (*p_create)(cublasHandle_t *);
static cublasStatus_t (*p_destroy)(cublasHandle_t);
static cublasStatus_t (*p_set_math_mode)(cublasHandle_t, int);
static cublasStatus_t (*p_get_property)(int, int *);
static cublasStatus_t (*p_sgemm)(cublasHandle_t, int, int, int, int, int,
	const float *, const float *, int, const float *, int,
	const float *, float *, int);

// open_lib returns the library, or NULL and dlerror's message in *err;
// dlerror is per-thread, so it is read in the same C call as dlopen.
static void *open_lib(const char *name, const char **err) {
	void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	*err = lib ? NULL : dlerror();
	return lib;
}

// load_syms returns the name of the first required symbol that is missing.
static const char *load_syms(void *lib) {
	if (!(p_create = dlsym(lib, "cublasCreate_v2"))) return "cublasCreate_v2";
	if (!(p_destroy = dlsym(lib, "cublasDestroy_v2"))) return "cublasDestroy_v2";
	if (!(p_sgemm = dlsym(lib, "cublasSgemm_v2"))) return "cublasSgemm_v2";
	p_set_math_mode = dlsym(lib, "cublasSetMathMode"); // optional
	p_get_property = dlsym(lib, "cublasGetProperty");  // optional
	return NULL;
}

// loaded_file is the file the loader mapped for the loaded symbols.
static const char *loaded_file(void) {
	Dl_info info;
	return dladdr((void *)p_create, &info) && info.dli_fname ? info.dli_fname : "";
}

// version is MAJOR*10000 + MINOR*100 + PATCH, or -1 when unknown.
static int version(void) {
	int v[3];
	if (!p_get_property) return -1;
	for (int i = 0; i < 3; i++)
		if (p_get_property(i, &v[i]) != 0) return -1; // MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
	return v[0] * 10000 + v[1] * 100 + v[2];
}

static int create(cublasHandle_t *h) { return p_create(h); }
static int destroy(cublasHandle_t h) { return p_destroy(h); }

// set_default_math returns -1 when the library has no cublasSetMathMode.
static int set_default_math(cublasHandle_t h) {
	return p_set_math_mode ? p_set_math_mode(h, 0) : -1; // CUBLAS_DEFAULT_MATH
}

// sgemm takes alpha and beta by value and device addresses as integers, so
// no Go pointer crosses into C.
static int sgemm(cublasHandle_t h, int ta, int tb, int m, int n, int k,
		float alpha, uintptr_t a, int lda, uintptr_t b, int ldb,
		float beta, uintptr_t c, int ldc) {
	return p_sgemm(h, ta, tb, m, n, k, &alpha, (const float *)a, lda,
		(const float *)b, ldb, &beta, (float *)c, ldc);
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

// The loader's state: the candidates left to try, what each gave, and
// whether one is loaded. A cuBLAS that loads but cannot create a handle
// (cuBLAS 13 on an older driver) gives way to the next soname, until a
// handle has been created once; from then on the library stays.
var (
	mu       sync.Mutex
	cands    []cudalib.Candidate // nil until the search ran
	next     int                 // the next candidate to try
	attempts []cudalib.Attempt
	loaded   = -1                // index in attempts of the loaded library, or -1
	rejected = map[string]bool{} // sonames that loaded but created no handle
	fixed    bool                // a handle was created
)

// Load loads cuBLAS (the first candidate that dlopen accepts) without
// creating a handle, which needs a GPU: it says whether a library is there.
func Load() error {
	mu.Lock()
	defer mu.Unlock()
	return load()
}

// Attempts says what each candidate tried so far gave.
func Attempts() []cudalib.Attempt {
	mu.Lock()
	defer mu.Unlock()
	return append([]cudalib.Attempt(nil), attempts...)
}

func load() error {
	if loaded >= 0 {
		return nil
	}
	if cands == nil {
		cands = cudalib.CuBLAS.Find(cudalib.Default().Dirs())
	}
	return loadNext()
}

// loadNext loads the next candidate that dlopen accepts, skipping the
// sonames already rejected.
func loadNext() error {
	var last string
	for ; next < len(cands); next++ {
		c := cands[next]
		if rejected[c.Soname] {
			continue
		}
		a := cudalib.Attempt{Candidate: c}
		if err := open(c); err != nil {
			a.Result, last = err.Error(), err.Error()
			attempts = append(attempts, a)
			continue
		}
		a.File = C.GoString(C.loaded_file())
		if rejectedFile(a.File) { // another name of a library that created no handle
			a.Result = "the same file as an earlier candidate"
			rejected[c.Soname] = true
			attempts = append(attempts, a)
			continue
		}
		a.OK, a.Result = true, "loaded"
		if v := int(C.version()); v >= 0 {
			a.Result = fmt.Sprintf("cuBLAS %d.%d.%d", v/10000, v/100%100, v%100)
		}
		attempts = append(attempts, a)
		loaded = len(attempts) - 1
		next++
		return nil
	}
	if failed := handleFailures(); failed != "" {
		return fmt.Errorf("cublas: no cuBLAS here creates a handle: %s", failed)
	}
	return fmt.Errorf("cublas: cannot load cuBLAS (tried %s): %s; install it or put it on LD_LIBRARY_PATH",
		strings.Join(cudalib.CuBLAS.Sonames, ", "), last)
}

// open dlopens candidate c (its companions first) and binds its symbols.
func open(c cudalib.Candidate) error {
	for _, p := range c.Preload {
		cs := C.CString(p)
		var msg *C.char
		C.open_lib(cs, &msg) // failing here, the library's own load says why
		C.free(unsafe.Pointer(cs))
	}
	cs := C.CString(c.Name())
	defer C.free(unsafe.Pointer(cs))
	var msg *C.char
	lib := C.open_lib(cs, &msg)
	if lib == nil {
		return errors.New(C.GoString(msg))
	}
	if sym := C.load_syms(lib); sym != nil {
		return fmt.Errorf("%s has no symbol %s", c.Name(), C.GoString(sym))
	}
	return nil
}

func rejectedFile(file string) bool {
	for _, a := range attempts {
		if a.File == file && rejected[a.Soname] {
			return true
		}
	}
	return false
}

// handleFailures lists the libraries that loaded but created no handle.
func handleFailures() string {
	var out []string
	for _, a := range attempts {
		if rejected[a.Soname] && a.File != "" && strings.Contains(a.Result, ", but ") {
			out = append(out, a.File+": "+a.Result)
		}
	}
	return strings.Join(out, "; ")
}

// Handle is one cuBLAS context (cublasHandle_t). It is not safe for
// concurrent use, like the handle it wraps.
type Handle struct {
	h C.cublasHandle_t
}

// Open loads cuBLAS (once per process) and creates a handle on the current
// CUDA context. Until a handle has been created once, a library that
// cannot create one gives way to the next soname (cuBLAS 13, then 12, then
// 11). The math mode is set to CUBLAS_DEFAULT_MATH, so SGEMM does not use
// TF32 and matches the CPU float32 products within float tolerance.
func Open() (*Handle, error) {
	mu.Lock()
	defer mu.Unlock()
	for {
		if err := load(); err != nil {
			return nil, err
		}
		h, err := create()
		if err == nil {
			fixed = true
			attempts[loaded].Result += ", handle created"
			return h, nil
		}
		if fixed {
			return nil, err
		}
		a := &attempts[loaded]
		a.OK, a.Result = false, a.Result+", but "+strings.TrimPrefix(err.Error(), "cublas: ")
		rejected[a.Soname] = true
		loaded = -1
	}
}

func create() (*Handle, error) {
	var h C.cublasHandle_t
	if err := check("cublasCreate_v2", C.create(&h)); err != nil {
		return nil, err
	}
	if rc := C.set_default_math(h); rc > 0 {
		C.destroy(h)
		return nil, check("cublasSetMathMode", rc)
	}
	return &Handle{h: h}, nil
}

var errClosed = errors.New("cublas: handle is closed")

// Sgemm computes C = alpha*op(A)*op(B) + beta*C with cublasSgemm_v2's
// semantics: column-major, op(A) is m x k, op(B) is k x n, C is m x n, and
// a, b, c are device addresses. It is asynchronous on h's stream.
func (h *Handle) Sgemm(transA, transB bool, m, n, k int, alpha float32, a uintptr, lda int,
	b uintptr, ldb int, beta float32, c uintptr, ldc int) error {
	if h.h == nil {
		return errClosed
	}
	for _, d := range [...]struct {
		name string
		v    int
	}{{"m", m}, {"n", n}, {"k", k}, {"lda", lda}, {"ldb", ldb}, {"ldc", ldc}} {
		if d.v < math.MinInt32 || d.v > math.MaxInt32 {
			return fmt.Errorf("cublas: Sgemm: %s=%d does not fit in a C int", d.name, d.v)
		}
	}
	return check("cublasSgemm_v2", C.sgemm(h.h, op(transA), op(transB), C.int(m), C.int(n), C.int(k),
		C.float(alpha), C.uintptr_t(a), C.int(lda), C.uintptr_t(b), C.int(ldb),
		C.float(beta), C.uintptr_t(c), C.int(ldc)))
}

// Close destroys the handle; closing twice is a no-op.
func (h *Handle) Close() error {
	if h.h == nil {
		return nil
	}
	err := check("cublasDestroy_v2", C.destroy(h.h))
	h.h = nil
	return err
}

// op maps a transpose flag to cublasOperation_t (CUBLAS_OP_N=0, CUBLAS_OP_T=1).
func op(trans bool) C.int {
	if trans {
		return 1
	}
	return 0
}

// statusNames are cublasStatus_t's values (cublas_api.h).
var statusNames = map[int]string{
	1: "CUBLAS_STATUS_NOT_INITIALIZED", 3: "CUBLAS_STATUS_ALLOC_FAILED",
	7: "CUBLAS_STATUS_INVALID_VALUE", 8: "CUBLAS_STATUS_ARCH_MISMATCH",
	11: "CUBLAS_STATUS_MAPPING_ERROR", 13: "CUBLAS_STATUS_EXECUTION_FAILED",
	14: "CUBLAS_STATUS_INTERNAL_ERROR", 15: "CUBLAS_STATUS_NOT_SUPPORTED",
	16: "CUBLAS_STATUS_LICENSE_ERROR",
}

// StatusName names a cublasStatus_t code.
func StatusName(code int) string {
	if code == 0 {
		return "CUBLAS_STATUS_SUCCESS"
	}
	if s, ok := statusNames[code]; ok {
		return s
	}
	return fmt.Sprintf("cublasStatus_t %d", code)
}

func check(fn string, rc C.int) error {
	if rc == 0 {
		return nil
	}
	return fmt.Errorf("cublas: %s: %s", fn, StatusName(int(rc)))
}
