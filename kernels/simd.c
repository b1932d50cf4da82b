// The CPU device's memory-bound loops in C: the aggregation's row sums and
// the ReLU pair. Each is written once over GCC vector types and compiled
// twice, for AVX2 and for the baseline ISA, chosen at run time (the
// aggregation also for AVX-512). Every value gets the operations of its Go
// twin (spmm.go, elementwise.go) in the same order, a rounded product then
// a rounded sum, so the bits are the same (ISO C, -std=c11, fuses no
// product into its sum, though the AVX-512 target has FMA), but for the
// payload of a NaN: where both terms of a sum are NaN, which one's payload
// survives depends on the operand order the compiler chose.
#include <stdint.h>

#define INLINE static inline __attribute__((always_inline))
#define AVX2 __attribute__((target("avx2")))

typedef float v8 __attribute__((vector_size(32)));

// Unaligned 8-float loads and stores (macros: a function passing v8 by
// value would change the baseline ABI).
typedef float v8u __attribute__((vector_size(32), aligned(4)));
#define load8(p) ((v8) * (const v8u*)(p))
#define store8(p, v) (*(v8u*)(p) = (v))

// The weight w in every lane, by copying: zero + w would turn a weight of
// -0 into +0 (-0 + 0 = +0), and the sign of a product with it.
#define bcast8(w) ((v8){(w), (w), (w), (w), (w), (w), (w), (w)})

// How many nonzeros ahead a source row is prefetched: random rows miss
// cache and TLB, and prefetching hides that latency.
enum { PREFETCH = 16 };

// The aggregation's column block (floats): 256 bytes of a source row.
enum { BLOCK = 64 };

// prefetch_row asks for the first and the last cache line of the f floats
// at r; the hardware prefetcher fetches the lines between, as it does for
// any run of lines. A prefetch per line, 16 for a 1 KiB row, costs more
// issue slots than the misses it hides: on the 1M-node benchmark graph in
// METIS order the two lines alone took a third less time, 256 and 40 wide,
// in BenchmarkAggregation (calls alone), and 3-8% less in a whole epoch
// (BenchmarkEpochRoofline).
INLINE void prefetch_row(const float* r, int64_t f) {
    __builtin_prefetch(r);
    __builtin_prefetch(r + f - 1);
}

// Columns of one output row, y_i[c:c+64] (+)= sum over k in [k0, k1) of
// val[k] * x[col[k], c:c+64] (val NULL: weight 1, no product), in the order
// of k, the sums in registers across the row's nonzeros. The source rows'
// pieces of the nonzeros up to pf_end are prefetched PREFETCH ahead.
INLINE void spmm_block(float* restrict yi, const float* restrict x, int64_t f, int64_t c, const int32_t* col,
                       const float* val, int64_t k0, int64_t k1, int64_t pf_end, int acc) {
    const v8 zero = {0};
    v8 s0 = zero, s1 = zero, s2 = zero, s3 = zero, s4 = zero, s5 = zero, s6 = zero, s7 = zero;
    if (acc) {
        s0 = load8(yi + c), s1 = load8(yi + c + 8), s2 = load8(yi + c + 16), s3 = load8(yi + c + 24);
        s4 = load8(yi + c + 32), s5 = load8(yi + c + 40), s6 = load8(yi + c + 48), s7 = load8(yi + c + 56);
    }
    for (int64_t k = k0; k < k1; k++) {
        if (k + PREFETCH < pf_end) prefetch_row(x + (int64_t)col[k + PREFETCH] * f + c, BLOCK);
        const float* xs = x + (int64_t)col[k] * f + c;
        v8 x0 = load8(xs), x1 = load8(xs + 8), x2 = load8(xs + 16), x3 = load8(xs + 24);
        v8 x4 = load8(xs + 32), x5 = load8(xs + 40), x6 = load8(xs + 48), x7 = load8(xs + 56);
        if (val) {
            const float w = val[k];
            const v8 a = bcast8(w);
            x0 *= a, x1 *= a, x2 *= a, x3 *= a, x4 *= a, x5 *= a, x6 *= a, x7 *= a;
        }
        s0 += x0, s1 += x1, s2 += x2, s3 += x3, s4 += x4, s5 += x5, s6 += x6, s7 += x7;
    }
    store8(yi + c, s0), store8(yi + c + 8, s1), store8(yi + c + 16, s2), store8(yi + c + 24, s3);
    store8(yi + c + 32, s4), store8(yi + c + 40, s5), store8(yi + c + 48, s6), store8(yi + c + 56, s7);
}

