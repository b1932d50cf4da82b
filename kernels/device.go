// Package kernels is the only place that touches numbers in bulk: dense and
// sparse products, element-wise ops, the loss and the optimizer step. The
// Device interface is what the model code calls; CPU is its reference
// implementation (and the twin every accelerator kernel is tested against).
package kernels

import (
	"fmt"
	"sync/atomic"
)

// Mat is a dense row-major float32 matrix: element (i, j) is Data[i*Cols+j]
// in host memory, or the float32 at address Ptr + 4*(i*Cols+j) in an
// accelerator's memory. A matrix lives in one place: Data is nil exactly
// when it lives on a device. Only the Device that made a matrix reads it.
type Mat struct {
	Rows, Cols int
	Data       []float32
	Ptr        uintptr
}

// Bytes is a byte buffer in an accelerator's memory: a halo payload on the
// GPU, in the wire format of comm/codec.
type Bytes struct {
	Ptr uintptr
	Len int
}

// NewMat allocates a zeroed rows x cols matrix in host memory (large ones
// on huge pages where the OS allows it).
func NewMat(rows, cols int) *Mat {
	m := &Mat{Rows: rows, Cols: cols, Data: make([]float32, rows*cols)}
	adviseHuge(m.Data)
	// Write every page now. A fresh page that a kernel reads before it
	// writes (an accumulator, the halo residual state) maps the shared zero
	// page first; the write then copies it and flushes the TLB on every
	// CPU, which costs dearly in a virtual machine: the demo's first
	// compressed epoch took 2.3-3.3 s that way, about 0.6 s with this.
	clear(m.Data)
	return m
}

// Row returns row i of a host matrix as a slice aliasing m.Data.
func (m *Mat) Row(i int) []float32 { return m.Data[i*m.Cols : (i+1)*m.Cols] }

// View returns rows [lo, hi) as a matrix aliasing m's memory.
func (m *Mat) View(lo, hi int) *Mat {
	if m.Data == nil && m.Ptr != 0 {
		return &Mat{Rows: hi - lo, Cols: m.Cols, Ptr: m.Ptr + uintptr(4*lo*m.Cols)}
	}
	return &Mat{Rows: hi - lo, Cols: m.Cols, Data: m.Data[lo*m.Cols : hi*m.Cols]}
}

// Reshape returns the first rows*cols elements of m as a rows x cols
// matrix aliasing m's memory (scratch buffers sized for the widest use).
func (m *Mat) Reshape(rows, cols int) *Mat {
	if rows*cols > m.Rows*m.Cols {
		panic(fmt.Sprintf("kernels: Reshape %dx%d to %dx%d", m.Rows, m.Cols, rows, cols))
	}
	if m.Data == nil && m.Ptr != 0 {
		return &Mat{Rows: rows, Cols: cols, Ptr: m.Ptr}
	}
	return &Mat{Rows: rows, Cols: cols, Data: m.Data[:rows*cols]}
}

// Len is the number of elements, Rows*Cols.
func (m *Mat) Len() int { return m.Rows * m.Cols }

// Adj is a weighted sparse matrix in CSR form: (A X)[i,:] = sum over k in
// [Ptr[i], Ptr[i+1]) of Val[k] * X[Col[k],:]. Val == nil means all ones.
// T is the transpose (CSR of A^T, with the same weights), used by backward
// passes so that they too run row-parallel without atomics.
type Adj struct {
	Rows, Cols int
	Ptr        []int64
	Col        []int32
	Val        []float32
	T          *Adj
	// checked: the CPU's SpMM found Ptr and Col inside the matrix, a walk
	// over every nonzero that an unchanging Adj needs once, not per call.
	checked atomic.Bool
}

