// Per-element and per-row routines of the dense kernels (dense.cu): the
// arithmetic of kernels/elementwise.go, dropout.go, adam.go and loss.go,
// kept apart from the __global__ kernels so that a host compiler can
// include them (kernels/cuda/hosttwin tests them against the Go code).
#ifndef GNN_SPMD_KERNELS_DENSE_CUH
#define GNN_SPMD_KERNELS_DENSE_CUH

#include "common.cuh"

// add_bias_elem is element e of add_bias on a matrix of F columns: y[e] +
// b[e % F] (CPU AddBias).
__host__ __device__ __forceinline__ float add_bias_elem(long long e, int F, const float* y, const float* b) {
    const int j = (int)(e % F);
    return y[e] + b[j];
}

// bias_grad_partial_elem is element e = c*F + j of bias_grad_partial: the
// sum in double of dy[i][j] over the rows i of chunk c ([c*rowsPerChunk,
// min(rows, (c+1)*rowsPerChunk)), in increasing i), as CPU biasGradTask.do
// sums a block.
__host__ __device__ __forceinline__ double bias_grad_partial_elem(long long e, int rows, int F, int rowsPerChunk,
                                                                  const float* dy) {
    const long long c = e / F;
    const int j = (int)(e - c * F);
    const long long lo = c * rowsPerChunk;
    const long long hi = min_ll(rows, lo + rowsPerChunk);
    double s = 0.0;
    for (long long i = lo; i < hi; i++) s += (double)dy[i * F + j];
    return s;
}

// bias_grad_finish_col is column j of bias_grad_finish: float((accumulate ?
// double(db[j]) : 0) + the partials of column j in chunk order), as CPU
// BiasGrad combines its blocks.
__host__ __device__ __forceinline__ float bias_grad_finish_col(long long j, int chunks, int F, const double* partial,
                                                               const float* db, int accumulate) {
    double s = accumulate ? (double)db[j] : 0.0;
    for (int c = 0; c < chunks; c++) s += partial[(long long)c * F + j];
    return (float)s;
}

// relu_value: x if x > 0, else +0 (NaN and -0 give +0, as CPU ReLU).
// Decided on the bits (x > 0 exactly when they lie in [1, +Inf] as an
// unsigned integer): nvcc turns a float select into max.f32, whose result
// for -0 and +0 is not the CPU's to rely on.
__host__ __device__ __forceinline__ float relu_value(float x) {
    const unsigned int b = f32bits(x);
    return f32frombits(b - 1u < 0x7f800000u ? b : 0u);
}

// relu_backward_value: d where y > 0, else +0 (CPU ReLUBackward).
__host__ __device__ __forceinline__ float relu_backward_value(float y, float d) { return y > 0.0f ? d : 0.0f; }

// mul_value: x * m (CPU Mul).
__host__ __device__ __forceinline__ float mul_value(float x, float m) { return x * m; }

// dropout_elem is dropoutTask.do for one element v in column j of a row
// whose key is row_key(h, rowID): u is the draw's 24-bit integer, kept iff
// u >= thr (thr = ceil(p*2^24), scale = float32(1/(1-p)), both computed by
// the caller on the host as CPU Dropout does). Dropped elements get exact
// +0 in y and mask, by masking the bits.
__host__ __device__ __forceinline__ void dropout_elem(float v, unsigned long long key, int j,
                                                      unsigned int thr, float scale, float* y,
                                                      float* mask) {
    const unsigned int u = (unsigned int)(mix64(key ^ (unsigned long long)(unsigned int)j) >> 40);
    const unsigned int keep = ((u - thr) >> 31) - 1u;
    *mask = f32frombits(f32bits(scale) & keep);
    *y = f32frombits(f32bits(v * scale) & keep);
}

