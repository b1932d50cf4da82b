package halo

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/comm/codec"
	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// TestGradBitmap: a row goes when its squared norm reaches tau times the
// mean of the rows', and always when it is not finite.
func TestGradBitmap(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(-1))
	// Squared norms 25, 0.25, 4, 0, 1: mean 6.05, so tau 0.5 cuts at 3.025.
	m := kernels.Mat{Rows: 6, Cols: 2, Data: []float32{9, 9, 3, 4, 0.3, -0.4, 2, 0, 0, 0, 1, 0}}
	norms := make([]float64, 5)
	bitmap := []byte{0xff}
	gradNorms := func() []float64 {
		rowSqNorms(m.Data[2:], 2, norms) // rows 1..5
		return norms
	}
	if n := gradBitmap(gradNorms(), 0.5, bitmap); bitmap[0] != 0b00101 || n != 2 {
		t.Errorf("bitmap %08b (%d rows), expected 00000101 (2 rows)", bitmap[0], n)
	}
	for _, bad := range []float32{nan, inf} {
		m.Data[9] = bad // row 4: kept, and with an infinite mean every row is
		want := byte(0b01000)
		if math.IsInf(float64(bad), 0) {
			want = 0b11111
		}
		if n := gradBitmap(gradNorms(), 0.5, bitmap); bitmap[0]&want != want {
			t.Errorf("%v in a row: bitmap %08b (%d rows), expected at least %08b", bad, bitmap[0], n, want)
		}
	}
}

// TestSkipGradBackward: with gradient row skipping every owner adds exactly
// the returned rows whose squared norm reaches tau times the mean of their
// message, the bytes are the bitmaps and those rows, and the AVX2 and Go
// paths add the same bits under a lossy codec.
func TestSkipGradBackward(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	l := randomLayout(rng, 3)
	const f, tau = 4, 0.3
	grad := func(row, col int) float32 { // most rows small, some large
		if row%3 == 0 {
			return float32(row+1) + float32(col)
		}
		return float32(col+1) / 64
	}
	for _, c := range []codec.Spec{codec.Trunc(1), codec.Quant(2), codec.Quant(1).Grouped(3)} {
		var got [2][]*kernels.Mat
		for m, on := range fastModes(t) {
			fast = on
			bwd := make([]int64, 3)
			got[m] = runExchange(t, l, f, func(x *Exchange[[]byte], h *kernels.Mat) error {
				x.SetCodecs(0, codec.None(), c)
				if err := x.SetResidual(Residual{SkipGrad: tau}); err != nil {
					return err
				}
				for i := x.plan.Owned; i < h.Rows; i++ {
					for j := range f {
						h.Data[i*f+j] = grad(i-x.plan.Owned, j)
					}
				}
				if err := backward(x, 0, h); err != nil {
					return err
				}
				b := make([]int64, 1)
				x.Meter().AddBytes(make([]int64, 1), b)
				bwd[x.plan.Rank] = b[0]
				return nil
			})
			if c != codec.Trunc(1) {
				continue
			}
			var expected int64 // the bitmaps and kept rows every owner receives
			for r := range 3 { // r owns the rows, p returns their gradients
				want := make([]float32, l.owned[r]*f)
				for i := range want {
					want[i] = value(r, i/f, i%f)
				}
				var bytes int64
				for p := range 3 {
					rows := l.send[r][p]
					if p == r || len(rows) == 0 {
						continue
					}
					lo := l.recvStart(p)[r]
					var total float64
					norm := func(k int) (s float64) {
						for j := range f {
							s += float64(grad(lo+k, j)) * float64(grad(lo+k, j))
						}
						return s
					}
					for k := range rows {
						total += norm(k)
					}
					bytes += int64(bitmapSize(len(rows)))
					for k, i := range rows {
						if norm(k) >= tau*total/float64(len(rows)) {
							bytes += 4 * f
							for j := range f {
								want[int(i)*f+j] += grad(lo+k, j)
							}
						}
					}
				}
				for i, w := range want {
					if g := got[m][r].Data[i]; g != w {
						t.Fatalf("fast %v: rank %d value %d: %v, want %v", on, r, i, g, w)
					}
				}
				expected += bytes
			}
			if sent := bwd[0] + bwd[1] + bwd[2]; sent != expected {
				t.Errorf("fast %v: %d backward bytes sent, expected %d (bitmaps and kept rows)", on, sent, expected)
			}
		}
		if len(got[1]) > 0 { // the same bits either way
			for r := range 3 {
				for i := range got[0][r].Data {
					if math.Float32bits(got[0][r].Data[i]) != math.Float32bits(got[1][r].Data[i]) {
						t.Fatalf("%s: rank %d value %d: Go %v, AVX2 %v", c.Name(), r, i, got[0][r].Data[i], got[1][r].Data[i])
					}
				}
			}
		}
	}
}

