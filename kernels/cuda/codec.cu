// Halo codecs: the CUDA twins of comm/codec.go's trunc, quant(b<=8) and
// quant(16) (bf16) encoders and decoders, producing and reading the same
// bytes (read that file's package doc for the wire formats and the random
// draws). Encoders take an optional row index list: payload row i encodes
// source row r = idx[i] (or i when idx is NULL), so that the forward halo
// exchange encodes straight from the owned rows; i, the payload row, keys
// the draws, as in the Go encoder run on the gathered rows. h = mix64(seed)
// is computed by the caller. See common.cuh for the conventions.
#include "common.cuh"

// ---- quant(b), b in 1..8 ----

// quant_stride is the payload bytes per row: 8 + ceil(cols*b/8).
__host__ __device__ __forceinline__ long long quant_stride(int cols, int b) {
    return 8 + ((long long)cols * b + 7) / 8;
}

// quant_params is rowParams after the min/max pass: lo and hi are the
// smallest and largest non-NaN values (lo > hi when there are none), n =
// 2^b-1. It returns lo and sets scale and inv.
__host__ __device__ __forceinline__ float quant_params(float lo, float hi, float n, float* scale,
                                                       float* inv) {
    if (lo > hi) { // only NaN, or no columns
        *scale = 0.0f;
        *inv = 0.0f;
        return 0.0f;
    }
    // lo+0 and hi+0 (-0 -> +0; no other value changes), written as a
    // select so that no optimizer can drop the addition.
    if (lo == 0.0f) lo = 0.0f;
    if (hi == 0.0f) hi = 0.0f;
    float s = (hi - lo) / n;
    if (!(s <= GNN_FLT_MAX)) s = GNN_FLT_MAX / n;
    while (lo + (n * s) > hi) s = nextafterf(s, 0.0f);
    const float iv = 1.0f / s;
    if (iv > GNN_FLT_MAX) {
        *scale = 0.0f;
        *inv = 0.0f;
        return lo;
    }
    *scale = s;
    *inv = iv;
    return lo;
}

// quant_code is code(): the b-bit code of x with the 24-bit draw u24.
__host__ __device__ __forceinline__ unsigned int quant_code(float x, float lo, float inv, float n,
                                                            unsigned int u24) {
    float f = (x - lo) * inv;
    if (!(f >= 0.0f)) f = 0.0f;
    if (f > n) f = n;
    const int q = (int)f;
    const float u = (float)(int)u24 * (1.0f / 16777216.0f);
    return (unsigned int)q + (f32bits(u - (f - (float)q)) >> 31);
}

// quant_group writes codes 8g .. min(8g+8, cols)-1 of row x into the code
// area out (the payload row after its 8-byte header): they fill bytes
// g*b .. g*b+b-1 exactly (LSB first), or, for a last partial group, its
// first ceil(count*b/8) bytes with the unused high bits 0.
__host__ __device__ __forceinline__ void quant_group(const float* x, int cols, int b, int g, float lo,
                                                     float inv, float n, unsigned long long key,
                                                     unsigned char* out) {
    const int j0 = 8 * g;
    const int cnt = min(8, cols - j0);
    unsigned long long acc = 0, z = 0;
    for (int t = 0; t < cnt; t++) {
        const int j = j0 + t;
        unsigned int u24;
        if ((t & 1) == 0) { // j0 is even, so t and j have the same parity
            z = mix64(key ^ (unsigned long long)(unsigned int)(j >> 1));
            u24 = (unsigned int)(z >> 40);
        } else {
            u24 = (unsigned int)((z >> 16) & 0xffffff);
        }
        acc |= (unsigned long long)quant_code(x[j], lo, inv, n, u24) << (t * b);
    }
    const int nbytes = (cnt * b + 7) / 8;
    out += (long long)g * b;
    for (int k = 0; k < nbytes; k++) out[k] = (unsigned char)(acc >> (8 * k));
}

// put_f32le stores v little-endian at p (payload rows are not 4-aligned).
__host__ __device__ __forceinline__ void put_f32le(unsigned char* p, float v) {
    const unsigned int w = f32bits(v);
    p[0] = (unsigned char)w;
    p[1] = (unsigned char)(w >> 8);
    p[2] = (unsigned char)(w >> 16);
    p[3] = (unsigned char)(w >> 24);
}