// dropout_at is element e of dropout on a matrix of F columns: row i =
// e/F has ID rowIDs[i] (i when rowIDs is NULL); copyOnly (p == 0) gives
// y = x and mask = 1, as CPU Dropout does.
__host__ __device__ __forceinline__ void dropout_at(long long e, int F, const float* x, unsigned long long h,
                                                    const int* rowIDs, unsigned int thr, float scale, int copyOnly,
                                                    float* y, float* mask) {
    if (copyOnly) {
        *y = x[e];
        *mask = 1.0f;
        return;
    }
    const long long i = e / F;
    const int j = (int)(e - i * F);
    const int id = rowIDs != NULL ? rowIDs[i] : (int)i;
    dropout_elem(x[e], row_key(h, id), j, thr, scale, y, mask);
}

// adam_elem is adamTask.do for one element, all in float32 with separately
// rounded operations; sqrtf is the correctly rounded square root, which is
// what float32(math.Sqrt(float64(v))) gives.
__host__ __device__ __forceinline__ void adam_elem(float* p, float g, float* m, float* v,
                                                   float beta1, float beta2, float eps, float wd,
                                                   float stepSize, float bc2Sqrt) {
    float gi = g;
    if (wd > 0.0f) gi = gi + wd * *p;
    const float mi = beta1 * *m + (1.0f - beta1) * gi;
    const float vi = beta2 * *v + ((1.0f - beta2) * gi) * gi;
    *m = mi;
    *v = vi;
    const float denom = sqrtf(vi) / bc2Sqrt + eps;
    *p = *p - (stepSize * mi) / denom;
}

// sum_squares_stride is one thread's share of sum_squares_partial: the sum
// in order of double(x)*double(x) over k = k0, k0+step, ... < n. With k0 =
// 0 and step = 1 it is CPU SumSquares (the products are exact in double,
// so fused or not they give these bits).
__host__ __device__ __forceinline__ double sum_squares_stride(long long n, const float* x, long long k0,
                                                              long long step) {
    double acc = 0.0;
    for (long long k = k0; k < n; k += step) {
        const double v = (double)x[k];
        acc += v * v;
    }
    return acc;
}

// softmax_xent_row is sceTask.do for one row x of C >= 1 logits with label
// `label`: d = scale*(softmax(x) - onehot(label)), computed as the CPU does
// (float32 max, double exp via goexp, the float32 rounding of each exp
// before it is rescaled), and the row's cross-entropy in double. Only the
// loss uses log(), which may differ from Go's math.Log by rounding.
__host__ __device__ __forceinline__ double softmax_xent_row(int C, const float* x, int label, float scale,
                                                            float* d) {
    float mx = x[0];
    for (int j = 1; j < C; j++) {
        const float v = x[j];
        if (v > mx) mx = v;
    }
    double s = 0.0;
    for (int j = 0; j < C; j++) {
        const double e = goexp((double)x[j] - (double)mx);
        d[j] = (float)e;
        s += e;
    }
    const double loss = log(s) - ((double)x[label] - (double)mx);
    const double k = (double)scale / s;
    for (int j = 0; j < C; j++) d[j] = (float)((double)d[j] * k);
    d[label] = (float)((double)d[label] - (double)scale);
    return loss;
}

// argmax_row is CountCorrect's argmax: the first index of the largest value.
__host__ __device__ __forceinline__ int argmax_row(int C, const float* x) {
    int best = 0;
    for (int j = 1; j < C; j++)
        if (x[j] > x[best]) best = j;
    return best;
}

// score_bin is ScoreHistogram's bin of a two-class row (l0, l1):
// int(bins/(1+exp(-d))) with d = double(l1)-double(l0), clamped to
// [0, bins) (NaN gives 0, as Go's int conversion of NaN, clamped, does).
__host__ __device__ __forceinline__ int score_bin(float l0, float l1, int bins) {
    const double d = (double)l1 - (double)l0;
    const double v = (double)bins / (1.0 + goexp(-d));
    int b = v != v ? 0 : (int)v;
    if (b < 0) b = 0;
    if (b > bins - 1) b = bins - 1;
    return b;
}

#endif // GNN_SPMD_KERNELS_DENSE_CUH
