// Package hosttwin runs the per-row and per-element routines of the CUDA
// kernels (kernels/cuda/*.cuh, __host__ __device__) on the host, compiled by
// the C compiler cgo uses, so that they can be compared with the Go code bit
// for bit on a machine without a GPU. Each function here replays one
// kernel's launch on one host thread: the same routine calls over the same
// indices, with a warp's 32 lanes run one after another and its shuffles
// replayed on arrays; what differs from the device is only which thread
// computes an element, never the arithmetic of one.
//
// The .h files here are links to the .cuh files, so that the go command
// sees their contents and rebuilds this package when a kernel changes (it
// does not follow an #include out of the package directory).
package hosttwin

/*
// The host's arithmetic must be the PTX's (-fmad=false, IEEE division and
// square root, no flush to zero): ISO C mode turns off GCC's contraction
// into fused multiply-adds (clang obeys the pragma), and fast math is
// refused.
#cgo CFLAGS: -O2 -std=c11 -Wno-unknown-pragmas -I${SRCDIR}/..
#cgo LDFLAGS: -lm
#pragma STDC FP_CONTRACT OFF
#ifdef __FAST_MATH__
#error "hosttwin: compiled with fast math, which changes the kernels' arithmetic"
#endif
#include "codec.h"
#include "dense.h"
#include "sparse.h"

// quant_encode: the warp per row, its butterfly of shuffles replayed.
static int twin_quant_encode(int rows, int cols, int b, const int* idx, const float* src,
                             unsigned char* dst, unsigned long long h) {
    const float n = (float)((1 << b) - 1);
    const long long stride = quant_stride(cols, b);
    const int groups = (int)(((long long)cols + 7) / 8);
    for (int i = 0; i < rows; i++) {
        const long long r = idx != NULL ? idx[i] : i;
        const float* x = src + r * cols;
        float lo[32], hi[32], ol[32], oh[32];
        for (int lane = 0; lane < 32; lane++) quant_minmax_lane(x, cols, lane, 32, &lo[lane], &hi[lane]);
        for (int m = 16; m > 0; m >>= 1) {
            for (int lane = 0; lane < 32; lane++) {
                ol[lane] = lo[lane ^ m];
                oh[lane] = hi[lane ^ m];
            }
            for (int lane = 0; lane < 32; lane++) quant_minmax_merge(&lo[lane], &hi[lane], ol[lane], oh[lane]);
        }
        // Every lane derives the header; they must agree.
        float scale0 = 0, inv0 = 0, lo0 = 0;
        for (int lane = 0; lane < 32; lane++) {
            float scale, inv;
            const float l = quant_params(lo[lane], hi[lane], n, &scale, &inv);
            if (lane == 0) {
                lo0 = l, scale0 = scale, inv0 = inv;
            } else if (f32bits(l) != f32bits(lo0) || f32bits(scale) != f32bits(scale0) ||
                       f32bits(inv) != f32bits(inv0)) {
                return i + 1;
            }
        }
        unsigned char* out = dst + (long long)i * stride;
        quant_header(out, lo0, scale0);
        for (int g = 0; g < groups; g++)
            quant_group(x, cols, b, g, lo0, 256 * inv0, 256 * n, i, (unsigned int)h, (unsigned int)(h >> 32), out + 6);
    }
    return 0;
}

static void twin_quant_decode(int rows, int cols, int b, const unsigned char* src, float* dst) {
    for (long long e = 0; e < (long long)rows * cols; e++) dst[e] = quant_decode_elem(e, cols, b, src);
}

static void twin_bf16_encode(int rows, int cols, const int* idx, const float* src, unsigned short* dst,
                             unsigned long long h) {
    const int groups = (int)(((long long)cols + 7) / 8);
    for (long long e = 0; e < (long long)rows * groups; e++) bf16_encode_at(e, cols, idx, src, dst, h);
}

static void twin_bf16_decode(long long n, const unsigned short* src, float* dst) {
    for (long long k = 0; k < n; k++) dst[k] = bf16_decode_value(src[k]);
}

static void twin_trunc_encode(int rows, int cols, int k, const int* idx, const float* src, float* dst) {
    for (long long e = 0; e < (long long)rows * k; e++) dst[e] = trunc_encode_elem(e, cols, k, idx, src);
}

static void twin_trunc_decode(int rows, int cols, int k, const float* src, float* dst) {
    for (long long e = 0; e < (long long)rows * cols; e++) dst[e] = trunc_decode_elem(e, cols, k, src);
}

// sq_diff_partial's terms summed as codec.SqDiff sums them: 8 lanes by
// column mod 8, each in element order, then the lanes in order.
static void twin_sq_diff(int rows, int cols, const int* idx, const float* src, const float* dec, double* out) {
    double ae[8] = {0}, an[8] = {0};
    for (long long e = 0; e < (long long)rows * cols; e++) {
        const int lane = (int)(e % cols) % 8;
        sq_diff_terms(e, cols, idx, src, dec, &ae[lane], &an[lane]);
    }
    out[0] = out[1] = 0.0;
    for (int t = 0; t < 8; t++) {
        out[0] += ae[t];
        out[1] += an[t];
    }
}

static void twin_add_bias(int rows, int F, float* y, const float* b) {
    for (long long e = 0; e < (long long)rows * F; e++) y[e] = add_bias_elem(e, F, y, b);
}

static void twin_bias_grad(int rows, int F, int rowsPerChunk, const float* dy, double* partial, float* db,
                           int accumulate) {
    const long long chunks = ((long long)rows + rowsPerChunk - 1) / rowsPerChunk;
    for (long long e = 0; e < chunks * F; e++) partial[e] = bias_grad_partial_elem(e, rows, F, rowsPerChunk, dy);
    for (long long j = 0; j < F; j++) db[j] = bias_grad_finish_col(j, (int)chunks, F, partial, db, accumulate);
}

static void twin_relu(long long n, const float* x, float* y) {
    for (long long k = 0; k < n; k++) y[k] = relu_value(x[k]);
}

static void twin_relu_backward(long long n, const float* y, const float* dy, float* dx) {
    for (long long k = 0; k < n; k++) dx[k] = relu_backward_value(y[k], dy[k]);
}

static void twin_mul(long long n, const float* x, const float* m, float* y) {
    for (long long k = 0; k < n; k++) y[k] = mul_value(x[k], m[k]);
}

static void twin_dropout(int rows, int F, const float* x, float* y, float* mask, unsigned long long h,
                         const int* rowIDs, unsigned int thr, float scale, int copyOnly) {
    for (long long e = 0; e < (long long)rows * F; e++) dropout_at(e, F, x, h, rowIDs, thr, scale, copyOnly, &y[e], &mask[e]);
}

static void twin_adam(long long n, float* p, const float* g, float* m, float* v, float beta1, float beta2,
                      float eps, float wd, float stepSize, float bc2Sqrt) {
    for (long long k = 0; k < n; k++) adam_elem(&p[k], g[k], &m[k], &v[k], beta1, beta2, eps, wd, stepSize, bc2Sqrt);
}

static double twin_sum_squares(long long n, const float* x) { return sum_squares_stride(n, x, 0, 1); }

// softmax_xent, the row losses summed in list order.
static double twin_softmax_xent(int n, int C, const float* logits, const int* labels, const int* rows, float scale,
                                float* dlogits) {
    double loss = 0.0;
    for (int t = 0; t < n; t++) {
        const long long i = rows[t];
        loss += softmax_xent_row(C, logits + i * C, labels[i], scale, dlogits + i * C);
    }
    return loss;
}

static int twin_count_correct(int n, int C, const float* logits, const int* labels, const int* rows) {
    int count = 0;
    for (int t = 0; t < n; t++) {
        const long long i = rows[t];
        if (argmax_row(C, logits + i * C) == labels[i]) count++;
    }
    return count;
}

static void twin_score_histogram(int n, const float* logits, const int* labels, const int* rows, int bins,
                                 double* hist) {
    for (int t = 0; t < n; t++) {
        const long long i = rows[t];
        hist[(long long)labels[i] * bins + score_bin(logits[2 * i], logits[2 * i + 1], bins)] += 1.0;
    }
}

// spmm_csr: each row's 32 lanes one after another (they own disjoint columns).
static void twin_spmm(int rows, int F, const long long* ptr, const int* col, const float* val, const float* x,
                      float* y, int accumulate) {
    for (int i = 0; i < rows; i++)
        for (int lane = 0; lane < 32; lane++)
            spmm_row_lane(F, ptr[i], ptr[i + 1], col, val, x, y + (long long)i * F, accumulate, lane);
}

static void twin_gather_rows(int n, int F, const int* idx, const float* src, float* dst) {
    for (long long e = 0; e < (long long)n * F; e++) gather_rows_elem(e, F, idx, src, dst);
}

static void twin_scatter_add_rows(int n, int F, const int* idx, const float* src, float* dst) {
    for (long long e = 0; e < (long long)n * F; e++) scatter_add_elem(e, F, idx, src, dst);
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

func fp(s []float32) *C.float {
	if len(s) == 0 {
		return nil
	}
	return (*C.float)(unsafe.Pointer(&s[0]))
}

func dp(s []float64) *C.double {
	if len(s) == 0 {
		return nil
	}
	return (*C.double)(unsafe.Pointer(&s[0]))
}

var emptyList [1]int32

// ip is an index list; nil stays NULL (the kernels' "no list").
func ip(s []int32) *C.int {
	if s == nil {
		return nil
	}
	if len(s) == 0 {
		return (*C.int)(unsafe.Pointer(&emptyList[0])) // empty, not NULL
	}
	return (*C.int)(unsafe.Pointer(&s[0]))
}

func bp(s []byte) *C.uchar {
	if len(s) == 0 {
		return nil
	}
	return (*C.uchar)(unsafe.Pointer(&s[0]))
}

func b2i(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// QuantEncode is quant_encode: rows payload rows of QuantStride(cols, b)
// bytes into dst, payload row i from src row idx[i] (i when idx is nil),
// h = rng.Mix64(seed). It fails when the replayed lanes of a row derive
// different headers.
func QuantEncode(dst []byte, src []float32, rows, cols, b int, idx []int32, h uint64) error {
	if bad := C.twin_quant_encode(C.int(rows), C.int(cols), C.int(b), ip(idx), fp(src), bp(dst), C.ulonglong(h)); bad != 0 {
		return fmt.Errorf("hosttwin: quant_encode: the lanes of row %d derive different headers", bad-1)
	}
	return nil
}

// QuantStride is quant_stride: the payload bytes per row.
func QuantStride(cols, b int) int { return int(C.quant_stride(C.int(cols), C.int(b))) }

// QuantDecode is quant_decode.
func QuantDecode(dst []float32, src []byte, rows, cols, b int) {
	C.twin_quant_decode(C.int(rows), C.int(cols), C.int(b), bp(src), fp(dst))
}

// BF16Encode is bf16_encode: rows*cols bf16 values into dst.
func BF16Encode(dst []uint16, src []float32, rows, cols int, idx []int32, h uint64) {
	var d *C.ushort
	if len(dst) > 0 {
		d = (*C.ushort)(unsafe.Pointer(&dst[0]))
	}
	C.twin_bf16_encode(C.int(rows), C.int(cols), ip(idx), fp(src), d, C.ulonglong(h))
}

// BF16Decode is bf16_decode.
func BF16Decode(dst []float32, src []uint16) {
	if len(src) == 0 {
		return
	}
	C.twin_bf16_decode(C.longlong(len(src)), (*C.ushort)(unsafe.Pointer(&src[0])), fp(dst))
}

// TruncEncode is trunc_encode: the first k of cols values of each row.
func TruncEncode(dst, src []float32, rows, cols, k int, idx []int32) {
	C.twin_trunc_encode(C.int(rows), C.int(cols), C.int(k), ip(idx), fp(src), fp(dst))
}

// TruncDecode is trunc_decode.
func TruncDecode(dst, src []float32, rows, cols, k int) {
	C.twin_trunc_decode(C.int(rows), C.int(cols), C.int(k), fp(src), fp(dst))
}

// SqDiff is sq_diff_partial's terms summed in codec.SqDiff's order.
func SqDiff(rows, cols int, idx []int32, src, dec []float32) (errSq, normSq float64) {
	var out [2]float64
	C.twin_sq_diff(C.int(rows), C.int(cols), ip(idx), fp(src), fp(dec), dp(out[:]))
	return out[0], out[1]
}

// AddBias is add_bias on a rows x F matrix y.
func AddBias(y []float32, rows, F int, b []float32) {
	C.twin_add_bias(C.int(rows), C.int(F), fp(y), fp(b))
}

// BiasGrad is bias_grad_partial then bias_grad_finish.
func BiasGrad(dy []float32, rows, F, rowsPerChunk int, db []float32, accumulate bool) {
	chunks := (rows + rowsPerChunk - 1) / rowsPerChunk
	partial := make([]float64, chunks*F)
	C.twin_bias_grad(C.int(rows), C.int(F), C.int(rowsPerChunk), fp(dy), dp(partial), fp(db), b2i(accumulate))
}

// ReLU is relu.
func ReLU(x, y []float32) { C.twin_relu(C.longlong(len(x)), fp(x), fp(y)) }

// ReLUBackward is relu_backward.
func ReLUBackward(y, dy, dx []float32) {
	C.twin_relu_backward(C.longlong(len(y)), fp(y), fp(dy), fp(dx))
}

// Mul is mul.
func Mul(x, m, y []float32) { C.twin_mul(C.longlong(len(x)), fp(x), fp(m), fp(y)) }

// Dropout is dropout with the launcher's host-side parameters.
func Dropout(x, y, mask []float32, rows, F int, h uint64, rowIDs []int32, thr uint32, scale float32, copyOnly bool) {
	C.twin_dropout(C.int(rows), C.int(F), fp(x), fp(y), fp(mask), C.ulonglong(h), ip(rowIDs), C.uint(thr), C.float(scale), b2i(copyOnly))
}

// Adam is adam with the launcher's host-side corrections.
func Adam(p, g, m, v []float32, beta1, beta2, eps, wd, stepSize, bc2Sqrt float32) {
	C.twin_adam(C.longlong(len(p)), fp(p), fp(g), fp(m), fp(v), C.float(beta1), C.float(beta2), C.float(eps),
		C.float(wd), C.float(stepSize), C.float(bc2Sqrt))
}

// SumSquares is sum_squares_partial as one thread.
func SumSquares(x []float32) float64 { return float64(C.twin_sum_squares(C.longlong(len(x)), fp(x))) }

// SoftmaxCrossEntropy is softmax_xent over the listed rows of a rows x classes
// matrix; dlogits' other rows are left as they are.
func SoftmaxCrossEntropy(logits []float32, classes int, labels, rows []int32, scale float32, dlogits []float32) float64 {
	return float64(C.twin_softmax_xent(C.int(len(rows)), C.int(classes), fp(logits), ip(labels), ip(rows), C.float(scale), fp(dlogits)))
}

// CountCorrect is count_correct.
func CountCorrect(logits []float32, classes int, labels, rows []int32) int {
	return int(C.twin_count_correct(C.int(len(rows)), C.int(classes), fp(logits), ip(labels), ip(rows)))
}

// ScoreHistogram is score_histogram: hist has 2*bins counts.
func ScoreHistogram(logits []float32, labels, rows []int32, bins int, hist []float64) {
	C.twin_score_histogram(C.int(len(rows)), fp(logits), ip(labels), ip(rows), C.int(bins), dp(hist))
}

// SpMM is spmm_csr on a CSR matrix of len(ptr)-1 rows; val nil is all ones.
func SpMM(F int, ptr []int64, col []int32, val []float32, x, y []float32, accumulate bool) {
	C.twin_spmm(C.int(len(ptr)-1), C.int(F), (*C.longlong)(unsafe.Pointer(&ptr[0])), ip(col), fp(val), fp(x), fp(y), b2i(accumulate))
}

// GatherRows is gather_rows.
func GatherRows(idx []int32, F int, src, dst []float32) {
	C.twin_gather_rows(C.int(len(idx)), C.int(F), ip(idx), fp(src), fp(dst))
}

// ScatterAddRows is scatter_add_rows.
func ScatterAddRows(idx []int32, F int, src, dst []float32) {
	C.twin_scatter_add_rows(C.int(len(idx)), C.int(F), ip(idx), fp(src), fp(dst))
}
