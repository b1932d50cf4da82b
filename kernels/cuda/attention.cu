// Graph-attention kernels: the CUDA twins of the CPU's attention passes
// (kernels/attention.go, attention.c), the source and destination terms
// and ELU. Their per-row, per-pair and per-element routines are in
// attention.cuh (which says how the work is split without changing any
// sum's order); see common.cuh for the conventions.
#include "attention.cuh"

#define FULL_WARP 0xffffffffu

// attn_forward_stats: for every (row, head) of the rows x heads pairs, a
// thread: the softmax's statistics, and the coefficients into alpha unless
// it is NULL (attn_forward_stats says how).
extern "C" __global__ void attn_forward_stats(int rows, int heads, int width, float slope, const long long* ptr,
                                              const int* col, const float* q, const float* t, float* stats,
                                              float* alpha) {
    const attn_params p = attn_make(heads, width, 0, 0, slope, 1.0f, 0u, 0ull, NULL);
    GRID_STRIDE_LOOP(e, (long long)rows * heads) {
        const int i = (int)(e / heads);
        attn_forward_stats(&p, i, (int)(e - (long long)i * heads), ptr, col, q, t, stats, alpha);
    }
}

// attn_forward_out: output row i of the forward, a warp per row after
// attn_forward_stats. In each pass over 32*ATTN_TILE output columns, the
// row's (edge, head) terms go 32 at a time: lane l computes term p0 + l
// (attn_forward_pair), and every lane adds the 32 terms in order into its
// columns (attn_forward_accum).
extern "C" __global__ void attn_forward_out(int rows, int heads, int width, int mean, int drop, float slope,
                                            float scale, unsigned int thr, unsigned long long key,
                                            const int* row_ids, const long long* ptr, const int* col,
                                            const float* q, const float* t, const float* stats, const float* alpha,
                                            float* out) {
    const attn_params p = attn_make(heads, width, mean, drop, slope, scale, thr, key, row_ids);
    const int lane = threadIdx.x & 31;
    const long long oc = attn_oc(&p);
    WARP_ROW_LOOP(i, rows) {
        const long long k0 = ptr[i], deg = ptr[i + 1] - k0, np = deg * heads;
        for (long long col0 = 0; col0 < oc; col0 += 32 * ATTN_TILE) {
            float acc[ATTN_TILE];
#pragma unroll
            for (int u = 0; u < ATTN_TILE; u++) acc[u] = 0.0f;
            for (long long p0 = 0; p0 < np; p0 += 32) {
                float c = 0.0f;
                int j = 0, h = 0;
                if (p0 + lane < np) c = attn_forward_pair(&p, i, k0, deg, p0 + lane, col, q, t, stats, alpha, &j, &h);
                const int m = (int)min_ll(32, np - p0);
                for (int s = 0; s < m; s++) {
                    const float cs = __shfl_sync(FULL_WARP, c, s);
                    const int js = __shfl_sync(FULL_WARP, j, s), hs = __shfl_sync(FULL_WARP, h, s);
                    attn_forward_accum(&p, cs, js, hs, q, col0, lane, acc);
                }
            }
            attn_forward_store(&p, i, col0, lane, acc, out);
        }
    }
}

// attn_backward_dst: the backward's pass by destination, a thread per
// (row, head): the softmax's sums, d(dst) and the row's record.
extern "C" __global__ void attn_backward_dst(int rows, int heads, int width, int mean, int drop, float slope,
                                             float scale, unsigned int thr, unsigned long long key,
                                             const int* row_ids, const long long* ptr, const int* col,
                                             const float* q, const float* t, const float* stats, const float* alpha,
                                             const float* dout, float* rec, float* ddst) {
    const attn_params p = attn_make(heads, width, mean, drop, slope, scale, thr, key, row_ids);
    GRID_STRIDE_LOOP(e, (long long)rows * heads) {
        const int i = (int)(e / heads);
        attn_backward_dst(&p, i, (int)(e - (long long)i * heads), ptr, col, q, t, stats, alpha, dout, rec, ddst);
    }
}

