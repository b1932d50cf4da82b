//go:build amd64 && cgo

// AVX2 encoders and decoders of the quant(b), bf16 and tern formats
// (codec.go and tern.go specify them; the Go code there is the reference
// and the fallback).
// The arithmetic is the reference's, per value and in the same float32
// operations (ISO C: no contraction into fused multiply-adds; the vector
// min and max keep the reference's NaN rule: a NaN operand loses), so the
// payloads are byte-identical; the draws come 32 columns to a hash of 8
// lanes.
#include <immintrin.h>
#include <stdint.h>
#include <string.h>
#include <math.h>
#include <float.h>

#define AVX2 __attribute__((target("avx2")))

// QUANT_HEADER is the bytes of a quant(b) row's header (codec.go quantHeader).
#define QUANT_HEADER 3

int gnn_codec_have_avx2(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2");
}

// GOLDEN is the odd constant that spreads a row's word indices m over the
// hash's input (codec.go: m*0x9E3779B9 + k1).
#define GOLDEN 0x9E3779B9u

// hash32 is rng.Hash32.
static inline uint32_t hash32(uint32_t x) {
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    return x ^ (x >> 16);
}

// hash8 is rng.Hash32 on 8 lanes.
AVX2 static inline __m256i hash8(__m256i x) {
    x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
    x = _mm256_mullo_epi32(x, _mm256_set1_epi32(0x7feb352d));
    x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 15));
    x = _mm256_mullo_epi32(x, _mm256_set1_epi32((int)0x846ca68bu));
    return _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
}

// draw_keys is what one message's draws share: its key, lane l's word
// term l*GOLDEN + k1, and for narrow rows (draw_rows, bpr blocks a row)
// each lane's row offset and word term in the pass's 4 vectors.
typedef struct {
    uint32_t k0;
    __m256i col, step;
    __m256i roff[4], rcol[4];
} draw_keys;

AVX2 static void draw_keys_init(draw_keys* ks, uint32_t k0, uint32_t k1, int bpr) {
    ks->k0 = k0;
    ks->col = _mm256_add_epi32(_mm256_set1_epi32((int)k1),
                               _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32((int)GOLDEN)));
    ks->step = _mm256_set1_epi32((int)(8 * GOLDEN));
    if (bpr == 0) return;
    for (int v = 0; v < 4; v++) {
        uint32_t off[8], col[8];
        for (int l = 0; l < 8; l++) { // word t of the pass: block t/4, row (t/4)/bpr, word t%(4*bpr)
            const int t = 8 * v + l;
            off[l] = (uint32_t)(t / 4 / bpr);
            col[l] = (uint32_t)(t % (4 * bpr)) * GOLDEN + k1;
        }
        ks->roff[v] = _mm256_loadu_si256((const __m256i*)off);
        ks->rcol[v] = _mm256_loadu_si256((const __m256i*)col);
    }
}

// draw_blocks is the blocks c0 .. c0+7 of row i (columns 16*c0 .. 16*c0+127):
// byte t of d[l] is the draw of column 16*(c0+l)+t.
AVX2 static inline __attribute__((always_inline)) void draw_blocks(uint32_t c0, uint32_t i, const draw_keys* ks, __m128i d[8]) {
    const __m256i rk = _mm256_set1_epi32((int)hash32(i ^ ks->k0));
    __m256i col = _mm256_add_epi32(ks->col, _mm256_set1_epi32((int)(4 * c0 * GOLDEN)));
    for (int v = 0; v < 4; v++) {
        const __m256i h = hash8(_mm256_xor_si256(rk, col));
        d[2 * v] = _mm256_castsi256_si128(h), d[2 * v + 1] = _mm256_extracti128_si256(h, 1);
        col = _mm256_add_epi32(col, ks->step);
    }
}

// draw_rows is the blocks 0 .. bpr-1 (bpr = 1, 2 or 4, as in
// draw_keys_init) of the 8/bpr rows i, i+1, ...: d + k*bpr holds row i+k's,
// as draw_blocks would give them. A narrow row needs fewer than its 8
// blocks; this makes every lane count.
AVX2 static inline __attribute__((always_inline)) void draw_rows(uint32_t i, const draw_keys* ks, __m128i d[8]) {
    const __m256i base = _mm256_set1_epi32((int)i), k0 = _mm256_set1_epi32((int)ks->k0);
    for (int v = 0; v < 4; v++) {
        const __m256i rk = hash8(_mm256_xor_si256(_mm256_add_epi32(base, ks->roff[v]), k0));
        const __m256i h = hash8(_mm256_xor_si256(rk, ks->rcol[v]));
        d[2 * v] = _mm256_castsi256_si128(h), d[2 * v + 1] = _mm256_extracti128_si256(h, 1);
    }
}

// narrow_blocks is the blocks per row that draw_rows serves for
// rows of cols values (a power of 2 >= ceil(cols/16)), 0 above 64 columns.
static inline int narrow_blocks(int cols) { return cols <= 16 ? 1 : cols <= 32 ? 2 : cols <= 64 ? 4 : 0; }

// row_draws is row i's draw blocks, rows being visited in order, when they
// are narrow (bpr = narrow_blocks(cols) > 0): a draw_rows pass into d at
// every (8/bpr)-th row, and row i's part of it. NULL for wider rows, whose
// blocks draw_blocks makes as the row is coded.
AVX2 static inline __attribute__((always_inline)) const __m128i* row_draws(int64_t i, int bpr, const draw_keys* ks, __m128i d[8]) {
    if (!bpr) return NULL;
    const int64_t at = i & (8 / bpr - 1); // 8/bpr is a power of 2
    if (at == 0) draw_rows((uint32_t)i, ks, d);
    return d + at * bpr;
}

static inline uint32_t f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// bf16_up is the reference's bf16Up: s >= 0 rounded up to a bf16, at most
// the largest finite one.
static inline float bf16_up(float s) {
    uint32_t w = f2u(s);
    if ((w & 0xffffu) == 0) return s;
    w = (w & ~0xffffu) + 0x10000u;
    return u2f(w >= 0x7f800000u ? 0x7f7f0000u : w);
}

