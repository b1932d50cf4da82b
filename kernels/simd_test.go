package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// specialMat is randMat with a sprinkling of the values whose bits are easy
// to get wrong: NaN, infinities, signed zeros, subnormals.
func specialMat(rng *rand.Rand, rows, cols int) *Mat {
	special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0,
		float32(math.Copysign(0, -1)), math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32, 1e-39, -1e-39}
	m := randMat(rng, rows, cols)
	for i := range m.Data {
		if rng.IntN(8) == 0 {
			m.Data[i] = special[rng.IntN(len(special))]
		}
	}
	return m
}

// sameBits is bitsEqual but for NaN payloads (simd.c says why they differ).
func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
			t.Fatalf("%s: [%d] = %v (%#x), want %v (%#x)", what, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

// simdVariants runs f with the C loops for AVX-512 and AVX2 (where the CPU
// has them) and for the baseline ISA.
func simdVariants(t *testing.T, f func(t *testing.T)) {
	have2, have512 := avx2, avx512
	defer func() { avx2, avx512 = have2, have512 }()
	for _, v := range []struct{ avx2, avx512 bool }{{true, true}, {true, false}, {false, false}} {
		if v.avx2 && !have2 || v.avx512 && !have512 {
			continue
		}
		avx2, avx512 = v.avx2, v.avx512
		t.Run(fmt.Sprintf("avx2=%v/avx512=%v", v.avx2, v.avx512), f)
	}
}

// goTwin runs f with the Go loops instead of the C ones.
func goTwin(f func()) {
	portable = true
	defer func() { portable = false }()
	f()
}

func TestSIMDSpMMEqualsGo(t *testing.T) {
	rng := newRNG(31)
	simdVariants(t, func(t *testing.T) {
		p := NewCPU(2)
		defer p.Close()
		for _, f := range []int{0, 1, 7, 8, 9, 40, 63, 64, 65, 72, 127, 128, 136, 200, 255, 256, 257, 300, 520} {
			for _, weighted := range []bool{false, true} {
				a := randAdj(rng, 90, 40, 6, weighted)
				if weighted {
					for k := range a.Val {
						if rng.IntN(6) == 0 {
							a.Val[k] = specialMat(rng, 1, 1).Data[0]
						}
					}
				}
				x := specialMat(rng, 40, f)
				var rows []int32
				for i := 0; i < a.Rows; i++ {
					if rng.IntN(3) == 0 {
						rows = append(rows, int32(i))
					}
				}
				s := NewRowSet(a, rows)
				for _, acc := range []bool{false, true} {
					y0 := specialMat(rng, a.Rows, f)
					got, want := copyMat(y0), copyMat(y0)
					p.SpMM(a, x, got, acc)
					goTwin(func() { p.SpMM(a, x, want, acc) })
					sameBits(t, fmt.Sprintf("SpMM F=%d weighted=%v acc=%v", f, weighted, acc), got.Data, want.Data)
					got, want = copyMat(y0), copyMat(y0)
					p.SpMMRows(a, s, x, got, acc)
					goTwin(func() { p.SpMMRows(a, s, x, want, acc) })
					sameBits(t, fmt.Sprintf("SpMMRows F=%d weighted=%v acc=%v", f, weighted, acc), got.Data, want.Data)
				}
			}
		}
	})
}

// A weight of -0 flips the sign of a zero product, which shows where the
// sum adds it to -0: every width's vector path must multiply by -0, not by
// +0 (an earlier broadcast added the weight to zero, which lost its sign).
func TestSIMDSpMMNegativeZeroWeights(t *testing.T) {
	simdVariants(t, func(t *testing.T) {
		p := NewCPU(1)
		defer p.Close()
		for _, f := range []int{8, 40, 64, 136, 256} {
			a := &Adj{Rows: 2, Cols: 2, Ptr: []int64{0, 1, 2}, Col: []int32{0, 1}, Val: []float32{float32(math.Copysign(0, -1)), 1}}
			x := NewMat(2, f)
			for j := range f {
				x.Data[j] = float32(j + 1) // row 0 positive: times -0 gives -0
			}
			got, want := NewMat(2, f), NewMat(2, f)
			for i := range got.Data {
				got.Data[i] = float32(math.Copysign(0, -1))
				want.Data[i] = got.Data[i]
			}
			p.SpMM(a, x, got, true)
			goTwin(func() { p.SpMM(a, x, want, true) })
			if math.Float32bits(want.Data[0]) != 0x80000000 {
				t.Fatalf("F=%d: the Go twin gives %v, want -0", f, want.Data[0])
			}
			bitsEqual(t, fmt.Sprintf("SpMM F=%d", f), got.Data, want.Data)
		}
	})
}

func TestSIMDReLUEqualsGo(t *testing.T) {
	rng := newRNG(32)
	simdVariants(t, func(t *testing.T) {
		p := NewCPU(2)
		defer p.Close()
		for _, n := range []int{0, 1, 7, 8, 9, 31, 33, 1000, 40000} {
			x, dy := specialMat(rng, 1, n), specialMat(rng, 1, n)
			got, want := NewMat(1, n), NewMat(1, n)
			p.ReLU(x, got)
			goTwin(func() { p.ReLU(x, want) })
			bitsEqual(t, fmt.Sprintf("ReLU n=%d", n), got.Data, want.Data)
			p.ReLUBackward(x, dy, got)
			goTwin(func() { p.ReLUBackward(x, dy, want) })
			bitsEqual(t, fmt.Sprintf("ReLUBackward n=%d", n), got.Data, want.Data)
		}
	})
}

// TestSIMDBiasEqualsGo: the C bias add and the bias gradient's column sums
// give the Go loops' bits, at widths around the vector sizes and row
// counts that split into several blocks.
func TestSIMDBiasEqualsGo(t *testing.T) {
	rng := newRNG(33)
	simdVariants(t, func(t *testing.T) {
		p := NewCPU(2)
		defer p.Close()
		for _, f := range []int{1, 3, 4, 7, 8, 9, 16, 40, 64, 65, 256} {
			for _, rows := range []int{0, 1, 5, 300, 5000} {
				y, b := specialMat(rng, rows, f), specialMat(rng, 1, f)
				got, want := copyMat(y), copyMat(y)
				p.AddBias(got, b)
				goTwin(func() { p.AddBias(want, b) })
				sameBits(t, fmt.Sprintf("AddBias %dx%d", rows, f), got.Data, want.Data)
				for _, acc := range []bool{false, true} {
					d0 := specialMat(rng, 1, f)
					dg, dw := copyMat(d0), copyMat(d0)
					p.BiasGrad(y, dg, acc)
					goTwin(func() { p.BiasGrad(y, dw, acc) })
					sameBits(t, fmt.Sprintf("BiasGrad %dx%d acc=%v", rows, f, acc), dg.Data, dw.Data)
				}
			}
		}
	})
}