__host__ __device__ __forceinline__ float get_f32le(const unsigned char* p) {
    return f32frombits((unsigned int)p[0] | (unsigned int)p[1] << 8 | (unsigned int)p[2] << 16 |
                       (unsigned int)p[3] << 24);
}

// quant_decode_value is x^ of code j of a payload row's code area in:
// lo + (float(q)*scale), the product rounded before the sum.
__host__ __device__ __forceinline__ float quant_decode_value(const unsigned char* in, int b, int j, float lo,
                                                             float scale) {
    const long long bit = (long long)j * b;
    const long long byte = bit >> 3;
    const int sh = (int)(bit & 7);
    unsigned int w = in[byte];
    if (sh + b > 8) w |= (unsigned int)in[byte + 1] << 8; // the code spans two bytes
    const unsigned int q = (w >> sh) & ((1u << b) - 1u);
    return lo + ((float)q * scale);
}

// quant_encode: quant(b).Encode of rows x cols values, payload row i from
// source row idx ? idx[i] : i, h = mix64(seed). Warp per row: the lanes
// find the row's min and max, every lane derives the same header, lane 0
// writes it, and lane l encodes the groups of 8 codes g = l, l+32, ...
extern "C" __global__ void quant_encode(int rows, int cols, int b, const int* idx, const float* src,
                                        unsigned char* dst, unsigned long long h) {
    const int lane = threadIdx.x & 31;
    const float n = (float)((1 << b) - 1);
    const long long stride = quant_stride(cols, b);
    const int groups = (int)(((long long)cols + 7) / 8);
    WARP_ROW_LOOP(i, rows) {
        const long long r = idx != NULL ? idx[i] : i;
        const float* x = src + r * cols;
        float lo = __int_as_float(0x7f800000), hi = __int_as_float((int)0xff800000u); // +Inf, -Inf
        for (int j = lane; j < cols; j += 32) {
            const float v = x[j];
            if (v < lo) lo = v;
            if (v > hi) hi = v;
        }
        // The min and max of the non-NaN values do not depend on the
        // order, up to the sign of zero, which quant_params normalises.
#pragma unroll
        for (int m = 16; m > 0; m >>= 1) {
            const float ol = __shfl_xor_sync(0xffffffffu, lo, m);
            const float oh = __shfl_xor_sync(0xffffffffu, hi, m);
            if (ol < lo) lo = ol;
            if (oh > hi) hi = oh;
        }
        float scale, inv;
        lo = quant_params(lo, hi, n, &scale, &inv);
        unsigned char* out = dst + (long long)i * stride;
        if (lane == 0) {
            put_f32le(out, lo);
            put_f32le(out + 4, scale);
        }
        const unsigned long long key = h ^ ((unsigned long long)(unsigned int)i << 32);
        for (int g = lane; g < groups; g += 32) quant_group(x, cols, b, g, lo, inv, n, key, out + 8);
    }
}

// quant_decode: quant(b).Decode of rows x cols values. One thread per value.
extern "C" __global__ void quant_decode(int rows, int cols, int b, const unsigned char* src, float* dst) {
    const long long stride = quant_stride(cols, b);
    GRID_STRIDE_LOOP(e, (long long)rows * cols) {
        const long long i = e / cols;
        const int j = (int)(e - i * cols);
        const unsigned char* in = src + i * stride;
        dst[e] = quant_decode_value(in + 8, b, j, get_f32le(in), get_f32le(in + 4));
    }
}

// ---- quant(16): bf16 ----

// to_bf16 is toBF16: w rounded to bf16 with the 16 random bits r.
__host__ __device__ __forceinline__ unsigned short to_bf16(unsigned int w, unsigned int r) {
    const unsigned int a = w & 0x7fffffffu;
    if (a >= 0x7f800000u) {
        if (a > 0x7f800000u) return (unsigned short)((w >> 16) | 0x0040u); // NaN
        return (unsigned short)(w >> 16);                                 // +-Inf
    }
    unsigned int o = (w + r) >> 16;
    if ((o & 0x7fffu) == 0x7f80u) o--; // carried into Inf: largest finite
    return (unsigned short)o;
}

