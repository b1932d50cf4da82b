// Shared helpers of the CUDA kernels in kernels/cuda/*.cu (see ptx.mk).
//
// Every kernel mirrors a CPU twin in kernels/*.go or comm/codec.go: the same
// operations in the same order per output element, float where Go uses
// float32 and double where it uses float64. The PTX is built with
// -fmad=false, so no product is fused into an add unless the code calls
// fma() explicitly (only goexp below does, as Go's amd64 Exp does).
//
// The helpers here and the per-row and per-element routines of the kernels
// (attention.cuh, codec.cuh, dense.cuh, sparse.cuh, which hold no
// __global__ kernel) are __host__ __device__: kernels/cuda/hosttwin
// compiles them with a host C++ compiler and checks them against the Go
// code bit for bit.
#ifndef GNN_SPMD_KERNELS_COMMON_CUH
#define GNN_SPMD_KERNELS_COMMON_CUH

#ifdef __CUDA_ARCH__
#define GNN_DEVICE_CODE 1
#else
#include <math.h>
#include <string.h>
#endif

// A host C compiler (the twin test's, not nvcc) sees the routines as plain
// static inline C functions.
#ifndef __CUDACC__
#define __host__
#define __device__
#define __forceinline__ static inline
#endif

// FLT_MAX without <float.h> (math.MaxFloat32 in Go).
#define GNN_FLT_MAX 3.40282346638528859811704183484516925440e+38f

// mix64 is the splitmix64 finaliser of kernels/dropout.go and comm/codec.go.
__host__ __device__ __forceinline__ unsigned long long mix64(unsigned long long z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// min_i and min_ll: the host has no overloaded min().
__host__ __device__ __forceinline__ int min_i(int a, int b) { return a < b ? a : b; }
__host__ __device__ __forceinline__ long long min_ll(long long a, long long b) { return a < b ? a : b; }

// row_key is the hash key of a row's draws (dropout, codecs): h ^
// uint64(uint32(id))<<32, the column counter going in the low half.
__host__ __device__ __forceinline__ unsigned long long row_key(unsigned long long h, int id) {
    return h ^ ((unsigned long long)(unsigned int)id << 32);
}

// hash32 is rng.Hash32.
__host__ __device__ __forceinline__ unsigned int hash32(unsigned int x) {
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    return x ^ (x >> 16);
}

// draw_block is comm/codec's drawBlock: the words w(i, 4p) .. w(i, 4p+3)
// of row i under key (k0, k1), the draws of columns 16p .. 16p+15, into
// w[0..3].
__host__ __device__ __forceinline__ void draw_block(unsigned int p, unsigned int i, unsigned int k0,
                                                    unsigned int k1, unsigned int w[4]) {
    const unsigned int rk = hash32(i ^ k0);
    for (int m = 0; m < 4; m++) w[m] = hash32(rk ^ ((4u * p + (unsigned int)m) * 0x9E3779B9u + k1));
}

// draw8 is byte t (0..15) of a block, little endian: comm/codec's r(i, j)
// for t = j%16.
__host__ __device__ __forceinline__ unsigned int draw8(const unsigned int w[4], int t) {
    return (w[t >> 2] >> (8 * (t & 3))) & 0xffu;
}

// f32bits and f32frombits are math.Float32bits and math.Float32frombits.
__host__ __device__ __forceinline__ unsigned int f32bits(float f) {
#ifdef GNN_DEVICE_CODE
    return __float_as_uint(f);
#else
    unsigned int u;
    memcpy(&u, &f, 4);
    return u;
#endif
}

__host__ __device__ __forceinline__ float f32frombits(unsigned int u) {
#ifdef GNN_DEVICE_CODE
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, 4);
    return f;
#endif
}

__host__ __device__ __forceinline__ double f64frombits(unsigned long long u) {
#ifdef GNN_DEVICE_CODE
    return __longlong_as_double((long long)u);
#else
    double f;
    memcpy(&f, &u, 8);
    return f;
#endif
}

__host__ __device__ __forceinline__ unsigned long long f64bits(double f) {
#ifdef GNN_DEVICE_CODE
    return (unsigned long long)__double_as_longlong(f);
#else
    unsigned long long u;
    memcpy(&u, &f, 8);
    return u;
#endif
}

