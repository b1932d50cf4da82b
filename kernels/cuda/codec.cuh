// Per-row and per-element routines of the halo codecs (codec.cu), kept
// apart from the __global__ kernels so that a host compiler can include
// them (kernels/cuda/hosttwin tests them against comm/codec bit for bit).
#ifndef GNN_SPMD_KERNELS_CODEC_CUH
#define GNN_SPMD_KERNELS_CODEC_CUH

#include "common.cuh"

// ---- quant(b), b in 1..8 ----

// QUANT_HEADER is the bytes of a row's header: the bf16 scale, then the
// grid origin's multiple k (int8).
#define QUANT_HEADER 3

// quant_stride is the payload bytes per row: 3 + ceil(cols*b/8).
__host__ __device__ __forceinline__ long long quant_stride(int cols, int b) {
    return QUANT_HEADER + ((long long)cols * b + 7) / 8;
}

// bf16_up is bf16Up: s >= 0 rounded up to a bf16, at most the largest
// finite one (0x7f7f0000).
__host__ __device__ __forceinline__ float bf16_up(float s) {
    unsigned int w = f32bits(s);
    if ((w & 0xffffu) == 0) return s;
    w = (w & ~0xffffu) + 0x10000u;
    return f32frombits(w >= 0x7f800000u ? 0x7f7f0000u : w);
}

// quant_grid is quantGrid: the multiple k and the origin of scale s's grid
// for a row [lo, hi], and whether it fits.
__host__ __device__ __forceinline__ int quant_grid(float lo, float hi, float n, float s, float* origin, int* k) {
    const float u = (n * s) * (1.0f / 32);
    if (u == 0.0f) {
        *origin = 0.0f;
        *k = 0;
        return lo == 0.0f && hi == 0.0f;
    }
    float f = floorf(lo / u);
    if (f * u > lo) f -= 1.0f;
    f = f < -128.0f ? -128.0f : f > 127.0f ? 127.0f : f;
    *origin = f * u;
    *k = (int)f;
    return *origin <= lo && (f + 32.0f) * u >= hi;
}

// quant_smax is sMax: the bf16 below MaxFloat32/(5n).
__host__ __device__ __forceinline__ float quant_smax(float n) {
    return f32frombits(f32bits(GNN_FLT_MAX / (5.0f * n)) & ~0xffffu);
}

// quant_params is quantParams after the min/max pass: lo and hi are the
// smallest and largest non-NaN values (lo > hi when there are none), n =
// 2^b-1. It returns the grid origin and sets scale, inv and k.
__host__ __device__ __forceinline__ float quant_params(float lo, float hi, float n, float* scale, float* inv,
                                                       int* k) {
    const float tiny = 1.2621774483536189e-29f; // 2^-96
    if (lo > hi || (-lo < tiny && hi < tiny)) { // only NaN, no columns, or tiny
        *scale = 0.0f;
        *inv = 0.0f;
        *k = 0;
        return 0.0f;
    }
    // lo+0 and hi+0 (-0 -> +0; no other value changes), written as a
    // select so that no optimizer can drop the addition.
    if (lo == 0.0f) lo = 0.0f;
    if (hi == 0.0f) hi = 0.0f;
    float w = hi - lo;
    if (!(w <= GNN_FLT_MAX)) w = GNN_FLT_MAX;
    const float smax = quant_smax(n);
    float s = fminf(bf16_up(w / n), smax), origin;
    int fits = quant_grid(lo, hi, n, s, &origin, k);
    if (!fits) {
        s = fminf(bf16_up(w / (n * (31.0f / 32))), smax);
        fits = quant_grid(lo, hi, n, s, &origin, k);
    }
    if (!fits && (lo > 0.0f || hi < 0.0f)) {
        s = fminf(bf16_up(lo > 0.0f ? hi / (n * (159.0f / 32)) : -lo / (n * 4.0f)), smax);
        fits = quant_grid(lo, hi, n, s, &origin, k);
    }
    while (!fits && s < smax) {
        s = fminf(bf16_up(2.0f * s), smax);
        fits = quant_grid(lo, hi, n, s, &origin, k);
    }
    const float iv = 1.0f / s;
    if (iv > GNN_FLT_MAX / 256) { // 256*inv must be finite
        *scale = 0.0f;
        *inv = 0.0f;
        *k = 0;
        return 0.0f;
    }
    *scale = s;
    *inv = iv;
    return origin;
}