// bf16_encode_quad encodes columns 4q .. min(4q+4, cols)-1 of row x: one
// hash z = mix64(key ^ q) serves the four, column 4q+t taking bits
// 16t .. 16t+15.
__host__ __device__ __forceinline__ void bf16_encode_quad(const float* x, int cols, int q, unsigned long long key,
                                                          unsigned short* out) {
    const unsigned long long z = mix64(key ^ (unsigned long long)(unsigned int)q);
    const int j0 = 4 * q;
    const int cnt = min(4, cols - j0);
    for (int t = 0; t < cnt; t++)
        out[j0 + t] = to_bf16(f32bits(x[j0 + t]), (unsigned int)(z >> (16 * t)) & 0xffffu);
}

// bf16_encode: quant(16).Encode into dst (rows*cols bf16 values, little
// endian on the device as on the wire). One thread per 4 columns of a row.
extern "C" __global__ void bf16_encode(int rows, int cols, const int* idx, const float* src, unsigned short* dst,
                                       unsigned long long h) {
    const int quads = (int)(((long long)cols + 3) / 4);
    GRID_STRIDE_LOOP(e, (long long)rows * quads) {
        const long long i = e / quads;
        const int q = (int)(e - i * quads);
        const long long r = idx != NULL ? idx[i] : i;
        const unsigned long long key = h ^ ((unsigned long long)(unsigned int)i << 32);
        bf16_encode_quad(src + r * cols, cols, q, key, dst + i * cols);
    }
}

// bf16_decode: dst[k] = Float32frombits(src[k] << 16), exact.
extern "C" __global__ void bf16_decode(long long n, const unsigned short* src, float* dst) {
    GRID_STRIDE_LOOP(k, n) { dst[k] = f32frombits((unsigned int)src[k] << 16); }
}

// ---- trunc ----

// trunc_encode: dst[i*k+c] = src[r*cols+c] for c < k (k <= cols is the
// caller's Trunc keep(cols)).
extern "C" __global__ void trunc_encode(int rows, int cols, int k, const int* idx, const float* src, float* dst) {
    GRID_STRIDE_LOOP(e, (long long)rows * k) {
        const long long i = e / k;
        const int c = (int)(e - i * k);
        const long long r = idx != NULL ? idx[i] : i;
        dst[e] = src[r * cols + c];
    }
}

// trunc_decode: dst row i = the k values of payload row i, then zeros up to
// cols.
extern "C" __global__ void trunc_decode(int rows, int cols, int k, const float* src, float* dst) {
    GRID_STRIDE_LOOP(e, (long long)rows * cols) {
        const long long i = e / cols;
        const int c = (int)(e - i * cols);
        dst[e] = c < k ? src[i * k + c] : 0.0f;
    }
}

// ---- compression error ----

// sq_diff_partial (blockDim.x == 256): over all (i, j) of a rows x cols
// encode call, with r = idx ? idx[i] : i, e = double(src[r][j]) -
// double(dec[i][j]): partial[2*blockIdx.x] = the sum of e*e and
// partial[2*blockIdx.x+1] = the sum of double(src[r][j])^2 over this
// block's grid-stride elements. These are the terms of comm/halo.go
// Forward's ErrSq and NormSq with the same per-element arithmetic; the
// CPU sums them sequentially per peer (then adds the per-peer sums into
// the layer's totals), this kernel in a block tree, so the totals differ
// by rounding only.
extern "C" __global__ void sq_diff_partial(int rows, int cols, const int* idx, const float* src, const float* dec,
                                           double* partial) {
    __shared__ double se[256];
    __shared__ double sn[256];
    double ae = 0.0, an = 0.0;
    GRID_STRIDE_LOOP(e, (long long)rows * cols) {
        const long long i = e / cols;
        const int j = (int)(e - i * cols);
        const long long r = idx != NULL ? idx[i] : i;
        const double v = (double)src[r * cols + j];
        const double d = v - (double)dec[e];
        ae += d * d;
        an += v * v;
    }
    se[threadIdx.x] = ae;
    sn[threadIdx.x] = an;
    __syncthreads();
    for (int off = 128; off > 0; off >>= 1) {
        if (threadIdx.x < off) {
            se[threadIdx.x] += se[threadIdx.x + off];
            sn[threadIdx.x] += sn[threadIdx.x + off];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        partial[2 * blockIdx.x] = se[0];
        partial[2 * blockIdx.x + 1] = sn[0];
    }
}
