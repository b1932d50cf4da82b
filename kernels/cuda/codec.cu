// Halo codecs: the CUDA twins of comm/codec.go's trunc, quant(b<=8) and
// quant(16) (bf16) encoders and decoders, and of comm/codec/tern.go's
// tern, producing and reading the same bytes (read those files' docs for
// the wire formats and the random draws). Encoders take an optional row
// index list: payload row i encodes source row r = idx[i] (or i when idx
// is NULL), so that the forward halo exchange encodes straight from the
// owned rows; i, the payload row (first + i for tern), keys the draws, as
// in the Go encoder run on the gathered rows. h = mix64(seed) is computed
// by the caller. The per-row and per-element routines are in codec.cuh;
// see common.cuh for the conventions.
#include "codec.cuh"

// ---- quant(b), b in 1..8 ----

// quant_encode: quant(b).Encode of rows x cols values, payload row i from
// source row idx ? idx[i] : i, h = mix64(seed). A row takes L =
// quant_lanes(cols) lanes of a warp (32/L rows a warp): they find its min
// and max (a butterfly within the L lanes), every lane derives the same
// header, the row's first lane writes it, and lane l of the row codes the
// draw blocks p = l, l+L, ... (16 columns each, 4 words of draws).
extern "C" __global__ void quant_encode(int rows, int cols, int b, const int* idx, const float* src,
                                        unsigned char* dst, unsigned long long h) {
    const int lanes = quant_lanes(cols), per = 32 / lanes;
    const int lane = threadIdx.x & 31, sub = lane & (lanes - 1);
    const float n = (float)((1 << b) - 1);
    const long long stride = quant_stride(cols, b);
    const int blocks = (cols + 15) / 16;
    const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    // Every lane runs every pass of the loop (the shuffles need the whole
    // warp); a lane past the last row only takes part in them.
    for (long long i0 = warp * per; i0 < rows; i0 += warps * per) {
        const long long i = i0 + lane / lanes;
        const bool live = i < rows;
        const float* x = src + (live ? (idx != NULL ? (long long)idx[i] : i) : 0) * cols;
        float lo, hi;
        quant_minmax_lane(x, live ? cols : 0, sub, lanes, &lo, &hi);
        for (int m = lanes >> 1; m > 0; m >>= 1) {
            const float ol = __shfl_xor_sync(0xffffffffu, lo, m);
            const float oh = __shfl_xor_sync(0xffffffffu, hi, m);
            quant_minmax_merge(&lo, &hi, ol, oh);
        }
        if (!live) continue;
        float scale, inv;
        int k;
        lo = quant_params(lo, hi, n, &scale, &inv, &k);
        unsigned char* out = dst + i * stride;
        if (sub == 0) quant_header(out, scale, k);
        for (int p = sub; p < blocks; p += lanes)
            quant_block(x, cols, b, p, lo, 256 * inv, 256 * n, (int)i, (unsigned int)h, (unsigned int)(h >> 32),
                        out + QUANT_HEADER);
    }
}

// quant_decode: quant(b).Decode of rows x cols values. One thread per value.
extern "C" __global__ void quant_decode(int rows, int cols, int b, const unsigned char* src, float* dst) {
    GRID_STRIDE_LOOP(e, (long long)rows * cols) { dst[e] = quant_decode_elem(e, cols, b, src); }
}

// ---- quant(16): bf16 ----

// bf16_encode: quant(16).Encode into dst (rows*cols bf16 values, little
// endian on the device as on the wire). One thread per 8 columns of a row.
extern "C" __global__ void bf16_encode(int rows, int cols, const int* idx, const float* src, unsigned short* dst,
                                       unsigned long long h) {
    const int groups = (int)(((long long)cols + 7) / 8);
    GRID_STRIDE_LOOP(e, (long long)rows * groups) { bf16_encode_at(e, cols, idx, src, dst, h); }
}

// bf16_decode: dst[k] = Float32frombits(src[k] << 16), exact.
extern "C" __global__ void bf16_decode(long long n, const unsigned short* src, float* dst) {
    GRID_STRIDE_LOOP(k, n) { dst[k] = bf16_decode_value(src[k]); }
}

// ---- tern: ternary codes of residuals ----