// row_minmax is the reference's min and max of a row (NaNs skipped; +Inf,
// -Inf for none).
AVX2 static inline __attribute__((always_inline)) void row_minmax(const float* x, int cols, float* lop, float* hip) {
    // Four accumulators each, so that the min/max latency does not bound
    // the pass; min(v, lo) is v < lo ? v : lo (a NaN v loses).
    __m256 lo8 = _mm256_set1_ps(INFINITY), hi8 = _mm256_set1_ps(-INFINITY);
    __m256 l1 = lo8, l2 = lo8, l3 = lo8, h1 = hi8, h2 = hi8, h3 = hi8;
    int j = 0;
    for (; j + 32 <= cols; j += 32) {
        const __m256 v0 = _mm256_loadu_ps(x + j), v1 = _mm256_loadu_ps(x + j + 8);
        const __m256 v2 = _mm256_loadu_ps(x + j + 16), v3 = _mm256_loadu_ps(x + j + 24);
        lo8 = _mm256_min_ps(v0, lo8), hi8 = _mm256_max_ps(v0, hi8);
        l1 = _mm256_min_ps(v1, l1), h1 = _mm256_max_ps(v1, h1);
        l2 = _mm256_min_ps(v2, l2), h2 = _mm256_max_ps(v2, h2);
        l3 = _mm256_min_ps(v3, l3), h3 = _mm256_max_ps(v3, h3);
    }
    for (; j + 8 <= cols; j += 8) {
        const __m256 v = _mm256_loadu_ps(x + j);
        lo8 = _mm256_min_ps(v, lo8);
        hi8 = _mm256_max_ps(v, hi8);
    }
    lo8 = _mm256_min_ps(_mm256_min_ps(l1, lo8), _mm256_min_ps(l2, l3));
    hi8 = _mm256_max_ps(_mm256_max_ps(h1, hi8), _mm256_max_ps(h2, h3));
    float l[8], h[8];
    _mm256_storeu_ps(l, lo8);
    _mm256_storeu_ps(h, hi8);
    float lo = l[0], hi = h[0];
    for (int t = 1; t < 8; t++) {
        if (l[t] < lo) lo = l[t];
        if (h[t] > hi) hi = h[t];
    }
    for (; j < cols; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    *lop = lo, *hip = hi;
}

// quant_grid is the reference's quantGrid: the multiple k and the origin
// of scale s's grid for a row [lo, hi], and whether it fits.
static inline int quant_grid(float lo, float hi, float n, float s, float* origin, int* k) {
    const float u = (n * s) * (1.0f / 32);
    if (u == 0) {
        *origin = 0, *k = 0;
        return lo == 0 && hi == 0;
    }
    float f = floorf(lo / u);
    if (f * u > lo) f -= 1;
    f = f < -128 ? -128 : f > 127 ? 127 : f;
    *origin = f * u, *k = (int)f;
    return *origin <= lo && (f + 32) * u >= hi;
}

// quant_try is one candidate t of quantParams: the scale t rounded up to a
// bf16 and capped at smax, into *s, and whether its grid fits.
static inline int quant_try(float lo, float hi, float n, float t, float smax, float* s, float* origin, int* k) {
    t = bf16_up(t);
    *s = t < smax ? t : smax;
    return quant_grid(lo, hi, n, *s, origin, k);
}

// quant_smax is the reference's quantSMax: the bf16 below FLT_MAX/(5n).
static inline float quant_smax(float n) { return u2f(f2u(FLT_MAX / (5 * n)) & ~0xffffu); }

// quant_params is the reference's quantParams given the row's min and max
// (smax = quant_smax(n)): it returns the grid origin and sets scale, inv
// and k.
static inline float quant_params(float lo, float hi, float n, float smax, float* scale, float* inv, int* k) {
    const float tiny = 0x1.0p-96f;
    if (lo > hi || (-lo < tiny && hi < tiny)) {
        *scale = *inv = 0, *k = 0;
        return 0;
    }
    lo = lo + 0.0f, hi = hi + 0.0f;
    float w = hi - lo;
    if (!(w <= FLT_MAX)) w = FLT_MAX;
    float s, origin;
    int fits = quant_try(lo, hi, n, w / n, smax, &s, &origin, k);
    if (!fits) fits = quant_try(lo, hi, n, w / (n * (31.0f / 32)), smax, &s, &origin, k);
    if (!fits && (lo > 0 || hi < 0))
        fits = quant_try(lo, hi, n, lo > 0 ? hi / (n * (159.0f / 32)) : -lo / (n * 4), smax, &s, &origin, k);
    while (!fits && s < smax) fits = quant_try(lo, hi, n, 2 * s, smax, &s, &origin, k);
    const float iv = 1.0f / s;
    if (iv > FLT_MAX / 256) {
        *scale = *inv = 0, *k = 0;
        return 0;
    }
    *scale = s, *inv = iv;
    return origin;
}

// quant_header reads a payload row's header: it returns the grid origin and
// sets scale.
static inline float quant_header(const uint8_t* in, float n, float* scale) {
    uint16_t s16;
    memcpy(&s16, in, 2);
    const float s = u2f((uint32_t)s16 << 16);
    *scale = s;
    return (float)(int8_t)in[2] * ((n * s) * (1.0f / 32));
}

// quant_row is a row's grid as quant_params gives it.
typedef struct {
    float origin, scale, inv;
    int k;
} quant_row;

// grid8 is quant_try on 8 lanes: the candidate scale t rounded up to a
// bf16 and capped at smax, into s, its grid's origin and multiple f, and
// the lanes whose grid fits (or where u is 0, left to the scalar path).
typedef struct {
    __m256 s, origin, f, fits, zero_u;
} grid8;

AVX2 static inline __attribute__((always_inline)) grid8 quant_try8(__m256 lo, __m256 hi, __m256 nv, __m256 t, __m256 smaxv) {
    grid8 g;
    const __m256i ti = _mm256_castps_si256(t);
    const __m256i low = _mm256_and_si256(ti, _mm256_set1_epi32(0xffff));
    __m256i up = _mm256_add_epi32(_mm256_andnot_si256(_mm256_set1_epi32(0xffff), ti), _mm256_set1_epi32(0x10000));
    // bf16_up: past the largest finite bf16 (t >= 0 here), that one
    up = _mm256_blendv_epi8(up, _mm256_set1_epi32(0x7f7f0000), _mm256_cmpgt_epi32(up, _mm256_set1_epi32(0x7f7fffff)));
    const __m256 tb = _mm256_castsi256_ps(_mm256_blendv_epi8(up, ti, _mm256_cmpeq_epi32(low, _mm256_setzero_si256())));
    g.s = _mm256_blendv_ps(smaxv, tb, _mm256_cmp_ps(tb, smaxv, _CMP_LT_OQ));
    // quant_grid
    const __m256 u = _mm256_mul_ps(_mm256_mul_ps(nv, g.s), _mm256_set1_ps(1.0f / 32));
    g.zero_u = _mm256_cmp_ps(u, _mm256_setzero_ps(), _CMP_EQ_OQ);
    __m256 f = _mm256_floor_ps(_mm256_div_ps(lo, u));
    f = _mm256_sub_ps(f, _mm256_and_ps(_mm256_cmp_ps(_mm256_mul_ps(f, u), lo, _CMP_GT_OQ), _mm256_set1_ps(1)));
    g.f = _mm256_min_ps(_mm256_max_ps(f, _mm256_set1_ps(-128)), _mm256_set1_ps(127));
    g.origin = _mm256_mul_ps(g.f, u);
    g.fits = _mm256_and_ps(_mm256_cmp_ps(g.origin, lo, _CMP_LE_OQ),
                           _mm256_cmp_ps(_mm256_mul_ps(_mm256_add_ps(g.f, _mm256_set1_ps(32)), u), hi, _CMP_GE_OQ));
    return g;
}

// quant_params8 is quant_params for 8 rows (their mins and maxes in lo and
// hi): the same float32 operations in the same order on 8 lanes, so the
// same bits, for the rows that the first or second candidate scale fits;
// the others (empty, tiny, infinite or far from 0) take the scalar path.
// One row's chain of divisions otherwise bounds narrow rows' coding.
AVX2 static void quant_params8(const float lo_in[8], const float hi_in[8], float n, float smax, quant_row out[8]) {
    const __m256 zero = _mm256_setzero_ps(), nv = _mm256_set1_ps(n), fmax = _mm256_set1_ps(FLT_MAX);
    const __m256 tiny = _mm256_set1_ps(0x1.0p-96f), smaxv = _mm256_set1_ps(smax);
    const __m256 lo = _mm256_add_ps(_mm256_loadu_ps(lo_in), zero), hi = _mm256_add_ps(_mm256_loadu_ps(hi_in), zero);
    // quant_params' early exit: lo > hi, or both within tiny of 0.
    __m256 odd = _mm256_or_ps(_mm256_cmp_ps(lo, hi, _CMP_GT_OQ),
                              _mm256_and_ps(_mm256_cmp_ps(_mm256_sub_ps(zero, lo), tiny, _CMP_LT_OQ), _mm256_cmp_ps(hi, tiny, _CMP_LT_OQ)));
    __m256 w = _mm256_sub_ps(hi, lo);
    w = _mm256_blendv_ps(fmax, w, _mm256_cmp_ps(w, fmax, _CMP_LE_OQ)); // !(w <= FLT_MAX): FLT_MAX
    const grid8 a = quant_try8(lo, hi, nv, _mm256_div_ps(w, nv), smaxv);
    const grid8 b = quant_try8(lo, hi, nv, _mm256_div_ps(w, _mm256_set1_ps(n * (31.0f / 32))), smaxv);
    const __m256 s = _mm256_blendv_ps(b.s, a.s, a.fits), f = _mm256_blendv_ps(b.f, a.f, a.fits);
    const __m256 origin = _mm256_blendv_ps(b.origin, a.origin, a.fits);
    odd = _mm256_or_ps(odd, _mm256_or_ps(a.zero_u, b.zero_u));
    odd = _mm256_or_ps(odd, _mm256_cmp_ps(_mm256_or_ps(a.fits, b.fits), zero, _CMP_EQ_OQ)); // neither fits
    const __m256 iv = _mm256_div_ps(_mm256_set1_ps(1.0f), s);
    odd = _mm256_or_ps(odd, _mm256_cmp_ps(iv, _mm256_set1_ps(FLT_MAX / 256), _CMP_GT_OQ));
    const int scalar = _mm256_movemask_ps(odd);
    float ov[8], sv[8], iw[8], fv[8];
    _mm256_storeu_ps(ov, origin), _mm256_storeu_ps(sv, s), _mm256_storeu_ps(iw, iv), _mm256_storeu_ps(fv, f);
    for (int l = 0; l < 8; l++) {
        if (scalar >> l & 1) {
            out[l].origin = quant_params(lo_in[l], hi_in[l], n, smax, &out[l].scale, &out[l].inv, &out[l].k);
        } else {
            out[l] = (quant_row){ov[l], sv[l], iw[l], (int)fv[l]};
        }
    }
}

// draws8 is the 8 draws of half h (0: columns 0-7, 1: 8-15) of a block.
AVX2 static inline __m256i draws8(__m128i block, int h) {
    return _mm256_cvtepu8_epi32(h ? _mm_srli_si128(block, 8) : block);
}

// g8 is the reference's g on 8 values (inv256 = 256*inv, n256 = 256*n):
// (x - lo) * inv256 clamped to [0, n256] (NaN and negatives to +0; a -0
// rounds to g = 0 as +0 does), rounded to the nearest integer, ties to
// even (the default rounding mode, which Go keeps).
AVX2 static inline __m256i g8(__m256 x, __m256 lo, __m256 inv256, __m256 n256) {
    __m256 f = _mm256_mul_ps(_mm256_sub_ps(x, lo), inv256);
    f = _mm256_min_ps(_mm256_max_ps(f, _mm256_setzero_ps()), n256);
    return _mm256_cvtps_epi32(f);
}

// codes8 is the reference's code() on 8 values with their draws r:
// (g + r) >> 8.
AVX2 static inline __m256i codes8(__m256 x, __m256i r, __m256 lo, __m256 inv256, __m256 n256) {
    return _mm256_srli_epi32(_mm256_add_epi32(g8(x, lo, inv256, n256), r), 8);
}

// pack8 joins 8 codes of b bits into one word, code t at bits t*b.
AVX2 static inline uint64_t pack8(__m256i c, __m256i shlo, __m256i shhi) {
    const __m256i a = _mm256_sllv_epi64(_mm256_cvtepu32_epi64(_mm256_castsi256_si128(c)), shlo);
    const __m256i h = _mm256_sllv_epi64(_mm256_cvtepu32_epi64(_mm256_extracti128_si256(c, 1)), shhi);
    const __m256i o = _mm256_or_si256(a, h);
    const __m128i p = _mm_or_si128(_mm256_castsi256_si128(o), _mm256_extracti128_si256(o, 1));
    return (uint64_t)_mm_cvtsi128_si64(_mm_or_si128(p, _mm_unpackhi_epi64(p, p)));
}

// g8_packed is g8 where a saturating pack to words follows: the pack
// clamps below (a negative g, and a NaN's or -Inf's 0x80000000, to 0, as
// g8's max with +0 would), so only the upper clamp is done here, with the
// NaN rule turned (min returns its second operand, f, where either is NaN).
AVX2 static inline __m256i g8_packed(__m256 x, __m256 lo, __m256 inv256, __m256 n256) {
    return _mm256_cvtps_epi32(_mm256_min_ps(n256, _mm256_mul_ps(_mm256_sub_ps(x, lo), inv256)));
}

// code_bytes32 is the codes of 4 whole groups (32 values from x, their
// draws in blocks d0 and d1), one byte each, b <= 8, in the packs' order:
// lane 0 holds values 0-3 of groups 0, 1, 2, 3, lane 1 values 4-7. The
// fractions g are packed to words first and the draws spread to match, so
// that the sum and its shift work on 16 values at once; g + r < 2^16, so
// the code is the sum's high byte.
AVX2 static inline __attribute__((always_inline)) __m256i code_bytes32(const float* x, __m128i d0, __m128i d1, __m256 lo, __m256 inv256, __m256 n256) {
    const __m128i split = _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15);
    const __m256i g01 = _mm256_packus_epi32(g8_packed(_mm256_loadu_ps(x), lo, inv256, n256), g8_packed(_mm256_loadu_ps(x + 8), lo, inv256, n256));
    const __m256i g23 = _mm256_packus_epi32(g8_packed(_mm256_loadu_ps(x + 16), lo, inv256, n256), g8_packed(_mm256_loadu_ps(x + 24), lo, inv256, n256));
    const __m256i w01 = _mm256_srli_epi16(_mm256_add_epi16(g01, _mm256_cvtepu8_epi16(_mm_shuffle_epi8(d0, split))), 8);
    const __m256i w23 = _mm256_srli_epi16(_mm256_add_epi16(g23, _mm256_cvtepu8_epi16(_mm_shuffle_epi8(d1, split))), 8);
    return _mm256_packus_epi16(w01, w23);
}

