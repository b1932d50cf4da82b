// Per-row, per-pair and per-element routines of the graph-attention kernels
// (attention.cu): the arithmetic of kernels/attention.go's Go twins
// (forwardRows, backwardDstRows, backwardSrcRows, expNonPos, dot8, keep,
// dAlpha, coefficient, the terms task and ELU), kept apart from the
// __global__ kernels so that a host compiler can include them
// (kernels/cuda/hosttwin tests them against the Go code).
//
// The CPU runs heads eight to a vector, but every head's sums run on their
// own, so the lanes of a block of eight change no order except one: the
// averaged output adds the heads' terms block by block, edge by edge, head
// by head. Here a (row, head) pair's reductions belong to one thread, and an
// output row's columns are spread over a warp's lanes, each column summed
// by one lane in the CPU's order of (edge, head) terms; the terms of 32
// pairs at a time are computed one per lane and broadcast by shuffles.
#ifndef GNN_SPMD_KERNELS_ATTENTION_CUH
#define GNN_SPMD_KERNELS_ATTENTION_CUH

#include "common.cuh"

// ATTN_TILE is how many output columns a lane accumulates: a warp covers
// 32 * ATTN_TILE columns per pass over a row's (edge, head) pairs.
#define ATTN_TILE 4

// attn_params is the layer as the kernels see it (kernels.Attention): heads
// of width values, averaged (mean) or concatenated, LeakyReLU's slope, and
// the coefficient dropout when drop != 0: key = rng.Mix64(seed), thr and
// scale from kernels.DropoutParams, row_ids the destinations' ids (NULL:
// row i has id i).
typedef struct {
    int heads, width, mean, drop;
    float slope, scale;
    unsigned int thr;
    unsigned long long key;
    const int* row_ids;
} attn_params;

__host__ __device__ __forceinline__ attn_params attn_make(int heads, int width, int mean, int drop, float slope,
                                                          float scale, unsigned int thr, unsigned long long key,
                                                          const int* row_ids) {
    attn_params p;
    p.heads = heads, p.width = width, p.mean = mean, p.drop = drop;
    p.slope = slope, p.scale = scale, p.thr = thr, p.key = key, p.row_ids = row_ids;
    return p;
}

// The row widths: q is [P | s] (heads*width + heads), the output heads*width
// or width, the backward's record 4*heads + the output's width.
__host__ __device__ __forceinline__ long long attn_hw(const attn_params* p) { return (long long)p->heads * p->width; }
__host__ __device__ __forceinline__ long long attn_qc(const attn_params* p) { return attn_hw(p) + p->heads; }
__host__ __device__ __forceinline__ long long attn_oc(const attn_params* p) {
    return p->mean ? (long long)p->width : attn_hw(p);
}
__host__ __device__ __forceinline__ long long attn_rc(const attn_params* p) { return 4LL * p->heads + attn_oc(p); }

// attn_exp_nonpos is expNonPos (attention.c's exp_nonpos): exp(x) for x <= 0
// (positive x taken as 0) by Cody-Waite reduction and Cephes' degree-5
// polynomial, every operation rounded to float; 0 below -87, NaN stays NaN.
// The float-to-int conversion truncates, as Go's and CVTTPS2DQ do.
__host__ __device__ __forceinline__ float attn_exp_nonpos(float x) {
    if (x != x) return x;
    if (x < -87.0f) return 0.0f;
    if (x > 0.0f) x = 0.0f;
    const float y = x * 1.44269504088896341f;
    const int n = -(int)(0.5f - y);
    const float nf = (float)n;
    const float r = (x - nf * 0.693359375f) - nf * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const float z = r * r;
    p = p * z;
    p = p + r;
    p = p + 1.0f;
    return p * f32frombits((unsigned int)(n + 127) << 23);
}

// attn_leaky is LeakyReLU (leaky): z if z > 0, else z * slope (-0 and NaN
// take the product).
__host__ __device__ __forceinline__ float attn_leaky(float z, float slope) { return z > 0.0f ? z : z * slope; }

// attn_slope_at is LeakyReLU's derivative at z (slopeAt).
__host__ __device__ __forceinline__ float attn_slope_at(float z, float slope) { return z > 0.0f ? 1.0f : slope; }