// SPMM_PASS defines NAME, columns c .. c+L*M-1 of one output row in M
// vectors V of L floats (LOAD, STORE, BCAST): one pass over the row's
// nonzeros with the M sums in registers, each in the order of k as in
// spmm_block; the source rows' next PF floats from c are prefetched. A pass
// per vector would read each source row's piece M times and its index M
// times.
#define SPMM_PASS(NAME, V, L, LOAD, STORE, BCAST, M, PF)                                                       \
    INLINE void NAME(float* restrict yi, const float* restrict x, int64_t f, int64_t c, const int32_t* col,     \
                     const float* val, int64_t k0, int64_t k1, int64_t pf_end, int acc) {                      \
        const V zero = {0};                                                                                     \
        V s[M];                                                                                                 \
        for (int t = 0; t < M; t++) s[t] = acc ? LOAD(yi + c + L * t) : zero;                                  \
        for (int64_t k = k0; k < k1; k++) {                                                                     \
            if (k + PREFETCH < pf_end) prefetch_row(x + (int64_t)col[k + PREFETCH] * f + c, PF);                \
            const float* xs = x + (int64_t)col[k] * f + c;                                                      \
            if (val) {                                                                                          \
                const float w = val[k];                                                                         \
                const V a = BCAST(w);                                                                           \
                for (int t = 0; t < M; t++) s[t] += LOAD(xs + L * t) * a;                                       \
            } else {                                                                                            \
                for (int t = 0; t < M; t++) s[t] += LOAD(xs + L * t);                                           \
            }                                                                                                   \
        }                                                                                                       \
        for (int t = 0; t < M; t++) STORE(yi + c + L * t, s[t]);                                                \
    }

// spmm_narrowM: columns c .. c+8M-1 when fewer than BLOCK remain (M = 1..7
// vectors of 8), prefetching the row's rest.
#define SPMM_NARROW(M) SPMM_PASS(spmm_narrow##M, v8, 8, load8, store8, bcast8, M, f - c)
SPMM_NARROW(1)
SPMM_NARROW(2)
SPMM_NARROW(3)
SPMM_NARROW(4)
SPMM_NARROW(5)
SPMM_NARROW(6)
SPMM_NARROW(7)

// Columns c.. of one output row when fewer than BLOCK remain: the whole
// vectors of 8 in one pass (spmm_narrow), then the last f%8 one at a time,
// each sum in the order of k as above.
INLINE void spmm_tail(float* restrict yi, const float* restrict x, int64_t f, int64_t c, const int32_t* col,
                      const float* val, int64_t k0, int64_t k1, int64_t pf_end, int acc) {
    switch ((f - c) / 8) {
    case 1: spmm_narrow1(yi, x, f, c, col, val, k0, k1, pf_end, acc); break;
    case 2: spmm_narrow2(yi, x, f, c, col, val, k0, k1, pf_end, acc); break;
    case 3: spmm_narrow3(yi, x, f, c, col, val, k0, k1, pf_end, acc); break;
    case 4: spmm_narrow4(yi, x, f, c, col, val, k0, k1, pf_end, acc); break;
    case 5: spmm_narrow5(yi, x, f, c, col, val, k0, k1, pf_end, acc); break;
    case 6: spmm_narrow6(yi, x, f, c, col, val, k0, k1, pf_end, acc); break;
    case 7: spmm_narrow7(yi, x, f, c, col, val, k0, k1, pf_end, acc); break;
    }
    for (c += (f - c) / 8 * 8; c < f; c++) {
        float s = acc ? yi[c] : 0;
        for (int64_t k = k0; k < k1; k++) {
            float xv = x[(int64_t)col[k] * f + c];
            if (val) xv *= val[k];
            s += xv;
        }
        yi[c] = s;
    }
}

// Rows rows[lo:hi] of y = A x (+= when acc), or rows lo..hi-1 when rows is
// NULL; A is the CSR ptr, col, val (val NULL: all ones). The columns go in
// blocks of BLOCK, each block over all the rows before the next: where
// neighbouring rows share sources (a graph ordered by its clusters), a
// cluster's pieces of one block stay in cache while its rows are summed,
// which whole rows, 4 to 8 times wider, would not. Every sum keeps the order
// of k, so the bits do not depend on the blocking. Contiguous rows prefetch
// across row ends up to the chunk's last nonzero, listed rows within each
// row.
INLINE void spmm_body(float* y, const float* x, int64_t f, const int64_t* ptr, const int32_t* col, const float* val,
                      const int32_t* rows, int64_t lo, int64_t hi, int acc) {
    int64_t chunk_end = rows ? 0 : ptr[hi];
    int64_t c = 0;
    for (; c + BLOCK <= f; c += BLOCK) {
        for (int64_t r = lo; r < hi; r++) {
            int64_t i = rows ? rows[r] : r;
            int64_t k0 = ptr[i], k1 = ptr[i + 1];
            spmm_block(y + i * f, x, f, c, col, val, k0, k1, rows ? k1 : chunk_end, acc);
        }
    }
    if (c == f) return;
    for (int64_t r = lo; r < hi; r++) {
        int64_t i = rows ? rows[r] : r;
        int64_t k0 = ptr[i], k1 = ptr[i + 1];
        spmm_tail(y + i * f, x, f, c, col, val, k0, k1, rows ? k1 : chunk_end, acc);
    }
}

