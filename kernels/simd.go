package kernels

// The C loops of simd.c: the aggregation's row sums, the ReLU pair, the
// bias add and the bias gradient's column sums, for AVX2 (the row and
// column sums also for AVX-512) where the CPU has it, else for the
// baseline ISA.

/*
#cgo CFLAGS: -O3 -std=c11
#include <stdint.h>
int gnn_kernels_simd(void);
void gnn_spmm(int level, float* y, const float* x, int64_t f, const int64_t* ptr, const int32_t* col, const float* val,
              const int32_t* rows, int64_t lo, int64_t hi, int acc);
void gnn_relu(int avx2, const float* x, float* y, int64_t n);
void gnn_relu_backward(int avx2, const float* y, const float* dy, float* dx, int64_t n);
void gnn_add_bias(int avx2, float* y, const float* b, int64_t rows, int64_t f);
void gnn_col_sums(int level, const float* y, int64_t rows, int64_t f, double* s);
*/
import "C"

import "unsafe"

// The C loops' vector width, decided once from the CPU: avx2 is whether the
// AVX2 variants run, avx512 whether the aggregation's AVX-512 one does
// (tests turn either off).
var avx2, avx512 = func() (bool, bool) {
	l := C.gnn_kernels_simd()
	return l >= 1, l >= 2
}()

// simdLevel is the aggregation's C loop in use, as gnn_kernels_simd numbers
// it: 0 baseline, 1 AVX2, 2 AVX-512.
func simdLevel() int {
	switch {
	case avx2 && avx512:
		return 2
	case avx2:
		return 1
	}
	return 0
}

// SIMD names the vector width of the aggregation's C loop, for the run's
// header.
func SIMD() string { return [...]string{"baseline", "avx2", "avx512"}[simdLevel()] }

// portable is whether the Go twins run instead of the C loops (tests set it).
var portable = false

func cBool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

func f32p(s []float32) *C.float {
	if len(s) == 0 {
		return nil
	}
	return (*C.float)(unsafe.Pointer(&s[0]))
}

// spmmC computes rows [lo, hi) of y = A x (+= when acc), or rows
// rows[lo:hi] when rows is not nil; the columns are checked by the caller.
func spmmC(a *Adj, x, y *Mat, rows []int32, lo, hi int, acc bool) {
	var rp *C.int32_t
	if rows != nil {
		rp = (*C.int32_t)(unsafe.Pointer(&rows[0]))
	}
	C.gnn_spmm(C.int(simdLevel()), f32p(y.Data), f32p(x.Data), C.int64_t(x.Cols),
		(*C.int64_t)(unsafe.Pointer(&a.Ptr[0])), (*C.int32_t)(unsafe.Pointer(unsafe.SliceData(a.Col))), f32p(a.Val),
		rp, C.int64_t(lo), C.int64_t(hi), cBool(acc))
}

func reluC(x, y []float32) {
	C.gnn_relu(cBool(avx2), f32p(x), f32p(y), C.int64_t(len(x)))
}

func reluBackwardC(y, dy, dx []float32) {
	C.gnn_relu_backward(cBool(avx2), f32p(y), f32p(dy), f32p(dx), C.int64_t(len(y)))
}

// addBiasC adds b to each of the len(y)/len(b) rows of y.
func addBiasC(y, b []float32) {
	C.gnn_add_bias(cBool(avx2), f32p(y), f32p(b), C.int64_t(len(y)/len(b)), C.int64_t(len(b)))
}

// colSumsC sets s to the float64 column sums of the len(y)/len(s) rows of
// y, each in row order (BenchmarkBias: AVX-512 twice the AVX2 loop's
// speed, whose float64 lanes are half as many).
func colSumsC(y []float32, s []float64) {
	C.gnn_col_sums(C.int(simdLevel()), f32p(y), C.int64_t(len(y)/len(s)), C.int64_t(len(s)), (*C.double)(unsafe.Pointer(&s[0])))
}
