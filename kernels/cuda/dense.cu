// Dense element-wise kernels, reductions, the loss and the optimizer step:
// the CUDA twins of kernels/elementwise.go, dropout.go, adam.go and
// loss.go. See common.cuh for the conventions.
#include "common.cuh"

// add_bias: y[i][j] += b[j] (CPU AddBias).
extern "C" __global__ void add_bias(int rows, int F, float* y, const float* b) {
    GRID_STRIDE_LOOP(e, (long long)rows * F) {
        const int j = (int)(e % F);
        y[e] = y[e] + b[j];
    }
}

// bias_grad_partial: partial[c*F+j] = sum in double of dy[i][j] over the
// rows i of chunk c ([c*rowsPerChunk, min(rows, (c+1)*rowsPerChunk)), in
// increasing i), for every chunk c and column j (CPU biasGradTask.do, with
// chunks of fixed size instead of span()'s near-equal ones).
extern "C" __global__ void bias_grad_partial(int rows, int F, int rowsPerChunk, const float* dy,
                                             double* partial) {
    if (rowsPerChunk <= 0) return;
    const long long chunks = ((long long)rows + rowsPerChunk - 1) / rowsPerChunk;
    GRID_STRIDE_LOOP(e, chunks * F) {
        const long long c = e / F;
        const int j = (int)(e - c * F);
        const long long lo = c * rowsPerChunk;
        const long long hi = min((long long)rows, lo + rowsPerChunk);
        double s = 0.0;
        for (long long i = lo; i < hi; i++) s += (double)dy[i * F + j];
        partial[e] = s;
    }
}

// bias_grad_finish: db[j] = float((accumulate ? double(db[j]) : 0) + the
// partials of column j in chunk order), as CPU BiasGrad combines its blocks.
extern "C" __global__ void bias_grad_finish(int chunks, int F, const double* partial, float* db,
                                            int accumulate) {
    GRID_STRIDE_LOOP(j, F) {
        double s = accumulate ? (double)db[j] : 0.0;
        for (int c = 0; c < chunks; c++) s += partial[(long long)c * F + j];
        db[j] = (float)s;
    }
}

// relu: y = x if x > 0, else +0 (NaN and -0 give +0, as CPU ReLU); y may
// alias x. Decided on the bits (x > 0 exactly when they lie in [1, +Inf]
// as an unsigned integer): nvcc turns a float select into max.f32, whose
// result for -0 and +0 is not the CPU's to rely on.
extern "C" __global__ void relu(long long n, const float* x, float* y) {
    GRID_STRIDE_LOOP(k, n) {
        const unsigned int b = f32bits(x[k]);
        y[k] = f32frombits(b - 1u < 0x7f800000u ? b : 0u);
    }
}

// relu_backward: dx = dy where y > 0, else +0; dx may alias y or dy.
extern "C" __global__ void relu_backward(long long n, const float* y, const float* dy, float* dx) {
    GRID_STRIDE_LOOP(k, n) {
        const float v = y[k], d = dy[k];
        dx[k] = v > 0.0f ? d : 0.0f;
    }
}

// mul: y = x * m element-wise; y may alias x.
extern "C" __global__ void mul(long long n, const float* x, const float* m, float* y) {
    GRID_STRIDE_LOOP(k, n) { y[k] = x[k] * m[k]; }
}

// dropout_elem is dropoutTask.do for one element v in column j of a row
// whose key is h ^ uint64(uint32(rowID))<<32: u is the draw's 24-bit
// integer, kept iff u >= thr (thr = ceil(p*2^24), scale = float32(1/(1-p)),
// both computed by the caller on the host as CPU Dropout does). Dropped
// elements get exact +0 in y and mask, by masking the bits.
__host__ __device__ __forceinline__ void dropout_elem(float v, unsigned long long key, int j,
                                                      unsigned int thr, float scale, float* y,
                                                      float* mask) {
    const unsigned int u = (unsigned int)(mix64(key ^ (unsigned long long)(unsigned int)j) >> 40);
    const unsigned int keep = ((u - thr) >> 31) - 1u;
    *mask = f32frombits(f32bits(scale) & keep);
    *y = f32frombits(f32bits(v * scale) & keep);
}

