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
#include "attention.h"
#include "codec.h"
#include "dense.h"
#include "residual.h"
#include "sparse.h"

// quant_encode: a row's quant_lanes(cols) lanes, their butterfly of
// shuffles replayed, then their draw blocks.
static int twin_quant_encode(int rows, int cols, int b, const int* idx, const float* src,
                             unsigned char* dst, unsigned long long h) {
    const float n = (float)((1 << b) - 1);
    const long long stride = quant_stride(cols, b);
    const int lanes = quant_lanes(cols), blocks = (cols + 15) / 16;
    for (int i = 0; i < rows; i++) {
        const long long r = idx != NULL ? idx[i] : i;
        const float* x = src + r * cols;
        float lo[32], hi[32], ol[32], oh[32];
        for (int lane = 0; lane < lanes; lane++) quant_minmax_lane(x, cols, lane, lanes, &lo[lane], &hi[lane]);
        for (int m = lanes >> 1; m > 0; m >>= 1) {
            for (int lane = 0; lane < lanes; lane++) {
                ol[lane] = lo[lane ^ m];
                oh[lane] = hi[lane ^ m];
            }
            for (int lane = 0; lane < lanes; lane++) quant_minmax_merge(&lo[lane], &hi[lane], ol[lane], oh[lane]);
        }
        // Every lane derives the header; they must agree.
        float scale0 = 0, inv0 = 0, lo0 = 0;
        int k0 = 0;
        for (int lane = 0; lane < lanes; lane++) {
            float scale, inv;
            int k;
            const float l = quant_params(lo[lane], hi[lane], n, &scale, &inv, &k);
            if (lane == 0) {
                lo0 = l, scale0 = scale, inv0 = inv, k0 = k;
            } else if (f32bits(l) != f32bits(lo0) || f32bits(scale) != f32bits(scale0) ||
                       f32bits(inv) != f32bits(inv0) || k != k0) {
                return i + 1;
            }
        }
        unsigned char* out = dst + (long long)i * stride;
        quant_header(out, scale0, k0);
        for (int p = 0; p < blocks; p++)
            quant_block(x, cols, b, p, lo0, 256 * inv0, 256 * n, i, (unsigned int)h, (unsigned int)(h >> 32),
                        out + QUANT_HEADER);
    }
    return 0;
}

static void twin_quant_decode(int rows, int cols, int b, const unsigned char* src, float* dst) {
    for (long long e = 0; e < (long long)rows * cols; e++) dst[e] = quant_decode_elem(e, cols, b, src);
}

// tern_encode: the key, then per row its tern_lanes(cols) lanes'
// largest magnitudes, their butterfly replayed, then their chunks.
static int twin_tern_encode(int rows, int cols, int first, const int* idx, const float* src, unsigned char* dst,
                            long long at, unsigned long long h) {
    const long long stride = tern_stride(cols);
    const int lanes = tern_lanes(cols), chunks = (int)(((long long)cols + 79) / 80);
    tern_put_key(dst, h);
    for (int i = 0; i < rows; i++) {
        const long long r = idx != NULL ? idx[i] : i;
        const float* x = src + r * cols;
        float m[32], o[32];
        for (int lane = 0; lane < lanes; lane++) m[lane] = tern_absmax_lane(x, cols, lane, lanes);
        for (int k = lanes >> 1; k > 0; k >>= 1) {
            for (int lane = 0; lane < lanes; lane++) o[lane] = m[lane ^ k];
            for (int lane = 0; lane < lanes; lane++) m[lane] = tern_absmax_merge(m[lane], o[lane]);
        }
        // Every lane derives the scale; they must agree.
        for (int lane = 1; lane < lanes; lane++)
            if (f32bits(m[lane]) != f32bits(m[0])) return i + 1;
        const float s = tern_scale(m[0]), inv = tern_inv(s);
        unsigned char* out = dst + at + (long long)i * stride;
        tern_header(out, s);
        for (int p = 0; p < chunks; p++)
            tern_chunk(x, cols, p, s, inv, (unsigned int)(first + i), (unsigned int)h, (unsigned int)(h >> 32),
                       out + TERN_HEADER);
    }
    return 0;
}