// attn_dot8 is dot8 (attention.c's dot_lanes and hsum8): lane l of eight
// sums the products of the columns f = l mod 8 in order, a partial last
// group adds its products (and +0 in the lanes past the end) to every lane,
// and the lanes meet in the tree ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)).
__host__ __device__ __forceinline__ float attn_dot8(const float* x, const float* y, int w) {
    float s[8];
#pragma unroll
    for (int l = 0; l < 8; l++) s[l] = 0.0f;
    int f = 0;
    for (; f + 8 <= w; f += 8) {
#pragma unroll
        for (int l = 0; l < 8; l++) s[l] = s[l] + x[f + l] * y[f + l];
    }
    if (f < w) {
        float tail[8];
#pragma unroll
        for (int l = 0; l < 8; l++) tail[l] = f + l < w ? x[f + l] * y[f + l] : 0.0f;
#pragma unroll
        for (int l = 0; l < 8; l++) s[l] = s[l] + tail[l];
    }
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

// attn_keep is keep: the dropout factor of the kr-th edge of destination
// row i, head h: the draw mix64(key ^ (uint32(id) << 32 | uint32(kr*heads +
// h))) >> 40 kept (scale) iff >= thr, else 0; 1 without dropout.
__host__ __device__ __forceinline__ float attn_keep(const attn_params* p, int i, long long kr, int h) {
    if (!p->drop) return 1.0f;
    const int id = p->row_ids != NULL ? p->row_ids[i] : i;
    const unsigned long long c = (unsigned long long)(unsigned int)(kr * p->heads + h);
    const unsigned int u = (unsigned int)(mix64(p->key ^ ((unsigned long long)(unsigned int)id << 32 | c)) >> 40);
    return u >= p->thr ? p->scale : 0.0f;
}

// attn_dalpha is dAlpha: d(alpha) of head h of the kr-th edge (j -> i) of
// row i, <g_h, P_j,h> (g_h = g when the heads are averaged), divided by the
// heads when they are, times the dropout factor.
__host__ __device__ __forceinline__ float attn_dalpha(const attn_params* p, const float* g, const float* qj, int i,
                                                      long long kr, int h) {
    const long long w = p->width;
    float d = attn_dot8(p->mean ? g : g + h * w, qj + h * w, p->width);
    if (p->mean && p->heads > 1) d = d / (float)p->heads;
    if (p->drop) d = d * attn_keep(p, i, kr, h);
    return d;
}

// attn_coefficient is coefficient: the coefficient of score z from its
// row's maximum m and 1 / sum inv.
__host__ __device__ __forceinline__ float attn_coefficient(float z, float m, float inv, float slope) {
    return attn_exp_nonpos(attn_leaky(z, slope) - m) * inv;
}

// ---- forward ----

// attn_forward_stats is forwardRows' statistics of row i, head h: the
// scores' maximum m (NaN once a score is NaN) in edge order, the sum in
// double of x_k = exp(e_k - m) in edge order, stats[i] = (m, float(1/sum))
// per head, and, when alpha is not NULL, alpha[k][h] = x_k * (1/sum): the
// coefficient before dropout, as the Go twin stores x_k and then rescales it.
__host__ __device__ __forceinline__ void attn_forward_stats(const attn_params* p, int i, int h, const long long* ptr,
                                                            const int* col, const float* q, const float* t,
                                                            float* stats, float* alpha) {
    const int H = p->heads;
    const long long hw = attn_hw(p), qc = attn_qc(p);
    const long long k0 = ptr[i], k1 = ptr[i + 1];
    const float ti = t[(long long)i * H + h];
    float m = f32frombits(0xff800000u); // -Inf
    for (long long k = k0; k < k1; k++) {
        const float e = attn_leaky(ti + q[(long long)col[k] * qc + hw + h], p->slope);
        if (e > m || e != e) m = e;
    }
    double sum = 0.0;
    for (long long k = k0; k < k1; k++) {
        const float x = attn_exp_nonpos(attn_leaky(ti + q[(long long)col[k] * qc + hw + h], p->slope) - m);
        if (alpha != NULL) alpha[k * H + h] = x;
        sum += (double)x;
    }
    const float inv = (float)(1.0 / sum);
    float* st = stats + (long long)i * 2 * H;
    st[h] = m;
    st[H + h] = inv;
    if (alpha != NULL)
        for (long long k = k0; k < k1; k++) alpha[k * H + h] = alpha[k * H + h] * inv;
}

// attn_forward_pair is term p (of deg*heads) of forwardRows' output row i,
// whose edges start at k0: the terms go as the Go twin adds them, blocks of
// eight heads, within a block edge by edge, within an edge head by head.
// It returns the coefficient after dropout, from alpha (stored by
// attn_forward_stats) or recomputed from the statistics, and sets the
// edge's source *j and head *h.
__host__ __device__ __forceinline__ float attn_forward_pair(const attn_params* p, int i, long long k0, long long deg,
                                                            long long pair, const int* col, const float* q,
                                                            const float* t, const float* stats, const float* alpha,
                                                            int* j, int* h) {
    const int H = p->heads;
    const long long b = pair / (8 * deg);
    const long long pb = pair - 8 * deg * b;
    const int h0 = (int)(8 * b);
    const int n = min_i(8, H - h0);
    const long long kr = pb / n;
    const int hh = h0 + (int)(pb - kr * n);
    const long long k = k0 + kr;
    const int jj = col[k];
    float al;
    if (alpha != NULL) {
        al = alpha[k * H + hh];
    } else {
        const float* st = stats + (long long)i * 2 * H;
        const float x = attn_exp_nonpos(
            attn_leaky(t[(long long)i * H + hh] + q[(long long)jj * attn_qc(p) + attn_hw(p) + hh], p->slope) - st[hh]);
        al = x * st[H + hh];
    }
    *j = jj;
    *h = hh;
    return p->drop ? al * attn_keep(p, i, kr, hh) : al;
}

// attn_forward_accum adds a term (coefficient c of source j, head h) into
// lane `lane`'s columns o = col0 + lane + 32*t of the output row, as axpy
// does (acc + c*P_j,h[f], the product rounded; a zero coefficient adds
// nothing): every column when the heads are averaged, else those of head h.
__host__ __device__ __forceinline__ void attn_forward_accum(const attn_params* p, float c, int j, int h,
                                                            const float* q, long long col0, int lane,
                                                            float acc[ATTN_TILE]) {
    if (c == 0.0f) return;
    const long long W = p->width, oc = attn_oc(p);
    const float* qj = q + (long long)j * attn_qc(p) + h * W;
#pragma unroll
    for (int t = 0; t < ATTN_TILE; t++) {
        const long long o = col0 + lane + 32 * t;
        if (o >= oc) continue;
        long long f = o;
        if (!p->mean) {
            if (o / W != h) continue;
            f = o - h * W;
        }
        acc[t] = acc[t] + c * qj[f];
    }
}

// attn_forward_store writes lane `lane`'s columns of output row i: the
// sums, times float(1/heads) when more than one head is averaged.
__host__ __device__ __forceinline__ void attn_forward_store(const attn_params* p, int i, long long col0, int lane,
                                                            const float acc[ATTN_TILE], float* out) {
    const long long oc = attn_oc(p);
    const float s = 1.0f / (float)p->heads;
#pragma unroll
    for (int t = 0; t < ATTN_TILE; t++) {
        const long long o = col0 + lane + 32 * t;
        if (o >= oc) continue;
        out[(long long)i * oc + o] = p->mean && p->heads > 1 ? acc[t] * s : acc[t];
    }
}

// ---- backward by destination ----

// attn_backward_dst is backwardDstRows for row i, head h: over the row's
// edges in order, with alpha the coefficient (stored or recomputed), d its
// d(alpha) and lambda LeakyReLU's slope at the score, the double sums
// A = sum alpha d, B = sum (alpha d) lambda, C = sum alpha lambda; then
// d(t_i,h) = float(B - A C) and the record's head h entries (t, max, 1/sum,
// float(A)), and the record's copy of d(out_i) at the columns f = h mod
// heads.
__host__ __device__ __forceinline__ void attn_backward_dst(const attn_params* p, int i, int h, const long long* ptr,
                                                           const int* col, const float* q, const float* t,
                                                           const float* stats, const float* alpha, const float* dout,
                                                           float* rec, float* ddst) {
    const int H = p->heads;
    const long long hw = attn_hw(p), qc = attn_qc(p), oc = attn_oc(p), rc = attn_rc(p);
    const long long k0 = ptr[i], k1 = ptr[i + 1];
    const float* g = dout + (long long)i * oc;
    const float* st = stats + (long long)i * 2 * H;
    const float ti = t[(long long)i * H + h], m = st[h], inv = st[H + h];
    double sa = 0.0, sb = 0.0, sc = 0.0;
    for (long long k = k0; k < k1; k++) {
        const float* qj = q + (long long)col[k] * qc;
        const float z = ti + qj[hw + h];
        const float al = alpha != NULL ? alpha[k * H + h] : attn_coefficient(z, m, inv, p->slope);
        const float da = attn_dalpha(p, g, qj, i, k - k0, h);
        const double ald = (double)al, lam = (double)attn_slope_at(z, p->slope);
        const double ad = ald * (double)da;
        sa += ad;
        sb += ad * lam;
        sc += ald * lam;
    }
    float* r = rec + (long long)i * rc;
    r[h] = ti;
    r[H + h] = m;
    r[2 * H + h] = inv;
    r[3 * H + h] = (float)sa;
    ddst[(long long)i * H + h] = (float)(sb - sa * sc);
    for (long long f = h; f < oc; f += H) r[4 * H + f] = g[f];
}

// ---- backward by source ----

// attn_backward_src_pair is term pair = x*heads + h of backwardSrcRows'
// row j, the x-th of j's edges (listed from e0 by destination, edst, and
// rank among that destination's edges, erank): from the destination i's
// record, the coefficient alpha recomputed, c = alpha after dropout
// (divided by the heads when they are averaged), and the score's gradient
// dz = (alpha (d(alpha) - A)) lambda. It returns c and sets *dz, *i, *h.
__host__ __device__ __forceinline__ float attn_backward_src_pair(const attn_params* p, int j, long long e0,
                                                                 long long pair, const int* edst, const int* erank,
                                                                 const float* q, const float* rec, float* dz, int* i,
                                                                 int* h) {
    const int H = p->heads;
    const long long hw = attn_hw(p), qc = attn_qc(p), rc = attn_rc(p);
    const long long xo = pair / H;
    const int hh = (int)(pair - xo * H);
    const int ii = edst[e0 + xo];
    const long long kr = erank[e0 + xo];
    const float* r = rec + (long long)ii * rc;
    const float* g = r + 4 * H;
    const float* qj = q + (long long)j * qc;
    const float z = r[hh] + qj[hw + hh];
    const float al = attn_coefficient(z, r[H + hh], r[2 * H + hh], p->slope);
    float c = al;
    if (p->drop) c = al * attn_keep(p, ii, kr, hh);
    if (p->mean && H > 1) c = c / (float)H;
    const float da = attn_dalpha(p, g, qj, ii, kr, hh);
    *dz = (al * (da - r[3 * H + hh])) * attn_slope_at(z, p->slope);
    *i = ii;
    *h = hh;
    return c;
}

// attn_backward_src_accum adds a term (c, dz of destination i, head h) into
// lane `lane`'s columns o = col0 + lane + 32*t of d(q_j): the columns of
// P_j,h get axpy's c*g_h[f] (g_h = g when averaged; nothing when c is 0),
// column heads*width + h gets dz.
__host__ __device__ __forceinline__ void attn_backward_src_accum(const attn_params* p, float c, float dz, int i,
                                                                 int h, const float* rec, long long col0, int lane,
                                                                 float acc[ATTN_TILE]) {
    const long long W = p->width, hw = attn_hw(p), qc = attn_qc(p);
    const float* g = rec + (long long)i * attn_rc(p) + 4LL * p->heads;
#pragma unroll
    for (int t = 0; t < ATTN_TILE; t++) {
        const long long o = col0 + lane + 32 * t;
        if (o >= qc) continue;
        if (o < hw) {
            if (o / W != h || c == 0.0f) continue;
            acc[t] = acc[t] + c * g[p->mean ? o - h * W : o];
        } else if (o - hw == h) {
            acc[t] = acc[t] + dz;
        }
    }
}

// attn_backward_src_store writes lane `lane`'s columns of d(q_j).
__host__ __device__ __forceinline__ void attn_backward_src_store(const attn_params* p, int j, long long col0, int lane,
                                                                 const float acc[ATTN_TILE], float* dq) {
    const long long qc = attn_qc(p);
#pragma unroll
    for (int t = 0; t < ATTN_TILE; t++) {
        const long long o = col0 + lane + 32 * t;
        if (o < qc) dq[(long long)j * qc + o] = acc[t];
    }
}

// ---- the source and destination terms ----

// attn_terms_row_head is the terms task's forward for row i, head h: q's
// row i gets P_i,h and s_i,h = sum over f in order of P_i,h[f] aSrc_h[f],
// t_i,h the same with aDst (float sums from +0, each product rounded).
__host__ __device__ __forceinline__ void attn_terms_row_head(int i, int h, int H, int W, const float* P,
                                                             const float* asrc, const float* adst, float* q,
                                                             float* t) {
    const long long hw = (long long)H * W, qc = hw + H, off = (long long)h * W;
    const float* pi = P + (long long)i * hw + off;
    float* qi = q + (long long)i * qc;
    float s = 0.0f, d = 0.0f;
    for (int f = 0; f < W; f++) {
        const float v = pi[f];
        qi[off + f] = v;
        s = s + v * asrc[off + f];
        d = d + v * adst[off + f];
    }
    qi[hw + h] = s;
    t[(long long)i * H + h] = d;
}

// attn_terms_dp_elem is element e (row i, column f of head h) of the terms
// backward's dP: d(q_i)[f] + (d(s_i,h) aSrc[f] + d(t_i,h) aDst[f]), each
// product rounded.
__host__ __device__ __forceinline__ float attn_terms_dp_elem(long long e, int H, int W, const float* asrc,
                                                             const float* adst, const float* dq, const float* dt) {
    const long long hw = (long long)H * W, qc = hw + H;
    const long long i = e / hw, f = e - i * hw;
    const long long h = f / W;
    const float ds = dq[i * qc + hw + h], dd = dt[i * H + h];
    return dq[i * qc + f] + (ds * asrc[f] + dd * adst[f]);
}

// attn_terms_partial_elem is element e = b*2*heads*width + f of the terms
// backward's block partials: over the rows of block b of nb (span: [b*rows/nb,
// (b+1)*rows/nb)) in order, the double sum from +0 of double(d(s_i,h)) *
// double(P_i[f]) for f < heads*width (daSrc), of double(d(t_i,h)) *
// double(P_i[f - heads*width]) above (daDst), h the column's head.
__host__ __device__ __forceinline__ double attn_terms_partial_elem(long long e, int rows, int nb, int H, int W,
                                                                   const float* P, const float* dq, const float* dt) {
    const long long hw = (long long)H * W, qc = hw + H, tw = 2 * hw;
    const long long b = e / tw, f2 = e - b * tw;
    const long long lo = b * rows / nb, hi = (b + 1) * rows / nb;
    const int src = f2 < hw;
    const long long f = src ? f2 : f2 - hw, h = f / W;
    double s = 0.0;
    for (long long i = lo; i < hi; i++) {
        const float d = src ? dq[i * qc + hw + h] : dt[i * H + h];
        s += (double)d * (double)P[i * hw + f];
    }
    return s;
}

// attn_terms_finish_col is column f2 of the terms backward's totals:
// float(the nb partials of column f2 added from +0 in block order).
__host__ __device__ __forceinline__ float attn_terms_finish_col(long long f2, int nb, long long tw,
                                                                const double* partial) {
    double s = 0.0;
    for (int b = 0; b < nb; b++) s += partial[(long long)b * tw + f2];
    return (float)s;
}

// ---- ELU ----

// goexpm1 is Go's math.Expm1 (the portable expm1 of $GOROOT/src/math/
// expm1.go, FreeBSD's s_expm1.c) with every operation rounded separately,
// as a build for the baseline amd64 runs it. (With GOAMD64=v3 Go fuses
// some of its products into FMAs, which moves the last bit of the double
// result for some x; rounded to float32, as ELU uses it, every x <= 0
// gives the same result either way: checked exhaustively.)
__host__ __device__ __forceinline__ double goexpm1(double x) {
    const double Othreshold = 7.09782712893383973096e+02; // 0x40862E42FEFA39EF
    const double Ln2X56 = 3.88162421113569373274e+01;     // 0x4043687a9f1af2b1
    const double Ln2HalfX3 = 1.03972077083991796413e+00;  // 0x3ff0a2b23f3bab73
    const double Ln2Half = 3.46573590279972654709e-01;    // 0x3fd62e42fefa39ef
    const double Ln2Hi = 6.93147180369123816490e-01;      // 0x3fe62e42fee00000
    const double Ln2Lo = 1.90821492927058770002e-10;      // 0x3dea39ef35793c76
    const double InvLn2 = 1.44269504088896338700e+00;     // 0x3ff71547652b82fe
    const double Tiny = 1.0 / 18014398509481984.0;        // 2^-54
    const double Q1 = -3.33333333333331316428e-02;        // 0xBFA11111111110F4
    const double Q2 = 1.58730158725481460165e-03;         // 0x3F5A01A019FE5585
    const double Q3 = -7.93650757867487942473e-05;        // 0xBF14CE199EAADBB7
    const double Q4 = 4.00821782732936239552e-06;         // 0x3ED0CFCA86E65239
    const double Q5 = -2.01099218183624371326e-07;        // 0xBE8AFDB76E09C32D
    const unsigned long long bx = f64bits(x);
    if (x != x || bx == 0x7FF0000000000000ull) return x;
    if (bx == 0xFFF0000000000000ull) return -1.0;
    double absx = x;
    int sign = 0;
    if (x < 0) {
        absx = -absx;
        sign = 1;
    }
    if (absx >= Ln2X56) {
        if (sign) return -1.0;
        if (absx >= Othreshold) return f64frombits(0x7FF0000000000000ull);
    }
    double c = 0.0;
    long long k = 0;
    if (absx > Ln2Half) {
        double hi, lo;
        if (absx < Ln2HalfX3) {
            if (!sign) {
                hi = x - Ln2Hi;
                lo = Ln2Lo;
                k = 1;
            } else {
                hi = x + Ln2Hi;
                lo = -Ln2Lo;
                k = -1;
            }
        } else {
            if (!sign) {
                k = (long long)(InvLn2 * x + 0.5);
            } else {
                k = (long long)(InvLn2 * x - 0.5);
            }
            const double t = (double)k;
            hi = x - t * Ln2Hi;
            lo = t * Ln2Lo;
        }
        x = hi - lo;
        c = (hi - x) - lo;
    } else if (absx < Tiny) {
        return x;
    }
    const double hfx = 0.5 * x;
    const double hxs = x * hfx;
    const double r1 = 1.0 + hxs * (Q1 + hxs * (Q2 + hxs * (Q3 + hxs * (Q4 + hxs * Q5))));
    double t = 3.0 - r1 * hfx;
    double e = hxs * ((r1 - t) / (6.0 - x * t));
    if (k == 0) return x - (x * e - hxs);
    e = (x * (e - c) - c);
    e = e - hxs;
    if (k == -1) return 0.5 * (x - e) - 0.5;
    if (k == 1) {
        if (x < -0.25) return -2.0 * (e - (x + 0.5));
        return 1.0 + 2.0 * (x - e);
    }
    if (k <= -2 || k > 56) {
        double y = 1.0 - (e - x);
        y = f64frombits(f64bits(y) + ((unsigned long long)k << 52));
        return y - 1.0;
    }
    if (k < 20) {
        t = f64frombits(0x3ff0000000000000ull - (0x20000000000000ull >> k)); // 1 - 2^-k
        double y = t - (e - x);
        return f64frombits(f64bits(y) + ((unsigned long long)k << 52));
    }
    t = f64frombits((unsigned long long)(0x3ff - k) << 52); // 2^-k
    double y = x - (e + t);
    y = y + 1.0;
    return f64frombits(f64bits(y) + ((unsigned long long)k << 52));
}

// elu_value is CPU ELU: x where x > 0, else float32(Expm1(float64(x)))
// (NaN, -0 and -Inf included).
__host__ __device__ __forceinline__ float elu_value(float x) { return x > 0.0f ? x : (float)goexpm1((double)x); }

// elu_backward_value is CPU ELUBackward: dy where y > 0, else dy * (y + 1).
__host__ __device__ __forceinline__ float elu_backward_value(float y, float dy) {
    return y > 0.0f ? dy : dy * (y + 1.0f);
}

#endif // GNN_SPMD_KERNELS_ATTENTION_CUH
