package halo

import (
	"math/rand/v2"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// The compression error's sums over a payload of 20k rows of 128 values
// (what the sender measures for comp_error after every encode).
func BenchmarkSqDiff(b *testing.B) {
	const rows, cols = 20_000, 128
	r := rand.New(rand.NewPCG(1, 2))
	src, dec := kernels.NewMat(rows, cols), kernels.NewMat(rows, cols)
	for i := range src.Data {
		src.Data[i], dec.Data[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
	}
	idx := make([]int32, rows)
	for i := range idx {
		idx[i] = int32(i)
	}
	b.SetBytes(4 * rows * cols)
	for b.Loop() {
		new(Host).SqDiff(idx, src, dec, 0)
	}
}