// in_order puts code_bytes32's bytes in the order of the values.
AVX2 static inline __m256i in_order(__m256i c) { return _mm256_permutevar8x32_epi32(c, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)); }

// pack32 packs code_bytes32's codes of b = 2..4 bits: 4b bytes, then
// zeros. Multiply-adds join 4 codes to a dword, b bits apart (weights wb
// = 1, 2^b in byte pairs, ww = 1, 2^2b in word pairs), each group's two
// dwords join, and pick keeps their low b bytes.
AVX2 static inline __m128i pack32(__m256i c, int b, __m256i wb, __m256i ww, __m128i pick) {
    const __m256i q = _mm256_madd_epi16(_mm256_maddubs_epi16(c, wb), ww);
    const __m128i v = _mm_or_si128(_mm256_castsi256_si128(q), _mm_sll_epi32(_mm256_extracti128_si256(q, 1), _mm_cvtsi32_si128(4 * b)));
    return _mm_shuffle_epi8(v, pick);
}

// code1 is one value's code (the reference's code()).
static inline uint32_t code1(float x, float lo, float inv256, float n256, uint32_t r) {
    float f = (x - lo) * inv256;
    if (!(f >= 0.0f)) f = 0.0f;
    if (f > n256) f = n256;
    const uint32_t g = (uint32_t)nearbyintf(f);
    return (g + r) >> 8;
}

// quant_enc is what every row of one quant(b) encode shares.
typedef struct {
    int cols, b, full;
    int64_t cb, stride;
    float n, smax;
    __m256i shlo, shhi, wb, ww;
    __m128i pick;
    __m256 n256;
    draw_keys ks;
} quant_enc;

AVX2 static void quant_enc_init(quant_enc* q, int cols, int b, uint32_t k0, uint32_t k1) {
    q->cols = cols, q->b = b, q->full = cols / 8;
    q->n = (float)((1 << b) - 1), q->smax = quant_smax(q->n);
    q->cb = ((int64_t)cols * b + 7) / 8, q->stride = QUANT_HEADER + q->cb;
    q->shlo = _mm256_setr_epi64x(0, b, 2 * b, 3 * b), q->shhi = _mm256_setr_epi64x(4 * b, 5 * b, 6 * b, 7 * b);
    // pack32's weights and byte pick (b = 2..4)
    q->wb = _mm256_set1_epi16((short)(1 | (1 << b) << 8));
    q->ww = _mm256_set1_epi32((int)(1 | (1u << 2 * b) << 16));
    int8_t m[16];
    for (int k = 0; k < 16; k++) m[k] = k < 4 * b ? (int8_t)(4 * (k / b) + k % b) : (int8_t)0x80;
    q->pick = _mm_loadu_si128((const __m128i*)m);
    q->n256 = _mm256_set1_ps(256 * q->n);
    draw_keys_init(&q->ks, k0, k1, narrow_blocks(cols));
}

// quant_encode_body writes row i (x, q->cols values, on grid g) of the
// payload at out, and when qb is not NULL each value's code, one byte
// each, at qb (the residual sender's update reads them there instead of
// unpacking the payload).
AVX2 static inline __attribute__((always_inline)) void quant_encode_body(const quant_enc* q, uint8_t* out, const float* x, uint32_t i, quant_row g,
                                                                         const __m128i* pre, uint8_t* qb) {
    const int cols = q->cols, b = q->b, full = q->full;
    const int64_t cb = q->cb;
    const float n = q->n;
    const __m256i shlo = q->shlo, shhi = q->shhi;
    const __m256 n256 = q->n256;
    const draw_keys* ks = &q->ks;
    {
        const float lo = g.origin, scale = g.scale, inv = g.inv;
        const int k = g.k;
        const uint16_t s16 = (uint16_t)(f2u(scale) >> 16);
        memcpy(out, &s16, 2);
        out[2] = (uint8_t)(int8_t)k;
        uint8_t* codes = out + QUANT_HEADER;
        const __m256 lov = _mm256_set1_ps(lo), inv256 = _mm256_set1_ps(256 * inv);
        for (int jb = 0; jb < cols; jb += 128) { // 16 groups, 8 blocks
            __m128i dm[8];
            const __m128i* d = pre;
            if (!d) draw_blocks((uint32_t)(jb / 16), i, ks, dm), d = dm;
            const int g0 = jb / 8;
            // Whole groups first, 4 at a time where the packing takes them,
            // then the generic loop.
            int gl = 0;
            const int by4 = b <= 4 || b == 8;
            for (; by4 && gl + 4 <= 16 && g0 + gl + 4 <= full; gl += 4) { // 4 groups at once
                const __m256i c = code_bytes32(x + 8 * (g0 + gl), d[gl / 2], d[gl / 2 + 1], lov, inv256, n256);
                uint8_t* o = codes + (int64_t)(g0 + gl) * b;
                if (qb) _mm256_storeu_si256((__m256i*)(qb + 8 * (g0 + gl)), in_order(c));
                if (b == 1) {
                    const uint32_t bits = (uint32_t)_mm256_movemask_epi8(_mm256_slli_epi16(in_order(c), 7));
                    memcpy(o, &bits, 4);
                } else if (b == 8) {
                    _mm256_storeu_si256((__m256i*)o, in_order(c));
                } else {
                    const __m128i w = pack32(c, b, q->wb, q->ww, q->pick);
                    if (b == 4) {
                        _mm_storeu_si128((__m128i*)o, w);
                    } else { // 8 or 12 bytes, in fixed-size stores
                        _mm_storel_epi64((__m128i*)o, w);
                        if (b == 3) {
                            const uint32_t t = (uint32_t)_mm_extract_epi32(w, 2);
                            memcpy(o + 8, &t, 4);
                        }
                    }
                }
            }
            for (; gl < 16 && 8 * (g0 + gl) < cols; gl++) {
                const int g = g0 + gl;
                if (g < full) {
                    const __m256i c = codes8(_mm256_loadu_ps(x + 8 * g), draws8(d[gl / 2], gl % 2), lov, inv256, n256);
                    const __m128i p = _mm_packus_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
                    const __m128i bytes = _mm_packus_epi16(p, p); // the 8 codes, a byte each
                    if (qb) _mm_storel_epi64((__m128i*)(qb + 8 * g), bytes);
                    if (b == 1) {
                        codes[g] = (uint8_t)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_slli_epi32(c, 31)));
                        continue;
                    }
                    const uint64_t w = b == 8 ? (uint64_t)_mm_cvtsi128_si64(bytes) : pack8(c, shlo, shhi);
                    if ((int64_t)g * b + 8 <= cb)
                        memcpy(codes + (int64_t)g * b, &w, 8); // the next group overwrites the excess
                    else
                        memcpy(codes + (int64_t)g * b, &w, (size_t)b);
                } else { // the last, partial group
                    uint8_t r[16];
                    memcpy(r, &d[gl / 2], 16);
                    uint64_t w = 0;
                    const int cnt = cols - 8 * g;
                    for (int t = 0; t < cnt; t++) {
                        const uint32_t c = code1(x[8 * g + t], lo, 256 * inv, 256 * n, r[8 * (gl % 2) + t]);
                        if (qb) qb[8 * g + t] = (uint8_t)c;
                        w |= (uint64_t)c << (t * b);
                    }
                    memcpy(codes + (int64_t)g * b, &w, (size_t)((cnt * b + 7) / 8));
                }
            }
        }
    }
}

// quant_encode_row is quant_encode_body on the grid of the row's min and
// max (mn, mx as row_minmax finds them), for rows coded one at a time.
AVX2 static inline __attribute__((always_inline)) void quant_encode_row(const quant_enc* q, uint8_t* out, const float* x, uint32_t i, float mn, float mx,
                                                                        const __m128i* pre, uint8_t* qb) {
    quant_row g;
    g.origin = quant_params(mn, mx, q->n, q->smax, &g.scale, &g.inv, &g.k);
    quant_encode_body(q, out, x, i, g, pre, qb);
}