// rint_f32 rounds f (0 <= f < 2^31) to the nearest integer, ties to even:
// math.RoundToEven, and CVTPS2DQ in the default rounding mode.
__host__ __device__ __forceinline__ unsigned int rint_f32(float f) {
#ifdef GNN_DEVICE_CODE
    return (unsigned int)__float2int_rn(f);
#else
    return (unsigned int)nearbyintf(f);
#endif
}

// cvtsd2sl is the x86 CVTSD2SL instruction: double to int32 rounded to the
// nearest (ties to even, the default MXCSR mode Go runs with), INT_MIN when
// the result does not fit. Callers never pass NaN or values above 2^31.
__host__ __device__ __forceinline__ int cvtsd2sl(double x) {
#ifdef GNN_DEVICE_CODE
    return __double2int_rn(x); // saturates to INT_MIN below the range
#else
    if (!(x > -2147483648.5)) return (int)0x80000000u;
    return (int)nearbyint(x);
#endif
}

// goexp is Go's math.Exp as it runs on amd64 with AVX and FMA (archExp in
// $GOROOT/src/math/exp_amd64.s, the useFMA path, which every x86 host of
// a CUDA GPU takes): Go's Exp is not correctly rounded, nor is CUDA's exp,
// so the CPU's softmax and score bins are reproduced bit for bit only by
// repeating its algorithm. Instruction by instruction, fma() where it uses
// VFMADD/VFNMADD and separately rounded operations elsewhere.
__host__ __device__ __forceinline__ double goexp(double x) {
    const double LOG2E = 1.4426950408889634073599246810018920;
    const double LN2U = 0.69314718055966295651160180568695068359375;
    const double LN2L = 0.28235290563031577122588448175013436025525412068e-12;
    const double Overflow = 7.09782712893384e+02;
    const unsigned long long PosInf = 0x7FF0000000000000ull;
    const unsigned long long NegInf = 0xFFF0000000000000ull;
    unsigned long long bx = f64bits(x);
    if ((bx & ~(1ull << 63)) >= PosInf) { // NaN or +-Inf
        if (bx == NegInf) return 0.0;
        return x;
    }
    if (x > Overflow) return f64frombits(PosInf);
    int e = cvtsd2sl(LOG2E * x);
    double fe = (double)e;
    double r = fma(-fe, LN2U, x);
    r = fma(-fe, LN2L, r);
    r = r * 0.0625;
    double p = 2.4801587301587301587e-5;
    p = fma(r, p, 1.9841269841269841270e-4);
    p = fma(r, p, 1.3888888888888888889e-3);
    p = fma(r, p, 8.3333333333333333333e-3);
    p = fma(r, p, 4.1666666666666666667e-2);
    p = fma(r, p, 1.6666666666666666667e-1);
    p = fma(r, p, 0.5);
    p = fma(r, p, 1.0);
    r = r * p;
    p = r + 2.0;
    r = r * p;
    p = r + 2.0;
    r = r * p;
    p = r + 2.0;
    r = r * p;
    p = r + 2.0;
    r = fma(p, r, 1.0);
    // fr * 2^e, with Go's handling of the subnormal range.
    e += 0x3FF;
    if (e <= 0) {
        if (e < -52) return 0.0;
        e += 0x3FE;
        r = r * f64frombits((unsigned long long)e << 52);
        e = 1;
    } else if (e >= 0x7FF) {
        return f64frombits(PosInf);
    }
    return r * f64frombits((unsigned long long)e << 52);
}

// Grid-stride loop over [0, n) with a 64-bit index.
#define GRID_STRIDE_LOOP(k, n)                                                      \
    for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < (n); \
         k += (long long)gridDim.x * blockDim.x)

// Warp-per-row loop: warp w takes rows w, w + warps, ... (blockDim.x must
// be a multiple of 32).
#define WARP_ROW_LOOP(i, rows)                                                              \
    for (int i = (int)(((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5); i < (rows); \
         i += (int)(((long long)gridDim.x * blockDim.x) >> 5))

// REDUCE_BLOCK256 tree-reduces s[0..256) into s[0] (blockDim.x == 256).
#define REDUCE_BLOCK256(s)                                     \
    do {                                                       \
        __syncthreads();                                       \
        for (int off_ = 128; off_ > 0; off_ >>= 1) {           \
            if (threadIdx.x < off_) s[threadIdx.x] += s[threadIdx.x + off_]; \
            __syncthreads();                                   \
        }                                                      \
    } while (0)

#endif // GNN_SPMD_KERNELS_COMMON_CUH
