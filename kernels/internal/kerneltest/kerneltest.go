// Package kerneltest holds the inputs and the comparison shared by the tests
// that hold a kernel to its CPU twin: the GPU device's (kernels/cuda) and
// the host-compiled CUDA routines' (kernels/cuda/hosttwin).
package kerneltest

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// Specials are the values whose handling the CPU defines: signed zeros,
// infinities, NaNs of both signs, subnormals, the smallest normal, the
// largest floats.
var Specials = []float32{float32(math.Copysign(0, -1)), 0, float32(math.NaN()), -float32(math.NaN()),
	float32(math.Inf(1)), float32(math.Inf(-1)), math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32,
	1e-40, -1e-40, 1.1754942e-38, math.MaxFloat32, -math.MaxFloat32, 1, -1, 0.5}

// RandMat is a rows x cols matrix of standard normal values.
func RandMat(r *rand.Rand, rows, cols int) *kernels.Mat {
	m := kernels.NewMat(rows, cols)
	for i := range m.Data {
		m.Data[i] = float32(r.NormFloat64())
	}
	return m
}

// RandAdj is a rows x cols CSR matrix of 0-5 random entries a row (none in
// every 17th), weighted or all ones.
func RandAdj(r *rand.Rand, rows, cols int, weighted bool) *kernels.Adj {
	ptr := make([]int64, rows+1)
	var col []int32
	var val []float32
	for i := range rows {
		deg := r.IntN(6)
		if i%17 == 0 || cols == 0 {
			deg = 0
		}
		for range deg {
			col = append(col, int32(r.IntN(cols)))
			val = append(val, float32(r.Float64()))
		}
		ptr[i+1] = int64(len(col))
	}
	if !weighted {
		val = nil
	}
	return kernels.NewAdj(rows, cols, ptr, col, val)
}

// Same demands equal bits, except that any NaN equals any NaN: which
// operand's NaN an operation returns is the hardware's choice (x86 the
// first's, a GPU a canonical NaN), and Go's compiler may swap the operands
// of a product.
func Same(t testing.TB, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if math.Float32bits(g) != math.Float32bits(w) && !(g != g && w != w) {
			t.Fatalf("%s: element %d is %v (%#x), CPU %v (%#x)", what, i, g, math.Float32bits(g), w, math.Float32bits(w))
		}
	}
}

// AttentionShapes are kernels' attentionShapes (attention_test.go, which
// cannot import this package; keep the two lists equal): one head and
// several, fewer and more than a block of eight, widths below, at and above
// a vector, averaged and concatenated.
var AttentionShapes = []struct {
	Heads, Width int
	Mean         bool
}{{1, 1, true}, {1, 40, true}, {8, 8, false}, {3, 5, false}, {9, 3, false}, {4, 6, true}, {10, 17, true}, {16, 9, false}}

// AttentionCase is one attention layer's inputs on a random graph, built as
// kernels' newAttentionCase builds them.
type AttentionCase struct {
	At         kernels.Attention
	A          *kernels.Adj
	E          *kernels.EdgesBySource
	Q, T, DOut *kernels.Mat
}

// NewAttentionCase is a layer of heads x width on rows destinations and
// cols sources: about a fifth of the rows without edges, the others with
// 1..14 sources drawn with repeats; row i has id 3i+1, the scores of every
// 7th source far below the others (exponentials that underflow to 0).
func NewAttentionCase(r *rand.Rand, rows, cols, heads, width int, mean bool, dropout float32) *AttentionCase {
	ptr := make([]int64, rows+1)
	var col []int32
	for i := range rows {
		n := 0
		if cols > 0 && r.IntN(5) != 0 {
			n = 1 + r.IntN(14)
		}
		for range n {
			col = append(col, int32(r.IntN(cols)))
		}
		ptr[i+1] = int64(len(col))
	}
	c := &AttentionCase{A: kernels.NewAdj(rows, cols, ptr, col, nil)}
	ids := make([]int32, rows)
	for i := range ids {
		ids[i] = int32(3*i + 1)
	}
	c.At = kernels.Attention{Heads: heads, Width: width, Mean: mean, Slope: 0.2, Dropout: dropout, Seed: r.Uint64(), RowIDs: ids}
	c.E = kernels.NewEdgesBySource(c.A)
	c.Q, c.T, c.DOut = RandMat(r, cols, c.At.SourceCols()), RandMat(r, rows, heads), RandMat(r, rows, c.At.OutCols())
	for j := 0; j < cols; j += 7 {
		c.Q.Data[j*c.Q.Cols+heads*width] = -200
	}
	return c
}

// WithSpecials sets about one value in twenty of q, t and d(out) to one of
// Specials, and some scores to +-200 and -0, so that NaN and infinite
// scores, statistics and coefficients go through every pass.
func (c *AttentionCase) WithSpecials(r *rand.Rand) *AttentionCase {
	for _, m := range []*kernels.Mat{c.Q, c.T, c.DOut} {
		for i := range m.Data {
			switch r.IntN(20) {
			case 0:
				m.Data[i] = Specials[r.IntN(len(Specials))]
			case 1:
				m.Data[i] = []float32{200, -200, float32(math.Copysign(0, -1))}[r.IntN(3)]
			}
		}
	}
	return c
}