// quant_encode_rows codes the rows 8 at a time: their mins and maxes, their
// grids at once (quant_params8), then their codes. Payload row i is row
// idx[i] of src, or row i where idx is NULL.
AVX2 static inline __attribute__((always_inline)) void quant_encode_rows(uint8_t* dst, const float* src, const int32_t* idx, int64_t rows,
                                                                         int cols, int b, uint32_t k0, uint32_t k1) {
    quant_enc q;
    quant_enc_init(&q, cols, b, k0, k1);
    const int bpr = narrow_blocks(cols);
    __m128i d[8];
    for (int64_t i0 = 0; i0 < rows; i0 += 8) {
        const int m = rows - i0 < 8 ? (int)(rows - i0) : 8;
        const float* x[8];
        float mn[8], mx[8];
        for (int r = 0; r < m; r++) {
            x[r] = src + (idx ? (int64_t)idx[i0 + r] : i0 + r) * cols;
            row_minmax(x[r], cols, &mn[r], &mx[r]);
        }
        for (int r = m; r < 8; r++) mn[r] = mx[r] = 0;
        quant_row g[8];
        quant_params8(mn, mx, q.n, q.smax, g);
        for (int r = 0; r < m; r++) {
            const int64_t i = i0 + r;
            quant_encode_body(&q, dst + i * q.stride, x[r], (uint32_t)i, g[r], row_draws(i, bpr, &q.ks, d), NULL);
        }
    }
}

AVX2 void gnn_quant_encode(uint8_t* dst, const float* src, int64_t rows, int cols, int b, uint32_t k0, uint32_t k1) {
    quant_encode_rows(dst, src, NULL, rows, cols, b, k0, k1);
}

// gnn_quant_encode_gather codes rows idx[0..rows) of src, as
// gnn_quant_encode codes them gathered: no copy of the rows first.
AVX2 void gnn_quant_encode_gather(uint8_t* dst, const float* src, const int32_t* idx, int64_t rows, int cols, int b, uint32_t k0,
                                  uint32_t k1) {
    quant_encode_rows(dst, src, idx, rows, cols, b, k0, k1);
}

// to_bf16 is the reference's toBF16, one value.
static inline uint16_t to_bf16(uint32_t w, uint32_t r) {
    const uint32_t a = w & 0x7fffffffu;
    if (a >= 0x7f800000u) return (uint16_t)(a > 0x7f800000u ? (w >> 16) | 0x0040u : w >> 16);
    uint32_t o = (w + r) >> 16;
    if ((o & 0x7fffu) == 0x7f80u) o--;
    return (uint16_t)o;
}

// bf16x8 is to_bf16 on 8 values with their draws r (added as 256r+128).
AVX2 static inline __m128i bf16x8(__m256i w, __m256i r) {
    const __m256i a = _mm256_and_si256(w, _mm256_set1_epi32(0x7fffffff));
    const __m256i add = _mm256_or_si256(_mm256_slli_epi32(r, 8), _mm256_set1_epi32(0x80));
    __m256i o = _mm256_srli_epi32(_mm256_add_epi32(w, add), 16);
    // Below 0x7f7f0000 in magnitude no carry reaches Inf and nothing is
    // special: the common case ends here.
    const __m256i big = _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7f7effff));
    if (_mm256_testz_si256(big, big)) {
        const __m256i p = _mm256_packus_epi32(o, o);
        return _mm256_castsi256_si128(_mm256_permute4x64_epi64(p, 0x08));
    }
    const __m256i special = _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7f7fffff)); // Inf or NaN
    const __m256i nan = _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7f800000));
    const __m256i carried = _mm256_cmpeq_epi32(_mm256_and_si256(o, _mm256_set1_epi32(0x7fff)), _mm256_set1_epi32(0x7f80));
    o = _mm256_add_epi32(o, carried); // -1 where the carry reached Inf
    __m256i sp = _mm256_srli_epi32(w, 16);
    sp = _mm256_or_si256(sp, _mm256_and_si256(nan, _mm256_set1_epi32(0x0040)));
    o = _mm256_blendv_epi8(o, sp, special);
    const __m256i p = _mm256_packus_epi32(o, o); // lanes: 0-3 0-3 | 4-7 4-7
    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(p, 0x08));
}

AVX2 void gnn_bf16_encode(uint16_t* dst, const float* src, int64_t rows, int cols, uint32_t k0, uint32_t k1) {
    const int full = cols / 8;
    draw_keys ks;
    draw_keys_init(&ks, k0, k1, 0);
    for (int64_t i = 0; i < rows; i++) {
        const float* x = src + i * cols;
        uint16_t* out = dst + i * cols;
        for (int jb = 0; jb < cols; jb += 128) {
            __m128i d[8];
            draw_blocks((uint32_t)(jb / 16), (uint32_t)i, &ks, d);
            const int g0 = jb / 8;
            for (int gl = 0; gl < 16 && 8 * (g0 + gl) < cols; gl++) {
                const int g = g0 + gl;
                if (g < full) {
                    _mm_storeu_si128((__m128i*)(out + 8 * g),
                                     bf16x8(_mm256_loadu_si256((const __m256i*)(x + 8 * g)), draws8(d[gl / 2], gl % 2)));
                } else {
                    uint8_t r[16];
                    memcpy(r, &d[gl / 2], 16);
                    for (int t = 0; t < cols - 8 * g; t++)
                        out[8 * g + t] = to_bf16(f2u(x[8 * g + t]), (uint32_t)r[8 * (gl % 2) + t] << 8 | 0x80);
                }
            }
        }
    }
}

// Decoders: x^ = lo + (float(q) * scale), the product rounded first.

// quant_decode_row decodes the payload row at in (left bytes readable from
// there on: whole 4- and 8-byte loads stay inside) into y, or with acc adds
// it into y (y + the decoded value, as DecodeAdd's ref += decoded).
AVX2 static inline __attribute__((always_inline)) void quant_decode_row(float* y, const uint8_t* in, int64_t left, int cols, int b, int acc) {
    const int full = cols / 8;
    const __m256i shlo = _mm256_setr_epi64x(0, b, 2 * b, 3 * b), shhi = _mm256_setr_epi64x(4 * b, 5 * b, 6 * b, 7 * b);
    const __m256i mask = _mm256_set1_epi64x((1 << b) - 1);
    const __m256i even = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    // b <= 4: a group's 8 codes fit in a dword, shifted apart per lane
    const __m256i sh32 = _mm256_mullo_epi32(_mm256_set1_epi32(b), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const __m256i mask32 = _mm256_set1_epi32((1 << b) - 1);
    float scale;
    const float lo = quant_header(in, (float)((1 << b) - 1), &scale);
    const uint8_t* codes = in + QUANT_HEADER;
    const __m256 lov = _mm256_set1_ps(lo), sv = _mm256_set1_ps(scale);
    int g = 0;
    for (; g < full; g++) {
        __m256i q;
        if (b <= 4) {
            uint32_t w = 0;
            if (QUANT_HEADER + (int64_t)g * b + 4 <= left)
                memcpy(&w, codes + (int64_t)g * b, 4);
            else
                memcpy(&w, codes + (int64_t)g * b, (size_t)b);
            q = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)w), sh32), mask32);
        } else {
            uint64_t w = 0;
            if (QUANT_HEADER + (int64_t)g * b + 8 <= left)
                memcpy(&w, codes + (int64_t)g * b, 8);
            else
                memcpy(&w, codes + (int64_t)g * b, (size_t)b);
            const __m256i wv = _mm256_set1_epi64x((long long)w);
            const __m256i a = _mm256_and_si256(_mm256_srlv_epi64(wv, shlo), mask);
            const __m256i h = _mm256_and_si256(_mm256_srlv_epi64(wv, shhi), mask);
            // the low dwords of a and h, in order
            q = _mm256_permutevar8x32_epi32(_mm256_blend_epi32(a, _mm256_slli_epi64(h, 32), 0xAA), even);
        }
        __m256 v = _mm256_add_ps(lov, _mm256_mul_ps(_mm256_cvtepi32_ps(q), sv));
        if (acc) v = _mm256_add_ps(_mm256_loadu_ps(y + 8 * g), v);
        _mm256_storeu_ps(y + 8 * g, v);
    }
    for (int j = 8 * g; j < cols; j++) {
        const int64_t bit = (int64_t)j * b;
        uint32_t w = codes[bit >> 3];
        if ((int)(bit & 7) + b > 8) w |= (uint32_t)codes[(bit >> 3) + 1] << 8;
        const uint32_t q = (w >> (bit & 7)) & ((1u << b) - 1u);
        const float v = lo + ((float)q * scale);
        y[j] = acc ? y[j] + v : v;
    }
}

AVX2 void gnn_quant_decode(float* dst, const uint8_t* src, int64_t rows, int cols, int b, int64_t srclen) {
    const int64_t stride = QUANT_HEADER + ((int64_t)cols * b + 7) / 8;
    for (int64_t i = 0; i < rows; i++) quant_decode_row(dst + i * cols, src + i * stride, srclen - i * stride, cols, b, 0);
}

AVX2 void gnn_bf16_decode(float* dst, const uint16_t* src, int64_t n) {
    int64_t k = 0;
    for (; k + 8 <= n; k += 8) {
        const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)(src + k)));
        _mm256_storeu_si256((__m256i*)(dst + k), _mm256_slli_epi32(v, 16));
    }
    for (; k < n; k++) {
        const uint32_t w = (uint32_t)src[k] << 16;
        memcpy(dst + k, &w, 4);
    }
}

// sq_lanes are SqDiff's 8 lanes of sums of (x - x^)^2 (e) and of x^2 (n):
// e0 and n0 hold columns 0-3 mod 8, e1 and n1 columns 4-7.
typedef struct {
    __m256d e0, e1, n0, n1;
} sq_lanes;