static void twin_tern_decode(int rows, int cols, int first, const unsigned char* src, long long at, float* dst) {
    unsigned int k0, k1;
    tern_get_key(src, &k0, &k1);
    for (long long e = 0; e < (long long)rows * cols; e++) dst[e] = tern_decode_elem(e, cols, first, k0, k1, src + at);
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

// residual_sub: a row's 32 lanes one after another, their shuffle
// butterfly of maxima replayed on arrays.
static void twin_residual_sub(int n, int F, const int* idx, const float* m, const float* s, float* d,
                              unsigned int* dmax, unsigned int* mmax) {
    for (int k = 0; k < n; k++) {
        unsigned int a[32], b[32], oa[32], ob[32];
        for (int lane = 0; lane < 32; lane++) residual_sub_lane(k, F, idx, m, s, d, lane, 32, &a[lane], &b[lane]);
        for (int o = 16; o > 0; o >>= 1) {
            for (int lane = 0; lane < 32; lane++) {
                oa[lane] = a[lane ^ o];
                ob[lane] = b[lane ^ o];
            }
            for (int lane = 0; lane < 32; lane++) {
                a[lane] = oa[lane] > a[lane] ? oa[lane] : a[lane];
                b[lane] = ob[lane] > b[lane] ? ob[lane] : b[lane];
            }
        }
        dmax[k] = a[0];
        mmax[k] = b[0];
    }
}

static void twin_row_sq_norms(int n, int F, const float* x, double* out) {
    for (long long k = 0; k < n; k++) out[k] = row_sq_norm(k, F, x);
}

// attn_forward_stats (a thread per row and head), then attn_forward_out:
// the warp per row, each chunk's 32 terms computed lane by lane and its
// shuffles replayed on arrays, every lane adding them into its columns.
static void twin_attn_forward(int rows, int H, int W, int mean, int drop, float slope, float scale, unsigned int thr,
                              unsigned long long key, const int* row_ids, const long long* ptr, const int* col,
                              const float* q, const float* t, float* stats, float* alpha, float* out) {
    const attn_params p = attn_make(H, W, mean, drop, slope, scale, thr, key, row_ids);
    for (long long e = 0; e < (long long)rows * H; e++) {
        const int i = (int)(e / H);
        attn_forward_stats(&p, i, (int)(e - (long long)i * H), ptr, col, q, t, stats, alpha);
    }
    const long long oc = attn_oc(&p);
    for (int i = 0; i < rows; i++) {
        const long long k0 = ptr[i], deg = ptr[i + 1] - k0, np = deg * H;
        for (long long col0 = 0; col0 < oc; col0 += 32 * ATTN_TILE) {
            float acc[32][ATTN_TILE];
            for (int lane = 0; lane < 32; lane++)
                for (int u = 0; u < ATTN_TILE; u++) acc[lane][u] = 0.0f;
            for (long long p0 = 0; p0 < np; p0 += 32) {
                float c[32];
                int j[32], h[32];
                for (int lane = 0; lane < 32; lane++) {
                    c[lane] = 0.0f, j[lane] = 0, h[lane] = 0;
                    if (p0 + lane < np)
                        c[lane] = attn_forward_pair(&p, i, k0, deg, p0 + lane, col, q, t, stats, alpha, &j[lane], &h[lane]);
                }
                const int m = (int)min_ll(32, np - p0);
                for (int lane = 0; lane < 32; lane++)
                    for (int s = 0; s < m; s++) attn_forward_accum(&p, c[s], j[s], h[s], q, col0, lane, acc[lane]);
            }
            for (int lane = 0; lane < 32; lane++) attn_forward_store(&p, i, col0, lane, acc[lane], out);
        }
    }
}

// attn_backward_dst (a thread per row and head), then attn_backward_src
// replayed as attn_forward_out is.
static void twin_attn_backward(int rows, int sources, int H, int W, int mean, int drop, float slope, float scale,
                               unsigned int thr, unsigned long long key, const int* row_ids, const long long* ptr,
                               const int* col, const long long* eptr, const int* edst, const int* erank,
                               const float* q, const float* t, const float* stats, const float* alpha,
                               const float* dout, float* rec, float* dq, float* ddst) {
    const attn_params p = attn_make(H, W, mean, drop, slope, scale, thr, key, row_ids);
    for (long long e = 0; e < (long long)rows * H; e++) {
        const int i = (int)(e / H);
        attn_backward_dst(&p, i, (int)(e - (long long)i * H), ptr, col, q, t, stats, alpha, dout, rec, ddst);
    }
    const long long qc = attn_qc(&p);
    for (int j = 0; j < sources; j++) {
        const long long e0 = eptr[j], np = (eptr[j + 1] - e0) * H;
        for (long long col0 = 0; col0 < qc; col0 += 32 * ATTN_TILE) {
            float acc[32][ATTN_TILE];
            for (int lane = 0; lane < 32; lane++)
                for (int u = 0; u < ATTN_TILE; u++) acc[lane][u] = 0.0f;
            for (long long p0 = 0; p0 < np; p0 += 32) {
                float c[32], dz[32];
                int di[32], h[32];
                for (int lane = 0; lane < 32; lane++) {
                    c[lane] = 0.0f, dz[lane] = 0.0f, di[lane] = 0, h[lane] = 0;
                    if (p0 + lane < np)
                        c[lane] = attn_backward_src_pair(&p, j, e0, p0 + lane, edst, erank, q, rec, &dz[lane], &di[lane], &h[lane]);
                }
                const int m = (int)min_ll(32, np - p0);
                for (int lane = 0; lane < 32; lane++)
                    for (int s = 0; s < m; s++)
                        attn_backward_src_accum(&p, c[s], dz[s], di[s], h[s], rec, col0, lane, acc[lane]);
            }
            for (int lane = 0; lane < 32; lane++) attn_backward_src_store(&p, j, col0, lane, acc[lane], dq);
        }
    }
}

static void twin_attn_terms(int rows, int H, int W, const float* P, const float* asrc, const float* adst, float* q,
                            float* t) {
    for (long long e = 0; e < (long long)rows * H; e++) {
        const int i = (int)(e / H);
        attn_terms_row_head(i, (int)(e - (long long)i * H), H, W, P, asrc, adst, q, t);
    }
}

// attn_terms_dp, attn_terms_partial and attn_terms_finish.
static void twin_attn_terms_backward(int rows, int nb, int H, int W, const float* P, const float* asrc,
                                     const float* adst, const float* dq, const float* dt, float* dP, double* partial,
                                     float* dasrc, float* dadst) {
    const long long hw = (long long)H * W;
    for (long long e = 0; e < (long long)rows * hw; e++) dP[e] = attn_terms_dp_elem(e, H, W, asrc, adst, dq, dt);
    for (long long e = 0; e < (long long)nb * 2 * hw; e++)
        partial[e] = attn_terms_partial_elem(e, rows, nb, H, W, P, dq, dt);
    for (long long f = 0; f < 2 * hw; f++) {
        const float v = attn_terms_finish_col(f, nb, 2 * hw, partial);
        if (f < hw) {
            dasrc[f] = v;
        } else {
            dadst[f - hw] = v;
        }
    }
}

static void twin_expm1(long long n, const double* x, double* y) {
    for (long long k = 0; k < n; k++) y[k] = goexpm1(x[k]);
}

static void twin_elu(long long n, const float* x, float* y) {
    for (long long k = 0; k < n; k++) y[k] = elu_value(x[k]);
}

static void twin_elu_backward(long long n, const float* y, const float* dy, float* dx) {
    for (long long k = 0; k < n; k++) dx[k] = elu_backward_value(y[k], dy[k]);
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

// TernKey is TERN_KEY: the bytes of a tern payload's key.
const TernKey = C.TERN_KEY

// TernStride is tern_stride: the payload bytes per row.
func TernStride(cols int) int { return int(C.tern_stride(C.int(cols))) }

// TernEncode is tern_encode: the key of h = rng.Mix64(seed) at dst[0:8],
// rows payload rows of TernStride(cols) bytes from dst[at:], payload row i
// from src row idx[i] (i when idx is nil) with the draws' row first + i.
// It fails when the replayed lanes of a row find different largest
// magnitudes.
// No rows write nothing, as the device launches nothing.
func TernEncode(dst []byte, src []float32, rows, cols, first int, idx []int32, at int, h uint64) error {
	if rows == 0 {
		return nil
	}
	if len(dst) < at+rows*TernStride(cols) || len(dst) < TernKey {
		panic(fmt.Sprintf("hosttwin: TernEncode: %d bytes for %d rows of %d columns at %d", len(dst), rows, cols, at))
	}
	if bad := C.twin_tern_encode(C.int(rows), C.int(cols), C.int(first), ip(idx), fp(src), bp(dst), C.longlong(at),
		C.ulonglong(h)); bad != 0 {
		return fmt.Errorf("hosttwin: tern_encode: the lanes of row %d find different largest magnitudes", bad-1)
	}
	return nil
}

// TernDecode is tern_decode: rows x cols values from the tern rows at
// src[at:], under the key at src[0:8], the draws' rows from first.
func TernDecode(dst []float32, src []byte, rows, cols, first, at int) {
	if rows*cols == 0 {
		return
	}
	if len(src) < at+rows*TernStride(cols) || len(src) < TernKey || len(dst) < rows*cols {
		panic(fmt.Sprintf("hosttwin: TernDecode: %d bytes, %d values for %d rows of %d columns at %d", len(src), len(dst), rows, cols, at))
	}
	C.twin_tern_decode(C.int(rows), C.int(cols), C.int(first), bp(src), C.longlong(at), fp(dst))
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

// ResidualSub is residual_sub: d's first len(idx) rows = m's rows idx
// minus s's first rows, and the rows' largest magnitudes as bits.
func ResidualSub(idx []int32, F int, m, s, d []float32, dmax, mmax []uint32) {
	C.twin_residual_sub(C.int(len(idx)), C.int(F), ip(idx), fp(m), fp(s), fp(d), up32(dmax), up32(mmax))
}

// RowSqNorms is row_sq_norms over the first len(out) rows of x.
func RowSqNorms(F int, x []float32, out []float64) {
	C.twin_row_sq_norms(C.int(len(out)), C.int(F), fp(x), dp(out))
}

func up32(s []uint32) *C.uint {
	if len(s) == 0 {
		return nil
	}
	return (*C.uint)(unsafe.Pointer(&s[0]))
}

func lp(s []int64) *C.longlong {
	if len(s) == 0 {
		return nil
	}
	return (*C.longlong)(unsafe.Pointer(&s[0]))
}

// AttnParams are an attention layer's kernel arguments as the launcher
// derives them on the host from a kernels.Attention: Drop is training with
// a dropout rate above 0, Scale and Thr are then kernels.DropoutParams',
// Key rng.Mix64(Seed), RowIDs the destinations' ids (nil: row i is i).
type AttnParams struct {
	Heads, Width int
	Mean, Drop   bool
	Slope, Scale float32
	Thr          uint32
	Key          uint64
	RowIDs       []int32
}

// AttentionForward is attn_forward_stats and attn_forward_out over the CSR
// (ptr, col) of len(ptr)-1 destination rows; alpha nil: recomputed.
func AttentionForward(p *AttnParams, ptr []int64, col []int32, q, t, stats, alpha, out []float32) {
	C.twin_attn_forward(C.int(len(ptr)-1), C.int(p.Heads), C.int(p.Width), b2i(p.Mean), b2i(p.Drop), C.float(p.Slope),
		C.float(p.Scale), C.uint(p.Thr), C.ulonglong(p.Key), ip(p.RowIDs), lp(ptr), ip(col), fp(q), fp(t), fp(stats),
		fp(alpha), fp(out))
}

// AttentionBackward is attn_backward_dst and attn_backward_src; the edges
// by source are (eptr, edst, erank) over len(eptr)-1 sources.
func AttentionBackward(p *AttnParams, ptr []int64, col []int32, eptr []int64, edst, erank []int32,
	q, t, stats, alpha, dOut, rec, dq, dDst []float32) {
	C.twin_attn_backward(C.int(len(ptr)-1), C.int(len(eptr)-1), C.int(p.Heads), C.int(p.Width), b2i(p.Mean), b2i(p.Drop),
		C.float(p.Slope), C.float(p.Scale), C.uint(p.Thr), C.ulonglong(p.Key), ip(p.RowIDs), lp(ptr), ip(col),
		lp(eptr), ip(edst), ip(erank), fp(q), fp(t), fp(stats), fp(alpha), fp(dOut), fp(rec), fp(dq), fp(dDst))
}

// AttentionTerms is attn_terms on rows x heads*width projected features P.
func AttentionTerms(rows, heads, width int, P, aSrc, aDst, q, t []float32) {
	C.twin_attn_terms(C.int(rows), C.int(heads), C.int(width), fp(P), fp(aSrc), fp(aDst), fp(q), fp(t))
}

// TermsBlocks is the number of row blocks the terms' backward sums in:
// kernels' blocks() (and kernels/cuda's termsBlocks) of rows*heads*width.
func TermsBlocks(work int) int { return max(1, min(256, (work+(1<<14)-1)/(1<<14))) }

// AttentionTermsBackward is attn_terms_dp, attn_terms_partial (nb blocks)
// and attn_terms_finish.
func AttentionTermsBackward(rows, nb, heads, width int, P, aSrc, aDst, dq, dt, dP, daSrc, daDst []float32) {
	partial := make([]float64, nb*2*heads*width)
	C.twin_attn_terms_backward(C.int(rows), C.int(nb), C.int(heads), C.int(width), fp(P), fp(aSrc), fp(aDst), fp(dq),
		fp(dt), fp(dP), dp(partial), fp(daSrc), fp(daDst))
}

// Expm1 is goexpm1 on every element of x.
func Expm1(x, y []float64) { C.twin_expm1(C.longlong(len(x)), dp(x), dp(y)) }

// ELU is elu.
func ELU(x, y []float32) { C.twin_elu(C.longlong(len(x)), fp(x), fp(y)) }

// ELUBackward is elu_backward.
func ELUBackward(y, dy, dx []float32) {
	C.twin_elu_backward(C.longlong(len(y)), fp(y), fp(dy), fp(dx))
}