// quant_code is code(): the b-bit code of x with the 8-bit draw r, inv256
// = 256*inv, n256 = 256*n: f in 1/256 steps rounded to g, then
// (g + r) >> 8.
__host__ __device__ __forceinline__ unsigned int quant_code(float x, float lo, float inv256, float n256,
                                                            unsigned int r) {
    float f = (x - lo) * inv256;
    if (!(f >= 0.0f)) f = 0.0f;
    if (f > n256) f = n256;
    const unsigned int g = rint_f32(f);
    return (g + r) >> 8;
}

// quant_group writes codes 8g .. min(8g+8, cols)-1 of row i (values x)
// into the code area out (the payload row after its header): they
// fill bytes g*b .. g*b+b-1 exactly (LSB first), or, for a last partial
// group, its first ceil(count*b/8) bytes with the unused high bits 0. The
// draws are half g%2 of w, row i's draw block g/2 (quant_block).
__host__ __device__ __forceinline__ void quant_group(const float* x, int cols, int b, int g, float lo,
                                                     float inv256, float n256, const unsigned int w[4],
                                                     unsigned char* out) {
    const int j0 = 8 * g;
    const int cnt = min_i(8, cols - j0);
    unsigned long long acc = 0;
    for (int t = 0; t < cnt; t++)
        acc |= (unsigned long long)quant_code(x[j0 + t], lo, inv256, n256, draw8(w, 8 * (g & 1) + t)) << (t * b);
    const int nbytes = (cnt * b + 7) / 8;
    out += (long long)g * b;
    for (int k = 0; k < nbytes; k++) out[k] = (unsigned char)(acc >> (8 * k));
}

// quant_block codes columns 16p .. 16p+15 of row i (groups 2p and 2p+1,
// as far as cols reaches) from one draw block (p, i) under key (k0, k1).
__host__ __device__ __forceinline__ void quant_block(const float* x, int cols, int b, int p, float lo,
                                                     float inv256, float n256, int i, unsigned int k0,
                                                     unsigned int k1, unsigned char* out) {
    unsigned int w[4];
    draw_block((unsigned int)p, (unsigned int)i, k0, k1, w);
    quant_group(x, cols, b, 2 * p, lo, inv256, n256, w, out);
    if (16 * p + 8 < cols) quant_group(x, cols, b, 2 * p + 1, lo, inv256, n256, w, out);
}

