//go:build amd64 && cgo

package halo

// The AVX2 row operations (rows_amd64.c), used when the CPU has AVX2.

/*
#cgo CFLAGS: -O3 -std=c11
#include <stdint.h>
int gnn_halo_have_avx2(void);
void gnn_residual_sub(float* d, const float* m, const float* s, const int32_t* idx, int64_t rows, int cols, uint32_t* dmax, uint32_t* mmax);
void gnn_scatter_add(float* dst, const int32_t* idx, const float* src, int64_t rows, int cols);
*/
import "C"

import "unsafe"

// fast is whether the AVX2 path runs (tests turn it off to run the Go one).
var fast = C.gnn_halo_have_avx2() != 0

func residualSubFast(d, m, s []float32, idx []int32, cols int, dmax, mmax []uint32) bool {
	if !fast || len(idx) == 0 || cols == 0 {
		return false
	}
	C.gnn_residual_sub((*C.float)(unsafe.Pointer(&d[0])), (*C.float)(unsafe.Pointer(&m[0])), (*C.float)(unsafe.Pointer(&s[0])),
		(*C.int32_t)(unsafe.Pointer(&idx[0])), C.int64_t(len(idx)), C.int(cols),
		(*C.uint32_t)(unsafe.Pointer(&dmax[0])), (*C.uint32_t)(unsafe.Pointer(&mmax[0])))
	return true
}

func scatterAddFast(dst []float32, idx []int32, src []float32, cols int) bool {
	if !fast || len(idx) == 0 || cols == 0 {
		return false
	}
	C.gnn_scatter_add((*C.float)(unsafe.Pointer(&dst[0])), (*C.int32_t)(unsafe.Pointer(&idx[0])), (*C.float)(unsafe.Pointer(&src[0])),
		C.int64_t(len(idx)), C.int(cols))
	return true
}