// The AVX-512 variant: 16-float vectors and 32 registers, so that up to 256
// columns of a row (16 sums) stay in registers across its nonzeros, and a
// 256-wide layer gathers each source row whole in one pass instead of four
// 256-byte pieces in four. Measured on the 1M-node benchmark graph in METIS
// order (README, Speed): the aggregation takes 36-61% of the time of the
// AVX2 blocks, whose pieces do not stay in cache between passes there.
#define AVX512 __attribute__((target("avx2,avx512f")))
typedef float v16 __attribute__((vector_size(64)));
typedef float v16u __attribute__((vector_size(64), aligned(4)));
#define load16(p) ((v16) * (const v16u*)(p))
#define store16(p, v) (*(v16u*)(p) = (v))
#define bcast16(w) ((v16){(w), (w), (w), (w), (w), (w), (w), (w), (w), (w), (w), (w), (w), (w), (w), (w)})
enum { WIDE = 256 };

// spmm_wideW: columns c .. c+16W-1 (W = 1..16 vectors of 16).
#define SPMM_WIDE(W) SPMM_PASS(spmm_wide##W, v16, 16, load16, store16, bcast16, W, 16 * W)
SPMM_WIDE(1)
SPMM_WIDE(2)
SPMM_WIDE(3)
SPMM_WIDE(4)
SPMM_WIDE(5)
SPMM_WIDE(6)
SPMM_WIDE(7)
SPMM_WIDE(8)
SPMM_WIDE(9)
SPMM_WIDE(10)
SPMM_WIDE(11)
SPMM_WIDE(12)
SPMM_WIDE(13)
SPMM_WIDE(14)
SPMM_WIDE(15)
SPMM_WIDE(16)

// spmm_wide is columns c .. c+16w-1 of one output row, w = 1..16.
AVX512 static inline __attribute__((always_inline)) void spmm_wide(int w, float* restrict yi, const float* restrict x,
                                                                   int64_t f, int64_t c, const int32_t* col,
                                                                   const float* val, int64_t k0, int64_t k1,
                                                                   int64_t pf_end, int acc) {
#define WIDE_CASE(W) \
    case W: spmm_wide##W(yi, x, f, c, col, val, k0, k1, pf_end, acc); break;
    switch (w) {
        WIDE_CASE(1) WIDE_CASE(2) WIDE_CASE(3) WIDE_CASE(4) WIDE_CASE(5) WIDE_CASE(6) WIDE_CASE(7) WIDE_CASE(8)
        WIDE_CASE(9) WIDE_CASE(10) WIDE_CASE(11) WIDE_CASE(12) WIDE_CASE(13) WIDE_CASE(14) WIDE_CASE(15) WIDE_CASE(16)
    }
#undef WIDE_CASE
}

// spmm_body's loop for AVX-512: blocks of WIDE columns, then a rest of 64 or
// more in one pass of whole 16-vectors, then what is left (fewer than 64)
// as spmm_tail does it. Every sum keeps the order of k: the bits are
// spmm_body's.
AVX512 static void spmm_avx512(float* y, const float* x, int64_t f, const int64_t* ptr, const int32_t* col,
                               const float* val, const int32_t* rows, int64_t lo, int64_t hi, int acc) {
    const int64_t chunk_end = rows ? 0 : ptr[hi];
    for (int64_t c = 0; c < f;) {
        // Below 64 columns spmm_tail takes them all in one pass.
        const int64_t w = f - c >= WIDE ? WIDE / 16 : f - c >= 64 ? (f - c) / 16 : 0;
        for (int64_t r = lo; r < hi; r++) {
            const int64_t i = rows ? rows[r] : r;
            const int64_t k0 = ptr[i], k1 = ptr[i + 1], pf_end = rows ? k1 : chunk_end;
            if (w > 0)
                spmm_wide((int)w, y + i * f, x, f, c, col, val, k0, k1, pf_end, acc);
            else
                spmm_tail(y + i * f, x, f, c, col, val, k0, k1, pf_end, acc);
        }
        c += w > 0 ? 16 * w : f - c;
    }
}

AVX2 static void spmm_avx2(float* y, const float* x, int64_t f, const int64_t* ptr, const int32_t* col,
                           const float* val, const int32_t* rows, int64_t lo, int64_t hi, int acc) {
    spmm_body(y, x, f, ptr, col, val, rows, lo, hi, acc);
}

