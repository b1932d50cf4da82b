// The CPU device's graph-attention loops in C (attention.go has their Go
// twins and the maths). Heads go eight to a vector: the scores, the
// softmax and the coefficients of eight heads of an edge are one v8 each;
// the per-head dot products and axpys run over the head's width. Like
// simd.c, each loop is compiled for AVX2 and for the baseline ISA, and
// every value gets its twin's operations in the same order, one rounding
// each (no FMA, -std=c11 contracts nothing), so the bits are the same.
#include <stdint.h>

#define INLINE static inline __attribute__((always_inline))
#define AVX2 __attribute__((target("avx2")))

typedef float v8 __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef double v8d __attribute__((vector_size(64)));
typedef float v8u __attribute__((vector_size(32), aligned(4)));
#define load8(p) ((v8) * (const v8u*)(p))
#define store8(p, v) (*(v8u*)(p) = (v))

enum { PREFETCH = 8 };

// The arguments of every loop; built on the C stack by the entry points,
// since a struct in Go memory may not hold Go pointers.
typedef struct {
    int64_t heads, width, mean, drop;
    float slope, scale;
    uint32_t thr;
    uint64_t key;
    const int32_t* row_ids;
    const int64_t* ptr;
    const int32_t* col;
    const int64_t* src_ptr;   // edges by source: Ptr, Dst, Rank
    const int32_t* src_dst;
    const int32_t* src_rank;
    const float* q;           // sources x (H*W + H)
    const float* t;           // destinations x H
    float* stats;             // destinations x 2H: max, 1/sum
    float* alpha;             // edges x H, or NULL (recomputed)
    float* out;               // forward: destinations x OutCols
    const float* dout;        // backward: d(out)
    float* rec;               // backward: destinations x (4H + OutCols), see backward_dst_rows
    float* dq;
    float* ddst;
} attn_args;

INLINE v8 sel(v8i m, v8 a, v8 b) { return (v8)((m & (v8i)a) | (~m & (v8i)b)); }

// n (1..8) floats from p, zeros after.
INLINE v8 loadn(const float* p, int64_t n) {
    if (n == 8) return load8(p);
    v8 v = {0};
    for (int64_t l = 0; l < n; l++) v[l] = p[l];
    return v;
}

INLINE void storen(float* p, v8 v, int64_t n) {
    if (n == 8) {
        store8(p, v);
        return;
    }
    for (int64_t l = 0; l < n; l++) p[l] = v[l];
}

INLINE v8 leaky(v8 z, float slope) {
    const v8 zero = {0};
    return sel(z > zero, z, z * slope);
}

// exp(x) for x <= 0 (positive x is taken as 0): Cody-Waite reduction by
// n ln 2, n = round(x log2 e) (ties down), and Cephes' degree-5 polynomial;
// 0 below -87 (where exp nears float32's least normal), NaN stays NaN.
INLINE v8 exp_nonpos(v8 x) {
    const v8 zero = {0}, one = zero + 1.0f, lo = zero - 87.0f;
    v8i small = x < lo, nan = x != x;
    v8 xc = sel(small, lo, x);
    xc = sel((xc > zero) | nan, zero, xc);
    v8 y = xc * 1.44269504088896341f;
    v8i n = -__builtin_convertvector((zero + 0.5f) - y, v8i);
    v8 nf = __builtin_convertvector(n, v8);
    v8 r = (xc - nf * 0.693359375f) - nf * -2.12194440e-4f;
    v8 p = zero + 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    v8 z = r * r;
    p = p * z;
    p = p + r;
    p = p + one;
    v8 res = p * (v8)((n + 127) << 23);
    res = sel(small, zero, res);
    return sel(nan, x, res);
}

// The coefficient dropout's factors of edge kr of row i, heads h0..h0+n-1.
INLINE uint64_t mix64(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ z >> 30) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ z >> 27) * 0x94D049BB133111EBull;
    return z ^ z >> 31;
}

