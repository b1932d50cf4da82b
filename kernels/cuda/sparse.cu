// Sparse and row-movement kernels: the CUDA twins of CPU SpMM
// (kernels/spmm.go) and of the halo exchange's row gather and scatter-add
// (comm/halo). Their per-row and per-element routines are in sparse.cuh;
// see common.cuh for the conventions.
#include "sparse.cuh"

// spmm_csr computes y = A x (y += A x when accumulate != 0) for the CSR
// matrix (ptr, col, val) of rows rows, x and y having F columns; val == NULL
// means all ones (spmm_row_lane says how). Columns are not range checked
// (the CPU panics on a bad one). Warp per row, lane over columns.
extern "C" __global__ void spmm_csr(int rows, int F, const long long* ptr, const int* col,
                                    const float* val, const float* x, float* y, int accumulate) {
    const int lane = threadIdx.x & 31;
    WARP_ROW_LOOP(i, rows) {
        spmm_row_lane(F, ptr[i], ptr[i + 1], col, val, x, y + (long long)i * F, accumulate, lane);
    }
}

// gather_rows: dst[k*F+j] = src[idx[k]*F+j] for k < n (the forward halo
// exchange's staging copy).
extern "C" __global__ void gather_rows(int n, int F, const int* idx, const float* src, float* dst) {
    GRID_STRIDE_LOOP(e, (long long)n * F) { gather_rows_elem(e, F, idx, src, dst); }
}

// scatter_add_rows: dst[idx[k]*F+j] += src[k*F+j] for k < n, one float add
// per element as in comm/halo.go Backward. idx must not repeat within a
// call (no atomics); the caller launches one call per peer in peer order,
// which keeps the CPU's summation order.
extern "C" __global__ void scatter_add_rows(int n, int F, const int* idx, const float* src, float* dst) {
    GRID_STRIDE_LOOP(e, (long long)n * F) { scatter_add_elem(e, F, idx, src, dst); }
}