// sq_row adds row x against its decoded y (cols values) into the lanes.
// The squares are rounded before they are added (no contraction in ISO C).
AVX2 static inline __attribute__((always_inline)) void sq_row(sq_lanes* a, const float* x, const float* y, int cols) {
    __m256d e0 = a->e0, e1 = a->e1, n0 = a->n0, n1 = a->n1;
    int j = 0;
    for (; j + 8 <= cols; j += 8) {
        const __m256 xv = _mm256_loadu_ps(x + j), yv = _mm256_loadu_ps(y + j);
        const __m256d xl = _mm256_cvtps_pd(_mm256_castps256_ps128(xv)), xh = _mm256_cvtps_pd(_mm256_extractf128_ps(xv, 1));
        const __m256d dl = _mm256_sub_pd(xl, _mm256_cvtps_pd(_mm256_castps256_ps128(yv)));
        const __m256d dh = _mm256_sub_pd(xh, _mm256_cvtps_pd(_mm256_extractf128_ps(yv, 1)));
        e0 = _mm256_add_pd(e0, _mm256_mul_pd(dl, dl));
        e1 = _mm256_add_pd(e1, _mm256_mul_pd(dh, dh));
        n0 = _mm256_add_pd(n0, _mm256_mul_pd(xl, xl));
        n1 = _mm256_add_pd(n1, _mm256_mul_pd(xh, xh));
    }
    if (j < cols) { // the row's tail: lanes 0 .. cols%8-1, in the same order
        double ev[8], nv[8];
        _mm256_storeu_pd(ev, e0), _mm256_storeu_pd(ev + 4, e1);
        _mm256_storeu_pd(nv, n0), _mm256_storeu_pd(nv + 4, n1);
        for (int t = 0; j < cols; j++, t++) {
            const double v = (double)x[j], d = v - (double)y[j];
            const double dd = d * d, vv = v * v;
            ev[t] += dd;
            nv[t] += vv;
        }
        e0 = _mm256_loadu_pd(ev), e1 = _mm256_loadu_pd(ev + 4);
        n0 = _mm256_loadu_pd(nv), n1 = _mm256_loadu_pd(nv + 4);
    }
    a->e0 = e0, a->e1 = e1, a->n0 = n0, a->n1 = n1;
}

// sq_sum adds the lanes in order into out.
AVX2 static void sq_sum(const sq_lanes* a, double out[2]) {
    double et[8], nt[8];
    _mm256_storeu_pd(et, a->e0), _mm256_storeu_pd(et + 4, a->e1);
    _mm256_storeu_pd(nt, a->n0), _mm256_storeu_pd(nt + 4, a->n1);
    out[0] = out[1] = 0;
    for (int t = 0; t < 8; t++) {
        out[0] += et[t];
        out[1] += nt[t];
    }
}

// gnn_sq_diff is SqDiff (codec.go): over rows idx[k] of src against rows
// k of dec (cols values each), the sums of (x - x^)^2 and x^2 in 8 lanes
// by column mod 8, each lane in row order, then the lanes in order.
AVX2 void gnn_sq_diff(const float* src, const int32_t* idx, int64_t rows, int cols, const float* dec, double out[2]) {
    sq_lanes a = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
    for (int64_t k = 0; k < rows; k++) sq_row(&a, src + (int64_t)idx[k] * cols, dec + k * cols, cols);
    sq_sum(&a, out);
}

// magnitude is |x|'s bits: for every float32 they order as the magnitudes
// do, with infinities above every finite value and NaNs above them.
static inline uint32_t magnitude(float x) { return f2u(x) & 0x7fffffffu; }

// delta_sub writes d = x - s (cols values) and returns the largest
// magnitudes (as bits) of d and of x, and d's min and max as row_minmax
// finds them.
AVX2 static inline __attribute__((always_inline)) void delta_sub(float* d, const float* x, const float* s, int cols,
                                                                 uint32_t* mdp, uint32_t* mmp, float* lop, float* hip) {
    const __m256i abs = _mm256_set1_epi32(0x7fffffff);
    __m256i md8 = _mm256_setzero_si256(), mm8 = md8;
    __m256 lo8 = _mm256_set1_ps(INFINITY), hi8 = _mm256_set1_ps(-INFINITY);
    int j = 0;
    for (; j + 8 <= cols; j += 8) {
        const __m256 xv = _mm256_loadu_ps(x + j);
        const __m256 v = _mm256_sub_ps(xv, _mm256_loadu_ps(s + j));
        _mm256_storeu_ps(d + j, v);
        md8 = _mm256_max_epu32(md8, _mm256_and_si256(_mm256_castps_si256(v), abs));
        mm8 = _mm256_max_epu32(mm8, _mm256_and_si256(_mm256_castps_si256(xv), abs));
        lo8 = _mm256_min_ps(v, lo8), hi8 = _mm256_max_ps(v, hi8); // a NaN v loses
    }
    uint32_t mdv[8], mmv[8];
    float l[8], h[8];
    _mm256_storeu_si256((__m256i*)mdv, md8), _mm256_storeu_si256((__m256i*)mmv, mm8);
    _mm256_storeu_ps(l, lo8), _mm256_storeu_ps(h, hi8);
    uint32_t md = 0, mm = 0;
    float lo = INFINITY, hi = -INFINITY;
    for (int t = 0; t < 8; t++) {
        md = mdv[t] > md ? mdv[t] : md;
        mm = mmv[t] > mm ? mmv[t] : mm;
        if (l[t] < lo) lo = l[t];
        if (h[t] > hi) hi = h[t];
    }
    for (; j < cols; j++) {
        const float v = x[j] - s[j];
        d[j] = v;
        const uint32_t dv = magnitude(v), xv = magnitude(x[j]);
        md = dv > md ? dv : md;
        mm = xv > mm ? xv : mm;
        if (v < lo) lo = v;
        if (v > hi) hi = v;
    }
    *mdp = md, *mmp = mm, *lop = lo, *hip = hi;
}

// delta_update adds the row's decoded values (its codes at qb, one byte
// each, on the grid of the payload row's header at in) into s, and the row
// x against the new s into the lanes: the decode, the add and sq_row in
// one pass.
AVX2 static inline __attribute__((always_inline)) void delta_update(float* s, const float* x, const uint8_t* in, const uint8_t* qb, int cols, int b, sq_lanes* a) {
    const int full = cols / 8;
    float scale;
    const float lo = quant_header(in, (float)((1 << b) - 1), &scale);
    const __m256 lov = _mm256_set1_ps(lo), sv = _mm256_set1_ps(scale);
    __m256d e0 = a->e0, e1 = a->e1, n0 = a->n0, n1 = a->n1;
    int g = 0;
    for (; g < full; g++) {
        const __m256i q = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)(qb + 8 * g)));
        const __m256 r = _mm256_add_ps(lov, _mm256_mul_ps(_mm256_cvtepi32_ps(q), sv));
        const __m256 yv = _mm256_add_ps(_mm256_loadu_ps(s + 8 * g), r);
        _mm256_storeu_ps(s + 8 * g, yv);
        const __m256 xv = _mm256_loadu_ps(x + 8 * g);
        const __m256d xl = _mm256_cvtps_pd(_mm256_castps256_ps128(xv)), xh = _mm256_cvtps_pd(_mm256_extractf128_ps(xv, 1));
        const __m256d dl = _mm256_sub_pd(xl, _mm256_cvtps_pd(_mm256_castps256_ps128(yv)));
        const __m256d dh = _mm256_sub_pd(xh, _mm256_cvtps_pd(_mm256_extractf128_ps(yv, 1)));
        e0 = _mm256_add_pd(e0, _mm256_mul_pd(dl, dl));
        e1 = _mm256_add_pd(e1, _mm256_mul_pd(dh, dh));
        n0 = _mm256_add_pd(n0, _mm256_mul_pd(xl, xl));
        n1 = _mm256_add_pd(n1, _mm256_mul_pd(xh, xh));
    }
    if (8 * g < cols) { // the row's tail: lanes 0 .. cols%8-1, as in sq_row
        double ev[8], nv[8];
        _mm256_storeu_pd(ev, e0), _mm256_storeu_pd(ev + 4, e1);
        _mm256_storeu_pd(nv, n0), _mm256_storeu_pd(nv + 4, n1);
        for (int j = 8 * g, t = 0; j < cols; j++, t++) {
            const uint32_t q = qb[j];
            s[j] += lo + ((float)q * scale);
            const double v = (double)x[j], dd = v - (double)s[j];
            const double e = dd * dd, vv = v * v;
            ev[t] += e;
            nv[t] += vv;
        }
        e0 = _mm256_loadu_pd(ev), e1 = _mm256_loadu_pd(ev + 4);
        n0 = _mm256_loadu_pd(nv), n1 = _mm256_loadu_pd(nv + 4);
    }
    a->e0 = e0, a->e1 = e1, a->n0 = n0, a->n1 = n1;
}

// DELTA_AHEAD is how many rows ahead the fused kernels ask for the rows
// they will gather or scatter into (m and the reference in DeltaEncode,
// the target and out rows in DecodeAdd): a row's first loads stalled on
// memory without it (BenchmarkResidualExchange in comm/halo).
#define DELTA_AHEAD 4

// prefetch_rows asks for every cache line of the cols values at x and,
// where s is not NULL, at s.
static inline void prefetch_rows(const float* x, const float* s, int cols) {
    for (int j = 0; j < cols; j += 16) __builtin_prefetch(x + j);
    __builtin_prefetch(x + cols - 1);
    if (!s) return;
    for (int j = 0; j < cols; j += 16) __builtin_prefetch(s + j);
    __builtin_prefetch(s + cols - 1);
}

// delta_forced reports whether the refresh forces the row at cycle = (k +
// phase) % every to go, and steps cycle to the next row's.
static inline int delta_forced(int every, int* cycle) {
    const int forced = every > 0 && *cycle == 0;
    if (every > 0 && ++*cycle == every) *cycle = 0;
    return forced;
}

// delta_keeps is Skip.Keeps's test on a row's largest magnitudes (float32
// bits without the sign): the residual's md and the row's mm.
static inline int delta_keeps(uint32_t md, uint32_t mm, float tau, float skip_floor) {
    return md > 0x7f7fffffu || (u2f(md) > tau * u2f(mm) && u2f(md) > skip_floor);
}

