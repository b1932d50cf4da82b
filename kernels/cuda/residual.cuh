// Per-row routines of residual coding's sender and of gradient row
// skipping (residual.cu), kept apart from the __global__ kernels so that a
// host compiler can include them (kernels/cuda/hosttwin tests them against
// comm/halo's host rows bit for bit).
#ifndef GNN_SPMD_KERNELS_RESIDUAL_CUH
#define GNN_SPMD_KERNELS_RESIDUAL_CUH

#include "common.cuh"

// magnitude_bits is |x|'s bits: for every float32 they order as the
// magnitudes do, with infinities above every finite value and NaNs above
// them (comm/halo's magnitude), so a maximum over them is an integer
// maximum, the same in any order.
__host__ __device__ __forceinline__ unsigned int magnitude_bits(float x) { return f32bits(x) & 0x7fffffffu; }

// residual_sub_lane is lane's share of row k (columns lane, lane+lanes,
// ...): d row k = m row idx[k] - s row k, one float subtraction per value
// as in Host.Residual; it returns the largest magnitudes (as bits) of its
// columns of d's row in *md and of m's row in *mm.
__host__ __device__ __forceinline__ void residual_sub_lane(int k, int F, const int* idx, const float* m,
                                                           const float* s, float* d, int lane, int lanes,
                                                           unsigned int* md, unsigned int* mm) {
    const float* x = m + (long long)idx[k] * F;
    const float* sk = s + (long long)k * F;
    float* dk = d + (long long)k * F;
    unsigned int a = 0, b = 0;
    for (int j = lane; j < F; j += lanes) {
        const float v = x[j] - sk[j];
        dk[j] = v;
        const unsigned int mv = magnitude_bits(v), mx = magnitude_bits(x[j]);
        a = mv > a ? mv : a;
        b = mx > b ? mx : b;
    }
    *md = a;
    *mm = b;
}

// row_sq_norm is the squared norm of row k of x (rows of F values), summed
// in double in column order as comm/halo's rowSqNorms sums it (each term,
// a product of two floats, is exact in double).
__host__ __device__ __forceinline__ double row_sq_norm(long long k, int F, const float* x) {
    const float* r = x + k * F;
    double s = 0;
    for (int j = 0; j < F; j++) {
        const double v = (double)r[j];
        s += v * v;
    }
    return s;
}

#endif // GNN_SPMD_KERNELS_RESIDUAL_CUH
