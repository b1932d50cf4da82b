// Dense element-wise kernels, reductions, the loss and the optimizer step:
// the CUDA twins of kernels/elementwise.go, dropout.go, adam.go and
// loss.go. Their per-element and per-row routines are in dense.cuh; see
// common.cuh for the conventions.
#include "dense.cuh"

// add_bias: y[i][j] += b[j] (CPU AddBias).
extern "C" __global__ void add_bias(int rows, int F, float* y, const float* b) {
    GRID_STRIDE_LOOP(e, (long long)rows * F) { y[e] = add_bias_elem(e, F, y, b); }
}

// bias_grad_partial: partial[c*F+j] = sum in double of dy[i][j] over the
// rows i of chunk c, for every chunk c and column j (CPU biasGradTask.do,
// with chunks of fixed size instead of span()'s near-equal ones).
extern "C" __global__ void bias_grad_partial(int rows, int F, int rowsPerChunk, const float* dy,
                                             double* partial) {
    if (rowsPerChunk <= 0) return;
    const long long chunks = ((long long)rows + rowsPerChunk - 1) / rowsPerChunk;
    GRID_STRIDE_LOOP(e, chunks * F) { partial[e] = bias_grad_partial_elem(e, rows, F, rowsPerChunk, dy); }
}

// bias_grad_finish: db[j] = float((accumulate ? double(db[j]) : 0) + the
// partials of column j in chunk order), as CPU BiasGrad combines its blocks.
extern "C" __global__ void bias_grad_finish(int chunks, int F, const double* partial, float* db,
                                            int accumulate) {
    GRID_STRIDE_LOOP(j, F) { db[j] = bias_grad_finish_col(j, chunks, F, partial, db, accumulate); }
}

// relu: y = relu_value(x); y may alias x.
extern "C" __global__ void relu(long long n, const float* x, float* y) {
    GRID_STRIDE_LOOP(k, n) { y[k] = relu_value(x[k]); }
}

// relu_backward: dx = dy where y > 0, else +0; dx may alias y or dy.
extern "C" __global__ void relu_backward(long long n, const float* y, const float* dy, float* dx) {
    GRID_STRIDE_LOOP(k, n) {
        const float v = y[k], d = dy[k];
        dx[k] = relu_backward_value(v, d);
    }
}

// mul: y = x * m element-wise; y may alias x.
extern "C" __global__ void mul(long long n, const float* x, const float* m, float* y) {
    GRID_STRIDE_LOOP(k, n) { y[k] = mul_value(x[k], m[k]); }
}

// dropout: CPU Dropout with h = mix64(seed); rowIDs == NULL means row i has
// ID i. copyOnly != 0 is p == 0: y = x and mask = 1. y may alias x.
extern "C" __global__ void dropout(int rows, int F, const float* x, float* y, float* mask,
                                   unsigned long long h, const int* rowIDs, unsigned int thr,
                                   float scale, int copyOnly) {
    GRID_STRIDE_LOOP(e, (long long)rows * F) {
        float yv, mv;
        dropout_at(e, F, x, h, rowIDs, thr, scale, copyOnly, &yv, &mv);
        y[e] = yv;
        mask[e] = mv;
    }
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
    s[threadIdx.x] = sum_squares_stride(n, x, (long long)blockIdx.x * blockDim.x + threadIdx.x,
                                        (long long)gridDim.x * blockDim.x);
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

// count_correct: *count += the number of listed rows whose argmax equals
// their label (CPU CountCorrect).
extern "C" __global__ void count_correct(int n, int C, const float* logits, const int* labels, const int* rows,
                                         unsigned int* count) {
    GRID_STRIDE_LOOP(t, n) {
        const long long i = rows[t];
        if (argmax_row(C, logits + i * C) == labels[i]) atomicAdd(count, 1u);
    }
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