INLINE v8 keep8(const attn_args* a, int64_t i, int64_t kr, int64_t h0, int64_t n) {
    v8 v = {0};
    uint64_t id = (uint32_t)(a->row_ids ? a->row_ids[i] : (int32_t)i);
    for (int64_t l = 0; l < n; l++) {
        uint32_t u = (uint32_t)(mix64(a->key ^ (id << 32 | (uint32_t)(kr * a->heads + h0 + l))) >> 40);
        v[l] = u >= a->thr ? a->scale : 0.0f;
    }
    return v;
}

// Eight heads of width 8, concatenated (the paper's hidden layers), keep
// a row's 64 sums in registers across its edges: o_l += c_l x_l where
// c_l != 0, lane l of c broadcast, as axpy would (a zero coefficient adds
// nothing, not even a signed zero).
#define BCAST(v, l) __builtin_shufflevector(v, v, l, l, l, l, l, l, l, l)
#define ACC8(o, c, nz, x, l) o##l = sel(BCAST(nz, l), o##l + BCAST(c, l) * load8((x) + 8 * (l)), o##l)
#define ACC8_ALL(o, c, nz, x) \
    ACC8(o, c, nz, x, 0), ACC8(o, c, nz, x, 1), ACC8(o, c, nz, x, 2), ACC8(o, c, nz, x, 3), \
    ACC8(o, c, nz, x, 4), ACC8(o, c, nz, x, 5), ACC8(o, c, nz, x, 6), ACC8(o, c, nz, x, 7)