static void spmm_base(float* y, const float* x, int64_t f, const int64_t* ptr, const int32_t* col, const float* val,
                      const int32_t* rows, int64_t lo, int64_t hi, int acc) {
    spmm_body(y, x, f, ptr, col, val, rows, lo, hi, acc);
}

// x86's vector width is decided once; other targets take the baseline.
// 0: baseline, 1: AVX2, 2: AVX2 and AVX-512 (the aggregation only).
int gnn_kernels_simd(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2")) return 0;
    return __builtin_cpu_supports("avx512f") ? 2 : 1;
#else
    return 0;
#endif
}

void gnn_spmm(int level, float* y, const float* x, int64_t f, const int64_t* ptr, const int32_t* col,
              const float* val, const int32_t* rows, int64_t lo, int64_t hi, int acc) {
    if (level >= 2)
        spmm_avx512(y, x, f, ptr, col, val, rows, lo, hi, acc);
    else if (level == 1)
        spmm_avx2(y, x, f, ptr, col, val, rows, lo, hi, acc);
    else
        spmm_base(y, x, f, ptr, col, val, rows, lo, hi, acc);
}

// y = x > 0 ? x : 0, decided by the comparison (NaN and -0 give +0), without
// branches; y may be x.
INLINE void relu_body(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0 ? x[i] : 0.0f;
}

// dx = y > 0 ? dy : 0; dx may be dy.
INLINE void relu_back_body(const float* y, const float* dy, float* dx, int64_t n) {
    for (int64_t i = 0; i < n; i++) dx[i] = y[i] > 0 ? dy[i] : 0.0f;
}

AVX2 static void relu_avx2(const float* x, float* y, int64_t n) { relu_body(x, y, n); }
static void relu_base(const float* x, float* y, int64_t n) { relu_body(x, y, n); }
AVX2 static void relu_back_avx2(const float* y, const float* dy, float* dx, int64_t n) { relu_back_body(y, dy, dx, n); }
static void relu_back_base(const float* y, const float* dy, float* dx, int64_t n) { relu_back_body(y, dy, dx, n); }

void gnn_relu(int avx2, const float* x, float* y, int64_t n) {
    if (avx2)
        relu_avx2(x, y, n);
    else
        relu_base(x, y, n);
}

void gnn_relu_backward(int avx2, const float* y, const float* dy, float* dx, int64_t n) {
    if (avx2)
        relu_back_avx2(y, dy, dx, n);
    else
        relu_back_base(y, dy, dx, n);
}

// Row i of y (rows x f) += b; one float add per value.
INLINE void add_bias_body(float* restrict y, const float* restrict b, int64_t rows, int64_t f) {
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < f; j++) y[i * f + j] += b[j];
}

// s[j] = the sum over the rows of y (rows x f) of y[i][j] in float64, in row
// order: the vector runs across columns, so each column's sum is the
// sequential one of the Go twin.
// Four rows at a time, so that s is loaded and stored once per four adds.
INLINE void col_sums_body(const float* restrict y, int64_t rows, int64_t f, double* restrict s) {
    for (int64_t j = 0; j < f; j++) s[j] = 0;
    int64_t i = 0;
    for (; i + 4 <= rows; i += 4) {
        const float *restrict y0 = y + i * f, *restrict y1 = y0 + f, *restrict y2 = y1 + f, *restrict y3 = y2 + f;
        for (int64_t j = 0; j < f; j++) {
            double t = s[j];
            t += (double)y0[j];
            t += (double)y1[j];
            t += (double)y2[j];
            t += (double)y3[j];
            s[j] = t;
        }
    }
    for (; i < rows; i++)
        for (int64_t j = 0; j < f; j++) s[j] += (double)y[i * f + j];
}

AVX2 static void add_bias_avx2(float* y, const float* b, int64_t rows, int64_t f) { add_bias_body(y, b, rows, f); }
static void add_bias_base(float* y, const float* b, int64_t rows, int64_t f) { add_bias_body(y, b, rows, f); }
AVX512 static void col_sums_avx512(const float* y, int64_t rows, int64_t f, double* s) { col_sums_body(y, rows, f, s); }
AVX2 static void col_sums_avx2(const float* y, int64_t rows, int64_t f, double* s) { col_sums_body(y, rows, f, s); }
static void col_sums_base(const float* y, int64_t rows, int64_t f, double* s) { col_sums_body(y, rows, f, s); }

void gnn_add_bias(int avx2, float* y, const float* b, int64_t rows, int64_t f) {
    if (avx2)
        add_bias_avx2(y, b, rows, f);
    else
        add_bias_base(y, b, rows, f);
}

void gnn_col_sums(int level, const float* y, int64_t rows, int64_t f, double* s) {
    if (level >= 2)
        col_sums_avx512(y, rows, f, s);
    else if (level == 1)
        col_sums_avx2(y, rows, f, s);
    else
        col_sums_base(y, rows, f, s);
}
