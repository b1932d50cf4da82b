package kernels

import "time"

// Phase is a class of kernels, for an epoch's roofline: aggregation
// (SpMM), dense products (Gemm), element-wise passes, the loss and
// accuracy, the optimizer.
type Phase int

const (
	Aggregation Phase = iota
	Dense
	Elementwise
	Loss
	Optimizer
	NumPhases
)

var phaseNames = [NumPhases]string{"aggregation", "dense", "elementwise", "loss", "optimizer"}

func (p Phase) String() string { return phaseNames[p] }

// PhaseTimer is a Device that times every kernel call of the device it
// wraps by phase, and counts the work each call implies: the floating-point
// operations of a product, the bytes any other kernel must move at least
// (each input read once, each output written once). A roofline divides
// the work by the machine's rates (sgemm FLOP/s, memory bandwidth) for the
// time the epoch cannot beat.
type PhaseTimer struct {
	Device
	Seconds [NumPhases]float64
	Flops   [NumPhases]float64 // Dense only
	Bytes   [NumPhases]float64
}

// NewPhaseTimer wraps d.
func NewPhaseTimer(d Device) *PhaseTimer { return &PhaseTimer{Device: d} }

// Reset zeroes the counts.
func (t *PhaseTimer) Reset() {
	t.Seconds, t.Flops, t.Bytes = [NumPhases]float64{}, [NumPhases]float64{}, [NumPhases]float64{}
}

func (t *PhaseTimer) add(p Phase, start time.Time, bytes float64) {
	t.Seconds[p] += time.Since(start).Seconds()
	t.Bytes[p] += bytes
}

const f32 = 4

// spmmBytes is what y = A x must move: the CSR (8-byte row pointers,
// 4-byte columns and weights), every entry's source row, and y.
func spmmBytes(a *Adj, rows int, nnz int64, f int, acc bool) float64 {
	b := float64(rows+1)*8 + float64(nnz)*4 + float64(nnz)*float64(f)*f32 + float64(rows*f)*f32
	if a.Val != nil {
		b += float64(nnz) * 4
	}
	if acc {
		b += float64(rows*f) * f32
	}
	return b
}

func (t *PhaseTimer) SpMM(a *Adj, x, y *Mat, accumulate bool) {
	start := time.Now()
	t.Device.SpMM(a, x, y, accumulate)
	t.add(Aggregation, start, spmmBytes(a, a.Rows, a.Ptr[a.Rows], x.Cols, accumulate))
}

// rowSpMM is the CPU's row-subset aggregation, which the model uses when
// the device has it.
type rowSpMM interface {
	SpMMRows(a *Adj, s *RowSet, x, y *Mat, accumulate bool)
}

// SpMMRows times the wrapped device's SpMMRows; it panics if it has none.
func (t *PhaseTimer) SpMMRows(a *Adj, s *RowSet, x, y *Mat, accumulate bool) {
	start := time.Now()
	t.Device.(rowSpMM).SpMMRows(a, s, x, y, accumulate)
	t.add(Aggregation, start, spmmBytes(a, len(s.Rows), s.weight[len(s.Rows)], x.Cols, accumulate))
}

func (t *PhaseTimer) Gemm(transA, transB bool, alpha float32, a, b *Mat, beta float32, c *Mat) {
	start := time.Now()
	t.Device.Gemm(transA, transB, alpha, a, b, beta, c)
	m, n, k := GemmShape(transA, transB, a, b, c)
	t.add(Dense, start, 0)
	t.Flops[Dense] += 2 * float64(m) * float64(n) * float64(k)
}

// elems is the bytes of n float32 values passed over reads+writes times.
func elems(n, passes int) float64 { return float64(n) * f32 * float64(passes) }

func (t *PhaseTimer) Copy(dst, src *Mat) {
	start := time.Now()
	t.Device.Copy(dst, src)
	t.add(Elementwise, start, elems(src.Len(), 2))
}

func (t *PhaseTimer) AddBias(y *Mat, b *Mat) {
	start := time.Now()
	t.Device.AddBias(y, b)
	t.add(Elementwise, start, elems(y.Len(), 2))
}

func (t *PhaseTimer) BiasGrad(dy *Mat, db *Mat, accumulate bool) {
	start := time.Now()
	t.Device.BiasGrad(dy, db, accumulate)
	t.add(Elementwise, start, elems(dy.Len(), 1))
}

func (t *PhaseTimer) ReLU(x, y *Mat) {
	start := time.Now()
	t.Device.ReLU(x, y)
	t.add(Elementwise, start, elems(x.Len(), 2))
}

func (t *PhaseTimer) ReLUBackward(y, dy, dx *Mat) {
	start := time.Now()
	t.Device.ReLUBackward(y, dy, dx)
	t.add(Elementwise, start, elems(y.Len(), 3))
}

func (t *PhaseTimer) Dropout(x, y, mask *Mat, p float32, seed uint64, rowIDs []int32) {
	start := time.Now()
	t.Device.Dropout(x, y, mask, p, seed, rowIDs)
	t.add(Elementwise, start, elems(x.Len(), 3))
}

func (t *PhaseTimer) Mul(x, m, y *Mat) {
	start := time.Now()
	t.Device.Mul(x, m, y)
	t.add(Elementwise, start, elems(x.Len(), 3))
}

func (t *PhaseTimer) SoftmaxCrossEntropy(logits *Mat, labels []int32, rows []int32, scale float32, dlogits *Mat) float64 {
	start := time.Now()
	loss := t.Device.SoftmaxCrossEntropy(logits, labels, rows, scale, dlogits)
	t.add(Loss, start, elems(logits.Len(), 2))
	return loss
}

func (t *PhaseTimer) CountCorrect(logits *Mat, labels []int32, rows []int32) int {
	start := time.Now()
	n := t.Device.CountCorrect(logits, labels, rows)
	t.add(Loss, start, elems(len(rows)*logits.Cols, 1))
	return n
}

func (t *PhaseTimer) ScoreHistogram(logits *Mat, labels []int32, rows []int32, hist []float64) {
	start := time.Now()
	t.Device.ScoreHistogram(logits, labels, rows, hist)
	t.add(Loss, start, elems(len(rows)*logits.Cols, 1))
}

func (t *PhaseTimer) SumSquares(x *Mat) float64 {
	start := time.Now()
	s := t.Device.SumSquares(x)
	t.add(Optimizer, start, elems(x.Len(), 1))
	return s
}

func (t *PhaseTimer) Adam(p, g, m, v *Mat, step int, lr, beta1, beta2, eps, weightDecay float32) {
	start := time.Now()
	t.Device.Adam(p, g, m, v, step, lr, beta1, beta2, eps, weightDecay)
	t.add(Optimizer, start, elems(p.Len(), 7)) // reads p, g, m, v; writes p, m, v
}
