// Package openblas is a minimal cgo binding to OpenBLAS: just what the
// kernels package needs for its Gemm backend.
package openblas

/*
#cgo pkg-config: openblas
#include <cblas.h>
*/
import "C"

import "fmt"

// Sgemm computes c = alpha*op(a)*op(b) + beta*c on row-major matrices, where
// op(a) is m x k and op(b) is k x n. It panics if a slice is too short for
// its dimensions, since the C side would read or write out of bounds.
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m < 0 || n < 0 || k < 0 {
		panic(fmt.Sprintf("openblas: Sgemm: negative size %dx%dx%d", m, n, k))
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
	ta, tb := uint32(C.CblasNoTrans), uint32(C.CblasNoTrans)
	if transA {
		ta = C.CblasTrans
	}
	if transB {
		tb = C.CblasTrans
	}
	// With k == 0 a and b may be empty; OpenBLAS then only scales c and
	// never dereferences them.
	var ap, bp *C.float
	if k > 0 {
		ap, bp = (*C.float)(&a[0]), (*C.float)(&b[0])
	}
	C.cblas_sgemm(C.CblasRowMajor, ta, tb, C.blasint(m), C.blasint(n), C.blasint(k),
		C.float(alpha), ap, C.blasint(lda), bp, C.blasint(ldb),
		C.float(beta), (*C.float)(&c[0]), C.blasint(ldc))
}

func need(name string, s []float32, rows, cols, ld int) {
	if ld < max(1, cols) || (rows > 0 && cols > 0 && len(s) < (rows-1)*ld+cols) {
		panic(fmt.Sprintf("openblas: Sgemm: %s has %d elements for %dx%d with stride %d", name, len(s), rows, cols, ld))
	}
}

// SetThreads sets the number of threads OpenBLAS uses (process-wide).
func SetThreads(n int) { C.openblas_set_num_threads(C.int(n)) }

// CoreName returns the CPU kernel set OpenBLAS selected (e.g. "Haswell").
func CoreName() string { return C.GoString(C.openblas_get_corename()) }