// attn_backward_src: the backward's pass by source, a warp per source row
// j of q (sources rows) after attn_backward_dst: d(q_j), its (edge, head)
// terms 32 at a time as in attn_forward_out.
extern "C" __global__ void attn_backward_src(int sources, int heads, int width, int mean, int drop, float slope,
                                             float scale, unsigned int thr, unsigned long long key,
                                             const int* row_ids, const long long* eptr, const int* edst,
                                             const int* erank, const float* q, const float* rec, float* dq) {
    const attn_params p = attn_make(heads, width, mean, drop, slope, scale, thr, key, row_ids);
    const int lane = threadIdx.x & 31;
    const long long qc = attn_qc(&p);
    WARP_ROW_LOOP(j, sources) {
        const long long e0 = eptr[j], np = (eptr[j + 1] - e0) * heads;
        for (long long col0 = 0; col0 < qc; col0 += 32 * ATTN_TILE) {
            float acc[ATTN_TILE];
#pragma unroll
            for (int u = 0; u < ATTN_TILE; u++) acc[u] = 0.0f;
            for (long long p0 = 0; p0 < np; p0 += 32) {
                float c = 0.0f, dz = 0.0f;
                int i = 0, h = 0;
                if (p0 + lane < np) c = attn_backward_src_pair(&p, j, e0, p0 + lane, edst, erank, q, rec, &dz, &i, &h);
                const int m = (int)min_ll(32, np - p0);
                for (int s = 0; s < m; s++) {
                    const float cs = __shfl_sync(FULL_WARP, c, s), dzs = __shfl_sync(FULL_WARP, dz, s);
                    const int is = __shfl_sync(FULL_WARP, i, s), hs = __shfl_sync(FULL_WARP, h, s);
                    attn_backward_src_accum(&p, cs, dzs, is, hs, rec, col0, lane, acc);
                }
            }
            attn_backward_src_store(&p, j, col0, lane, acc, dq);
        }
    }
}

// attn_terms: q's rows [P_i | s_i] and t's rows t_i from the projected
// features P (rows x heads*width), a thread per (row, head).
extern "C" __global__ void attn_terms(int rows, int heads, int width, const float* P, const float* asrc,
                                      const float* adst, float* q, float* t) {
    GRID_STRIDE_LOOP(e, (long long)rows * heads) {
        const int i = (int)(e / heads);
        attn_terms_row_head(i, (int)(e - (long long)i * heads), heads, width, P, asrc, adst, q, t);
    }
}

// attn_terms_dp: the terms backward's dP (rows x heads*width); dP must not
// alias dq.
extern "C" __global__ void attn_terms_dp(int rows, int heads, int width, const float* asrc, const float* adst,
                                         const float* dq, const float* dt, float* dP) {
    GRID_STRIDE_LOOP(e, (long long)rows * heads * width) {
        dP[e] = attn_terms_dp_elem(e, heads, width, asrc, adst, dq, dt);
    }
}

// attn_terms_partial: the nb x 2*heads*width block partials of daSrc and
// daDst, a thread per (block, column).
extern "C" __global__ void attn_terms_partial(int rows, int nb, int heads, int width, const float* P,
                                              const float* dq, const float* dt, double* partial) {
    GRID_STRIDE_LOOP(e, (long long)nb * 2 * heads * width) {
        partial[e] = attn_terms_partial_elem(e, rows, nb, heads, width, P, dq, dt);
    }
}

// attn_terms_finish: daSrc and daDst (heads*width each), the partials of a
// column added in block order.
extern "C" __global__ void attn_terms_finish(int nb, int heads, int width, const double* partial, float* dasrc,
                                             float* dadst) {
    const long long hw = (long long)heads * width;
    GRID_STRIDE_LOOP(f, 2 * hw) {
        const float v = attn_terms_finish_col(f, nb, 2 * hw, partial);
        if (f < hw) {
            dasrc[f] = v;
        } else {
            dadst[f - hw] = v;
        }
    }
}

// elu: y = ELU(x); y may alias x.
extern "C" __global__ void elu(long long n, const float* x, float* y) {
    GRID_STRIDE_LOOP(k, n) { y[k] = elu_value(x[k]); }
}

// elu_backward: dx = dy * ELU'(x) from y = ELU(x); dx may alias y or dy.
extern "C" __global__ void elu_backward(long long n, const float* y, const float* dy, float* dx) {
    GRID_STRIDE_LOOP(k, n) {
        const float v = y[k], d = dy[k];
        dx[k] = elu_backward_value(v, d);
    }
}