#define STORE8_ALL(p, o) \
    store8((p), o##0), store8((p) + 8, o##1), store8((p) + 16, o##2), store8((p) + 24, o##3), \
    store8((p) + 32, o##4), store8((p) + 40, o##5), store8((p) + 48, o##6), store8((p) + 56, o##7)

// y += c x over w floats.
INLINE void axpy(float c, const float* restrict x, float* restrict y, int64_t w) {
    const v8 cv = (v8){0} + c;
    int64_t f = 0;
    for (; f + 8 <= w; f += 8) store8(y + f, load8(y + f) + cv * load8(x + f));
    for (; f < w; f++) y[f] += c * x[f];
}

// The eight lane sums of <x, y> over w floats (lane f mod 8).
INLINE v8 dot_lanes(const float* x, const float* y, int64_t w) {
    v8 s = {0};
    int64_t f = 0;
    for (; f + 8 <= w; f += 8) s += load8(x + f) * load8(y + f);
    if (f < w) {
        v8 tail = {0};
        for (int64_t l = 0; f + l < w; l++) tail[l] = x[f + l] * y[f + l];
        s += tail;
    }
    return s;
}

// [x0+x1, x2+x3, y0+y1, y2+y3, x4+x5, x6+x7, y4+y5, y6+y7].
INLINE v8 hadd(v8 x, v8 y) {
    return __builtin_shufflevector(x, y, 0, 2, 8, 10, 4, 6, 12, 14) + __builtin_shufflevector(x, y, 1, 3, 9, 11, 5, 7, 13, 15);
}

// Lane h of the result sums s_h's lanes l as ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)):
// eight dot products finished at once.
INLINE v8 hsum8(v8 s0, v8 s1, v8 s2, v8 s3, v8 s4, v8 s5, v8 s6, v8 s7) {
    v8 q0 = hadd(hadd(s0, s1), hadd(s2, s3)), q1 = hadd(hadd(s4, s5), hadd(s6, s7));
    return __builtin_shufflevector(q0, q1, 0, 1, 2, 3, 8, 9, 10, 11) + __builtin_shufflevector(q0, q1, 4, 5, 6, 7, 12, 13, 14, 15);
}

// The d(alpha) of heads h0..h0+n-1 of edge (j -> i): <g_h, P_j,h>, divided
// by the heads when they are averaged, times the dropout factor.
INLINE v8 dalpha(const attn_args* a, const float* g, const float* qj, int64_t h0, int64_t n, v8 keep) {
    const int64_t w = a->width, gs = a->mean ? 0 : w;
    const v8 zero = {0};
    // Constant lane numbers keep the eight sums in registers.
#define LANE(l) ((l) < n ? dot_lanes(g + (h0 + (l)) * gs, qj + (h0 + (l)) * w, w) : zero)
    v8 da = hsum8(LANE(0), LANE(1), LANE(2), LANE(3), LANE(4), LANE(5), LANE(6), LANE(7));
#undef LANE
    if (a->mean && a->heads > 1) da /= (float)a->heads;
    return a->drop ? da * keep : da;
}

INLINE void forward_rows(const attn_args* a, int64_t lo, int64_t hi) {
    const int64_t H = a->heads, W = a->width, hw = H * W, qc = hw + H, oc = a->mean ? W : hw;
    const v8 ninf = (v8){0} - __builtin_inff();
    const v8d oned = (v8d){0} + 1.0;
    const int64_t pf_end = a->ptr[hi];
    for (int64_t i = lo; i < hi; i++) {
        const int64_t k0 = a->ptr[i], k1 = a->ptr[i + 1];
        float* out = a->out + i * oc;
        for (int64_t f = 0; f < oc; f++) out[f] = 0;
        float* st = a->stats + i * 2 * H;
        for (int64_t h0 = 0; h0 < H; h0 += 8) {
            const int64_t n = H - h0 < 8 ? H - h0 : 8;
            const v8 tv = loadn(a->t + i * H + h0, n);
            v8 m = ninf;
            for (int64_t k = k0; k < k1; k++) {
                if (h0 == 0 && k + PREFETCH < pf_end) {
                    const float* r = a->q + (int64_t)a->col[k + PREFETCH] * qc;
                    for (int64_t b = 0; b < qc; b += 16) __builtin_prefetch(r + b);
                }
                v8 e = leaky(tv + loadn(a->q + (int64_t)a->col[k] * qc + hw + h0, n), a->slope);
                m = sel((e > m) | (e != e), e, m);
            }
            v8d sum = {0};
            for (int64_t k = k0; k < k1; k++) {
                v8 e = leaky(tv + loadn(a->q + (int64_t)a->col[k] * qc + hw + h0, n), a->slope);
                v8 x = exp_nonpos(e - m);
                if (a->alpha) storen(a->alpha + k * H + h0, x, n);
                sum += __builtin_convertvector(x, v8d);
            }
            const v8 inv = __builtin_convertvector(oned / sum, v8);
            storen(st + h0, m, n);
            storen(st + H + h0, inv, n);
            const int regs = W == 8 && n == 8 && !a->mean;
            v8 o0 = {0}, o1 = {0}, o2 = {0}, o3 = {0}, o4 = {0}, o5 = {0}, o6 = {0}, o7 = {0};
            for (int64_t k = k0; k < k1; k++) {
                const float* qj = a->q + (int64_t)a->col[k] * qc;
                v8 x = a->alpha ? loadn(a->alpha + k * H + h0, n) : exp_nonpos(leaky(tv + loadn(qj + hw + h0, n), a->slope) - m);
                v8 al = x * inv;
                if (a->alpha) storen(a->alpha + k * H + h0, al, n);
                v8 c = a->drop ? al * keep8(a, i, k - k0, h0, n) : al;
                if (regs) {
                    const v8i nz = c != (v8){0};
                    ACC8_ALL(o, c, nz, qj + h0 * 8);
                    continue;
                }
                for (int64_t l = 0; l < n; l++)
                    if (c[l] != 0) axpy(c[l], qj + (h0 + l) * W, a->mean ? out : out + (h0 + l) * W, W);
            }
            if (regs) STORE8_ALL(out + h0 * 8, o);
        }
        if (a->mean && H > 1) {
            float s = 1 / (float)H;
            for (int64_t f = 0; f < oc; f++) out[f] *= s;
        }
    }
}

// The coefficients of heads h0.. of an edge with scores z, from the
// forward's statistics: the bits the forward gave.
INLINE v8 coefficients(v8 z, v8 m, v8 inv, float slope) { return exp_nonpos(leaky(z, slope) - m) * inv; }

INLINE v8 slope_of(v8 z, float slope) {
    const v8 zero = {0};
    return sel(z > zero, zero + 1.0f, zero + slope);
}

// The backward's pass by destination: per row and head the sums
// A = sum alpha d(alpha), B = sum alpha d(alpha) lambda and
// C = sum alpha lambda (lambda: LeakyReLU's slope at the score) in float64,
// and d(t) = B - A C. The row's record gathers what the pass by source
// needs of destination i, in one place since it is read at random there:
// [t_i | max | 1/sum | A | d(out_i)], heads of each.
INLINE void backward_dst_rows(const attn_args* a, int64_t lo, int64_t hi) {
    const int64_t H = a->heads, W = a->width, hw = H * W, qc = hw + H, oc = a->mean ? W : hw, rc = 4 * H + oc;
    const int64_t pf_end = a->ptr[hi];
    for (int64_t i = lo; i < hi; i++) {
        const int64_t k0 = a->ptr[i], k1 = a->ptr[i + 1];
        const float* g = a->dout + i * oc;
        const float* st = a->stats + i * 2 * H;
        float* rec = a->rec + i * rc;
        for (int64_t f = 0; f < oc; f++) rec[4 * H + f] = g[f];
        for (int64_t h0 = 0; h0 < H; h0 += 8) {
            const int64_t n = H - h0 < 8 ? H - h0 : 8;
            const v8 tv = loadn(a->t + i * H + h0, n), m = loadn(st + h0, n), inv = loadn(st + H + h0, n);
            v8d sa = {0}, sb = {0}, sc = {0};
            for (int64_t k = k0; k < k1; k++) {
                if (h0 == 0 && k + PREFETCH < pf_end) {
                    const float* r = a->q + (int64_t)a->col[k + PREFETCH] * qc;
                    for (int64_t b = 0; b < qc; b += 16) __builtin_prefetch(r + b);
                }
                const float* qj = a->q + (int64_t)a->col[k] * qc;
                v8 z = tv + loadn(qj + hw + h0, n);
                v8 al = a->alpha ? loadn(a->alpha + k * H + h0, n) : coefficients(z, m, inv, a->slope);
                v8 keep = a->drop ? keep8(a, i, k - k0, h0, n) : (v8){0};
                v8 da = dalpha(a, g, qj, h0, n, keep);
                v8d ald = __builtin_convertvector(al, v8d), lam = __builtin_convertvector(slope_of(z, a->slope), v8d);
                v8d ad = ald * __builtin_convertvector(da, v8d);
                sa += ad;
                sb += ad * lam;
                sc += ald * lam;
            }
            storen(rec + h0, tv, n);
            storen(rec + H + h0, m, n);
            storen(rec + 2 * H + h0, inv, n);
            storen(rec + 3 * H + h0, __builtin_convertvector(sa, v8), n);
            storen(a->ddst + i * H + h0, __builtin_convertvector(sb - sa * sc, v8), n);
        }
    }
}

// The backward's pass by source j: over j's edges (j -> i), with c the
// coefficient after dropout (divided by the heads when they are
// averaged), d(P_j,h) sums c d(out_i,h) and d(s_j,h) the scores' gradients
// dz = alpha (d(alpha) - A) lambda, both from i's record.
INLINE void backward_src_rows(const attn_args* a, int64_t lo, int64_t hi) {
    const int64_t H = a->heads, W = a->width, hw = H * W, qc = hw + H, oc = a->mean ? W : hw, rc = 4 * H + oc;
    const int64_t pf_end = a->src_ptr[hi];
    // One block of eight heads of 8, concatenated: d(q_j) in registers.
    const int regs = H == 8 && W == 8 && !a->mean;
    for (int64_t j = lo; j < hi; j++) {
        const float* qj = a->q + j * qc;
        float* dq = a->dq + j * qc;
        v8 o0 = {0}, o1 = {0}, o2 = {0}, o3 = {0}, o4 = {0}, o5 = {0}, o6 = {0}, o7 = {0}, ds = {0};
        if (!regs)
            for (int64_t f = 0; f < qc; f++) dq[f] = 0;
        for (int64_t x = a->src_ptr[j]; x < a->src_ptr[j + 1]; x++) {
            if (x + PREFETCH < pf_end) {
                const float* r = a->rec + (int64_t)a->src_dst[x + PREFETCH] * rc;
                for (int64_t b = 0; b < rc; b += 16) __builtin_prefetch(r + b);
            }
            const int64_t i = a->src_dst[x];
            const float* rec = a->rec + i * rc;
            const float* g = rec + 4 * H;
            if (regs) {
                v8 z = loadn(rec, 8) + loadn(qj + 64, 8);
                v8 al = coefficients(z, loadn(rec + 8, 8), loadn(rec + 16, 8), a->slope);
                v8 keep = a->drop ? keep8(a, i, a->src_rank[x], 0, 8) : (v8){0};
                v8 c = a->drop ? al * keep : al;
                v8 da = dalpha(a, g, qj, 0, 8, keep);
                ds += (al * (da - loadn(rec + 24, 8))) * slope_of(z, a->slope);
                const v8i nz = c != (v8){0};
                ACC8_ALL(o, c, nz, g);
                continue;
            }
            for (int64_t h0 = 0; h0 < H; h0 += 8) {
                const int64_t n = H - h0 < 8 ? H - h0 : 8;
                v8 z = loadn(rec + h0, n) + loadn(qj + hw + h0, n);
                v8 al = coefficients(z, loadn(rec + H + h0, n), loadn(rec + 2 * H + h0, n), a->slope);
                v8 keep = a->drop ? keep8(a, i, a->src_rank[x], h0, n) : (v8){0};
                v8 c = a->drop ? al * keep : al;
                if (a->mean && H > 1) c /= (float)H;
                v8 da = dalpha(a, g, qj, h0, n, keep);
                v8 dz = (al * (da - loadn(rec + 3 * H + h0, n))) * slope_of(z, a->slope);
                for (int64_t l = 0; l < n; l++)
                    if (c[l] != 0) axpy(c[l], a->mean ? g : g + (h0 + l) * W, dq + (h0 + l) * W, W);
                storen(dq + hw + h0, loadn(dq + hw + h0, n) + dz, n);
            }
        }
        if (regs) {
            STORE8_ALL(dq, o);
            store8(dq + 64, ds);
        }
    }
}

AVX2 static void forward_avx2(const attn_args* a, int64_t lo, int64_t hi) { forward_rows(a, lo, hi); }
static void forward_base(const attn_args* a, int64_t lo, int64_t hi) { forward_rows(a, lo, hi); }
AVX2 static void backward_dst_avx2(const attn_args* a, int64_t lo, int64_t hi) { backward_dst_rows(a, lo, hi); }
static void backward_dst_base(const attn_args* a, int64_t lo, int64_t hi) { backward_dst_rows(a, lo, hi); }
AVX2 static void backward_src_avx2(const attn_args* a, int64_t lo, int64_t hi) { backward_src_rows(a, lo, hi); }
static void backward_src_base(const attn_args* a, int64_t lo, int64_t hi) { backward_src_rows(a, lo, hi); }

// pass 0: forward over destinations; 1: backward by destination;
// 2: backward by source. Rows lo..hi-1.
void gnn_attention(int avx2, int pass, int64_t heads, int64_t width, int mean, float slope, int drop, uint64_t key,
                   uint32_t thr, float scale, const int32_t* row_ids, const int64_t* ptr, const int32_t* col,
                   const int64_t* src_ptr, const int32_t* src_dst, const int32_t* src_rank, const float* q,
                   const float* t, float* stats, float* alpha, float* out, const float* dout, float* rec, float* dq,
                   float* ddst, int64_t lo, int64_t hi) {
    attn_args a = {heads, width, mean, drop, slope, scale, thr, key, row_ids, ptr, col, src_ptr, src_dst, src_rank,
                   q, t, stats, alpha, out, dout, rec, dq, ddst};
    switch (pass) {
    case 0:
        avx2 ? forward_avx2(&a, lo, hi) : forward_base(&a, lo, hi);
        break;
    case 1:
        avx2 ? backward_dst_avx2(&a, lo, hi) : backward_dst_base(&a, lo, hi);
        break;
    default:
        avx2 ? backward_src_avx2(&a, lo, hi) : backward_src_base(&a, lo, hi);
    }
}