// dropout: CPU Dropout with h = mix64(seed); rowIDs == NULL means row i has
// ID i. copyOnly != 0 is p == 0: y = x and mask = 1. y may alias x.
extern "C" __global__ void dropout(int rows, int F, const float* x, float* y, float* mask,
                                   unsigned long long h, const int* rowIDs, unsigned int thr,
                                   float scale, int copyOnly) {
    GRID_STRIDE_LOOP(e, (long long)rows * F) {
        if (copyOnly) {
            y[e] = x[e];
            mask[e] = 1.0f;
            continue;
        }
        const long long i = e / F;
        const int j = (int)(e - i * F);
        const int id = rowIDs != NULL ? rowIDs[i] : (int)i;
        const unsigned long long key = h ^ ((unsigned long long)(unsigned int)id << 32);
        float yv, mv;
        dropout_elem(x[e], key, j, thr, scale, &yv, &mv);
        y[e] = yv;
        mask[e] = mv;
    }
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

// adam: one step of CPU Adam; stepSize = float32(lr/(1-beta1^t)) and
// bc2Sqrt = float32(sqrt(1-beta2^t)) are computed by the caller in float64
// as the CPU does.
extern "C" __global__ void adam(long long n, float* p, const float* g, float* m, float* v, float beta1,
                                float beta2, float eps, float wd, float stepSize, float bc2Sqrt) {
    GRID_STRIDE_LOOP(k, n) {
        float pk = p[k], mk = m[k], vk = v[k];
        adam_elem(&pk, g[k], &mk, &vk, beta1, beta2, eps, wd, stepSize, bc2Sqrt);
        m[k] = mk;
        v[k] = vk;
        p[k] = pk;
    }
}

// sum_squares_partial (blockDim.x == 256): partial[blockIdx.x] = the sum
// of double(x)*double(x) over this block's grid-stride elements. CPU
// SumSquares adds sequentially, so the total differs by rounding only.
extern "C" __global__ void sum_squares_partial(long long n, const float* x, double* partial) {
    __shared__ double s[256];
    double acc = 0.0;
    GRID_STRIDE_LOOP(k, n) {
        const double v = (double)x[k];
        acc += v * v;
    }
    s[threadIdx.x] = acc;
    REDUCE_BLOCK256(s);
    if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}

// sum_f64_partial (blockDim.x == 256): partial[blockIdx.x] = the sum of
// x over this block's grid-stride elements (used to sum partials and row
// losses; launched again on its own output to finish).
extern "C" __global__ void sum_f64_partial(long long n, const double* x, double* partial) {
    __shared__ double s[256];
    double acc = 0.0;
    GRID_STRIDE_LOOP(k, n) { acc += x[k]; }
    s[threadIdx.x] = acc;
    REDUCE_BLOCK256(s);
    if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
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

// softmax_xent: for t < n, row i = rows[t]: dlogits row i = scale*(softmax
// - onehot(labels[i])) and rowloss[t] = the row's cross-entropy (CPU
// SoftmaxCrossEntropy, which zeroes dlogits first and sums the losses: the
// caller does both). rows must not repeat. One thread per listed row.
extern "C" __global__ void softmax_xent(int n, int C, const float* logits, const int* labels, const int* rows,
                                        float scale, float* dlogits, double* rowloss) {
    GRID_STRIDE_LOOP(t, n) {
        const long long i = rows[t];
        rowloss[t] = softmax_xent_row(C, logits + i * C, labels[i], scale, dlogits + i * C);
    }
}

// argmax_row is CountCorrect's argmax: the first index of the largest value.
__host__ __device__ __forceinline__ int argmax_row(int C, const float* x) {
    int best = 0;
    for (int j = 1; j < C; j++)
        if (x[j] > x[best]) best = j;
    return best;
}

// count_correct: *count += the number of listed rows whose argmax equals
// their label (CPU CountCorrect).
extern "C" __global__ void count_correct(int n, int C, const float* logits, const int* labels, const int* rows,
                                         unsigned int* count) {
    GRID_STRIDE_LOOP(t, n) {
        const long long i = rows[t];
        if (argmax_row(C, logits + i * C) == labels[i]) atomicAdd(count, 1u);
    }
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

// score_histogram: hist[labels[i]*bins + bin(i)] += 1 for the listed rows of
// a two-class logits matrix (CPU ScoreHistogram with ScoreBins = bins).
extern "C" __global__ void score_histogram(int n, const float* logits, const int* labels, const int* rows, int bins,
                                           double* hist) {
    GRID_STRIDE_LOOP(t, n) {
        const long long i = rows[t];
        const int b = score_bin(logits[2 * i], logits[2 * i + 1], bins);
        atomicAdd(&hist[(long long)labels[i] * bins + b], 1.0);
    }
}
