//go:build !cpu

package cuda

import (
	"fmt"
	"unsafe"

	"github.com/gnn-spmd/gnn-spmd/kernels"
	"github.com/gnn-spmd/gnn-spmd/kernels/rng"
	"gorgonia.org/cu"
)

// Launchers of the kernels in dense.cu, and the dense products on cuBLAS.
// Each mirrors the CPU method of the same name; argument checks are the
// CPU's, so that a shape bug fails the same way on both.

// Gemm is cuBLAS's sgemm on row-major matrices: a row-major C = op(A) op(B)
// is the column-major C^T = op(B)^T op(A)^T, and a row-major matrix is its
// own transpose in column-major order, so the operands swap places and keep
// their transpose flags.
func (d *Device) Gemm(transA, transB bool, alpha float32, a, b *kernels.Mat, beta float32, c *kernels.Mat) {
	m, n, k := kernels.GemmShape(transA, transB, a, b, c)
	if m == 0 || n == 0 {
		return
	}
	fail("cublasSgemm", d.blas.Sgemm(transB, transA, n, m, k, alpha, uintptr(mat(b)), max(b.Cols, 1),
		uintptr(mat(a)), max(a.Cols, 1), beta, uintptr(mat(c)), max(n, 1)))
}

// AddBias adds b to every row of y.
func (d *Device) AddBias(y, b *kernels.Mat) {
	if b.Len() != y.Cols {
		panic(fmt.Sprintf("cuda: AddBias: %d biases for %d columns", b.Len(), y.Cols))
	}
	if y.Len() > 0 {
		d.launch(kAddBias, y.Len(), false, i32(y.Rows), i32(y.Cols), mat(y), mat(b))
	}
}

// BiasGrad sums dy's columns: float64 partials per chunk of rows, then the
// partials in chunk order.
func (d *Device) BiasGrad(dy, db *kernels.Mat, accumulate bool) {
	f := dy.Cols
	if db.Len() != f {
		panic(fmt.Sprintf("cuda: BiasGrad: %d outputs for %d columns", db.Len(), f))
	}
	if f == 0 {
		return
	}
	chunks := (dy.Rows + rowsPerChunk - 1) / rowsPerChunk
	part := d.scratchBuf(int64(8 * max(chunks, 1) * f))
	if chunks > 0 {
		d.launch(kBiasGradPartial, chunks*f, false, i32(dy.Rows), i32(f), i32(rowsPerChunk), mat(dy), dptr(part))
	}
	d.launch(kBiasGradFinish, f, false, i32(chunks), i32(f), dptr(part), mat(db), i32(b2i(accumulate)))
}

// ReLU computes y = max(x, 0).
func (d *Device) ReLU(x, y *kernels.Mat) {
	shape("ReLU", x, y)
	if n := x.Len(); n > 0 {
		d.launch(kReLU, n, false, i64(n), mat(x), mat(y))
	}
}

// ReLUBackward computes dx = dy where y > 0.
func (d *Device) ReLUBackward(y, dy, dx *kernels.Mat) {
	shape("ReLUBackward", y, dy)
	shape("ReLUBackward", y, dx)
	if n := y.Len(); n > 0 {
		d.launch(kReLUBackward, n, false, i64(n), mat(y), mat(dy), mat(dx))
	}
}

// Mul computes y = x * m element-wise.
func (d *Device) Mul(x, m, y *kernels.Mat) {
	shape("Mul", x, m)
	shape("Mul", x, y)
	if n := x.Len(); n > 0 {
		d.launch(kMul, n, false, i64(n), mat(x), mat(m), mat(y))
	}
}

// Dropout draws the CPU's masks: the same hash of (seed, row ID, column).
func (d *Device) Dropout(x, y, mask *kernels.Mat, p float32, seed uint64, rowIDs []int32) {
	shape("Dropout", x, y)
	shape("Dropout", x, mask)
	scale, thr := kernels.DropoutParams(p, x.Rows, rowIDs)
	if x.Len() == 0 {
		return
	}
	d.launch(kDropout, x.Len(), false, i32(x.Rows), i32(x.Cols), mat(x), mat(y), mat(mask),
		rng.Mix64(seed), d.Ints(rowIDs), uint64(thr), f32(scale), i32(b2i(p == 0)))
}

