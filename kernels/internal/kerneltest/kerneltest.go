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