// gnn_quant_delta_encode is DeltaEncode (delta.go) for quant(b), b < 16, in
// one pass over each row: the difference d from the reference row, the
// skip test (Skip.Keeps: tau, floor, and row k forced where (k + phase) % every
// == 0), the code of d, its decoded value added into the reference,
// and the error of the new reference. buf holds cols floats and cols
// bytes (DeltaScratch).
AVX2 void gnn_quant_delta_encode(uint8_t* dst, const float* m, const int32_t* idx, int64_t rows, int cols, int b,
                                 uint32_t k0, uint32_t k1, float* ref, float tau, float skip_floor, int every, int phase, uint8_t* bitmap, float* buf,
                                 int64_t* kept, double out[2]) {
    quant_enc q;
    quant_enc_init(&q, cols, b, k0, k1);
    sq_lanes a = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
    int64_t n = 0;
    const int bpr = narrow_blocks(cols); // the blocks of payload rows n, n+1, ... (kept rows)
    __m128i d[8];
    uint8_t* qb = (uint8_t*)(buf + cols); // a kept row's codes, one byte each, from the encoder to the update
    int cycle = phase;                    // (k + phase) % every
    for (int64_t k = 0; k < rows; k++) {
        const int forced = delta_forced(every, &cycle);
        const float* x = m + (int64_t)idx[k] * cols;
        float* s = ref + k * cols;
        if (k + DELTA_AHEAD < rows) prefetch_rows(m + (int64_t)idx[k + DELTA_AHEAD] * cols, s + DELTA_AHEAD * cols, cols);
        uint32_t md, mm;
        float lo, hi;
        delta_sub(buf, x, s, cols, &md, &mm, &lo, &hi);
        if (bitmap && !forced && !delta_keeps(md, mm, tau, skip_floor)) {
            sq_row(&a, x, s, cols);
            continue;
        }
        if (bitmap) bitmap[k >> 3] |= (uint8_t)(1u << (k & 7));
        uint8_t* o = dst + n * q.stride;
        quant_encode_row(&q, o, buf, (uint32_t)n, lo, hi, row_draws(n, bpr, &q.ks, d), qb);
        delta_update(s, x, o, qb, cols, b, &a);
        n++;
    }
    *kept = n;
    sq_sum(&a, out);
}

// gnn_quant_decode_add is DecodeAdd (delta.go) for quant(b), b < 16: ref
// row rows[k] += the decoded payload row k, copied into out's row too
// where out is not NULL.
AVX2 void gnn_quant_decode_add(float* ref, const int32_t* rowsIdx, int64_t rows, const uint8_t* src, int64_t srclen, int cols, int b, float* out) {
    const int64_t stride = QUANT_HEADER + ((int64_t)cols * b + 7) / 8;
    for (int64_t k = 0; k < rows; k++) {
        const int64_t at = (int64_t)rowsIdx[k] * cols;
        if (k + DELTA_AHEAD < rows) {
            const int64_t next = (int64_t)rowsIdx[k + DELTA_AHEAD] * cols;
            prefetch_rows(ref + next, out ? out + next : NULL, cols);
        }
        quant_decode_row(ref + at, src + k * stride, srclen - k * stride, cols, b, 1);
        if (out) memcpy(out + at, ref + at, 4 * (size_t)cols); // from L1
    }
}

// The ternary code (tern.go): per row s, its largest non-NaN magnitude
// rounded up to a bf16 and capped at the largest finite one, then each
// value's code t = 2 where x * (1/s) + u >= 1/2, 0 where that is below
// -1/2, else 1 (NaN too), with the dither u = (r - 128)/256 + 1/512 =
// (2r - 255)/512 of its draw r, five codes to a byte, t0 + 3 t1 + 9 t2 +
// 27 t3 + 81 t4; decoded ((t - 1) - u) * s = ((512 t - 2 r - 257) / 512) * s
// (the quotient is exact, as the reference's subtraction is). A payload's
// rows share one key, which the Go side writes at its head; row i of a
// call draws as row first + i. The encoder goes 40 columns (5 vectors, 8
// code bytes) at a time, in registers: it weighs each code by its power
// of 3 and sums each byte's five (shuffle, psadbw). The decoder goes 16
// columns at a time in 16-bit lanes: it spreads the bytes over their
// five lanes each and takes digit k of byte v as floor(3 frac(v /
// 3^(k+1))), a 16-bit multiply's low half, then another's high half.

#define TERN_KEY 8
#define TERN_HEADER 2

static inline int64_t tern_stride(int cols) { return TERN_HEADER + ((int64_t)cols + 4) / 5; }

// tern_scale is the reference's ternScale: s for a row whose largest
// non-NaN magnitude is m.
static inline float tern_scale(float m) {
    const float s = bf16_up(m), top = u2f(0x7f7f0000u);
    return s < top ? s : top;
}

// tern_neg_codes8 is -t, t the codes of 8 values x with their draws r, as
// int32 lanes: the masks v >= 1/2 and !(v < -1/2) (true for NaN) added,
// v = x * inv + u. u = (1 + r/256) - (1 + 255/512), the first term made
// from its bits: both terms and their difference exact.
AVX2 static inline __m256i tern_neg_codes8(__m256 x, __m256i r, __m256 inv, __m256* up) {
    const __m256 one_r = _mm256_castsi256_ps(_mm256_or_si256(_mm256_slli_epi32(r, 15), _mm256_set1_epi32(0x3f800000)));
    const __m256 u = _mm256_sub_ps(one_r, _mm256_set1_ps(1.498046875f));
    const __m256 v = _mm256_add_ps(_mm256_mul_ps(x, inv), u);
    *up = u;
    return _mm256_add_epi32(_mm256_castps_si256(_mm256_cmp_ps(v, _mm256_set1_ps(0.5f), _CMP_GE_OQ)),
                            _mm256_castps_si256(_mm256_cmp_ps(v, _mm256_set1_ps(-0.5f), _CMP_NLT_UQ)));
}

// tern_decoded8 is the decoded values ((t - 1) - u) * s of 8 codes, given
// as -t (nt), with their dithers u: the difference exact, as the
// reference's.
AVX2 static inline __m256 tern_decoded8(__m256i nt, __m256 u, __m256 s) {
    const __m256 d = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_set1_epi32(-1), nt)); // t - 1
    return _mm256_mul_ps(_mm256_sub_ps(d, u), s);
}

// tern_ctx is what the rows of one call share: the draws' keys; for the
// encoder, vector h (columns 8h .. 8h+7) of a block of 40 columns, lane l
// being column 8h + l: its weight 3^k, k = (8h+l)%5, negated (the lanes
// hold -t), in the low 16 bits; for the decoder, 16 columns 16m ..
// 16m+15 whose code bytes are read from byte floor(16m/5) on, column
// 16m + w (a 16-bit lane) being digit k = (p+w)%5 of byte (p+w)/5 there,
// p = 16m%5 = m%5: the byte shuffle of that p and the multipliers
// ceil(2^16 / 3^(k+1)).
typedef struct {
    draw_keys ks;
    int bpr;
    __m256i negw[5], shuf[5], mul[5];
} tern_ctx;

AVX2 static void tern_ctx_init(tern_ctx* c, int cols, uint32_t k0, uint32_t k1) {
    static const uint16_t mul[5] = {21846, 7282, 2428, 810, 270}, pow3[5] = {1, 3, 9, 27, 81};
    c->bpr = narrow_blocks(cols);
    draw_keys_init(&c->ks, k0, k1, c->bpr);
    for (int h = 0; h < 5; h++) {
        uint32_t nw[8];
        uint16_t sh[16], mu[16];
        for (int l = 0; l < 8; l++) nw[l] = (0x10000u - pow3[(8 * h + l) % 5]) & 0xffffu;
        for (int w = 0; w < 16; w++) { // lanes 8..15 are the upper 128 bits: their bytes from that half's copy
            sh[w] = (uint16_t)(0x8000u | (uint32_t)((h + w) / 5));
            mu[w] = mul[(h + w) % 5];
        }
        c->negw[h] = _mm256_loadu_si256((const __m256i*)nw);
        c->shuf[h] = _mm256_loadu_si256((const __m256i*)sh);
        c->mul[h] = _mm256_loadu_si256((const __m256i*)mu);
    }
}

// tern_join40 is the 8 code bytes of a block of 40 columns from its 5
// vectors of weighted codes w (t 3^k, int32 lanes, columns in order):
// the 40 bytes in order (x0, x1, x2), cut into 8-byte slots of 5 (two
// 16-byte windows a vector, at columns 0, 10 and 20, 30), each slot
// summed by psadbw, and the 8 sums put in order.
AVX2 static inline uint64_t tern_join40(const __m256i w[5]) {
    const __m256i y = in_order(_mm256_packus_epi16(_mm256_packs_epi32(w[0], w[1]), _mm256_packs_epi32(w[2], w[3])));
    const __m128i p4 = _mm_packs_epi32(_mm256_castsi256_si128(w[4]), _mm256_extracti128_si256(w[4], 1));
    const __m128i x0 = _mm256_castsi256_si128(y), x1 = _mm256_extracti128_si256(y, 1), x2 = _mm_packus_epi16(p4, p4);
    const __m256i p = _mm256_inserti128_si256(_mm256_castsi128_si256(x0), _mm_alignr_epi8(x1, x0, 10), 1);                     // columns 0.., 10..
    const __m256i q = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_alignr_epi8(x2, x1, 4)), _mm_alignr_epi8(x2, x1, 14), 1); // 20.., 30..
    const __m256i slots = _mm256_setr_epi8(0, 1, 2, 3, 4, -1, -1, -1, 5, 6, 7, 8, 9, -1, -1, -1, 0, 1, 2, 3, 4, -1, -1, -1, 5, 6, 7, 8, 9, -1, -1, -1);
    const __m256i sp = _mm256_sad_epu8(_mm256_shuffle_epi8(p, slots), _mm256_setzero_si256()); // qwords: bytes 0, 1 | 2, 3
    const __m256i sq = _mm256_sad_epu8(_mm256_shuffle_epi8(q, slots), _mm256_setzero_si256()); // 4, 5 | 6, 7
    const __m256i r = _mm256_or_si256(sp, _mm256_slli_epi64(sq, 32));                           // dwords: 0 4 1 5 | 2 6 3 7
    const __m256i pick = _mm256_setr_epi8(0, 8, -1, -1, 4, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 8, -1, -1, 4, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m256i z = _mm256_shuffle_epi8(r, pick); // bytes 0 1 _ _ 4 5 | 2 3 _ _ 6 7
    return (uint64_t)_mm_cvtsi128_si64(_mm_or_si128(_mm256_castsi256_si128(z), _mm_slli_epi64(_mm256_extracti128_si256(z, 1), 16)));
}

