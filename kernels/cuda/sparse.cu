// Sparse and row-movement kernels: the CUDA twins of CPU SpMM
// (kernels/spmm.go) and of the halo exchange's row gather and scatter-add
// (comm/halo). See common.cuh for the conventions.
#include "common.cuh"

// SPMM_TILE is how many accumulators a lane keeps: a warp covers 32 *
// SPMM_TILE columns per pass over the row's nonzeros.
#define SPMM_TILE 4

// spmm_csr computes y = A x (y += A x when accumulate != 0) for the CSR
// matrix (ptr, col, val) of rows rows, x and y having F columns; val == NULL
// means all ones. As CPU SpMM (spmmTask.do, gatherAxpy): element (i, j)
// starts from +0 (or y[i][j] when accumulating) and adds val[k]*x[col[k]][j]
// (x[col[k]][j] when val is NULL), each product rounded, for k in CSR order.
// A row without nonzeros becomes 0 (or keeps y). Columns are not range
// checked (the CPU panics on a bad one). Warp per row, lane over columns
// j = lane + 32*t.
extern "C" __global__ void spmm_csr(int rows, int F, const long long* ptr, const int* col,
                                    const float* val, const float* x, float* y, int accumulate) {
    const int lane = threadIdx.x & 31;
    WARP_ROW_LOOP(i, rows) {
        const long long k0 = ptr[i], k1 = ptr[i + 1];
        float* yi = y + (long long)i * F;
        for (int j0 = 0; j0 < F; j0 += 32 * SPMM_TILE) {
            float acc[SPMM_TILE];
#pragma unroll
            for (int t = 0; t < SPMM_TILE; t++) {
                const int j = j0 + lane + 32 * t;
                acc[t] = (accumulate && j < F) ? yi[j] : 0.0f;
            }
            for (long long k = k0; k < k1; k++) {
                const float* xr = x + (long long)col[k] * F;
                if (val != NULL) {
                    const float a = val[k];
#pragma unroll
                    for (int t = 0; t < SPMM_TILE; t++) {
                        const int j = j0 + lane + 32 * t;
                        if (j < F) acc[t] = acc[t] + a * xr[j];
                    }
                } else {
#pragma unroll
                    for (int t = 0; t < SPMM_TILE; t++) {
                        const int j = j0 + lane + 32 * t;
                        if (j < F) acc[t] = acc[t] + xr[j];
                    }
                }
            }
#pragma unroll
            for (int t = 0; t < SPMM_TILE; t++) {
                const int j = j0 + lane + 32 * t;
                if (j < F) yi[j] = acc[t];
            }
        }
    }
}

// gather_rows: dst[k*F+j] = src[idx[k]*F+j] for k < n (the forward halo
// exchange's staging copy).
extern "C" __global__ void gather_rows(int n, int F, const int* idx, const float* src, float* dst) {
    GRID_STRIDE_LOOP(e, (long long)n * F) {
        const long long k = e / F;
        const int j = (int)(e - k * F);
        dst[e] = src[(long long)idx[k] * F + j];
    }
}

// scatter_add_rows: dst[idx[k]*F+j] += src[k*F+j] for k < n, one float add
// per element as in comm/halo.go Backward. idx must not repeat within a
// call (no atomics); the caller launches one call per peer in peer order,
// which keeps the CPU's summation order.
extern "C" __global__ void scatter_add_rows(int n, int F, const int* idx, const float* src, float* dst) {
    GRID_STRIDE_LOOP(e, (long long)n * F) {
        const long long k = e / F;
        const int j = (int)(e - k * F);
        float* d = dst + (long long)idx[k] * F + j;
        *d = *d + src[e];
    }
}