// Device runs the numerical primitives of GNN training. Matrices passed in
// must have matching shapes (implementations panic otherwise: a shape error is
// a programming error, not bad input) and live in the device's memory (made
// by its NewMat, or host matrices for the CPU). Unless stated, outputs may
// not alias inputs. Index slices (labels, rows, row IDs) and Adj are host
// data that must not change after their first use: an accelerator keeps a
// copy. Implementations are safe for use by one goroutine at a time.
type Device interface {
	// Host reports whether the device's matrices live in host memory
	// (Data set), so that host slices can be used in place.
	Host() bool

	// Synchronize waits for the work issued so far (a GPU's queue; nothing
	// on the CPU), so that a time measured after it covers only what
	// follows.
	Synchronize() error

	// NewMat allocates a zeroed rows x cols matrix in the device's memory.
	NewMat(rows, cols int) *Mat

	// Upload copies len(src) == dst.Len() host values into dst; Download
	// copies src into the host slice dst. Copy copies src into dst (same
	// shape). On the CPU, Upload and Download between the same memory do
	// nothing.
	Upload(dst *Mat, src []float32)
	Download(dst []float32, src *Mat)
	Copy(dst, src *Mat)

	// SpMM computes y = A x, or y += A x when accumulate is set.
	// x is A.Cols x F, y is A.Rows x F.
	SpMM(a *Adj, x, y *Mat, accumulate bool)

	// Gemm computes c = alpha * op(a) * op(b) + beta * c, where op(m) is m or
	// its transpose as transA/transB say. beta = 0 ignores c's old contents.
	Gemm(transA, transB bool, alpha float32, a, b *Mat, beta float32, c *Mat)

	// AddBias adds b (1 x y.Cols) to every row of y.
	AddBias(y *Mat, b *Mat)

	// BiasGrad computes db (1 x dy.Cols) = column sums of dy (db += ...
	// when accumulate).
	BiasGrad(dy *Mat, db *Mat, accumulate bool)

	// ReLU computes y = max(x, 0); y may alias x.
	ReLU(x, y *Mat)

	// ReLUBackward computes dx = dy where y > 0, else 0; dx may alias dy.
	ReLUBackward(y, dy, dx *Mat)

	// Dropout zeroes each element of x with probability p and scales the
	// survivors by 1/(1-p), writing y (may alias x) and the applied factor
	// to mask (same shape). The draw for element (i, j) depends only on
	// (seed, rowID(i), j), where rowID(i) = rowIDs[i] or i when rowIDs is nil,
	// so that a node gets the same mask wherever it is stored.
	Dropout(x, y, mask *Mat, p float32, seed uint64, rowIDs []int32)

	// Mul computes y = x * m element-wise (the dropout backward); y may alias x.
	Mul(x, m, y *Mat)

	// SoftmaxCrossEntropy computes, over the rows listed in rows, the summed
	// cross-entropy of softmax(logits[i]) against labels[i], and writes
	// dlogits = scale * (softmax - onehot) for those rows and 0 elsewhere.
	// It returns the loss sum (not scaled) in float64.
	SoftmaxCrossEntropy(logits *Mat, labels []int32, rows []int32, scale float32, dlogits *Mat) float64

	// CountCorrect returns how many of the listed rows have argmax(logits[i])
	// == labels[i] (ties go to the lowest class index).
	CountCorrect(logits *Mat, labels []int32, rows []int32) int

	// ScoreHistogram bins the two-class scores of the listed rows by label
	// for ROC AUC (see the CPU method and AUC).
	ScoreHistogram(logits *Mat, labels []int32, rows []int32, hist []float64)

	// SumSquares returns the sum of squares of x in float64 (a gradient's
	// squared norm).
	SumSquares(x *Mat) float64

	// Adam performs one step (step >= 1) of Adam on p with gradient g and
	// moments m, v. With weightDecay > 0 it adds weightDecay*p to the
	// gradient first (L2 regularisation, as torch.optim.Adam does).
	// All four have the same number of elements.
	Adam(p, g, m, v *Mat, step int, lr, beta1, beta2, eps, weightDecay float32)
}

// NewAdj builds the CSR matrix with the given arrays (which it keeps) and
// its transpose.
func NewAdj(rows, cols int, ptr []int64, col []int32, val []float32) *Adj {
	a := &Adj{Rows: rows, Cols: cols, Ptr: ptr, Col: col, Val: val}
	a.T = transpose(a)
	a.T.T = a
	return a
}

// RowRange returns rows [lo, hi) of a as a CSR of their own, sharing a's
// column and weight arrays (only the row pointers are copied, rebased to
// zero). It has no transpose.
func (a *Adj) RowRange(lo, hi int) *Adj {
	if lo < 0 || lo > hi || hi > a.Rows {
		panic(fmt.Sprintf("kernels: RowRange [%d, %d) of %d rows", lo, hi, a.Rows))
	}
	base, end := a.Ptr[lo], a.Ptr[hi]
	r := &Adj{Rows: hi - lo, Cols: a.Cols, Ptr: make([]int64, hi-lo+1), Col: a.Col[base:end:end]}
	for i := range r.Ptr {
		r.Ptr[i] = a.Ptr[lo+i] - base
	}
	if a.Val != nil {
		r.Val = a.Val[base:end:end]
	}
	return r
}

// transpose returns A^T in CSR form (a counting sort by column). Entries of
// each transposed row keep increasing source-row order.
func transpose(a *Adj) *Adj {
	nnz := a.Ptr[a.Rows]
	ptr := make([]int64, a.Cols+1)
	for _, c := range a.Col[:nnz] {
		ptr[c+1]++
	}
	for j := 0; j < a.Cols; j++ {
		ptr[j+1] += ptr[j]
	}
	col := make([]int32, nnz)
	var val []float32
	if a.Val != nil {
		val = make([]float32, nnz)
	}
	fill := make([]int64, a.Cols)
	copy(fill, ptr[:a.Cols])
	for i := 0; i < a.Rows; i++ {
		for k := a.Ptr[i]; k < a.Ptr[i+1]; k++ {
			c := a.Col[k]
			col[fill[c]] = int32(i)
			if val != nil {
				val[fill[c]] = a.Val[k]
			}
			fill[c]++
		}
	}
	return &Adj{Rows: a.Cols, Cols: a.Rows, Ptr: ptr, Col: col, Val: val}
}