// SoftmaxCrossEntropy writes dlogits for the listed rows and returns the
// summed loss (per-row losses summed in a fixed order).
func (d *Device) SoftmaxCrossEntropy(logits *kernels.Mat, labels []int32, rows []int32, scale float32, dlogits *kernels.Mat) float64 {
	shape("SoftmaxCrossEntropy", logits, dlogits)
	if len(labels) != logits.Rows {
		panic(fmt.Sprintf("cuda: SoftmaxCrossEntropy: %d labels for %d rows", len(labels), logits.Rows))
	}
	d.zero(dlogits)
	if len(rows) == 0 {
		return 0
	}
	if logits.Cols == 0 {
		panic("cuda: SoftmaxCrossEntropy: no classes")
	}
	n := len(rows)
	loss := d.scratchBuf(int64(8 * n))
	d.launch(kSoftmaxXent, n, false, i32(n), i32(logits.Cols), mat(logits), d.Ints(labels), d.Ints(rows),
		f32(scale), mat(dlogits), dptr(loss))
	g := partialGrid(n)
	d.launchGrid(kSumF64Partial, g, i64(n), dptr(loss), dptr(d.partial))
	return d.sumPartials(g, 1, 0)
}

// CountCorrect counts the listed rows whose argmax is their label.
func (d *Device) CountCorrect(logits *kernels.Mat, labels []int32, rows []int32) int {
	if len(labels) != logits.Rows {
		panic(fmt.Sprintf("cuda: CountCorrect: %d labels for %d rows", len(labels), logits.Rows))
	}
	if len(rows) == 0 || logits.Cols == 0 {
		return 0
	}
	fail("zero counter", cu.MemsetD32(d.counter, 0, 1))
	d.launch(kCountCorrect, len(rows), false, i32(len(rows)), i32(logits.Cols), mat(logits), d.Ints(labels),
		d.Ints(rows), dptr(d.counter))
	var c uint32
	d.download(unsafe.Pointer(&c), d.counter, 4)
	return int(c)
}

// ScoreHistogram adds the listed rows' two-class scores into hist.
func (d *Device) ScoreHistogram(logits *kernels.Mat, labels []int32, rows []int32, hist []float64) {
	if logits.Cols != 2 || len(labels) != logits.Rows || len(hist) != 2*kernels.ScoreBins {
		panic(fmt.Sprintf("cuda: ScoreHistogram: %dx%d logits, %d labels, %d bins", logits.Rows, logits.Cols, len(labels), len(hist)))
	}
	if len(rows) == 0 {
		return
	}
	h := d.scratchBuf(int64(8 * len(hist)))
	fail("zero histogram", cu.MemsetD32(h, 0, int64(2*len(hist))))
	d.launch(kScoreHistogram, len(rows), false, i32(len(rows)), mat(logits), d.Ints(labels), d.Ints(rows),
		i32(kernels.ScoreBins), dptr(h))
	got := make([]float64, len(hist))
	d.download(unsafe.Pointer(&got[0]), h, int64(8*len(got)))
	for i, v := range got {
		hist[i] += v
	}
}

// SumSquares returns the sum of x^2 in float64.
func (d *Device) SumSquares(x *kernels.Mat) float64 {
	n := x.Len()
	if n == 0 {
		return 0
	}
	g := partialGrid(n)
	d.launchGrid(kSumSquaresPartial, g, i64(n), mat(x), dptr(d.partial))
	return d.sumPartials(g, 1, 0)
}

// Adam is torch.optim.Adam's step with the CPU's bias corrections.
func (d *Device) Adam(p, g, m, v *kernels.Mat, step int, lr, beta1, beta2, eps, weightDecay float32) {
	n := p.Len()
	if g.Len() != n || m.Len() != n || v.Len() != n {
		panic(fmt.Sprintf("cuda: Adam: lengths %d, %d, %d, %d", n, g.Len(), m.Len(), v.Len()))
	}
	if step < 1 {
		panic(fmt.Sprintf("cuda: Adam: step %d < 1", step))
	}
	if n == 0 {
		return
	}
	stepSize, bc2Sqrt := kernels.AdamCorrections(step, lr, beta1, beta2)
	d.launch(kAdam, n, false, i64(n), mat(p), mat(g), mat(m), mat(v), f32(beta1), f32(beta2), f32(eps),
		f32(weightDecay), f32(stepSize), f32(bc2Sqrt))
}
