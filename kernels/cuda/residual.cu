// Residual coding's sender-side row pass and gradient row skipping's row
// norms: the CUDA twins of comm/halo's Host.Residual and rowSqNorms. The
// skip decisions themselves are made on the host from what these return
// (a few bytes per row), by the same Go code the CPU exchange runs. The
// per-row routines are in residual.cuh; see common.cuh for the
// conventions.
#include "residual.cuh"

// residual_sub: for k < n, d row k = m row idx[k] - s row k, dmax[k] and
// mmax[k] the largest magnitudes (as bits) of d's row and of m's. A warp
// per row, lanes over columns, the maxima merged by shuffles.
extern "C" __global__ void residual_sub(int n, int F, const int* idx, const float* m, const float* s, float* d,
                                        unsigned int* dmax, unsigned int* mmax) {
    const int lane = threadIdx.x & 31;
    WARP_ROW_LOOP(k, n) {
        unsigned int a, b;
        residual_sub_lane(k, F, idx, m, s, d, lane, 32, &a, &b);
        for (int o = 16; o > 0; o >>= 1) {
            const unsigned int oa = __shfl_xor_sync(0xffffffffu, a, o), ob = __shfl_xor_sync(0xffffffffu, b, o);
            a = oa > a ? oa : a;
            b = ob > b ? ob : b;
        }
        if (lane == 0) {
            dmax[k] = a;
            mmax[k] = b;
        }
    }
}

// row_sq_norms: out[k] = the squared norm of row k of x, k < n, a thread
// per row summing in column order.
extern "C" __global__ void row_sq_norms(int n, int F, const float* x, double* out) {
    GRID_STRIDE_LOOP(k, (long long)n) { out[k] = row_sq_norm(k, F, x); }
}