// tern_row_max is the reference's M: the largest magnitude among the row's
// non-NaN values, 0 if none.
AVX2 static inline __attribute__((always_inline)) float tern_row_max(const float* x, int cols) {
    const __m256 abs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 m0 = _mm256_setzero_ps(), m1 = m0, m2 = m0, m3 = m0;
    int j = 0;
    // max(a, m) is m where a is NaN: a NaN loses
    for (; j + 32 <= cols; j += 32) {
        m0 = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + j), abs), m0);
        m1 = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + j + 8), abs), m1);
        m2 = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + j + 16), abs), m2);
        m3 = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + j + 24), abs), m3);
    }
    for (; j + 8 <= cols; j += 8) m0 = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + j), abs), m0);
    m0 = _mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m0), _mm256_extractf128_ps(m0, 1)); // no NaN here: any order
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    float m = _mm_cvtss_f32(_mm_max_ss(h, _mm_shuffle_ps(h, h, 1)));
    for (; j < cols; j++) {
        const float a = fabsf(x[j]);
        if (a > m) m = a; // NaN is never larger
    }
    return m;
}

// tern_row_draws is row_draws for calls whose row i draws as row first + i.
AVX2 static inline __attribute__((always_inline)) const __m128i* tern_row_draws(int64_t i, int64_t first, int bpr, const draw_keys* ks, __m128i d[8]) {
    if (!bpr) return NULL;
    const int64_t at = i & (8 / bpr - 1);
    if (at == 0) draw_rows((uint32_t)(first + i), ks, d);
    return d + at * bpr;
}