// quant_lanes is how many lanes of a warp encode one row of cols values: a
// draw block (16 columns) per lane at a time, the smallest power of 2
// that covers the row's blocks, at most 32; a warp takes 32/lanes rows.
__host__ __device__ __forceinline__ int quant_lanes(int cols) {
    const int blocks = (cols + 15) / 16;
    int l = 1;
    while (l < blocks && l < 32) l <<= 1;
    return l;
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

// quant_minmax_lane is lane `lane` of `lanes`' share of the min/max pass:
// the smallest and largest of x[lane], x[lane+lanes], ... (NaN skipped;
// +Inf and -Inf when the lane has no value).
__host__ __device__ __forceinline__ void quant_minmax_lane(const float* x, int cols, int lane, int lanes, float* lo,
                                                           float* hi) {
    float l = f32frombits(0x7f800000u), h = f32frombits(0xff800000u);
    for (int j = lane; j < cols; j += lanes) {
        const float v = x[j];
        if (v < l) l = v;
        if (v > h) h = v;
    }
    *lo = l;
    *hi = h;
}

// quant_minmax_merge folds another lane's (ol, oh) into (lo, hi). The min
// and max of the non-NaN values do not depend on the order of the folds, up
// to the sign of zero, which quant_params normalises.
__host__ __device__ __forceinline__ void quant_minmax_merge(float* lo, float* hi, float ol, float oh) {
    if (ol < *lo) *lo = ol;
    if (oh > *hi) *hi = oh;
}

// quant_header writes a payload row's header: the bf16 scale (its
// float32's high half), then k.
__host__ __device__ __forceinline__ void quant_header(unsigned char* out, float scale, int k) {
    const unsigned int w = f32bits(scale);
    out[0] = (unsigned char)(w >> 16);
    out[1] = (unsigned char)(w >> 24);
    out[2] = (unsigned char)(signed char)k;
}

// quant_origin is the grid origin k*(n*scale/32) of a payload row's header.
__host__ __device__ __forceinline__ float quant_origin(const unsigned char* in, float n, float scale) {
    return (float)(signed char)in[2] * ((n * scale) * (1.0f / 32));
}

// quant_decode_elem is element e (row i = e/cols, column j) of a quant(b)
// payload: the row's header, then code j.
__host__ __device__ __forceinline__ float quant_decode_elem(long long e, int cols, int b, const unsigned char* src) {
    const long long i = e / cols;
    const int j = (int)(e - i * cols);
    const unsigned char* in = src + i * quant_stride(cols, b);
    const float scale = f32frombits((unsigned int)in[0] << 16 | (unsigned int)in[1] << 24);
    const float n = (float)((1 << b) - 1);
    return quant_decode_value(in + QUANT_HEADER, b, j, quant_origin(in, n, scale), scale);
}

// ---- quant(16): bf16 ----

// to_bf16 is toBF16: w rounded to bf16 by adding r (256 draw + 128) to its low half.
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

// bf16_encode_group encodes columns 8g .. min(8g+8, cols)-1 of row i
// (values x): column j adds 256*r(i, j) + 128, r from half g%2 of draw
// block (g/2, i).
__host__ __device__ __forceinline__ void bf16_encode_group(const float* x, int cols, int g, int i, unsigned int k0,
                                                           unsigned int k1, unsigned short* out) {
    unsigned int w[4];
    draw_block((unsigned int)(g >> 1), (unsigned int)i, k0, k1, w);
    const int j0 = 8 * g;
    const int cnt = min_i(8, cols - j0);
    for (int t = 0; t < cnt; t++)
        out[j0 + t] = to_bf16(f32bits(x[j0 + t]), draw8(w, 8 * (g & 1) + t) << 8 | 0x80u);
}

// bf16_encode_at is group e (row i = e/groups, group g) of bf16_encode:
// payload row i from source row idx ? idx[i] : i; h = Mix64(seed) gives
// the key.
__host__ __device__ __forceinline__ void bf16_encode_at(long long e, int cols, const int* idx, const float* src,
                                                        unsigned short* dst, unsigned long long h) {
    const int groups = (int)(((long long)cols + 7) / 8);
    const long long i = e / groups;
    const int g = (int)(e - i * groups);
    const long long r = idx != NULL ? idx[i] : i;
    bf16_encode_group(src + r * cols, cols, g, (int)i, (unsigned int)h, (unsigned int)(h >> 32), dst + i * cols);
}

// bf16_decode_value: Float32frombits(v << 16), exact.
__host__ __device__ __forceinline__ float bf16_decode_value(unsigned short v) {
    return f32frombits((unsigned int)v << 16);
}

// ---- tern: ternary codes of residuals ----

// TERN_KEY is the bytes of a tern payload's key (k0, k1, little endian),
// TERN_HEADER those of a row's header (s as a bf16).
#define TERN_KEY 8
#define TERN_HEADER 2

// TERN_MAX_S is the largest finite bf16: the cap on s.
#define TERN_MAX_S 0x7f7f0000u

// tern_stride is the payload bytes per row: 2 + ceil(cols/5).
__host__ __device__ __forceinline__ long long tern_stride(int cols) {
    return TERN_HEADER + ((long long)cols + 4) / 5;
}

// tern_lanes is how many lanes of a warp encode one row of cols values: a
// chunk of 80 columns (16 code bytes, 5 draw blocks) per lane at a time,
// the smallest power of 2 that covers the row's chunks, at most 32; a warp
// takes 32/lanes rows.
__host__ __device__ __forceinline__ int tern_lanes(int cols) {
    const int chunks = (int)(((long long)cols + 79) / 80);
    int l = 1;
    while (l < chunks && l < 32) l <<= 1;
    return l;
}

// tern_absmax_lane is lane `lane` of `lanes`' share of the largest
// magnitude: of |x[lane]|, |x[lane+lanes]|, ..., NaN never larger, 0 when
// the lane has none.
__host__ __device__ __forceinline__ float tern_absmax_lane(const float* x, int cols, int lane, int lanes) {
    float m = 0.0f;
    for (int j = lane; j < cols; j += lanes) {
        const float a = f32frombits(f32bits(x[j]) & 0x7fffffffu);
        if (a > m) m = a;
    }
    return m;
}

// tern_absmax_merge folds another lane's largest magnitude o into m: the
// maximum of the non-NaN magnitudes (all +0 or above) is the same in any
// order of folds.
__host__ __device__ __forceinline__ float tern_absmax_merge(float m, float o) { return o > m ? o : m; }

// tern_scale is ternScale: s for a row whose largest magnitude is m (+Inf
// included): m rounded up to a bf16, at most the largest finite one.
__host__ __device__ __forceinline__ float tern_scale(float m) {
    const float s = bf16_up(m), cap = f32frombits(TERN_MAX_S);
    return s > cap ? cap : s;
}

// tern_inv is 1/s, 0 for s = 0.
__host__ __device__ __forceinline__ float tern_inv(float s) { return s > 0.0f ? 1.0f / s : 0.0f; }

// tern_dither is ternDither: u = (r - 128)/256 + 1/512 for the 8-bit draw
// r, in (-1/2, 1/2), exact.
__host__ __device__ __forceinline__ float tern_dither(unsigned int r) {
    return (float)((int)r - 128) / 256.0f + (1.0f / 512);
}

// tern_code is t = q + 1 of x in a row of scale s (inv = 1/s) with the
// 8-bit draw r: v = x*inv + u, rounded after the product; 2 where v >=
// 1/2, 0 where v < -1/2, else 1 (NaN, and every value of a row with s = 0).
__host__ __device__ __forceinline__ unsigned int tern_code(float x, float s, float inv, unsigned int r) {
    if (!(s > 0.0f)) return 1u;
    const float p = x * inv;
    const float v = p + tern_dither(r);
    if (v >= 0.5f) return 2u;
    if (v < -0.5f) return 0u;
    return 1u;
}

// tern_header writes a payload row's header: s's bf16 (its float32's high
// half), little endian.
__host__ __device__ __forceinline__ void tern_header(unsigned char* out, float s) {
    const unsigned int w = f32bits(s);
    out[0] = (unsigned char)(w >> 16);
    out[1] = (unsigned char)(w >> 24);
}

// tern_chunk codes columns 80p .. min(80p+80, cols)-1 of a row (values x,
// the draws' row i) into code bytes 16p .. of its code area out (the
// payload row after its header): five codes a byte, t0 + 3t1 + 9t2 + 27t3
// + 81t4, the row's last byte padded with zero codes; the draws from
// blocks (5p .. 5p+4, i) under key (k0, k1). 80p starts both a byte and a
// draw block.
__host__ __device__ __forceinline__ void tern_chunk(const float* x, int cols, int p, float s, float inv,
                                                    unsigned int i, unsigned int k0, unsigned int k1,
                                                    unsigned char* out) {
    unsigned int w[4];
    const int c0 = 80 * p, c1 = min_i(c0 + 80, cols);
    unsigned int b = 0, pw = 1;
    for (int c = c0; c < c1; c++) {
        if ((c & 15) == 0) draw_block((unsigned int)(c >> 4), i, k0, k1, w);
        b += tern_code(x[c], s, inv, draw8(w, c & 15)) * pw;
        pw *= 3;
        if (pw == 243 || c == c1 - 1) {
            out[c / 5] = (unsigned char)b;
            b = 0;
            pw = 1;
        }
    }
}

// tern_put_key writes the payload's key at its head: k0 then k1, little
// endian, where h = mix64(seed) (comm/codec's drawKey) gives k0 =
// uint32(h), k1 = uint32(h >> 32): h's 8 bytes, little endian.
__host__ __device__ __forceinline__ void tern_put_key(unsigned char* head, unsigned long long h) {
    for (int k = 0; k < 8; k++) head[k] = (unsigned char)(h >> (8 * k));
}

// tern_get_key reads the key (k0, k1) at a payload's head.
__host__ __device__ __forceinline__ void tern_get_key(const unsigned char* head, unsigned int* k0, unsigned int* k1) {
    unsigned int a = 0, b = 0;
    for (int k = 3; k >= 0; k--) {
        a = a << 8 | head[k];
        b = b << 8 | head[4 + k];
    }
    *k0 = a;
    *k1 = b;
}

// tern_draw is draw8(draw_block(c/16, i), c%16): the 8-bit draw of column
// c of row i, from the one word of the block that holds it.
__host__ __device__ __forceinline__ unsigned int tern_draw(int c, unsigned int i, unsigned int k0, unsigned int k1) {
    const unsigned int rk = hash32(i ^ k0);
    const unsigned int w = hash32(rk ^ ((unsigned int)(c >> 2) * 0x9E3779B9u + k1)); // word 4p+m = c/4
    return (w >> (8 * (c & 3))) & 0xffu;
}

// tern_digit is code c%5 of byte b minus 1 (q in -1..1): 0 for bytes
// above 242, which hold no codes.
__host__ __device__ __forceinline__ int tern_digit(unsigned int b, int k) {
    if (b > 242u) return 0;
    for (; k > 0; k--) b /= 3u;
    return (int)(b % 3u) - 1;
}

// tern_decode_elem is element e (row i = e/cols, column c) of a tern
// payload's rows (src: the first row's header), the draws' rows numbered
// from first under key (k0, k1): ((t - 1) - u) * s, 0 where s = 0.
__host__ __device__ __forceinline__ float tern_decode_elem(long long e, int cols, int first, unsigned int k0,
                                                           unsigned int k1, const unsigned char* src) {
    const long long i = e / cols;
    const int c = (int)(e - i * cols);
    const unsigned char* in = src + i * tern_stride(cols);
    const float s = f32frombits((unsigned int)in[0] << 16 | (unsigned int)in[1] << 24);
    if (s == 0.0f) return 0.0f;
    const float u = tern_dither(tern_draw(c, (unsigned int)(first + i), k0, k1));
    const float d = (float)tern_digit(in[TERN_HEADER + c / 5], c % 5) - u;
    return d * s;
}

// ---- trunc ----

// trunc_encode_elem is element e (payload row i = e/k, column c < k) of
// trunc_encode: src[r][c] with r = idx ? idx[i] : i.
__host__ __device__ __forceinline__ float trunc_encode_elem(long long e, int cols, int k, const int* idx,
                                                            const float* src) {
    const long long i = e / k;
    const int c = (int)(e - i * k);
    const long long r = idx != NULL ? idx[i] : i;
    return src[r * cols + c];
}

// trunc_decode_elem is element e (row i = e/cols, column c) of
// trunc_decode: the kept value for c < k, else 0.
__host__ __device__ __forceinline__ float trunc_decode_elem(long long e, int cols, int k, const float* src) {
    const long long i = e / cols;
    const int c = (int)(e - i * cols);
    return c < k ? src[i * k + c] : 0.0f;
}

// ---- compression error ----

// sq_diff_terms adds element e's terms to (ae, an): with v = double(src[r][j])
// (r = idx ? idx[i] : i), (v - double(dec[e]))^2 and v^2, the terms of
// comm/halo.go Forward's ErrSq and NormSq.
__host__ __device__ __forceinline__ void sq_diff_terms(long long e, int cols, const int* idx, const float* src,
                                                       const float* dec, double* ae, double* an) {
    const long long i = e / cols;
    const int j = (int)(e - i * cols);
    const long long r = idx != NULL ? idx[i] : i;
    const double v = (double)src[r * cols + j];
    const double d = v - (double)dec[e];
    *ae += d * d;
    *an += v * v;
}

#endif // GNN_SPMD_KERNELS_CODEC_CUH