// tern_encode: tern rows of rows x cols values, payload row i from source
// row idx ? idx[i] : i, coded with the draws' row first + i under the key
// of h = mix64(seed): the key (8 bytes) at dst, the rows from dst + at (a
// whole payload: at = TERN_KEY, first = 0; tern(g)'s rest: its restAt, and
// first = the number of whole groups). A row takes L = tern_lanes(cols)
// lanes of a warp (32/L rows a warp): they find its largest magnitude (a
// butterfly within the L lanes), every lane derives the same scale, the
// row's first lane writes the header, and lane l of the row codes the
// chunks p = l, l+L, ... (80 columns each: 16 bytes, 5 draw blocks).
extern "C" __global__ void tern_encode(int rows, int cols, int first, const int* idx, const float* src,
                                       unsigned char* dst, long long at, unsigned long long h) {
    if (blockIdx.x == 0 && threadIdx.x == 0) tern_put_key(dst, h);
    const int lanes = tern_lanes(cols), per = 32 / lanes;
    const int lane = threadIdx.x & 31, sub = lane & (lanes - 1);
    const long long stride = tern_stride(cols);
    const int chunks = (int)(((long long)cols + 79) / 80);
    const unsigned int k0 = (unsigned int)h, k1 = (unsigned int)(h >> 32);
    const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    // Every lane runs every pass of the loop (the shuffles need the whole
    // warp); a lane past the last row only takes part in them.
    for (long long i0 = warp * per; i0 < rows; i0 += warps * per) {
        const long long i = i0 + lane / lanes;
        const bool live = i < rows;
        const float* x = src + (live ? (idx != NULL ? (long long)idx[i] : i) : 0) * cols;
        float m = tern_absmax_lane(x, live ? cols : 0, sub, lanes);
        for (int o = lanes >> 1; o > 0; o >>= 1) m = tern_absmax_merge(m, __shfl_xor_sync(0xffffffffu, m, o));
        if (!live) continue;
        const float s = tern_scale(m), inv = tern_inv(s);
        unsigned char* out = dst + at + i * stride;
        if (sub == 0) tern_header(out, s);
        for (int p = sub; p < chunks; p += lanes)
            tern_chunk(x, cols, p, s, inv, (unsigned int)(first + i), k0, k1, out + TERN_HEADER);
    }
}

// tern_decode: rows x cols values from the tern rows at src + at, the
// draws' rows numbered from first under the key at src. One thread per
// value.
extern "C" __global__ void tern_decode(int rows, int cols, int first, const unsigned char* src, long long at,
                                       float* dst) {
    unsigned int k0, k1;
    tern_get_key(src, &k0, &k1);
    GRID_STRIDE_LOOP(e, (long long)rows * cols) { dst[e] = tern_decode_elem(e, cols, first, k0, k1, src + at); }
}

// ---- trunc ----

// trunc_encode: dst[i*k+c] = src[r*cols+c] for c < k (k <= cols is the
// caller's Trunc keep(cols)).
extern "C" __global__ void trunc_encode(int rows, int cols, int k, const int* idx, const float* src, float* dst) {
    GRID_STRIDE_LOOP(e, (long long)rows * k) { dst[e] = trunc_encode_elem(e, cols, k, idx, src); }
}

// trunc_decode: dst row i = the k values of payload row i, then zeros up to
// cols.
extern "C" __global__ void trunc_decode(int rows, int cols, int k, const float* src, float* dst) {
    GRID_STRIDE_LOOP(e, (long long)rows * cols) { dst[e] = trunc_decode_elem(e, cols, k, src); }
}

// ---- compression error ----

// sq_diff_partial (blockDim.x == 256): over all (i, j) of a rows x cols
// encode call, partial[2*blockIdx.x] and partial[2*blockIdx.x+1] are the
// sums of sq_diff_terms over this block's grid-stride elements. The CPU
// sums the terms sequentially per peer (then adds the per-peer sums into
// the layer's totals), this kernel in a block tree, so the totals differ
// by rounding only.
extern "C" __global__ void sq_diff_partial(int rows, int cols, const int* idx, const float* src, const float* dec,
                                           double* partial) {
    __shared__ double se[256];
    __shared__ double sn[256];
    double ae = 0.0, an = 0.0;
    GRID_STRIDE_LOOP(e, (long long)rows * cols) { sq_diff_terms(e, cols, idx, src, dec, &ae, &an); }
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
