//go:build amd64 && cgo

// The row operations of residual coding and of the backward scatter-add,
// as loops GCC vectorizes for AVX2 (host_rows.go holds the Go twins, which
// these equal bit for bit: a subtraction or an addition per value, and a
// maximum over integers).
#include <stdint.h>

#define AVX2 __attribute__((target("avx2")))

int gnn_halo_have_avx2(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2");
}

// magnitude is |x|'s bits: for every float32 they order as the magnitudes
// do, with infinities above every finite value and NaNs above them.
static inline uint32_t magnitude(float x) {
    union { float f; uint32_t u; } v = {x};
    return v.u & 0x7fffffffu;
}

// d row k = m row idx[k] - s row k; dmax[k] and mmax[k] are the largest
// magnitudes (as bits) of d's row and of m's.
AVX2 void gnn_residual_sub(float* restrict d, const float* restrict m, const float* restrict s, const int32_t* idx,
                           int64_t rows, int cols, uint32_t* dmax, uint32_t* mmax) {
    for (int64_t k = 0; k < rows; k++) {
        const float* restrict x = m + (int64_t)idx[k] * cols;
        const float* restrict sk = s + k * cols;
        float* restrict dk = d + k * cols;
        uint32_t md = 0, mm = 0;
        for (int j = 0; j < cols; j++) {
            float v = x[j] - sk[j];
            dk[j] = v;
            uint32_t a = magnitude(v), b = magnitude(x[j]);
            md = a > md ? a : md;
            mm = b > mm ? b : mm;
        }
        dmax[k] = md;
        mmax[k] = mm;
    }
}

// dst row idx[k] += src row k.
AVX2 void gnn_scatter_add(float* restrict dst, const int32_t* idx, const float* restrict src, int64_t rows, int cols) {
    for (int64_t k = 0; k < rows; k++) {
        float* restrict y = dst + (int64_t)idx[k] * cols;
        const float* restrict x = src + k * cols;
        for (int j = 0; j < cols; j++) {
            y[j] += x[j];
        }
    }
}