// TestRowSqNorms: the four-rows-at-a-time norms are the one-row sums, bit
// for bit, for every row count and width.
func TestRowSqNorms(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, f := range []int{0, 1, 7, 64, 129} {
		for n := range 11 {
			x := make([]float32, n*f)
			for i := range x {
				x[i] = float32(rng.NormFloat64()) * float32(math.Exp(rng.NormFloat64()*8))
			}
			got := make([]float64, n)
			rowSqNorms(x, f, got)
			for k := range n {
				var want float64
				for _, v := range x[k*f : (k+1)*f] {
					want += float64(v) * float64(v)
				}
				if math.Float64bits(got[k]) != math.Float64bits(want) {
					t.Fatalf("%d rows of %d: row %d: %v, want %v", n, f, k, got[k], want)
				}
			}
		}
	}
}

// BenchmarkGradBitmap: the skip decision of one peer's gradient rows, the
// demo graph's shape (30000 halo rows of 128).
func BenchmarkGradBitmap(b *testing.B) {
	const n, f = 30000, 128
	dh := kernels.NewMat(n, f)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range dh.Data {
		dh.Data[i] = float32(rng.NormFloat64())
	}
	norms, bitmap := make([]float64, n), make([]byte, bitmapSize(n))
	b.SetBytes(4 * n * f)
	for b.Loop() {
		rowSqNorms(dh.Data, f, norms)
		gradBitmap(norms, 0.1, bitmap)
	}
}

// TestResidualGradFloor: with residual-coded gradients and SkipGrad, a row
// whose residual's largest magnitude m has f·m² at most tau times its
// message's mean squared norm stays out, so under a constant gradient
// every value the owner adds is within that floor of the exact one (the
// small rows never go, the others until their residual falls below it);
// the backward bytes fall, and the AVX2 and Go paths add the same bits.
func TestResidualGradFloor(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	l := randomLayout(rng, 3)
	const f, tau, epochs = 8, 0.1, 30
	grad := func(row, col int) float32 { // a third of the rows large
		if row%3 == 0 {
			return float32(row+1) - float32(col)/8
		}
		return float32(col+1) / 64
	}
	run := func(skipGrad float32) ([]*kernels.Mat, int64) {
		var bytes [3]int64
		mats := runExchange(t, l, f, func(x *Exchange[[]byte], h *kernels.Mat) error {
			x.SetCodecs(0, codec.None(), codec.Quant(2))
			if err := x.SetResidual(Residual{Forward: true, Backward: true, Skip: 1e-4, SkipGrad: skipGrad}); err != nil {
				return err
			}
			own := h.View(0, x.plan.Owned)
			for e := range epochs {
				x.SetEpoch(5, e)
				clear(own.Data)
				for i := x.plan.Owned; i < h.Rows; i++ {
					for j := range f {
						h.Data[i*f+j] = grad(i-x.plan.Owned, j)
					}
				}
				if err := backward(x, 0, h); err != nil {
					return err
				}
			}
			b := make([]int64, 1)
			x.Meter().AddBytes(make([]int64, 1), b)
			bytes[x.plan.Rank] = b[0]
			return nil
		})
		return mats, bytes[0] + bytes[1] + bytes[2]
	}
	_, all := run(0)
	var got [2][]*kernels.Mat
	for m, on := range fastModes(t) {
		fast = on
		var sent int64
		got[m], sent = run(tau)
		if sent >= all {
			t.Errorf("fast %v: %d backward bytes with the floor, %d without", on, sent, all)
		}
		for r := range 3 { // r owns the rows, p returns their gradients
			want, slack := make([]float64, l.owned[r]*f), make([]float64, l.owned[r]*f)
			for p := range 3 {
				rows := l.send[r][p]
				if p == r || len(rows) == 0 {
					continue
				}
				lo := l.recvStart(p)[r]
				var total float64
				for k := range rows {
					for j := range f {
						v := float64(grad(lo+k, j))
						total += v * v
					}
				}
				floor := math.Sqrt(tau * total / float64(len(rows)) / f)
				for k, i := range rows {
					for j := range f {
						want[int(i)*f+j] += float64(grad(lo+k, j))
						slack[int(i)*f+j] += floor
					}
				}
			}
			for i, w := range want {
				if g := float64(got[m][r].Data[i]); math.Abs(g-w) > slack[i]+1e-6 {
					t.Fatalf("fast %v: rank %d value %d: %v, want %v within %v", on, r, i, g, w, slack[i])
				}
			}
		}
	}
	if len(got[1]) > 0 {
		for r := range 3 {
			for i := range got[0][r].Data {
				if math.Float32bits(got[0][r].Data[i]) != math.Float32bits(got[1][r].Data[i]) {
					t.Fatalf("rank %d value %d: Go %v, AVX2 %v", r, i, got[0][r].Data[i], got[1][r].Data[i])
				}
			}
		}
	}
}
