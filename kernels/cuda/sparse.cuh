// Per-row and per-element routines of the sparse kernels (sparse.cu), kept
// apart from the __global__ kernels so that a host compiler can include
// them (kernels/cuda/hosttwin tests them against the Go code).
#ifndef GNN_SPMD_KERNELS_SPARSE_CUH
#define GNN_SPMD_KERNELS_SPARSE_CUH

#include "common.cuh"

// SPMM_TILE is how many accumulators a lane keeps: a warp covers 32 *
// SPMM_TILE columns per pass over the row's nonzeros.
#define SPMM_TILE 4

// spmm_row_lane is lane `lane` (of 32) of spmm_csr on one output row yi,
// whose nonzeros are [k0, k1): the lane computes the columns j = lane +
// 32*t + 32*SPMM_TILE*pass. As CPU SpMM (spmmTask.do, gatherAxpy): element
// j starts from +0 (or yi[j] when accumulating) and adds val[k]*x[col[k]][j]
// (x[col[k]][j] when val is NULL), each product rounded, for k in CSR
// order; a row without nonzeros becomes 0 (or keeps yi).
__host__ __device__ __forceinline__ void spmm_row_lane(int F, long long k0, long long k1, const int* col,
                                                       const float* val, const float* x, float* yi,
                                                       int accumulate, int lane) {
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

// gather_rows_elem is element e (row k = e/F, column j) of gather_rows:
// dst[k*F+j] = src[idx[k]*F+j].
__host__ __device__ __forceinline__ void gather_rows_elem(long long e, int F, const int* idx, const float* src,
                                                          float* dst) {
    const long long k = e / F;
    const int j = (int)(e - k * F);
    dst[e] = src[(long long)idx[k] * F + j];
}

// scatter_add_elem is element e of scatter_add_rows: dst[idx[k]*F+j] +=
// src[k*F+j], one float add as in comm/halo's Host.ScatterAdd.
__host__ __device__ __forceinline__ void scatter_add_elem(long long e, int F, const int* idx, const float* src,
                                                          float* dst) {
    const long long k = e / F;
    const int j = (int)(e - k * F);
    float* d = dst + (long long)idx[k] * F + j;
    *d = *d + src[e];
}

#endif // GNN_SPMD_KERNELS_SPARSE_CUH
