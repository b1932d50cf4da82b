// Package cblas loads a CBLAS library at run time (dlopen) for its
// single-precision GEMM: OpenBLAS, BLIS or MKL, whichever is installed, so
// that one binary uses the fast BLAS of the machine it runs on and, where
// none is found, its caller falls back to pure Go. The library is told to
// run single-threaded: the caller cuts products into pieces for its own
// thread pool (so that results do not depend on the thread count).
package cblas

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>

// CBLAS's enums, as every implementation defines them.
enum { RowMajor = 101, NoTrans = 111, Trans = 112 };

typedef void (*sgemm_fn)(int, int, int, int, int, int, float, const float *, int,
	const float *, int, float, float *, int);

static sgemm_fn p_sgemm;
static char *(*p_openblas_corename)(void);
static char *(*p_openblas_config)(void);

// open_lib returns the library, or NULL and dlerror's message in *err;
// dlerror is per-thread, so it is read in the same C call as dlopen.
static void *open_lib(const char *name, const char **err) {
	void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	*err = lib ? NULL : dlerror();
	return lib;
}

static void *sym(void *lib, const char *name) { return dlsym(lib, name); }

// use makes lib the GEMM, single-threaded; 0 if it has no cblas_sgemm.
static int use(void *lib) {
	p_sgemm = (sgemm_fn)dlsym(lib, "cblas_sgemm");
	if (!p_sgemm) return 0;
	void (*openblas_threads)(int) = dlsym(lib, "openblas_set_num_threads");
	if (openblas_threads) openblas_threads(1);
	void (*blis_threads)(long) = dlsym(lib, "bli_thread_set_num_threads");
	if (blis_threads) blis_threads(1);
	void (*mkl_threads)(int) = dlsym(lib, "MKL_Set_Num_Threads");
	if (mkl_threads) mkl_threads(1);
	p_openblas_corename = dlsym(lib, "openblas_get_corename");
	p_openblas_config = dlsym(lib, "openblas_get_config");
	return 1;
}

static const char *corename(void) { return p_openblas_corename ? p_openblas_corename() : ""; }
static const char *config(void) { return p_openblas_config ? p_openblas_config() : ""; }

static void sgemm(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
		const float *b, int ldb, float beta, float *c, int ldc) {
	p_sgemm(RowMajor, ta ? Trans : NoTrans, tb ? Trans : NoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
*/
import "C"

import (
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"unsafe"
)

// EnvLibrary names the CBLAS library to load (a path or a soname), or
// "none" for none; unset, the candidates are tried in order.
const EnvLibrary = "GNN_SPMD_BLAS"

// candidates are the sonames tried in order: fast implementations only
// (the reference BLAS behind Debian's libblas.so.3 is slower than pure Go).
var candidates = []string{
	"libopenblas.so.0", "libopenblas.so", "libopenblasp.so.0",
	"libblis.so.4", "libblis.so.3", "libblis.so",
	"libmkl_rt.so.2", "libmkl_rt.so",
}

// Library is the loaded CBLAS.
type Library struct {
	Name   string // the soname or path it was loaded by
	Path   string // the file, where the loader says
	Detail string // OpenBLAS's version and core, when it says
}

var (
	once    sync.Once
	loaded  *Library
	loadErr error
)

// Load loads the CBLAS library once per process and returns it, or why
// there is none (every candidate tried, with the loader's reason).
func Load() (*Library, error) {
	once.Do(func() { loaded, loadErr = load() })
	return loaded, loadErr
}

func load() (*Library, error) {
	names := candidates
	if v, ok := os.LookupEnv(EnvLibrary); ok {
		if v == "none" {
			return nil, fmt.Errorf("%s=none", EnvLibrary)
		}
		names = []string{v}
	}
	var tried []string
	for _, name := range names {
		cname := C.CString(name)
		var cerr *C.char
		lib := C.open_lib(cname, &cerr)
		C.free(unsafe.Pointer(cname))
		if lib == nil {
			tried = append(tried, C.GoString(cerr))
			continue
		}
		if C.use(lib) == 0 {
			tried = append(tried, name+": no cblas_sgemm")
			continue
		}
		l := &Library{Name: name, Path: libPath(lib, name)}
		// OpenBLAS says its version ("OpenBLAS 0.3.21 DYNAMIC_ARCH ...")
		// and the kernels it picked for this CPU.
		if f := strings.Fields(C.GoString(C.config())); len(f) >= 2 {
			l.Detail = f[0] + " " + f[1]
		}
		if core := C.GoString(C.corename()); core != "" {
			l.Detail = strings.TrimSpace(l.Detail + ", core " + core)
		}
		return l, nil
	}
	return nil, fmt.Errorf("no CBLAS library found (%s)", strings.Join(tried, "; "))
}

// libPath is the file behind the loaded library, from the address of its
// cblas_sgemm in /proc/self/maps; name where that cannot be read.
func libPath(lib unsafe.Pointer, name string) string {
	csym := C.CString("cblas_sgemm")
	defer C.free(unsafe.Pointer(csym))
	addr := uintptr(C.sym(lib, csym))
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil || addr == 0 {
		return name
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 {
			continue
		}
		var lo, hi uintptr
		if _, err := fmt.Sscanf(f[0], "%x-%x", &lo, &hi); err == nil && lo <= addr && addr < hi {
			return f[5]
		}
	}
	return name
}

// Sgemm computes c = alpha*op(a)*op(b) + beta*c on row-major matrices, where
// op(a) is m x k and op(b) is k x n, on the calling thread. Load must have
// succeeded. It panics if a slice is too short for its dimensions, since
// the C side would read or write out of bounds, or if a size does not fit
// CBLAS's 32-bit int.
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if loaded == nil {
		panic("cblas: Sgemm before a successful Load")
	}
	for _, v := range []int{m, n, k, lda, ldb, ldc} {
		if v < 0 || v > math.MaxInt32 {
			panic(fmt.Sprintf("cblas: Sgemm: size %d out of CBLAS's int range", v))
		}
	}
	if m == 0 || n == 0 {
		return
	}
	ar, ac := m, k
	if transA {
		ar, ac = k, m
	}
	br, bc := k, n
	if transB {
		br, bc = n, k
	}
	need("a", a, ar, ac, lda)
	need("b", b, br, bc, ldb)
	need("c", c, m, n, ldc)
	// With k == 0 a and b may be empty; CBLAS then only scales c and never
	// dereferences them.
	var ap, bp *C.float
	if k > 0 {
		ap, bp = (*C.float)(&a[0]), (*C.float)(&b[0])
	}
	C.sgemm(cbool(transA), cbool(transB), C.int(m), C.int(n), C.int(k), C.float(alpha), ap, C.int(lda), bp, C.int(ldb),
		C.float(beta), (*C.float)(&c[0]), C.int(ldc))
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

func need(name string, s []float32, rows, cols, ld int) {
	if ld < max(1, cols) || (rows > 0 && cols > 0 && len(s) < (rows-1)*ld+cols) {
		panic(fmt.Sprintf("cblas: Sgemm: %s has %d elements for %dx%d with stride %d", name, len(s), rows, cols, ld))
	}
}