// tern_encode_block codes the block of 40 columns at x (block b of the
// row; columns at or past cols, in its last block, code 0: no value is
// read or written there), returning its 8 code bytes, and where dec is
// not NULL writes each value's decoded value there (which may be x
// itself: each value is read before it is overwritten). d holds the
// row's draws: dm refilled as each pass of 128 columns begins unless pre.
AVX2 static inline __attribute__((always_inline)) uint64_t tern_encode_block(const tern_ctx* c, const float* x, int b, int cols, uint32_t i,
                                                                             const __m128i* pre, __m128i dm[8], __m256 invv, __m256 sv, float* dec,
                                                                             int partial) {
    const __m128i* d = pre ? pre : dm;
    const __m256i zero = _mm256_setzero_si256();
    __m256i w[5];
#pragma GCC unroll 5
    for (int h = 0; h < 5; h++) {
        const int g = 5 * b + h;
        if (partial && 8 * g >= cols) {
            w[h] = zero;
            continue;
        }
        if (!pre && (g & 15) == 0) draw_blocks((uint32_t)(g >> 1), i, &c->ks, dm);
        const __m256i r = draws8(d[(g & 15) >> 1], g & 1);
        __m256 u;
        if (partial && 8 * g + 8 > cols) { // the row's last, partial group
            const __m256i in = _mm256_cmpgt_epi32(_mm256_set1_epi32(cols - 8 * g), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
            const __m256i nt = _mm256_and_si256(in, tern_neg_codes8(_mm256_maskload_ps(x + 8 * g, in), r, invv, &u));
            if (dec) _mm256_maskstore_ps(dec + 8 * g, in, tern_decoded8(nt, u, sv));
            w[h] = _mm256_mullo_epi16(nt, c->negw[h]);
            continue;
        }
        const __m256i nt = tern_neg_codes8(_mm256_loadu_ps(x + 8 * g), r, invv, &u);
        if (dec) _mm256_storeu_ps(dec + 8 * g, tern_decoded8(nt, u, sv));
        w[h] = _mm256_mullo_epi16(nt, c->negw[h]); // t 3^k in the low half; the high half's 0 or -1 times 0
    }
    return tern_join40(w);
}

// tern_encode_body writes row x (cols values whose largest non-NaN
// magnitude is mx) as the payload row at out, drawn as row i (pre: its
// blocks from draw_rows, or NULL for draw_blocks), and where dec is not
// NULL each value's decoded value into dec (which may be x itself).
AVX2 static inline __attribute__((always_inline)) void tern_encode_body(const tern_ctx* c, uint8_t* out, const float* x, int cols, float mx, uint32_t i,
                                                                        const __m128i* pre, float* dec) {
    const float s = tern_scale(mx);
    const uint16_t s16 = (uint16_t)(f2u(s) >> 16);
    memcpy(out, &s16, 2);
    const float inv = s > 0 ? 1.0f / s : 0.0f; // with inv = 0 every code is 1 (|u| < 1/2; Inf * 0 is NaN)
    const __m256 invv = _mm256_set1_ps(inv), sv = _mm256_set1_ps(s);
    uint8_t* codes = out + TERN_HEADER;
    __m128i dm[8];
    const int whole = cols / 40;
    for (int b = 0; b < whole; b++) {
        const uint64_t o = tern_encode_block(c, x, b, cols, i, pre, dm, invv, sv, dec, 0);
        memcpy(codes + 8 * b, &o, 8);
    }
    if (40 * whole < cols) {
        const uint64_t o = tern_encode_block(c, x, whole, cols, i, pre, dm, invv, sv, dec, 1);
        for (int k = 0; 40 * whole + 5 * k < cols; k++) codes[8 * whole + k] = (uint8_t)(o >> (8 * k));
    }
    if (dec && s == 0) memset(dec, 0, 4 * (size_t)cols); // the reference decodes such a row to +0
}

// tern_scaled8 is the decoded values of 8 numerators n (int32 lanes):
// (n / 512) * s, the quotient exact; or, where one (s / 512 exact: s is a
// bf16 of magnitude at least 2^-117, or not finite), n * s512 with s512 =
// s / 512, the same real number rounded once, so the same float.
AVX2 static inline __m256 tern_scaled8(__m256i n, __m256 s, __m256 s512, int one) {
    const __m256 f = _mm256_cvtepi32_ps(n);
    return one ? _mm256_mul_ps(f, s512) : _mm256_mul_ps(_mm256_mul_ps(f, _mm256_set1_ps(1.0f / 512)), s);
}

// tern_one is tern_scaled8's one for s.
static inline int tern_one(float s) { return !(fabsf(s) < 0x1p-117f); }

// tern_group16 is the numerators 512 t - 2 r - 257 of 16 columns 16m ..
// 16m+15 (16-bit lanes), whose code bytes are the 8 in every quadword of
// bytes, from byte floor(16m/5) of the row on, p = m%5, and whose draws
// are the block dr: each lane's code byte (shuffled), above 242 made 121
// (five codes of 1, as the reference decodes such bytes), and its digit
// floor(3 frac(v / 3^(k+1))): a multiply's low 16 bits, then 3 times
// those's high 16 bits.
AVX2 static inline __m256i tern_group16(const tern_ctx* c, __m256i bytes, int p, __m128i dr) {
    __m256i v = _mm256_shuffle_epi8(bytes, c->shuf[p]);
    v = _mm256_blendv_epi8(v, _mm256_set1_epi16(121), _mm256_cmpgt_epi16(v, _mm256_set1_epi16(242)));
    const __m256i t = _mm256_mulhi_epu16(_mm256_mullo_epi16(v, c->mul[p]), _mm256_set1_epi16(3));
    const __m256i r = _mm256_cvtepu8_epi16(dr);
    return _mm256_sub_epi16(_mm256_slli_epi16(t, 9), _mm256_add_epi16(_mm256_add_epi16(r, r), _mm256_set1_epi16(257)));
}

// tern_store16 writes (or with acc adds into y) the decoded values of
// the numerators n of 16 columns at y.
AVX2 static inline __attribute__((always_inline)) void tern_store16(float* y, __m256i n, __m256 sv, __m256 s512, int acc, int one) {
    __m256 lo = tern_scaled8(_mm256_cvtepi16_epi32(_mm256_castsi256_si128(n)), sv, s512, one);
    __m256 hi = tern_scaled8(_mm256_cvtepi16_epi32(_mm256_extracti128_si256(n, 1)), sv, s512, one);
    if (acc) lo = _mm256_add_ps(_mm256_loadu_ps(y), lo), hi = _mm256_add_ps(_mm256_loadu_ps(y + 8), hi);
    _mm256_storeu_ps(y, lo);
    _mm256_storeu_ps(y + 8, hi);
}

// tern_decode_body is tern_decode_row for a row of scale s (not 0): 16
// columns at a time (tern_group16), then 8 at a time in floats. Group m
// reads the 8 bytes from floor(16m/5) on (left: bytes readable at codes;
// the next row's, read near a row's end, go unused); its draws are block
// m of the row, made 8 at a time (a pass of 128 columns) unless pre.
AVX2 static inline __attribute__((always_inline)) void tern_decode_body(const tern_ctx* c, float* y, const uint8_t* codes, int64_t left, int cols,
                                                                        uint32_t i, const __m128i* pre, int acc, float s, int one) {
    const __m256 sv = _mm256_set1_ps(s), s512 = _mm256_set1_ps(s * (1.0f / 512));
    __m128i dm[8];
    const __m128i* d = pre ? pre : dm;
    const int whole = cols / 16;
    int m = 0, p = 0, at = 0; // 16m = 5 at + p
    for (int jb = 0; jb < cols; jb += 128) {
        if (!pre) draw_blocks((uint32_t)(jb >> 4), i, &c->ks, dm);
        const int end = whole < (jb >> 4) + 8 ? whole : (jb >> 4) + 8;
        for (; m < end; m++) {
            __m256i bytes;
            if (at + 8 <= left) {
                bytes = _mm256_broadcastq_epi64(_mm_loadl_epi64((const __m128i*)(codes + at)));
            } else {
                uint64_t w = 0;
                for (int k = 0; at + k < left && k < 8; k++) w |= (uint64_t)codes[at + k] << (8 * k);
                bytes = _mm256_set1_epi64x((long long)w);
            }
            tern_store16(y + 16 * m, tern_group16(c, bytes, p, d[m & 7]), sv, s512, acc, one);
            const int wrap = p == 4;
            at += 3 + wrap, p = wrap ? 0 : p + 1;
        }
    }
    if (16 * whole < cols) { // the last, partial group: its draws are in d already
        uint64_t w = 0;
        for (int k = 0; at + k < left && k < 8; k++) w |= (uint64_t)codes[at + k] << (8 * k);
        float v16[16];
        tern_store16(v16, tern_group16(c, _mm256_set1_epi64x((long long)w), p, d[whole & 7]), sv, s512, 0, one);
        float* yo = y + 16 * whole;
        for (int k = 0; 16 * whole + k < cols; k++) yo[k] = acc ? yo[k] + v16[k] : v16[k];
    }
}

// tern_decode_row decodes the payload row at in (left bytes readable from
// there on; cols values, drawn as row i; pre as in tern_encode_body) into
// y, or with acc adds it into y (y + the decoded value, as DecodeAdd's
// ref += decoded). Bytes above 242 (no digits) become 121, five codes of
// 1, as the reference decodes them.
AVX2 static inline __attribute__((always_inline)) void tern_decode_row(const tern_ctx* c, float* y, const uint8_t* in, int64_t left, int cols,
                                                                       uint32_t i, const __m128i* pre, int acc) {
    uint16_t s16;
    memcpy(&s16, in, 2);
    const float s = u2f((uint32_t)s16 << 16);
    if (s == 0) { // +0 or -0: the row decodes to +0
        if (!acc) {
            memset(y, 0, 4 * (size_t)cols);
            return;
        }
        int j = 0;
        for (; j + 8 <= cols; j += 8) _mm256_storeu_ps(y + j, _mm256_add_ps(_mm256_loadu_ps(y + j), _mm256_setzero_ps()));
        for (; j < cols; j++) y[j] = y[j] + 0.0f;
        return;
    }
    if (tern_one(s))
        tern_decode_body(c, y, in + TERN_HEADER, left - TERN_HEADER, cols, i, pre, acc, s, 1);
    else
        tern_decode_body(c, y, in + TERN_HEADER, left - TERN_HEADER, cols, i, pre, acc, s, 0);
}

// gnn_tern_encode writes rows of cols values (row i of src, or row idx[i]
// where idx is not NULL), drawn as rows first, first + 1, ..., at dst: the
// payload after its key.
AVX2 void gnn_tern_encode(uint8_t* dst, const float* src, const int32_t* idx, int64_t rows, int cols, int64_t first, uint32_t k0, uint32_t k1) {
    tern_ctx c;
    tern_ctx_init(&c, cols, k0, k1);
    const int64_t stride = tern_stride(cols);
    __m128i d[8];
    for (int64_t i = 0; i < rows; i++) {
        const float* x = src + (idx ? (int64_t)idx[i] : i) * cols;
        tern_encode_body(&c, dst + i * stride, x, cols, tern_row_max(x, cols), (uint32_t)(first + i), tern_row_draws(i, first, c.bpr, &c.ks, d), NULL);
    }
}

// gnn_tern_decode decodes rows of cols values, drawn as rows first, first
// + 1, ..., from src (the payload after its key, srclen bytes) into dst.
AVX2 void gnn_tern_decode(float* dst, const uint8_t* src, int64_t srclen, int64_t rows, int cols, int64_t first, uint32_t k0, uint32_t k1) {
    tern_ctx c;
    tern_ctx_init(&c, cols, k0, k1);
    const int64_t stride = tern_stride(cols);
    __m128i d[8];
    for (int64_t i = 0; i < rows; i++)
        tern_decode_row(&c, dst + i * cols, src + i * stride, srclen - i * stride, cols, (uint32_t)(first + i), tern_row_draws(i, first, c.bpr, &c.ks, d), 0);
}

// delta_add adds the decoded row dec into s, and the row x against the new
// s into the lanes (as delta_update does from codes).
AVX2 static inline __attribute__((always_inline)) void delta_add(float* s, const float* x, const float* dec, int cols, sq_lanes* a) {
    __m256d e0 = a->e0, e1 = a->e1, n0 = a->n0, n1 = a->n1;
    int j = 0;
    for (; j + 8 <= cols; j += 8) {
        const __m256 yv = _mm256_add_ps(_mm256_loadu_ps(s + j), _mm256_loadu_ps(dec + j));
        _mm256_storeu_ps(s + j, yv);
        const __m256 xv = _mm256_loadu_ps(x + j);
        const __m256d xl = _mm256_cvtps_pd(_mm256_castps256_ps128(xv)), xh = _mm256_cvtps_pd(_mm256_extractf128_ps(xv, 1));
        const __m256d dl = _mm256_sub_pd(xl, _mm256_cvtps_pd(_mm256_castps256_ps128(yv)));
        const __m256d dh = _mm256_sub_pd(xh, _mm256_cvtps_pd(_mm256_extractf128_ps(yv, 1)));
        e0 = _mm256_add_pd(e0, _mm256_mul_pd(dl, dl));
        e1 = _mm256_add_pd(e1, _mm256_mul_pd(dh, dh));
        n0 = _mm256_add_pd(n0, _mm256_mul_pd(xl, xl));
        n1 = _mm256_add_pd(n1, _mm256_mul_pd(xh, xh));
    }
    if (j < cols) { // the row's tail: lanes 0 .. cols%8-1, as in sq_row
        double ev[8], nv[8];
        _mm256_storeu_pd(ev, e0), _mm256_storeu_pd(ev + 4, e1);
        _mm256_storeu_pd(nv, n0), _mm256_storeu_pd(nv + 4, n1);
        for (int t = 0; j < cols; j++, t++) {
            s[j] += dec[j];
            const double v = (double)x[j], dd = v - (double)s[j];
            const double e = dd * dd, vv = v * v;
            ev[t] += e;
            nv[t] += vv;
        }
        e0 = _mm256_loadu_pd(ev), e1 = _mm256_loadu_pd(ev + 4);
        n0 = _mm256_loadu_pd(nv), n1 = _mm256_loadu_pd(nv + 4);
    }
    a->e0 = e0, a->e1 = e1, a->n0 = n0, a->n1 = n1;
}

// gnn_tern_delta_encode is DeltaEncode (delta.go) for tern, as
// gnn_quant_delta_encode is for quant: the kept rows go at dst (the
// payload after its key), drawn as rows 0, 1, ... in order, and their
// decoded values, made with their codes into buf over the difference,
// go into the reference. buf holds cols floats. The largest non-NaN
// magnitude of a difference is that of its min or its max.
AVX2 void gnn_tern_delta_encode(uint8_t* dst, const float* m, const int32_t* idx, int64_t rows, int cols, uint32_t k0, uint32_t k1, float* ref,
                                float tau, float skip_floor, int every, int phase, uint8_t* bitmap, float* buf, int64_t* kept, double out[2]) {
    tern_ctx c; // its draws: those of payload rows n, n+1, ... (kept rows)
    tern_ctx_init(&c, cols, k0, k1);
    const int64_t stride = tern_stride(cols);
    sq_lanes a = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
    int64_t n = 0;
    __m128i d[8];
    int cycle = phase; // (k + phase) % every
    for (int64_t k = 0; k < rows; k++) {
        const int forced = delta_forced(every, &cycle);
        const float* x = m + (int64_t)idx[k] * cols;
        float* s = ref + k * cols;
        if (k + DELTA_AHEAD < rows) prefetch_rows(m + (int64_t)idx[k + DELTA_AHEAD] * cols, s + DELTA_AHEAD * cols, cols);
        uint32_t md, mm;
        float lo, hi;
        delta_sub(buf, x, s, cols, &md, &mm, &lo, &hi);
        if (bitmap && !forced && !delta_keeps(md, mm, tau, skip_floor)) {
            sq_row(&a, x, s, cols);
            continue;
        }
        if (bitmap) bitmap[k >> 3] |= (uint8_t)(1u << (k & 7));
        const float mx = lo <= hi ? fmaxf(fabsf(lo), fabsf(hi)) : 0.0f; // lo > hi: all NaN
        tern_encode_body(&c, dst + n * stride, buf, cols, mx, (uint32_t)n, tern_row_draws(n, 0, c.bpr, &c.ks, d), buf);
        delta_add(s, x, buf, cols, &a);
        n++;
    }
    *kept = n;
    sq_sum(&a, out);
}

// gnn_tern_decode_add is DecodeAdd (delta.go) for tern: ref row rows[k] +=
// the decoded payload row k (src: the whole payload, key first, srclen
// bytes), copied into out's row too where out is not NULL.
AVX2 void gnn_tern_decode_add(float* ref, const int32_t* rowsIdx, int64_t rows, const uint8_t* src, int64_t srclen, int cols, float* out) {
    uint32_t k0, k1;
    memcpy(&k0, src, 4), memcpy(&k1, src + 4, 4); // little endian, as the host
    tern_ctx c;
    tern_ctx_init(&c, cols, k0, k1);
    const int64_t stride = tern_stride(cols);
    __m128i d[8];
    for (int64_t k = 0; k < rows; k++) {
        const int64_t at = (int64_t)rowsIdx[k] * cols;
        if (k + DELTA_AHEAD < rows) {
            const int64_t next = (int64_t)rowsIdx[k + DELTA_AHEAD] * cols;
            prefetch_rows(ref + next, out ? out + next : NULL, cols);
        }
        tern_decode_row(&c, ref + at, src + TERN_KEY + k * stride, srclen - TERN_KEY - k * stride, cols, (uint32_t)k, tern_row_draws(k, 0, c.bpr, &c.ks, d), 1);
        if (out) memcpy(out + at, ref + at, 4 * (size_t)cols); // from L1
    }
}
