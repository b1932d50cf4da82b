package halo

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/comm/codec"
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

// BenchmarkEncodeRows codes 10k scattered rows of 128 values of a 50k-row
// matrix (a rank's gradient rows for one peer), 1-bit: in place (what
// EncodeRows does) or gathered into a buffer first (what it did before).
func BenchmarkEncodeRows(b *testing.B) {
	const rows, cols, n = 50_000, 128, 10_000
	r := rand.New(rand.NewPCG(3, 4))
	m := kernels.NewMat(rows, cols)
	for i := range m.Data {
		m.Data[i] = float32(r.NormFloat64())
	}
	idx := make([]int32, n)
	for i := range idx {
		idx[i] = int32(r.IntN(rows))
	}
	c := codec.Quant(1)
	dst := make([]byte, c.WireSize(n, cols))
	b.Run("in-place", func(b *testing.B) {
		b.SetBytes(4 * n * cols)
		h := new(Host)
		for b.Loop() {
			h.EncodeRows(c, m, idx, dst, 7)
		}
	})
	b.Run("gathered", func(b *testing.B) {
		b.SetBytes(4 * n * cols)
		buf := make([]float32, n*cols)
		for b.Loop() {
			for k, i := range idx {
				copy(buf[k*cols:(k+1)*cols], m.Row(int(i)))
			}
			c.Encode(dst, buf, n, cols, 7)
		}
	})
}

// BenchmarkResidualExchange is one layer's exchanges in the recommended
// setting, as the demo graph's ranks make them: 4 ranks, each with 12500
// owned rows of 128 values and 30000 halo rows (10000 from each peer),
// residual-coded 2-bit rows both ways with skipping at 0.005 and a refresh
// every 8 epochs. Between iterations each rank's rows move by about 5%, so
// that most residuals are sent, as in a hidden layer of training. Bytes:
// the float32 halo rows of both directions, all ranks. forward-only codes
// the gradients plainly (residual coding of the activations alone). The
// tern cases code the residuals (and the plain gradients) ternary instead.
func BenchmarkResidualExchange(b *testing.B) {
	for _, c := range []codec.Spec{codec.Quant(2), codec.Tern()} {
		for _, both := range []bool{true, false} {
			name := "both-directions"
			if !both {
				name = "forward-only"
			}
			if c.Kind() == codec.KindTern {
				name += "/tern"
			}
			b.Run(name, func(b *testing.B) { residualExchange(b, c, both) })
		}
	}
}

func residualExchange(b *testing.B, c codec.Spec, both bool) {
	const q, owned, perPeer, f = 4, 12_500, 10_000, 128
	rng := rand.New(rand.NewPCG(5, 6))
	l := haloLayout{owned: make([]int, q), send: make([][][]int32, q)}
	for r := range q {
		l.owned[r] = owned
		l.send[r] = make([][]int32, q)
		for p := range q {
			if p != r {
				l.send[r][p] = sortedSample(rng, owned, perPeer)
			}
		}
	}
	b.SetBytes(2 * 4 * q * (q - 1) * perPeer * f)
	runExchange(b, l, f, func(x *Exchange[[]byte], h *kernels.Mat) error {
		rows := [2][]float32{make([]float32, owned*f), make([]float32, owned*f)}
		r := rand.New(rand.NewPCG(7, uint64(x.plan.Rank)))
		for i := range rows[0] {
			v := float32(r.NormFloat64())
			rows[0][i], rows[1][i] = v, v*(1+0.05*float32(r.NormFloat64()))
		}
		x.SetCodecs(0, c, c)
		if err := x.SetResidual(Residual{Forward: true, Backward: both, Skip: 0.005, Refresh: 8}); err != nil {
			return err
		}
		if x.plan.Rank == 0 {
			b.ResetTimer()
		}
		for e := range b.N {
			x.SetEpoch(1, e)
			copy(h.Data, rows[e%2])
			if err := x.Forward(0, h); err != nil {
				return err
			}
			if err := backward(x, 0, h); err != nil {
				return err
			}
		}
		return nil
	})
}

// sortedSample is k distinct ints of [0, n) in increasing order.
func sortedSample(rng *rand.Rand, n, k int) []int32 {
	out := make([]int32, 0, k)
	for _, v := range rng.Perm(n)[:k] {
		out = append(out, int32(v))
	}
	slices.Sort(out)
	return out
}
